package ai.accelerate;

import java.util.ArrayDeque;

/** A scope that closes every Tensor and TensorList handed out on its thread while it is the
 *  innermost open scope: {@code try (TensorScope s = Tensors.scope()) { ... }}. Scopes nest; an
 *  object that must outlive the scope is taken out with {@code keep()} (then its caller closes it).
 *  Open and close a scope on the same thread (try-with-resources does). Objects made on other threads
 *  (loader threads, executors) are not the scope's. */
public final class TensorScope extends Owner implements AutoCloseable {
  private final ArrayDeque<TensorScope> stack;
  private boolean closed;

  TensorScope(ArrayDeque<TensorScope> stack) {
    this.stack = stack;
  }

  /** How many objects the scope holds now. */
  public int held() {
    return size();
  }

  /** Closes every object the scope still holds and leaves the thread's stack of scopes. Closing
   *  again does nothing. */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    stack.remove(this);
    closeAll();
  }
}
