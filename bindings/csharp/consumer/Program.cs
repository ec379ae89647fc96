// Trains a small model for one epoch through the installed NuGet package's files (the assembly, and
// the native libraries next to it as a linux-x64 app has them) and prints one line the test checks.
// Runs on 1 or N processes.
using System;
using System.IO;
using Accelerate;

public static class Program {
  // The file a loaded library was mapped from (/proc/self/maps: the file a symlink such as
  // libaccelerate.so.0 points to), for the test to check.
  static string LoadedFrom(string name) {
    foreach (string line in File.ReadAllLines("/proc/self/maps")) {
      int at = line.IndexOf('/');
      if (at >= 0 && line.Substring(at).Contains("/" + name)) return line.Substring(at);
    }
    return "?";
  }

  public static int Main() {
    var x = new float[64 * 4];
    var y = new long[64];
    for (int i = 0; i < x.Length; ++i) x[i] = (i % 13) / 13f;
    for (int i = 0; i < y.Length; ++i) y[i] = i % 2;
    const string spec = "[{\"type\":\"linear\",\"in_features\":4,\"out_features\":2}]";
    using (var acc = new Accelerator(Options.Accelerator().Put("seed", 5)))
    using (Tensor xt = Tensor.Of(x, 64, 4))
    using (Tensor yt = Tensor.Of(y, 64))
    using (TensorList fields = TensorList.Of(xt, yt))
    using (Dataset ds = Dataset.FromTensors(fields))
    using (Options lo = Options.DataLoader().Put("batch_size", 8))
    using (var raw = new DataLoader(ds, lo))
    using (DataLoader loader = acc.Prepare(raw))
    using (Model rawModel = Model.FromSpec(spec))
    using (Model model = acc.Prepare(rawModel))
    using (Options oo = Options.Optimizer().Put("lr", 0.1))
    using (var rawOpt = new Optimizer(model, "sgd", oo))
    using (Optimizer opt = acc.Prepare(rawOpt)) {
      int steps = 0;
      foreach (TensorList batch in loader) {
        using (Tensors.Scope()) {
          Tensor loss = Loss.CrossEntropy(model.Forward(batch.Get(0)), batch.Get(1), Reduction.Mean, 0.0);
          acc.Backward(loss);
          opt.Step();
          opt.ZeroGrad();
        }
        ++steps;
      }
      Console.WriteLine("csharp consumer: accelerate " + Library.Version() + ", rank " + acc.ProcessIndex + " of " +
                        acc.NumProcesses + ", " + steps + " steps, libaccelerate from " + LoadedFrom("libaccelerate.so"));
    }
    return 0;
  }
}
