// The golden scenario of bindings/golden/golden.c through the C# binding, printed the same way (the
// bits of every number). Also a program, for the 2-process run: mono Golden.exe OUT_FILE.
using System;
using System.IO;
using System.Text;
using Accelerate;

namespace Accelerate.Tests {

public static class Golden {
  const int N = 64, D = 8, C = 3, Epochs = 2;
  const string Spec = "[{\"type\":\"linear\",\"in_features\":8,\"out_features\":16},{\"type\":\"relu\"}," +
                      "{\"type\":\"linear\",\"in_features\":16,\"out_features\":3}]";

  public static int Main(string[] args) {
    if (args.Length != 1) {
      Console.Error.WriteLine("usage: Golden.exe OUT_FILE");
      return 2;
    }
    Run(args[0]);
    return 0;
  }

  static void PutFloats(StringBuilder out_, string label, Tensor t) {
    float[] v = t.ToFloatArray();
    out_.Append(label).Append(' ').Append(v.Length);
    foreach (float f in v) out_.Append(' ').Append(BitConverter.ToUInt32(BitConverter.GetBytes(f), 0).ToString("x8"));
    out_.Append('\n');
  }

  /// Runs the scenario and writes OUT.rank<N>; returns that path.
  public static string Run(string outPrefix) {
    var x = new float[N * D];
    var y = new long[N];
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < D; ++j) x[i * D + j] = (float)((i * 7 + j * 3) % 17 - 8) / 16.0f;
      y[i] = (i * 5) % C;
    }
    var out_ = new StringBuilder();
    long rank;
    using (Options ao = Options.Accelerator().Put("cpu", true).Put("seed", 1234))
    using (var acc = new Accelerator(ao))
    using (Tensor xt = Tensor.Of(x, N, D))
    using (Tensor yt = Tensor.Of(y, N))
    using (TensorList fields = TensorList.Of(xt, yt))
    using (Dataset ds = Dataset.FromTensors(fields))
    using (Options lo = Options.DataLoader().Put("batch_size", 8).Put("shuffle", true).Put("seed", 7))
    using (var rawLoader = new DataLoader(ds, lo))
    using (Model rawModel = Model.FromSpec(Spec))
    using (Options oo = Options.Optimizer().Put("lr", 0.01))
    using (var rawOpt = new Optimizer(rawModel, "adamw", oo))
    using (Options so = Options.Scheduler().Put("num_warmup_steps", 2).Put("num_training_steps", 20))
    using (var rawSched = new Scheduler(rawOpt, "linear", so))
    using (Model model = acc.Prepare(rawModel))
    using (Optimizer opt = acc.Prepare(rawOpt))
    using (DataLoader loader = acc.Prepare(rawLoader))
    using (Scheduler sched = acc.Prepare(rawSched)) {
      rank = acc.ProcessIndex();
      long steps = 0;
      for (int epoch = 0; epoch < Epochs; ++epoch) {
        foreach (TensorList batch in loader) {
          using (batch)
          using (Tensor bx = batch.Get(0))
          using (Tensor by = batch.Get(1)) {
            Tensor logits, loss;
            using (acc.Accumulate()) {
              logits = model.Forward(bx);
              loss = Loss.CrossEntropy(logits, by, Reduction.MEAN, 0.0);
              acc.Backward(loss);
              opt.Step();
              sched.Step();
              opt.ZeroGrad();
            }
            using (logits)
            using (loss)
            using (Tensor all = acc.Gather(loss, "loss"))
            using (Tensor total = acc.Reduce(logits, Reduction.SUM, "logits")) {
              out_.Append("loss ").Append(steps).Append(' ')
                  .Append(BitConverter.DoubleToInt64Bits(loss.Item()).ToString("x16")).Append('\n');
              PutFloats(out_, "gather " + steps, all);
              PutFloats(out_, "reduce " + steps, total);
            }
            ++steps;
          }
        }
      }
      using (StringList names = model.ParameterNames()) {
        foreach (string name in names.ToList())
          using (Tensor p = model.Parameter(name)) PutFloats(out_, "param " + name, p);
      }
    }
    string path = outPrefix + ".rank" + rank;
    File.WriteAllText(path, out_.ToString(), new UTF8Encoding(false));
    return path;
  }
}

}
