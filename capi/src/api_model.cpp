// Models: loading, building, forward, modes, parameters, state dicts, saving.
#include "accelerator/config.h"
#include "accelerator/lora_data_starts.h"
#include "checkpoint/pretrained_layout.h"
#include "common/device.h"
#include "guard.h"
#include "handles.h"
#include "host_callbacks.h"
#include "model/peft/mixed_batch.h"
#include "model/peft/weighted_adapter.h"
#include "model/quantization_config.h"

#include <functional>

using namespace acc::capi;

namespace {

acc::Model& model_arg(const acc_model* m) { return *live(m, "model").model; }

// A LoRA configuration from target_modules (NULL as "", PEFT's None: target_parameters alone, else
// refused as empty) and ACC_OPTIONS_LORA options (NULL: the defaults).
acc::LoraConfig lora_config_arg(const char* target_modules, const acc_options* opts) {
  return acc::LoraConfig::from(target_modules ? text_arg(target_modules, "target_modules") : std::string(),
                               options_arg(opts, acc::OptionsKind::Lora));
}

// PEFT's add_adapter takes any method's configuration: ACC_OPTIONS_LORA (or NULL), ACC_OPTIONS_IA3,
// ACC_OPTIONS_LOHA, ACC_OPTIONS_LOKR, ACC_OPTIONS_VERA or ACC_OPTIONS_OFT.
acc::LoraConfig adapter_config_arg(const char* target_modules, const acc_options* opts) {
  return acc::LoraConfig::of_kind(target_modules ? text_arg(target_modules, "target_modules") : std::string(),
                                  opts ? live(opts, "opts").options : options_arg(nullptr, acc::OptionsKind::Lora));
}

acc::NamedTensors run_forward(acc::Model& model, const acc_tensor* const* inputs, size_t n, uint32_t flags) {
  auto args = tensors_arg(inputs, n, "inputs");
  acc::require((flags & ~ACC_FORWARD_NO_GRAD) == 0, "unknown forward flags ", flags);
  // Grad mode is thread-local torch state: set it for this call only.
  at::AutoGradMode grad_mode((flags & ACC_FORWARD_NO_GRAD) == 0);
  return model.forward(args);
}

}  // namespace

extern "C" {

acc_status acc_model_load_torchscript(const char* path, acc_model** out) {
  return guarded([&] {
    const std::string file = path_arg(path, "path");
    emit(out_param(out, "out"), acc::load_torchscript_model(file, acc::builds_placeholder_weights()));
  });
}

acc_status acc_model_from_spec(const char* json_spec, acc_model** out) {
  return guarded([&] {
    const std::string spec = text_arg(json_spec, "json_spec");
    emit(out_param(out, "out"), acc::model_from_spec(spec, acc::builds_placeholder_weights()));
  });
}

acc_status acc_model_forward(acc_model* model, const acc_tensor* const* inputs, size_t n, uint32_t flags,
                             acc_tensor_list** out) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    out_param(out, "out");
    emit_named(out, run_forward(m, inputs, n, flags));
  });
}

acc_status acc_model_forward_adapters(acc_model* model, const acc_tensor* const* inputs, size_t n,
                                      const char* const* adapter_names, size_t n_names, uint32_t flags,
                                      acc_tensor_list** out) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    out_param(out, "out");
    const std::vector<std::string> names = names_arg(adapter_names, n_names, "adapter_names");
    const auto mixed = m.mixed_batch(names);
    emit_named(out, run_forward(m, inputs, n, flags));
  });
}

acc_status acc_model_forward1(acc_model* model, const acc_tensor* input, uint32_t flags, acc_tensor** out) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    out_param(out, "out");
    auto outputs = run_forward(m, &input, 1, flags);
    acc::require(outputs.size() == 1, "forward returned ", outputs.size(),
                 " tensors; use acc_model_forward for models with several outputs");
    emit(out, outputs[0].second);
  });
}

acc_status acc_model_set_training(acc_model* model, int training) {
  return guarded([&] { model_arg(model).set_training(training != 0); });
}

acc_status acc_model_set_graph_optimization(acc_model* model, int enabled) {
  return guarded([&] { model_arg(model).set_graph_optimization(enabled != 0); });
}

acc_status acc_model_set_requires_grad(acc_model* model, const char* patterns, int requires_grad, size_t* count) {
  return guarded([&] {
    auto& m = model_arg(model);
    const size_t changed = m.set_requires_grad(text_arg(patterns, "patterns"), requires_grad != 0);
    if (count) *count = changed;
  });
}

