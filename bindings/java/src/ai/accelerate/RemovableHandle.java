package ai.accelerate;

/** Removes a save or load pre-hook again: what Accelerate's register_save_state_pre_hook and
 *  register_load_state_pre_hook return. */
public final class RemovableHandle {
  private final Accelerator accelerator;
  private final long id;

  RemovableHandle(Accelerator accelerator, long id) {
    this.accelerator = accelerator;
    this.id = id;
  }

  /** The hook runs no more (a saveState or loadState already running it finishes with it). Again, or
   *  once the accelerator is closed (its hooks went with it), remove does nothing. */
  public void remove() {
    if (!accelerator.isClosed()) accelerator.removeStatePreHook(id);
  }
}
