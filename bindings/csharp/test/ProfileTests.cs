// Profile as a `using` scope: the trace file and the operators' table.
using System.IO;
using NUnit.Framework;

namespace Accelerate.Tests {

[TestFixture]
public class ProfileTests {
  const string Spec = "[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]";

  [Test]
  public void ProfileWritesTheTraceAndTheTable() {
    string dir = Path.Combine(Path.GetTempPath(), "acc_cs_profile_" + System.Diagnostics.Process.GetCurrentProcess().Id);
    using (Options o = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(o))
    using (Model raw = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(raw))
    using (Options p = Options.Profile().Put("output_trace_dir", dir).Put("record_shapes", true)) {
      var e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.ProfileSummary());
      StringAssert.Contains("no profile has ended yet", e.Message);
      using (var profile = acc.Profile(p)) {
        using (Tensor x = Tensor.Of(new float[] {1, 2}, 1, 2))
        using (Tensor y = model.Forward(x)) {
          profile.Step();
        }
        e = Assert.Throws<AccelerateInvalidArgumentException>(() => acc.Profile());
        StringAssert.Contains("already running", e.Message);
      }
      StringAssert.Contains("\"aten::addmm\"", File.ReadAllText(Path.Combine(dir, "profile_0.json")));
      StringAssert.Contains("aten::addmm", acc.ProfileSummary());
    }
    Directory.Delete(dir, true);
  }

  [Test]
  public void OnTraceReadyReadsTheCycleThatEnded() {
    string path = Path.Combine(Path.GetTempPath(), "acc_cs_cycle_" + System.Diagnostics.Process.GetCurrentProcess().Id + ".json");
    using (Options o = Options.Accelerator().Put("cpu", true))
    using (var acc = new Accelerator(o))
    using (Model raw = Model.FromSpec(Spec))
    using (Model model = acc.Prepare(raw)) {
      var steps = new System.Collections.Generic.List<long>();
      string table = "";
      acc.OnTraceReady(step => {
        steps.Add(step);
        table = acc.ProfileSummary();
        acc.ExportChromeTrace(path);
      });
      using (var profile = acc.Profile()) {
        using (Tensor x = Tensor.Of(new float[] {1, 2}, 1, 2))
        using (Tensor y = model.Forward(x)) {
          profile.Step();
        }
      }
      CollectionAssert.AreEqual(new long[] {1}, steps);
      StringAssert.Contains("aten::addmm", table);
      StringAssert.Contains("\"aten::addmm\"", File.ReadAllText(path));
    }
    File.Delete(path);
  }
}

}
