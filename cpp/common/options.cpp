#include "common/options.h"

#include <algorithm>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/error.h"

namespace acc {
namespace {

OptionSpec num(const char* key, OptionType type, std::optional<OptionValue> fallback, std::optional<double> min,
               std::optional<double> max = std::nullopt) {
  return OptionSpec{key, type, std::move(fallback), min, max, {}};
}

const char* type_name(OptionType type) {
  switch (type) {
    case OptionType::Int: return "an integer";
    case OptionType::Double: return "a number";
    case OptionType::Bool: return "a boolean";
    case OptionType::String: return "a string";
  }
  return "?";
}

std::string to_text(const OptionValue& value) {
  struct {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return concat(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return v; }
  } visitor;
  return std::visit(visitor, value);
}

}  // namespace

std::optional<bool> parse_bool(std::string text) {
  // Accelerate's str_to_bool.
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* t : {"1", "true", "yes", "y", "on", "t"})
    if (text == t) return true;
  for (const char* f : {"0", "false", "no", "n", "off", "f"})
    if (text == f) return false;
  return std::nullopt;
}

const std::vector<OptionSpec>& option_schema(OptionsKind kind) {
  using T = OptionType;
  static const std::vector<OptionSpec> optimizer = {
      // Defaults differ between algorithms (cpp/optim/algorithm_*.cpp): none here.
      num("lr", T::Double, std::nullopt, 0.0),
      num("weight_decay", T::Double, std::nullopt, 0.0),
      num("momentum", T::Double, std::nullopt, 0.0),
      num("dampening", T::Double, std::nullopt, 0.0),
      num("nesterov", T::Bool, std::nullopt, std::nullopt),
      num("beta1", T::Double, std::nullopt, 0.0, 1.0),
      num("beta2", T::Double, std::nullopt, 0.0, 1.0),
      num("eps", T::Double, std::nullopt, 0.0),
      num("amsgrad", T::Bool, std::nullopt, std::nullopt),
      num("alpha", T::Double, std::nullopt, 0.0),
      num("centered", T::Bool, std::nullopt, std::nullopt),
      num("lr_decay", T::Double, std::nullopt, 0.0),
      num("initial_accumulator_value", T::Double, std::nullopt, 0.0),
      num("eps1", T::Double, std::nullopt, 0.0),
      num("eps2", T::Double, std::nullopt, 0.0),
      num("clip_threshold", T::Double, std::nullopt, 0.0),
      num("decay_rate", T::Double, std::nullopt, std::nullopt, 0.0),
      num("scale_parameter", T::Bool, std::nullopt, std::nullopt),
      num("relative_step", T::Bool, std::nullopt, std::nullopt),
      num("warmup_init", T::Bool, std::nullopt, std::nullopt),
  };
  static const std::vector<OptionSpec> scheduler = {
      num("num_warmup_steps", T::Int, int64_t{0}, 0.0),
      num("num_training_steps", T::Int, std::nullopt, 1.0),
      num("num_cycles", T::Double, 0.5, 0.0),
      num("power", T::Double, 1.0, 0.0),
      num("lr_end", T::Double, 1e-7, 0.0),
      num("step_size", T::Int, std::nullopt, 1.0),
      num("gamma", T::Double, 0.1, 0.0),
  };
  static const std::vector<OptionSpec> dataloader = {
      num("batch_size", T::Int, int64_t{1}, 1.0),
      num("shuffle", T::Bool, false, std::nullopt),
      num("drop_last", T::Bool, false, std::nullopt),
      num("seed", T::Int, std::nullopt, 0.0),
      num("num_workers", T::Int, int64_t{1}, 0.0, 64.0),
      num("prefetch_factor", T::Int, int64_t{2}, 1.0, 1024.0),
      OptionSpec{"device", T::String, std::nullopt, std::nullopt, std::nullopt, {}},
  };
  static const std::vector<OptionSpec> accelerator = {
      num("cpu", T::Bool, false, std::nullopt),
      OptionSpec{"mixed_precision", T::String, std::string("no"), std::nullopt, std::nullopt, {"no", "fp16", "bf16"}},
      num("gradient_accumulation_steps", T::Int, int64_t{1}, 1.0),
      // GradientAccumulationPlugin.
      num("sync_with_dataloader", T::Bool, true, std::nullopt),
      num("sync_each_batch", T::Bool, false, std::nullopt),
      num("seed", T::Int, std::nullopt, 0.0),
      num("device_placement", T::Bool, true, std::nullopt),
      num("step_scheduler_with_optimizer", T::Bool, true, std::nullopt),
      num("split_batches", T::Bool, false, std::nullopt),
      OptionSpec{"project_dir", T::String, std::string(""), std::nullopt, std::nullopt, {}},
      // ProjectConfiguration.
      OptionSpec{"logging_dir", T::String, std::string(""), std::nullopt, std::nullopt, {}},
      num("automatic_checkpoint_naming", T::Bool, false, std::nullopt),
      num("total_limit", T::Int, std::nullopt, 1.0),
      num("iteration", T::Int, int64_t{0}, 0.0),
      num("save_on_each_node", T::Bool, false, std::nullopt),
      // Trackers: "tensorboard", "jsonl", "csv", "all", or a comma-separated list; "" for none.
      OptionSpec{"log_with", T::String, std::string(""), std::nullopt, std::nullopt, {}},
      num("even_batches", T::Bool, true, std::nullopt),
      num("dispatch_batches", T::Bool, std::nullopt, std::nullopt),
      num("data_seed", T::Int, std::nullopt, 0.0),
      num("use_seedable_sampler", T::Bool, false, std::nullopt),
      num("non_blocking", T::Bool, true, std::nullopt),
      num("scaler_init_scale", T::Double, 65536.0, 0.0),
      num("scaler_growth_factor", T::Double, 2.0, 1.0),
      num("scaler_backoff_factor", T::Double, 0.5, 0.0, 1.0),
      num("scaler_growth_interval", T::Int, int64_t{2000}, 1.0),
      num("timeout_seconds", T::Int, int64_t{1800}, 1.0),
      // InitProcessGroupKwargs(backend=...); unset: nccl on CUDA, gloo on the CPU.
      OptionSpec{"backend", T::String, std::nullopt, std::nullopt, std::nullopt, {"gloo", "nccl"}},
      num("ddp_bucket_cap_mb", T::Int, int64_t{25}, 1.0),
      num("ddp_find_unused_parameters", T::Bool, false, std::nullopt),
      num("ddp_broadcast_buffers", T::Bool, true, std::nullopt),
      OptionSpec{"ddp_comm_hook", T::String, std::string("no"), std::nullopt, std::nullopt, {"no", "fp16", "bf16"}},
      // Sharded data parallelism (DeepSpeed's ZeRO stage; FSDP's strategies map onto it); 0: DDP.
      num("zero_stage", T::Int, int64_t{0}, 0.0, 3.0),
      num("offload_optimizer", T::Bool, false, std::nullopt),
      num("offload_params", T::Bool, false, std::nullopt),
      OptionSpec{"state_dict_type", T::String, std::string("FULL_STATE_DICT"), std::nullopt, std::nullopt,
                 {"FULL_STATE_DICT", "SHARDED_STATE_DICT"}},
  };
  // PEFT's LoraConfig (its defaults); the target modules are an argument of their own.
  static const std::vector<OptionSpec> lora = {
      num("r", T::Int, int64_t{8}, 1.0, 1048576.0),
      num("lora_alpha", T::Double, 8.0, 0.0),
      num("lora_dropout", T::Double, 0.0, 0.0, 1.0),
      num("use_rslora", T::Bool, false, std::nullopt),
      OptionSpec{"init_lora_weights", T::String, std::string("true"), std::nullopt, std::nullopt,
                 {"true", "gaussian", "false"}},
  };
  switch (kind) {
    case OptionsKind::Lora: return lora;
    case OptionsKind::Accelerator: return accelerator;
    case OptionsKind::Optimizer: return optimizer;
    case OptionsKind::Scheduler: return scheduler;
    case OptionsKind::DataLoader: return dataloader;
  }
  fail(Status::InvalidArgument, "unknown options kind ", static_cast<int>(kind));
}