acc_status acc_model_is_training(const acc_model* model, int* out) {
  return guarded([&] { *out_param(out, "out") = model_arg(model).is_training() ? 1 : 0; });
}

acc_status acc_model_to(acc_model* model, const char* device, acc_dtype dtype) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    c10::optional<c10::Device> where;
    if (device) where = acc::parse_device(device);
    c10::optional<at::ScalarType> type;
    if (enum_int(dtype) != ACC_DTYPE_UNDEFINED) {
      type = to_scalar_type(dtype);
      acc::require(at::isFloatingType(*type), "a model can only be converted to a floating dtype");
    }
    m.require_movable(where, type);
    m.to(where, type);
  });
}

acc_status acc_model_parameter_count(const acc_model* model, size_t* tensors, int64_t* elements) {
  return guarded([&] {
    auto params = model_arg(model).named_parameters();
    int64_t total = 0;
    for (const auto& p : params) total += p.second.numel();
    if (tensors) *tensors = params.size();
    if (elements) *elements = total;
  });
}

acc_status acc_model_parameter_names(const acc_model* model, acc_string_list** out) {
  return guarded([&] {
    std::vector<std::string> names;
    for (const auto& p : model_arg(model).named_parameters()) names.push_back(p.first);
    emit(out_param(out, "out"), std::move(names));
  });
}

acc_status acc_model_parameter(const acc_model* model, const char* name, acc_tensor** out) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const std::string key = text_arg(name, "name");
    m.require_weights("acc_model_parameter");
    m.require_whole_parameters("acc_model_parameter");
    emit(out_param(out, "out"), m.find_tensor(key));
  });
}

acc_status acc_model_zero_grad(acc_model* model) {
  return guarded([&] { model_arg(model).zero_grad(); });
}

acc_status acc_model_state_dict(const acc_model* model, acc_tensor_list** out) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    out_param(out, "out");
    m.require_whole_parameters("acc_model_state_dict");
    emit_named(out, m.state_dict());
  });
}

acc_status acc_model_load_state_dict(acc_model* model, const acc_tensor_list* state, int strict) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const auto& l = live(state, "state");
    m.require_whole_parameters("acc_model_load_state_dict");
    m.load_state_dict(named_tensors(l), strict != 0);
  });
}

acc_status acc_model_save_torchscript(const acc_model* model, const char* path) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    m.save_torchscript(path_arg(path, "path"));
  });
}

acc_status acc_model_quantize(acc_model* model, const char* quantization_config, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const size_t layers =
        m.quantize(acc::QuantizationConfig::from_json(text_arg(quantization_config, "quantization_config")));
    if (count) *count = layers;
  });
}

acc_status acc_model_quantize_4bit(acc_model* model, const char* quantization_config, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const auto config = acc::QuantizationConfig::from_json(text_arg(quantization_config, "quantization_config"));
    acc::require(!config.eight_bit, "acc_model_quantize_4bit: the quantization config asks for load_in_8bit; ",
                 "acc_model_quantize makes 8-bit layers");
    const size_t layers = m.quantize(config);
    if (count) *count = layers;
  });
}

acc_status acc_model_prepare_for_kbit_training(acc_model* model, size_t* cast) {
  return guarded([&] {
    const size_t n = model_arg(model).prepare_for_kbit_training();
    if (cast) *cast = n;
  });
}

acc_status acc_model_add_lora(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const size_t added = m.add_lora(lora_config_arg(target_modules, opts));
    if (count) *count = added;
  });
}

acc_status acc_model_add_trainable_tokens(acc_model* model, const char* target_modules, const acc_options* opts,
                                          size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    acc::require(opts != nullptr,
                 "opts is NULL: ACC_OPTIONS_TRAINABLE_TOKENS with token_indices names the rows to train");
    const auto config =
        acc::LoraConfig::trainable_tokens(target_modules ? text_arg(target_modules, "target_modules") : std::string(),
                                          options_arg(opts, acc::OptionsKind::TrainableTokens));
    const size_t added = m.add_lora(config);
    if (count) *count = added;
  });
}

namespace {

// acc_model_add_ia3, _loha, _lokr, _vera and _oft: PEFT's method of `kind`, with `opts` of that kind or NULL (its
// defaults).
acc_status add_adapters_of(acc_model* model, const char* target_modules, const acc_options* opts, acc::OptionsKind kind,
                           size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const size_t added = m.add_lora(acc::LoraConfig::of_kind(
        target_modules ? text_arg(target_modules, "target_modules") : std::string(), options_arg(opts, kind)));
    if (count) *count = added;
  });
}

}  // namespace

