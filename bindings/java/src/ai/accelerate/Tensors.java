package ai.accelerate;

import java.util.ArrayDeque;

/** Tensor scopes: every Tensor and TensorList handed out on a thread while a scope is open there is
 *  the innermost scope's, closed when it closes:
 *  <pre>{@code
 *  try (TensorScope step = Tensors.scope()) {
 *    Tensor loss = Loss.crossEntropy(model.forward(x), y, Reduction.MEAN, 0.0);
 *    acc.backward(loss);
 *  }  // loss and the logits are closed here
 *  }</pre> */
public final class Tensors {
  private static final ThreadLocal<ArrayDeque<TensorScope>> SCOPES = ThreadLocal.withInitial(ArrayDeque::new);

  private Tensors() {}

  /** Opens a scope on this thread; close it on this thread (try-with-resources). */
  public static TensorScope scope() {
    ArrayDeque<TensorScope> stack = SCOPES.get();
    TensorScope scope = new TensorScope(stack);
    stack.push(scope);
    return scope;
  }

  /** The innermost open scope of this thread, or null. */
  static Owner current() {
    return SCOPES.get().peek();
  }

  /** Native tensors alive in this process (all languages and threads), for leak checks. */
  public static long liveHandles() {
    return Accelerate.liveHandles(HandleKind.HANDLE_TENSOR);
  }
}
