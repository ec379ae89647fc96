// Tensor scopes: every Tensor and TensorList handed out on a thread while a scope is open there is
// the innermost scope's, disposed with it:
//   using (Tensors.Scope()) { var loss = Loss.CrossEntropy(model.Forward(x), y, Reduction.Mean, 0); ... }
using System;
using System.Collections.Generic;

namespace Accelerate {

/// <summary>A scope that disposes every Tensor and TensorList handed out on its thread while it is
/// the innermost open scope. Scopes nest; an object that must outlive the scope is taken out with
/// Keep() (its caller then disposes it). Open and dispose a scope on the same thread (`using` does);
/// objects made on other threads (loader threads, tasks) are not the scope's.</summary>
public sealed class TensorScope : Owner, IDisposable {
  readonly List<TensorScope> stack;
  bool disposed;

  internal TensorScope(List<TensorScope> stack) { this.stack = stack; }

  /// <summary>How many objects the scope holds now.</summary>
  public int Held { get { return Count; } }

  /// <summary>Disposes every object the scope still holds and leaves the thread's stack of scopes;
  /// disposing again does nothing.</summary>
  public void Dispose() {
    if (disposed) return;
    disposed = true;
    stack.Remove(this);
    DisposeAll();
  }
}

/// <summary>Tensor scopes and the live-tensor count.</summary>
public static class Tensors {
  [ThreadStatic] static List<TensorScope> scopes;

  /// <summary>Opens a scope on this thread: <c>using (Tensors.Scope()) { ... }</c>.</summary>
  public static TensorScope Scope() {
    if (scopes == null) scopes = new List<TensorScope>();
    var scope = new TensorScope(scopes);
    scopes.Add(scope);
    return scope;
  }

  internal static Owner CurrentFor(bool tracked) {
    if (!tracked || scopes == null || scopes.Count == 0) return null;
    return scopes[scopes.Count - 1];
  }

  /// <summary>Native tensors alive in this process (all languages and threads), for leak checks.</summary>
  public static long LiveHandles { get { return Library.LiveHandles(HandleKind.HandleTensor); } }
}

}
