package ai.accelerate;

/** Runs with the checkpoint folder before saveState writes or loadState reads it; an exception
 *  aborts the save or load on every process, with its message (AccelerateIOException). */
@FunctionalInterface
public interface CheckpointHookFunction {
  void run(String dir) throws Exception;
}
