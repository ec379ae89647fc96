package ai.accelerate;

/** Accelerate's hook(models, weights, output_dir) / hook(models, input_dir): runs with the models whose
 *  weights the library saves or loads, and the checkpoint folder, before saveState writes or loadState
 *  reads it. A hook that saves or loads a model's weights itself takes it out with
 *  {@link CheckpointModels#remove}. An exception aborts the save or load on every process. */
@FunctionalInterface
public interface CheckpointModelsHookFunction {
  void run(CheckpointModels models, String dir) throws Exception;
}
