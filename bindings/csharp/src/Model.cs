// Model: forward on arrays of inputs, and the names a safetensors load found missing or unexpected.
using System.Collections.Generic;

namespace Accelerate {

public sealed class LoadResult {
  public IList<string> Missing { get; internal set; }
  public IList<string> Unexpected { get; internal set; }
}

public partial class Model {
  /// PEFT's add_weighted_adapter: a new adapter, kept aside, combining the named adapters with one
  /// weight each, combinationType "svd", "linear", "cat", "ties", "dare_linear", "dare_ties",
  /// "magnitude_prune" or a pruning one with "_svd"; options (Options.WeightedAdapter(), may be null):
  /// density, majority_sign_method, svd_rank, svd_clamp, ... Returns how many layers it adapts.
  public long AddWeightedAdapter(IEnumerable<string> adapters, double[] weights, string adapterName,
                                 string combinationType, Options options) {
    byte[] encoded = Arg.NulJoined("AddWeightedAdapter: the adapter name", adapters);
    Arg.NotNull(weights, "weights");
    return AddWeightedAdapter(encoded, encoded.LongLength, weights, weights.LongLength, adapterName, combinationType,
                              options);
  }
  /// PEFT's merge_and_unload(adapter_names=...): the named adapters merged into the weights in this
  /// order, then every adapter removed.
  public void MergeLoraAdapters(IEnumerable<string> adapters) {
    byte[] encoded = Arg.NulJoined("MergeLoraAdapters: the adapter name", adapters);
    MergeLoraAdapters(encoded, encoded.LongLength);
  }
  /// AddWeightedAdapter with svd_rank alone (0: the largest of the adapters' ranks).
  public long AddWeightedAdapter(IEnumerable<string> adapters, double[] weights, string adapterName,
                                 string combinationType, long svdRank = 0) {
    using (Options options = Options.WeightedAdapter().Put("svd_rank", svdRank))
      return AddWeightedAdapter(adapters, weights, adapterName, combinationType, options);
  }

  public static readonly uint FlagDefault = Native.ACC_FORWARD_DEFAULT;
  public static readonly uint FlagNoGrad = Native.ACC_FORWARD_NO_GRAD;

  /// Forward on one input with autograd recording.
  public Tensor Forward(Tensor input) { return Forward1(input, FlagDefault); }
  /// Forward without autograd history (evaluation).
  public Tensor ForwardNoGrad(Tensor input) { return Forward1(input, FlagNoGrad); }
  /// Forward on several inputs; the outputs flattened into a list.
  public TensorList Forward(uint flags, params Tensor[] inputs) {
    using (TensorList list = TensorList.Of(inputs)) return Forward(list, flags);
  }

  /// PEFT's forward with adapter_names (mixed batches, evaluation): sample i of the batch computes with
  /// the named adapter adapterNames[i] ("__base__": none); see acc_model_forward_adapters.
  public TensorList ForwardAdapters(IEnumerable<string> adapterNames, params Tensor[] inputs) {
    byte[] encoded = Arg.NulJoined("ForwardAdapters: the adapter name", adapterNames);
    using (TensorList list = TensorList.Of(inputs)) return ForwardAdapters(list, encoded, encoded.LongLength, FlagNoGrad);
  }

  /// PEFT's `with model.disable_adapter():` for `using`: the LoRA adapters stay disabled (the adapted
  /// layers compute as the base model's) until the scope is disposed, which enables them again unless
  /// they were disabled before.
  public Scope DisableLora() {
    bool wasEnabled = IsLoraEnabled;
    SetLoraEnabled(false);
    return new Scope(() => { if (wasEnabled) SetLoraEnabled(true); });
  }

  /// Loads weights from a safetensors file; non-strict loads report the names that did not match.
  public LoadResult LoadSafetensors(string path, bool strict = true) {
    using (LoadReport report = LoadSafetensorsReport(path, strict)) {
      var result = new LoadResult { Missing = new List<string>(), Unexpected = new List<string>() };
      for (long i = 0; i < report.MissingCount(); ++i) result.Missing.Add(report.Missing(i));
      for (long i = 0; i < report.UnexpectedCount(); ++i) result.Unexpected.Add(report.Unexpected(i));
      return result;
    }
  }
}

public partial class Optimizer {
  /// A parameter group of the named parameters, with option overrides (may be null).
  public void AddParamGroup(IEnumerable<string> names, Options overrides) {
    byte[] encoded = Arg.NulJoined("AddParamGroup: the parameter name", names);
    AddParamGroup(encoded, encoded.LongLength, overrides);
  }
}

}