const char* options_kind_name(OptionsKind kind) {
  switch (kind) {
    case OptionsKind::Optimizer: return "optimizer";
    case OptionsKind::Scheduler: return "scheduler";
    case OptionsKind::DataLoader: return "dataloader";
    case OptionsKind::Accelerator: return "accelerator";
    case OptionsKind::Lora: return "lora";
  }
  return "?";
}

Options::Options(OptionsKind kind) : kind_(kind) { option_schema(kind); }

const OptionSpec& Options::spec(const std::string& key) const {
  for (const auto& s : option_schema(kind_))
    if (s.key == key) return s;
  std::string known;
  for (const auto& s : option_schema(kind_)) known += (known.empty() ? "" : ", ") + s.key;
  fail(Status::InvalidArgument, "unknown ", options_kind_name(kind_), " option '", key, "' (known: ", known, ")");
}

void Options::set(const std::string& key, OptionValue value) {
  const OptionSpec& s = spec(key);
  if (s.type == OptionType::Double && std::holds_alternative<int64_t>(value))
    value = static_cast<double>(std::get<int64_t>(value));
  const bool type_ok = (s.type == OptionType::Int && std::holds_alternative<int64_t>(value)) ||
                       (s.type == OptionType::Double && std::holds_alternative<double>(value)) ||
                       (s.type == OptionType::Bool && std::holds_alternative<bool>(value)) ||
                       (s.type == OptionType::String && std::holds_alternative<std::string>(value));
  require(type_ok, "option '", key, "' takes ", type_name(s.type), ", got '", to_text(value), "'");
  if (s.type == OptionType::Int || s.type == OptionType::Double) {
    const double v = s.type == OptionType::Int ? static_cast<double>(std::get<int64_t>(value)) : std::get<double>(value);
    require(std::isfinite(v), "option '", key, "' must be finite, got ", v);
    require(!s.min || v >= *s.min, "option '", key, "' must be at least ", *s.min, ", got ", to_text(value));
    require(!s.max || v <= *s.max, "option '", key, "' must be at most ", *s.max, ", got ", to_text(value));
  }
  if (!s.choices.empty()) {
    bool allowed = false;
    std::string list;
    for (const auto& c : s.choices) {
      allowed = allowed || c == std::get<std::string>(value);
      list += (list.empty() ? "" : ", ") + c;
    }
    require(allowed, "option '", key, "' must be one of ", list, ", got '", to_text(value), "'");
  }
  values_[key] = std::move(value);
}