acc_status acc_model_add_ia3(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Ia3, count);
}

acc_status acc_model_add_loha(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Loha, count);
}

acc_status acc_model_add_lokr(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Lokr, count);
}

acc_status acc_model_add_vera(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Vera, count);
}

acc_status acc_model_add_oft(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Oft, count);
}

acc_status acc_model_add_adalora(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Adalora, count);
}

acc_status acc_model_add_boft(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Boft, count);
}

acc_status acc_model_add_hra(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Hra, count);
}

acc_status acc_model_add_fourierft(acc_model* model, const char* target_modules, const acc_options* opts,
                                   size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Fourierft, count);
}

acc_status acc_model_add_ln_tuning(acc_model* model, const char* target_modules, const acc_options* opts,
                                   size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::LnTuning, count);
}

acc_status acc_model_add_miss(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Miss, count);
}

acc_status acc_model_add_c3a(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::C3a, count);
}

acc_status acc_model_add_shira(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Shira, count);
}

acc_status acc_model_add_randlora(acc_model* model, const char* target_modules, const acc_options* opts,
                                  size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Randlora, count);
}

acc_status acc_model_add_delora(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Delora, count);
}

acc_status acc_model_add_road(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Road, count);
}

acc_status acc_model_add_gralora(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Gralora, count);
}

acc_status acc_model_add_hira(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Hira, count);
}

acc_status acc_model_add_pvera(acc_model* model, const char* target_modules, const acc_options* opts, size_t* count) {
  return add_adapters_of(model, target_modules, opts, acc::OptionsKind::Pvera, count);
}

acc_status acc_model_adalora_loss(const acc_model* model, const acc_tensor* loss, acc_tensor** out) {
  return guarded([&] {
    const acc::Model& m = model_arg(model);
    const at::Tensor& given = live(loss, "loss").tensor;
    emit(out_param(out, "out"), m.adalora_loss(given));
  });
}

acc_status acc_model_adalora_update_and_allocate(acc_model* model, int64_t global_step) {
  return guarded([&] { model_arg(model).adalora_update_and_allocate(global_step); });
}

acc_status acc_model_save_lora(const acc_model* model, const char* dir) {
  return guarded([&] { model_arg(model).save_lora(path_arg(dir, "dir")); });
}

acc_status acc_model_load_lora(acc_model* model, const char* dir) {
  return guarded([&] { model_arg(model).load_lora(path_arg(dir, "dir")); });
}

acc_status acc_model_merge_lora(acc_model* model) {
  return guarded([&] { model_arg(model).merge_lora(); });
}

acc_status acc_model_merge_lora_adapters(acc_model* model, const char* const* adapter_names, size_t n) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    acc::require(n > 0, "n is 0: name at least one adapter to merge");
    m.merge_lora_adapters(names_arg(adapter_names, n, "adapter_names"));
  });
}

acc_status acc_model_lora_count(const acc_model* model, size_t* out) {
  return guarded([&] { *out_param(out, "out") = model_arg(model).lora().count(); });
}

acc_status acc_model_set_lora_enabled(acc_model* model, int enabled) {
  return guarded([&] { model_arg(model).set_lora_enabled(enabled != 0); });
}

acc_status acc_model_lora_enabled(const acc_model* model, int* out) {
  return guarded([&] { *out_param(out, "out") = model_arg(model).lora().enabled() ? 1 : 0; });
}

acc_status acc_model_add_lora_named(acc_model* model, const char* adapter_name, const char* target_modules,
                                    const acc_options* opts, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const std::string name = text_arg(adapter_name, "adapter_name");
    const size_t added = m.add_named_lora(name, adapter_config_arg(target_modules, opts));
    if (count) *count = added;
  });
}

acc_status acc_model_load_lora_named(acc_model* model, const char* dir, const char* adapter_name) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    m.load_named_lora(path_arg(dir, "dir"), text_arg(adapter_name, "adapter_name"));
  });
}

acc_status acc_model_set_adapter(acc_model* model, const char* adapter_name) {
  return guarded([&] { model_arg(model).set_adapter(text_arg(adapter_name, "adapter_name")); });
}

acc_status acc_model_delete_adapter(acc_model* model, const char* adapter_name) {
  return guarded([&] { model_arg(model).delete_adapter(text_arg(adapter_name, "adapter_name")); });
}

acc_status acc_model_unload_lora(acc_model* model) {
  return guarded([&] { model_arg(model).unload_lora(); });
}

