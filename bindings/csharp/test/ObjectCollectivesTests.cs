// GatherObject and BroadcastObject carry bytes (NUL included) through; on one process each returns its own.
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class ObjectCollectivesTests {
  [Test]
  public void BytesGoThroughWhole() {
    byte[] mine = {1, 0, 2, 0xff};
    using (Options o = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(o)) {
      var all = acc.GatherObject(mine, "objects");
      Assert.AreEqual(1, all.Count);
      CollectionAssert.AreEqual(mine, all[0]);
      CollectionAssert.AreEqual(mine, acc.BroadcastObject(mine, 0, "object"));
      CollectionAssert.AreEqual(new byte[0], acc.BroadcastObject(null, 0));
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.BroadcastObject(mine, 1, "object"));
      StringAssert.Contains("source process 1", e.Message);
    }
  }
}

}
