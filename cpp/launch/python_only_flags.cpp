#include "launch/python_only_flags.h"

#include "common/error.h"
#include "common/text.h"

namespace acc {

namespace {

using Answer = PythonOnlyFlag::Answer;
constexpr bool kSwitch = false, kValue = true;

PythonOnlyFlag refused(const std::string& name, bool takes_value, const std::string& why) {
  return {name, takes_value, Answer::Refused, why, {}, ""};
}
PythonOnlyFlag accepted(const std::string& name, bool takes_value, std::vector<std::string> choices = {}) {
  return {name, takes_value, Answer::Accepted, "", std::move(choices), ""};
}

}  // namespace

const std::vector<PythonOnlyFlag>& python_only_flags() {
  static const std::vector<PythonOnlyFlag> flags = [] {
    std::vector<PythonOnlyFlag> f = {
        refused("tpu", kSwitch, "no TPU support"),
        refused("use_megatron_lm", kSwitch, "Megatron-LM is Python-only"),
        refused("mpirun_hostfile", kValue,
                "Accelerate starts the processes on that file's hosts through mpirun; start them with mpirun "
                "yourself (the library reads its variables), or run accelerate launch on each machine with its "
                "--machine_rank"),
        // Accelerate's choices (its argparse refuses others; "torhchxla_trace_once" is its own spelling).
        {"dynamo_backend", kValue, Answer::Warned, "torch.compile needs Python (the model runs as it is)",
         {"no", "eager", "aot_eager", "inductor", "aot_ts_nvfuser", "nvprims_nvfuser", "cudagraphs", "ofi", "fx2trt",
          "onnxrt", "tensorrt", "aot_torchxla_trace_once", "torhchxla_trace_once", "torchxla_trace_once", "tvm"},
         "no"},
        accepted("dynamo_mode", kValue, {"default", "reduce-overhead", "max-autotune"}),
        accepted("dynamo_use_fullgraph", kSwitch),
        accepted("dynamo_use_dynamic", kSwitch),
        accepted("dynamo_use_regional_compilation", kSwitch),
        {"downcast_bf16", kSwitch, Answer::Warned, "TPU only", {}, ""},
        // A TPU pod's (with --tpu), SageMaker's (with its config file), DeepSpeed's NVMe offload (with
        // an offload device nvme, refused).
        accepted("main_training_function", kValue),
        accepted("tpu_cluster", kSwitch),
        accepted("no_tpu_cluster", kSwitch),
        accepted("tpu_use_sudo", kSwitch),
        accepted("vm", kValue),
        accepted("env", kValue),
        accepted("aws_access_key_id", kValue),
        accepted("aws_secret_access_key", kValue),
        accepted("offload_optimizer_nvme_path", kValue),
        accepted("offload_param_nvme_path", kValue),
        // fp8's (with --mixed_precision fp8, refused).
        accepted("fp8_backend", kValue, {"ao", "te", "msamp"}),
        accepted("fp8_use_autocast_during_eval", kSwitch),
        accepted("fp8_format", kValue, {"HYBRID", "E4M3", "E5M2"}),
        accepted("fp8_amax_compute_algo", kValue, {"max", "most_recent"}),
        accepted("fp8_opt_level", kValue, {"O1", "O2"}),
    };
    for (const char* name : {"fp8_margin", "fp8_interval", "fp8_amax_history_len", "fp8_override_linear_precision",
                             "fp8_enable_fsdp_float8_all_gather", "fp8_pad_inner_dim"})
      f.push_back(accepted(name, kValue));
    // Megatron-LM's (with --use_megatron_lm, refused).
    for (const char* name :
         {"tp_degree", "pp_degree", "num_micro_batches", "sequence_parallelism", "recompute_activations",
          "use_distributed_optimizer", "gradient_clipping", "use_custom_fsdp", "no_load_optim", "no_save_optim",
          "eod_mask_loss", "overlap_cpu_optimizer_d2h_h2d", "optimizer_cpu_offload",
          "use_precision_aware_optimizer", "decoder_last_pipeline_num_layers", "recompute_granularity",
          "recompute_method", "recompute_num_layers", "attention_backend", "expert_model_parallel_size",
          "expert_tensor_parallel_size", "context_parallel_size", "attention_dropout", "hidden_dropout",
          "attention_softmax_in_fp32", "calculate_per_token_loss", "use_rotary_position_embeddings"})
      f.push_back(accepted(std::string("megatron_lm_") + name, kValue));
    return f;
  }();
  return flags;
}

std::vector<std::string> check_python_only_flags(const std::map<std::string, std::vector<std::string>>& given) {
  std::vector<std::string> warnings;
  for (const PythonOnlyFlag& flag : python_only_flags()) {
    const auto it = given.find(flag.name);
    if (it == given.end() || it->second.empty() || flag.answer == Answer::Accepted) continue;
    const std::string& value = it->second.back();  // as argparse: the last one given
    if (!flag.neutral.empty() && lowercase(value) == flag.neutral) continue;
    const std::string said = "--" + flag.name + (flag.takes_value ? " " + value : "");
    if (flag.answer == Answer::Refused)
      fail(Status::Unsupported, said, " is not supported by this runtime (", flag.why, ")");
    warnings.push_back(said + " is ignored: " + flag.why);
  }
  return warnings;
}

}  // namespace acc