namespace {

// add_weighted_adapter from the C arguments, with its keywords in `options`.
acc_status add_weighted_adapter(acc_model* model, const char* const* adapter_names, const double* weights, size_t n,
                                const char* adapter_name, const char* combination_type,
                                const std::function<acc::Options()>& options, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    acc::require(n > 0, "n is 0: add_weighted_adapter combines at least one adapter");
    const std::vector<std::string> names = names_arg(adapter_names, n, "adapter_names");
    acc::require(weights != nullptr, "weights is NULL");
    const auto how = acc::WeightedCombination::from(text_arg(combination_type, "combination_type"), options(), n);
    const size_t added = m.add_weighted_adapter(names, std::vector<double>(weights, weights + n),
                                                text_arg(adapter_name, "adapter_name"), how);
    if (count) *count = added;
  });
}

}  // namespace

acc_status acc_model_add_weighted_adapter_with(acc_model* model, const char* const* adapter_names,
                                               const double* weights, size_t n, const char* adapter_name,
                                               const char* combination_type, const acc_options* opts, size_t* count) {
  return add_weighted_adapter(
      model, adapter_names, weights, n, adapter_name, combination_type,
      [&] { return options_arg(opts, acc::OptionsKind::WeightedAdapter); }, count);
}

acc_status acc_model_add_weighted_adapter(acc_model* model, const char* const* adapter_names, const double* weights,
                                          size_t n, const char* adapter_name, const char* combination_type,
                                          int64_t svd_rank, size_t* count) {
  return add_weighted_adapter(
      model, adapter_names, weights, n, adapter_name, combination_type,
      [&] {
        acc::Options options = options_arg(nullptr, acc::OptionsKind::WeightedAdapter);
        options.set("svd_rank", svd_rank);
        return options;
      },
      count);
}

acc_status acc_model_initialize_lora_eva(acc_model* model, acc_dataloader* dl, const acc_options* opts,
                                         acc_accelerator* acc, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    acc::DataLoader& loader = *live(dl, "dl").loader;
    const acc::EvaReading reading = acc::eva_option_table().read(options_arg(opts, acc::OptionsKind::Eva));
    const size_t adapted = acc::initialize_lora_eva(m, loader, reading, acc ? &accelerator_arg(acc) : nullptr);
    if (count) *count = adapted;
  });
}

acc_status acc_model_add_lora_corda(acc_model* model, const char* target_modules, const acc_options* opts,
                                    acc_dataloader* dl, int64_t inputs, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    acc::LoraConfig config = lora_config_arg(target_modules, opts);
    const size_t adapted = acc::add_lora_corda(m, std::move(config), *live(dl, "dl").loader, inputs);
    if (count) *count = adapted;
  });
}

acc_status acc_model_begin_lora_ga(acc_model* model, const char* target_modules, const acc_options* opts) {
  return guarded([&] { model_arg(model).begin_lora_ga(lora_config_arg(target_modules, opts)); });
}

acc_status acc_model_add_lora_ga(acc_model* model, size_t* count) {
  return guarded([&] {
    const size_t adapted = model_arg(model).add_lora_ga();
    if (count) *count = adapted;
  });
}

acc_status acc_model_replace_lora_weights_loftq(acc_model* model, const char* model_path, const char* adapter_name,
                                                acc_loftq_keep_fn keep, void* user_data, size_t* count) {
  return guarded([&] {
    acc::Model& m = model_arg(model);
    const std::string path = path_arg(model_path, "model_path");
    std::function<bool(const std::string&)> decide;
    if (keep)
      decide = [&](const std::string& module) {
        int keeps = 1;
        acc::capi::invoke_host("the keep callback of acc_model_replace_lora_weights_loftq",
                               [&] { return keep(user_data, module.c_str(), &keeps); });
        return keeps != 0;
      };
    const size_t kept =
        m.replace_lora_weights_loftq(acc::load_sharded(path), path, adapter_name ? adapter_name : "", decide);
    if (count) *count = kept;
  });
}

acc_status acc_model_active_adapter(const acc_model* model, char** out) {
  return guarded([&] {
    const acc::Model& m = model_arg(model);
    char** result = out_param(out, "out");
    acc::require(!m.lora().empty(), "the model has no adapters");
    *result = owned_string(m.active_adapter());
  });
}

acc_status acc_model_adapter_names(const acc_model* model, acc_string_list** out) {
  return guarded([&] { emit(out_param(out, "out"), model_arg(model).adapter_names()); });
}

void acc_model_free(acc_model* model) { release(model); }

}  // extern "C"
