// Cheap getters as properties (tensor.Numel, loader.Epoch, acc.ProcessIndex), over the internal
// Get* methods SWIG generates (csharp.i). Each one is a native call that fails only on a disposed object.
namespace Accelerate {

public partial class Tensor {
  /// <summary>The number of dimensions.</summary>
  public long Ndim { get { return GetNdim(); } }
  /// <summary>The number of elements.</summary>
  public long Numel { get { return GetNumel(); } }
  /// <summary>The element type.</summary>
  public DType DType { get { return GetDType(); } }
  /// <summary>The device ("cpu", "cuda:0").</summary>
  public string Device { get { return GetDevice(); } }
  /// <summary>Whether autograd records operations on it.</summary>
  public bool RequiresGrad { get { return GetRequiresGrad(); } }
}

public partial class TensorList {
  /// <summary>The number of entries.</summary>
  public long Count { get { return GetCount(); } }
}

public partial class StringList {
  /// <summary>The number of items.</summary>
  public long Count { get { return GetCount(); } }
}

public partial class Dataset {
  /// <summary>The number of samples (-1 for a stream of unknown size).</summary>
  public long Count { get { return GetCount(); } }
}

public partial class DataLoader {
  /// <summary>Batches per epoch (-1 when unknown).</summary>
  public long Length { get { return GetLength(); } }
  /// <summary>The epoch being iterated, or the next one between epochs (the first is 0).</summary>
  public long Epoch { get { return GetEpoch(); } }
  /// <summary>Whether an epoch has begun and not ended.</summary>
  public bool InEpoch { get { return GetInEpoch(); } }
  /// <summary>Whether the batch last returned was the last of its epoch.</summary>
  public bool EndOfEpoch { get { return GetEndOfEpoch(); } }
  /// <summary>Samples per step over all processes (Accelerate's total_batch_size).</summary>
  public long TotalBatchSize { get { return GetTotalBatchSize(); } }
  /// <summary>Samples in the dataset (-1 for a stream of unknown size).</summary>
  public long TotalDatasetLength { get { return GetTotalDatasetLength(); } }
}

public partial class Model {
  /// <summary>Whether the model is in training mode (SetTraining changes it).</summary>
  public bool IsTraining { get { return GetIsTraining(); } }
  /// <summary>The number of parameter tensors.</summary>
  public long ParameterTensorCount { get { return GetParameterTensorCount(); } }
  /// <summary>The number of parameter elements.</summary>
  public long ParameterElementCount { get { return GetParameterElementCount(); } }
  /// <summary>The number of layers with LoRA adapters (0 without adapters).</summary>
  public long LoraCount { get { return GetLoraCount(); } }
  /// <summary>Whether the model has LoRA adapters and they are enabled (SetLoraEnabled, DisableLora).</summary>
  public bool IsLoraEnabled { get { return GetIsLoraEnabled(); } }
  /// <summary>The active adapter's name (SetAdapter changes it; an error without adapters).</summary>
  public string ActiveAdapter { get { return GetActiveAdapter(); } }
}

public partial class Optimizer {
  /// <summary>The number of parameter groups.</summary>
  public long NumParamGroups { get { return GetNumParamGroups(); } }
}

public partial class AveragedModel {
  /// <summary>The updates averaged so far (AveragedModel's n_averaged).</summary>
  public long Count { get { return GetCount(); } }
}

public partial class Accelerator {
  /// <summary>The device this process trains on.</summary>
  public string Device { get { return GetDevice(); } }
  /// <summary>"NO", "MULTI_CPU" or "MULTI_GPU" (Accelerate's names).</summary>
  public string DistributedType { get { return GetDistributedType(); } }
  /// <summary>"no", "bf16" or "fp16".</summary>
  public string MixedPrecision { get { return GetMixedPrecision(); } }
  /// <summary>This process's rank.</summary>
  public long ProcessIndex { get { return GetProcessIndex(); } }
  /// <summary>The number of processes.</summary>
  public long NumProcesses { get { return GetNumProcesses(); } }
  /// <summary>This process's rank on its machine.</summary>
  public long LocalProcessIndex { get { return GetLocalProcessIndex(); } }
  /// <summary>Whether this is process 0.</summary>
  public bool IsMainProcess { get { return GetIsMainProcess(); } }
  /// <summary>Whether this is its machine's process 0.</summary>
  public bool IsLocalMainProcess { get { return GetIsLocalMainProcess(); } }
  /// <summary>Whether this is the last process.</summary>
  public bool IsLastProcess { get { return GetIsLastProcess(); } }
  /// <summary>Micro-steps per optimizer step.</summary>
  public long GradientAccumulationSteps { get { return GetGradientAccumulationSteps(); } }
  /// <summary>Whether this micro-step synchronizes gradients and steps the optimizer.</summary>
  public bool SyncGradients { get { return GetSyncGradients(); } }
  /// <summary>Whether the last optimizer step was skipped (fp16 overflow).</summary>
  public bool OptimizerStepWasSkipped { get { return GetOptimizerStepWasSkipped(); } }
  /// <summary>Micro-steps counted by Accumulate in the current window.</summary>
  public long Step { get { return GetStep(); } }
  /// <summary>The number the next automatic checkpoint gets.</summary>
  public long Iteration { get { return GetIteration(); } }
}

}
