// A program that leaves objects undisposed when Main returns, one case per run (the argument). Mono
// finalized them at shutdown in any order, and a loader or an accelerator freed there called back
// into an adapter finalized before it (a fatal NullReferenceException, exit 255, in about half the
// runs); a loader left mid-epoch kept Mono waiting for its worker threads for ever. Each case must
// exit with 0.
using System;
using System.Collections.Generic;
using Accelerate;

static class ExitWithoutDispose {
  static DataLoader loader;        // kept reachable to the end, as a static field keeps it
  static Accelerator accelerator;
  static IEnumerator<TensorList> pass;

  static Dataset Counting() {
    return Dataset.FromCallback(64, index => new[] { Tensor.Of(new float[] { index }, 1) });
  }

  static int Main(string[] args) {
    string which = args.Length > 0 ? args[0] : "";
    using (Options lo = Options.DataLoader().Put("batch_size", 4).Put("num_workers", 2)) {
      switch (which) {
        case "loader":  // a whole epoch, then nothing disposed
          loader = new DataLoader(Counting(), lo);
          foreach (TensorList batch in loader.Batches()) {}
          break;
        case "mid_epoch":  // a loop left mid-epoch: an enumerator neither finished nor disposed
          loader = new DataLoader(Counting(), lo);
          pass = loader.Batches().GetEnumerator();
          pass.MoveNext();
          break;
        case "mid_epoch_next":  // the same by hand: one batch taken with Next()
          loader = new DataLoader(Counting(), lo);
          loader.Next().Dispose();
          break;
        case "tracker":  // an accelerator holding a program's tracker
          accelerator = new Accelerator(null);
          accelerator.AddTracker("exit", new ExitTracker());
          accelerator.InitTrackers("exit", null);
          accelerator.Log(new Dictionary<string, double> { { "loss", 1.0 } }, 0);
          break;
        default:
          Console.Error.WriteLine("usage: ExitWithoutDispose.exe loader|mid_epoch|mid_epoch_next|tracker");
          return 2;
      }
    }
    GC.Collect();
    return 0;
  }
}

sealed class ExitTracker : ITracker {
  public void Init(string project, string configJson) {}
  public void Log(IDictionary<string, double> values, long step) {}
  public void Finish() {}
}
