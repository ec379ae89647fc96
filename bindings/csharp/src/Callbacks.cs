// Director adapters that run the user's delegates for the library. Two rules make them safe:
//  - nothing thrown may unwind into C++ (Mono would skip the C++ destructors; .NET would abort): every
//    exception is caught here and reported with acc_callback_set_error and a non-zero status;
//  - the native side holds only function pointers to delegates stored in the adapter, so the
//    adapter is pinned by a GCHandle from registration until the library releases it (Released).
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;

namespace Accelerate {

internal static class CallbackErrors {
  internal static int Failed(Exception e) {
    Report(() => e.GetType().Name + ": " + e.Message);
    return 1;
  }

  // Hands a callback's failure to the library. Nothing may escape it (it runs in a director method):
  // what the library's strings cannot hold (a NUL, a lone surrogate) is written out, and a message
  // that cannot be built (a Message getter that throws) is reported as such.
  internal static void Report(Func<string> message) {
    string text;
    try {
      text = message();
    } catch (Exception e) {
      text = "(the exception's message could not be read: " + e.GetType().Name + ")";
    }
    try {
      Library.CallbackSetError(AccelerateException.WrittenOut(text ?? ""));
    } catch (Exception) {
      // Nothing is left to report it with; the non-zero status still reaches the caller.
    }
  }

  // Runs a callback's body: 0, or the status of a failure reported with acc_callback_set_error.
  internal static int Run(Action body) {
    try {
      body();
      return 0;
    } catch (Exception e) {
      return Failed(e);
    }
  }

  // Appends `fields` to `list`, then disposes them (the list holds its own references).
  internal static void AppendAndDispose(TensorList list, Tensor[] fields, string what) {
    if (fields == null) throw new InvalidOperationException("the callback returned null for " + what);
    try {
      foreach (Tensor t in fields) list.Append(null, t);
    } finally {
      foreach (Tensor t in fields)
        if (t != null) t.Dispose();
    }
  }
}

// The pinning shared by the adapters: each constructor calls Pin() before the object goes to the
// library, which owns the native half from then on (it deletes it, so the proxy must not), and each
// Released override calls Unpin() when the library lets it go.
public partial class Callback {
  internal static long live;  // pinned adapters (Library.LiveCallbacks)
  GCHandle pin;

  internal void Pin() {
    Interlocked.Increment(ref live);
    pin = GCHandle.Alloc(this);
    swigCMemOwn = false;
  }

  internal void Unpin() {
    if (!pin.IsAllocated) return;
    pin.Free();
    Interlocked.Decrement(ref live);
  }
}

public partial class Library {
  /// How many C# callbacks (datasets, collation, hooks, trackers...) the library holds now: a debug
  /// aid like LiveHandles, to check that callbacks are released with their owners.
  public static long LiveCallbacks() { return Interlocked.Read(ref Callback.live); }
}

internal sealed class SampleAdapter : SampleSource {
  readonly Func<long, Tensor[]> fn;

  internal SampleAdapter(Func<long, Tensor[]> fn) {
    this.fn = fn;
    Pin();
  }

  public override int Sample(long index, TensorList out_) {
    return CallbackErrors.Run(() => CallbackErrors.AppendAndDispose(out_, fn(index), "sample " + index));
  }

  public override void Released() { Unpin(); }
}

internal sealed class StreamAdapter : StreamSource {
  readonly Func<Tensor[]> next;
  readonly Action<long> start;

  internal StreamAdapter(Func<Tensor[]> next, Action<long> start) {
    this.next = next;
    this.start = start;
    Pin();
  }

  public override int Start(long epoch) {
    return CallbackErrors.Run(() => { if (start != null) start(epoch); });
  }

  public override int Next(TensorList out_) {
    return CallbackErrors.Run(() => {
      Tensor[] fields = next();
      if (fields != null) CallbackErrors.AppendAndDispose(out_, fields, "next");
    });
  }

  public override void Released() { Unpin(); }
}

internal sealed class CollateAdapter : Collator {
  readonly Func<IList<Tensor[]>, Tensor[]> fn;

  internal CollateAdapter(Func<IList<Tensor[]>, Tensor[]> fn) {
    this.fn = fn;
    Pin();
  }

  public override int Collate(Samples samples, TensorList out_) {
    var list = new List<Tensor[]>();
    try {
      for (long i = 0, n = samples.Size(); i < n; ++i) {
        var sample = new Tensor[samples.Fields(i)];
        list.Add(sample);
        for (int j = 0; j < sample.Length; ++j) sample[j] = samples.Get(i, j);
      }
      CallbackErrors.AppendAndDispose(out_, fn(list), "collate");
      return 0;
    } catch (Exception e) {
      return CallbackErrors.Failed(e);
    } finally {
      foreach (Tensor[] sample in list)
        foreach (Tensor t in sample)
          if (t != null) t.Dispose();
    }
  }

  public override void Released() { Unpin(); }
}

}
