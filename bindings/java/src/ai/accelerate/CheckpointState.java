package ai.accelerate;

/** An object whose state goes into checkpoints (Accelerator.registerForCheckpointing): save() is
 *  called by saveState, load() with the same bytes by loadState on every process. An exception
 *  fails the save or load with its message (AccelerateIOException). */
public interface CheckpointState {
  byte[] save() throws Exception;

  void load(byte[] state) throws Exception;
}
