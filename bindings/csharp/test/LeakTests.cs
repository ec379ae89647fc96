// 100 000 tensors made and dropped: live handles return to the baseline, and memory with them.
using System;
using System.IO;
using System.Text.RegularExpressions;
using System.Threading;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class LeakTests {
  static long RssKb() {
    foreach (string line in File.ReadAllLines("/proc/self/status"))
      if (line.StartsWith("VmRSS:")) return long.Parse(Regex.Replace(line, "[^0-9]", ""));
    throw new InvalidOperationException("no VmRSS");
  }

  [Test]
  public void DisposedTensorsAreFreed() {
    var data = new float[256];  // 1 KiB per tensor: 100 MB if none were freed
    long baseline = Library.LiveHandles(HandleKind.HandleAny);
    for (int i = 0; i < 1000; ++i) Tensor.Of(data, 256).Dispose();  // warm up the allocators
    long rssBefore = RssKb();
    for (int i = 0; i < 100000; ++i) {
      using (Tensor t = Tensor.Of(data, 256))
      using (Tensor s = t.Sum())
        if (i % 25000 == 0) Assert.AreEqual(0.0, s.Item());
    }
    Assert.AreEqual(baseline, Library.LiveHandles(HandleKind.HandleAny));
    long growthKb = RssKb() - rssBefore;
    Console.WriteLine("LeakTests: RSS growth after 100000 disposed tensors: " + growthKb + " KiB");
    Assert.That(growthKb, Is.LessThan(64 * 1024), "RSS grew by " + growthKb + " KiB");
  }

  [Test]
  public void TheFinalizerFreesWhatWasNeverDisposed() {
    long baseline = Library.LiveHandles(HandleKind.HandleTensor);
    for (int i = 0; i < 100000; ++i) Tensor.Of(new float[] {i}, 1);  // dropped without Dispose
    DateTime deadline = DateTime.UtcNow.AddSeconds(30);
    while (Library.LiveHandles(HandleKind.HandleTensor) > baseline && DateTime.UtcNow < deadline) {
      GC.Collect();
      GC.WaitForPendingFinalizers();
      Thread.Sleep(20);
    }
    Assert.AreEqual(baseline, Library.LiveHandles(HandleKind.HandleTensor));
  }
}

}
