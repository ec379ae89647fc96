// The golden scenario of bindings/golden/golden.c through the C# binding, printed the same way (the
// bits of every number), checkpoint and resume included. Also a program, for the 2-process run:
// mono Golden.exe OUT_FILE (the checkpoint goes to OUT_FILE.ckpt, the same folder on every rank).
using System;
using System.IO;
using System.Text;
using Accelerate;

namespace Accelerate.Tests {

public static class Golden {
  const int N = 64, D = 8, C = 3, Epochs = 2, StepsBeforeSave = 2;
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

  // The registered custom state: the step counter that numbers the lines, as 8 little-endian bytes
  // (as golden.c writes it).
  sealed class StepCounter {
    internal long Steps;

    internal byte[] Save() {
      var b = new byte[8];
      for (int i = 0; i < 8; ++i) b[i] = (byte)((ulong)Steps >> (8 * i));
      return b;
    }

    internal void Load(byte[] state) {
      if (state.Length != 8) throw new ArgumentException("the step counter's state is not 8 bytes");
      ulong v = 0;
      for (int i = 0; i < 8; ++i) v |= (ulong)state[i] << (8 * i);
      Steps = (long)v;
    }
  }

  // Model, optimizer, scheduler and loader, raw and prepared; made the same way for the first run
  // and for the resumed one.
  sealed class Objects : IDisposable {
    readonly IDisposable[] owned;
    internal readonly Model Model;
    internal readonly Optimizer Opt;
    internal readonly DataLoader Loader;
    internal readonly Scheduler Sched;

    internal Objects(Accelerator acc, Dataset ds) {
      Options lo = Options.DataLoader().Put("batch_size", 8).Put("shuffle", true).Put("seed", 7);
      Options oo = Options.Optimizer().Put("lr", 0.01);
      Options so = Options.Scheduler().Put("num_warmup_steps", 2).Put("num_training_steps", 32);
      var rawLoader = new DataLoader(ds, lo);
      Model rawModel = Model.FromSpec(Spec);
      var rawOpt = new Optimizer(rawModel, "adamw", oo);
      var rawSched = new Scheduler(rawOpt, "linear", so);
      Model = acc.Prepare(rawModel);
      Opt = acc.Prepare(rawOpt);
      Loader = acc.Prepare(rawLoader);
      Sched = acc.Prepare(rawSched);
      owned = new IDisposable[] {Sched, Loader, Opt, Model, rawSched, rawOpt, rawModel, rawLoader, so, oo, lo};
    }

    public void Dispose() {
      foreach (IDisposable d in owned) d.Dispose();
    }
  }

  static void PutFloats(StringBuilder out_, string label, Tensor t) {
    float[] v = t.ToFloatArray();
    out_.Append(label).Append(' ').Append(v.Length);
    foreach (float f in v) out_.Append(' ').Append(BitConverter.ToUInt32(BitConverter.GetBytes(f), 0).ToString("x8"));
    out_.Append('\n');
  }

  // Trains on up to maxBatches batches (-1: to the end of the epoch), printing each step.
  static void Train(StringBuilder out_, Accelerator acc, Objects o, StepCounter counter, int maxBatches) {
    for (int done = 0; maxBatches < 0 || done < maxBatches; ++done) {
      TensorList next = o.Loader.Next();
      if (next == null) return;
      using (TensorList batch = next)
      using (Tensor bx = batch.Get(0))
      using (Tensor by = batch.Get(1)) {
        Tensor logits, loss;
        using (acc.Accumulate()) {
          logits = o.Model.Forward(bx);
          loss = Loss.CrossEntropy(logits, by, Reduction.Mean, 0.0);
          acc.Backward(loss);
          o.Opt.Step();
          o.Sched.Step();
          o.Opt.ZeroGrad();
        }
        using (logits)
        using (loss)
        using (Tensor all = acc.Gather(loss, "loss"))
        using (Tensor total = acc.Reduce(logits, Reduction.Sum, "logits")) {
          long s = counter.Steps;
          out_.Append("loss ").Append(s).Append(' ')
              .Append(BitConverter.DoubleToInt64Bits(loss.Item()).ToString("x16")).Append('\n');
          PutFloats(out_, "gather " + s, all);
          PutFloats(out_, "reduce " + s, total);
        }
        ++counter.Steps;
      }
    }
  }

  static void PutParams(StringBuilder out_, Model model) {
    using (StringList names = model.ParameterNames()) {
      foreach (string name in names.ToList())
        using (Tensor p = model.Parameter(name)) PutFloats(out_, "param " + name, p);
    }
  }

  // The rest of the epoch after the checkpoint and the weights it ends with.
  static string FinishEpoch(Accelerator acc, Objects o, StepCounter counter) {
    var text = new StringBuilder();
    Train(text, acc, o, counter, -1);
    PutParams(text, o.Model);
    return text.ToString();
  }

  /// Runs the scenario and writes OUT.rank<N>; returns that path.
  public static string Run(string outPrefix) {
    var x = new float[N * D];
    var y = new long[N];
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < D; ++j) x[i * D + j] = (float)((i * 7 + j * 3) % 17 - 8) / 16.0f;
      y[i] = (i * 5) % C;
    }
    string ckpt = outPrefix + ".ckpt";
    var out_ = new StringBuilder();
    var counter = new StepCounter();
    string continued, resumedText, path;
    using (Options ao = Options.Accelerator().Put("cpu", true).Put("seed", 1234))
    using (var acc = new Accelerator(ao))
    using (Tensor xt = Tensor.Of(x, N, D))
    using (Tensor yt = Tensor.Of(y, N))
    using (TensorList fields = TensorList.Of(xt, yt))
    using (Dataset ds = Dataset.FromTensors(fields)) {
      long rank = acc.ProcessIndex;
      acc.RegisterForCheckpointing(counter.Save, counter.Load);
      using (var first = new Objects(acc, ds)) {
        for (int epoch = 0; epoch < Epochs; ++epoch) Train(out_, acc, first, counter, -1);
        PutParams(out_, first.Model);
        // A checkpoint in the middle of the next epoch, then the rest of that epoch twice:
        // uninterrupted, and on fresh objects (from a scrambled RNG) restored from the checkpoint.
        Train(out_, acc, first, counter, StepsBeforeSave);
        acc.SaveState(ckpt);
        out_.Append("saved at step ").Append(counter.Steps).Append('\n');
        // The registered state's file in hex: every language must write the same bytes.
        out_.Append("custom_checkpoint_0.bin ");
        foreach (byte b in File.ReadAllBytes(Path.Combine(ckpt, "custom_checkpoint_0.bin"))) out_.Append(b.ToString("x2"));
        out_.Append('\n');
        continued = FinishEpoch(acc, first, counter);
        out_.Append("continued\n").Append(continued);
        acc.FreeMemory();
      }
      Library.SetSeed(98765);
      counter.Steps = -1;
      using (var resumed = new Objects(acc, ds)) {
        acc.LoadState(ckpt);
        out_.Append("resumed at step ").Append(counter.Steps).Append('\n');
        resumedText = FinishEpoch(acc, resumed, counter);
        out_.Append("resumed\n").Append(resumedText);
      }
      path = outPrefix + ".rank" + rank;
    }
    File.WriteAllText(path, out_.ToString(), new UTF8Encoding(false));
    if (continued != resumedText)
      throw new InvalidOperationException("the resumed run differs from the uninterrupted one (see " + path + ")");
    return path;
  }
}

}
