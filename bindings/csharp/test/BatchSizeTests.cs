// Library.FindExecutableBatchSize with a C# delegate: the library's out-of-memory exception shrinks
// the batch; any other exception ends the search as the C API documents.
using System;
using System.Collections.Generic;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class BatchSizeTests {
  [Test]
  public void ABatchThatDoesNotFitIsTriedAgainSmaller() {
    var tried = new List<long>();
    long found = Library.FindExecutableBatchSize(16, batchSize => {
      tried.Add(batchSize);
      // Above 8, 2^48 bytes a sample: more than any address space, a real allocation failure.
      using (Tensor t = Tensor.Zeros(DType.Float32, batchSize, batchSize > 8 ? 1L << 46 : 4)) {
      }
    });
    Assert.AreEqual(8, found);
    Assert.AreEqual(new long[] {16, 14, 12, 10, 9, 8}, tried.ToArray());
  }

  [Test]
  public void OtherExceptionsEndTheSearch() {
    var io = Assert.Throws<AccelerateIOException>(
        () => Library.FindExecutableBatchSize(32, batchSize => { throw new InvalidOperationException("no data"); }));
    StringAssert.Contains("the run with batch size 32 failed: InvalidOperationException: no data", io.Message);
    Assert.Throws<AccelerateInvalidArgumentException>(() => Library.FindExecutableBatchSize(32, batchSize => {
      using (Options o = Options.Accelerator()) o.Put("no_such_option", 1);
    }));
    var none = Assert.Throws<AccelerateOutOfMemoryException>(() => Library.FindExecutableBatchSize(
        2, batchSize => { throw new AccelerateOutOfMemoryException("too big"); }));
    StringAssert.Contains("no executable batch size found", none.Message);
  }
}

}
