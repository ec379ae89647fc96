// The C# golden run (training, gather, reduce, checkpoint and resume) prints exactly what the C
// reference (bindings/golden/golden.c) printed.
using System;
using System.IO;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class GoldenTests {
  [Test]
  public void SameBitsAsTheCApi() {
    string reference = Environment.GetEnvironmentVariable("ACC_GOLDEN_REFERENCE");
    Assert.IsNotNull(reference, "ACC_GOLDEN_REFERENCE is not set (CTest sets it)");
    string prefix = Path.Combine(TestDirs.Temp(), "golden-cs.txt");
    string written = Golden.Run(prefix);
    string expected = File.ReadAllText(reference), actual = File.ReadAllText(written);
    Assert.That(expected.Length, Is.GreaterThan(1000), "the reference looks truncated");
    StringAssert.Contains("saved at step 18\n", expected, "the reference saves mid-epoch");
    StringAssert.Contains("resumed at step 18\n", expected, "the reference resumes mid-epoch");
    Assert.AreEqual(expected, actual, "the C# numbers differ from the C API's: " + written + " vs " + reference);
  }
}

static class TestDirs {
  // ACC_TEST_TMP (set by CTest) or the system's temporary folder; a fresh subfolder per call.
  internal static string Temp() {
    string root = Environment.GetEnvironmentVariable("ACC_TEST_TMP") ?? Path.GetTempPath();
    string dir = Path.Combine(root, "cs-" + Guid.NewGuid().ToString("N"));
    Directory.CreateDirectory(dir);
    return dir;
  }
}

}