void Options::set_from_text(const std::string& key, const std::string& text) {
  const OptionSpec& s = spec(key);
  auto bad = [&]() { fail(Status::InvalidArgument, "option '", key, "' takes ", type_name(s.type), ", got '", text, "'"); };
  switch (s.type) {
    case OptionType::Int: {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end || errno) bad();
      return set(key, static_cast<int64_t>(v));
    }
    case OptionType::Double: {
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || errno) bad();
      return set(key, v);
    }
    case OptionType::Bool: {
      auto flag = parse_bool(text);
      if (!flag) bad();
      return set(key, *flag);
    }
    case OptionType::String: return set(key, text);
  }
}

std::optional<OptionValue> Options::lookup(const std::string& key) const {
  auto it = values_.find(key);
  if (it != values_.end()) return it->second;
  return spec(key).fallback;
}

std::string Options::get_text(const std::string& key) const {
  auto value = lookup(key);
  return value ? to_text(*value) : "";
}

std::vector<std::string> Options::keys_set() const {
  std::vector<std::string> keys;
  for (const auto& item : values_) keys.push_back(item.first);
  return keys;
}

int64_t Options::get_int(const std::string& key, int64_t fallback) const {
  auto v = lookup(key);
  return v ? std::get<int64_t>(*v) : fallback;
}

double Options::get_double(const std::string& key, double fallback) const {
  auto v = lookup(key);
  return v ? std::get<double>(*v) : fallback;
}

bool Options::get_bool(const std::string& key, bool fallback) const {
  auto v = lookup(key);
  return v ? std::get<bool>(*v) : fallback;
}

std::string Options::get_string(const std::string& key, const std::string& fallback) const {
  auto v = lookup(key);
  return v ? std::get<std::string>(*v) : fallback;
}

const std::vector<std::string>& mixed_precision_choices() {
  for (const auto& spec : option_schema(OptionsKind::Accelerator))
    if (spec.key == "mixed_precision") return spec.choices;
  fail(Status::Internal, "the accelerator options have no mixed_precision");
}

bool is_mixed_precision(const std::string& mode) {
  const auto& choices = mixed_precision_choices();
  return std::find(choices.begin(), choices.end(), mode) != choices.end();
}

}  // namespace acc
