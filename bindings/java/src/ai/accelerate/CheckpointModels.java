package ai.accelerate;

/** The prepared models a checkpoint pre-hook is handed, in prepare order: those whose weights the
 *  library will save or load. Usable while the hook runs only. */
public final class CheckpointModels {
  private CheckpointModelsView view;

  CheckpointModels(CheckpointModelsView view) {
    this.view = view;
  }

  /** How many models are left to the library. */
  public int size() {
    return Math.toIntExact(live().size());
  }

  /** The i-th model left: a new handle to the prepared model, which the caller closes. */
  public Model get(int i) {
    return live().model(i);
  }

  /** The i-th model's place in prepare order. */
  public long index(int i) {
    return live().index(i);
  }

  /** Takes the i-th model out (the later ones move up): the library neither writes nor reads its
   *  weights, and the checkpoint's weight files number the models left (Accelerate's weights.pop(i),
   *  models.pop(i)). A model prepared with sharded data parallelism cannot be taken out. */
  public void remove(int i) {
    live().remove(i);
  }

  void end() {
    view = null;
  }

  private CheckpointModelsView live() {
    if (view == null)
      throw new IllegalStateException("these models were handed to a checkpoint pre-hook that has returned");
    return view;
  }
}
