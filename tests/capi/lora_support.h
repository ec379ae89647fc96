// The small network, training loops and fixture checks the LoRA tests (and IA3, LoHa, LoKr) share.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "support.h"

namespace lora_test {

using acc_test::floats;
using acc_test::lora_options;
using acc_test::to_floats;

// linear 6->8, a post-norm encoder layer (d_model 8), linear 8->3.
inline const char* kNet = R"([{"type":"linear","in_features":6,"out_features":8},
  {"type":"transformer_encoder_layer","d_model":8,"nhead":2,"dim_feedforward":16,"dropout":0.0,"batch_first":true},
  {"type":"linear","in_features":8,"out_features":3}])";
inline const char* kTargets = "0,linear1,out_proj";

inline acc_model* net(uint64_t seed = 5) {
  EXPECT_EQ(acc_set_seed(seed), ACC_OK);
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(kNet, &m), ACC_OK) << acc_last_error_message();
  return m;
}

inline size_t add_lora(acc_model* m, const char* targets = kTargets, int64_t r = 2, double alpha = 4,
                       double dropout = 0) {
  acc_options* o = lora_options(r, alpha);
  EXPECT_EQ(acc_options_set_double(o, "lora_dropout", dropout), ACC_OK);
  size_t count = 0;
  EXPECT_EQ(acc_model_add_lora(m, targets, o, &count), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return count;
}

inline acc_tensor* input() {
  std::vector<float> v(2 * 4 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i));
  return floats(v, {2, 4, 6});
}

// The model's output on `x` without gradients (`x` is freed).
inline std::vector<float> outputs_on(acc_model* m, acc_tensor* x) {
  acc_tensor* y = nullptr;
  EXPECT_EQ(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y), ACC_OK) << acc_last_error_message();
  auto v = y ? to_floats(y) : std::vector<float>{};
  acc_tensor_free(x);
  acc_tensor_free(y);
  return v;
}

inline std::vector<float> outputs(acc_model* m) { return outputs_on(m, input()); }

// The model's outputs with every parameter frozen, as adding adapters leaves the base model: what
// an adapted model computes where its adapters add nothing. PyTorch 2.x's matmul folds a batch into
// one product when the weight requires grad (whatever the grad mode), so the bits follow
// requires_grad there, in Python as here.
inline std::vector<float> frozen_outputs(acc_model* m) {
  size_t count = 0;
  EXPECT_EQ(acc_model_set_requires_grad(m, "*", 0, &count), ACC_OK) << acc_last_error_message();
  auto values = outputs(m);
  EXPECT_EQ(acc_model_set_requires_grad(m, "*", 1, &count), ACC_OK) << acc_last_error_message();
  return values;
}

inline std::vector<float> param(const acc_model* m, const std::string& name) {
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name.c_str(), &t), ACC_OK) << acc_last_error_message();
  auto v = t ? to_floats(t) : std::vector<float>{};
  acc_tensor_free(t);
  return v;
}

// A parameter's values as float32, whatever its dtype.
inline std::vector<float> param_floats(const acc_model* m, const std::string& name) {
  acc_tensor *t = nullptr, *f = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name.c_str(), &t), ACC_OK) << name << ": " << acc_last_error_message();
  EXPECT_EQ(acc_tensor_to(t, nullptr, ACC_DTYPE_FLOAT32, &f), ACC_OK);
  auto values = f ? acc_test::to_floats(f) : std::vector<float>{};
  acc_tensor_free(t);
  acc_tensor_free(f);
  return values;
}

// AdamW steps on an MSE loss against fixed targets; returns the losses.
inline std::vector<double> train(acc_model* m, int steps) {
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  std::vector<double> losses;
  acc_tensor* x = input();
  std::vector<float> target(2 * 4 * 3);
  for (size_t i = 0; i < target.size(); ++i) target[i] = std::cos(0.5f * static_cast<float>(i));
  acc_tensor* y = floats(target, {2, 4, 3});
  for (int s = 0; s < steps; ++s) {
    acc_tensor *out = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(m, x, 0, &out), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    losses.push_back(acc_test::item(loss));
    EXPECT_EQ(acc_tensor_backward(loss), ACC_OK);
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
  acc_tensor_free(x);
  acc_tensor_free(y);
  acc_optimizer_free(opt);
  return losses;
}

// A TorchScript model the exporters wrote under ACC_TEST_DATA.
inline acc_model* data_model(const std::string& file) {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/" + file).c_str(), &m), ACC_OK)
      << acc_last_error_message();
  return m;
}

// A case's module names as target_modules ("a,b").
inline std::string joined(const nlohmann::json& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n.template get<std::string>();
  return out;
}

// ACC_OPTIONS_LORA of a case's configuration: r, lora_alpha, and rank_pattern and use_dora where given.
inline acc_options* case_lora_options(const nlohmann::json& config) {
  acc_options* o = lora_options(config["r"].template get<int64_t>(), config["lora_alpha"].template get<double>());
  if (config.contains("use_dora")) EXPECT_EQ(acc_options_set_bool(o, "use_dora", 1), ACC_OK);
  if (config.contains("rank_pattern"))
    EXPECT_EQ(acc_options_set(o, "rank_pattern", config["rank_pattern"].dump().c_str()), ACC_OK);
  return o;
}

// A data loader over fixture tensors (fields of one dataset), in batches, shuffled or not.
inline acc_dataloader* loader_over(const std::vector<nlohmann::json>& fields, int64_t batch_size, bool shuffle) {
  std::vector<acc_tensor*> tensors;
  for (const auto& f : fields) tensors.push_back(acc_test::from_json(f));
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(tensors.data(), tensors.size(), &ds), ACC_OK) << acc_last_error_message();
  for (acc_tensor* t : tensors) acc_tensor_free(t);
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "batch_size", batch_size), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "shuffle", shuffle ? 1 : 0), ACC_OK);
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, o, &dl), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  acc_dataset_free(ds);
  return dl;
}

// The case's tensors (an object from names to fixture tensors) loaded into the model by their names
// followed by `suffix`.
inline void load_case_tensors(acc_model* m, const nlohmann::json& tensors, const std::string& suffix = "") {
  acc_tensor_list* list = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&list), ACC_OK);
  for (const auto& item : tensors.items()) {
    acc_tensor* t = acc_test::from_json(item.value());
    ASSERT_EQ(acc_tensor_list_append(list, (item.key() + suffix).c_str(), t), ACC_OK);
    acc_tensor_free(t);
  }
  ASSERT_EQ(acc_model_load_state_dict(m, list, 0), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(list);
}

// What export_lora_cases.py recorded of PEFT (under ACC_TEST_DATA, which the caller checked).
inline nlohmann::json lora_cases() {
  std::ifstream in(acc_test::data_dir() + "/lora_cases.json");
  EXPECT_TRUE(in) << "run export_lora_cases.py first";
  return in ? nlohmann::json::parse(in) : nlohmann::json::object();
}

// A model of the test data (ACC_TEST_DATA) computing as PyTorch's eager forward (no graph optimisation).
inline acc_model* eager_data_model(const std::string& file) {
  acc_model* m = data_model(file);
  if (m) EXPECT_EQ(acc_model_set_graph_optimization(m, 0), ACC_OK);
  return m;
}

// Each of `tensors` (names to fixture tensors) equals the model's parameter of that name.
inline void expect_params(const acc_model* m, const nlohmann::json& tensors) {
  for (const auto& item : tensors.items())
    EXPECT_EQ(param(m, item.key()), acc_test::float_values(item.value())) << item.key();
}

// The model's evaluation-mode output on the case's "input".
inline std::vector<float> eval_outputs(acc_model* m, const nlohmann::json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, acc_test::from_json(c["input"]));
}

// A training-mode forward of `input` with the global generator seeded `seed` first, its output
// compared with `output`; then the backward of its sum, each parameter's gradient compared with
// `grads` (one that module dropout left out has none: PEFT's None, recorded as zeros). The
// gradients are zeroed after.
inline void expect_training_step(acc_model* m, const nlohmann::json& input, uint64_t seed, const nlohmann::json& output,
                                 const nlohmann::json& grads) {
  ASSERT_EQ(acc_model_set_training(m, 1), ACC_OK);
  ASSERT_EQ(acc_set_seed(seed), ACC_OK);
  acc_tensor *x = acc_test::from_json(input), *y = nullptr, *sum = nullptr;
  ASSERT_EQ(acc_model_forward1(m, x, 0, &y), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(to_floats(y), acc_test::float_values(output));
  ASSERT_EQ(acc_tensor_sum(y, &sum), ACC_OK);
  ASSERT_EQ(acc_tensor_backward(sum), ACC_OK);
  for (const auto& item : grads.items()) {
    acc_tensor *p = nullptr, *g = nullptr;
    ASSERT_EQ(acc_model_parameter(m, item.key().c_str(), &p), ACC_OK) << item.key();
    ASSERT_EQ(acc_tensor_grad(p, &g), ACC_OK);
    const auto expected = acc_test::float_values(item.value());
    if (g)
      EXPECT_EQ(to_floats(g), expected) << item.key();
    else
      EXPECT_EQ(expected, std::vector<float>(expected.size(), 0.0f)) << item.key() << " has no gradient";
    acc_tensor_free(p);
    acc_tensor_free(g);
  }
  for (acc_tensor* t : {x, y, sum}) acc_tensor_free(t);
  EXPECT_EQ(acc_model_zero_grad(m), ACC_OK);
}

// `steps` AdamW steps (lr 1e-2) of the MSE between the model's output on `input` and `target`, the
// global generator seeded `seed` first where one is given (dropout); the losses.
inline std::vector<double> adamw_mse_losses(acc_model* m, const nlohmann::json& input, const nlohmann::json& target,
                                            int steps, std::optional<uint64_t> seed = std::nullopt) {
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  acc_tensor *x = acc_test::from_json(input), *goal = acc_test::from_json(target);
  std::vector<double> losses;
  if (seed) EXPECT_EQ(acc_set_seed(*seed), ACC_OK);
  for (int step = 0; step < steps; ++step) {
    acc_tensor *y = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(m, x, 0, &y), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_loss_mse(y, goal, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    if (!loss) break;
    losses.push_back(acc_test::item(loss));
    EXPECT_EQ(acc_tensor_backward(loss), ACC_OK);
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    acc_tensor_free(y);
    acc_tensor_free(loss);
  }
  acc_tensor_free(x);
  acc_tensor_free(goal);
  acc_optimizer_free(opt);
  return losses;
}

// Three AdamW steps of `m` in training mode (adamw_mse_losses on `input` and `target`, the generator
// seeded `seed` first where given) give the case's losses and its trained parameters; `m` is freed.
inline void expect_case_training(acc_model* m, const nlohmann::json& input, const nlohmann::json& target,
                                 const nlohmann::json& c, std::optional<uint64_t> seed) {
  EXPECT_EQ(acc_model_set_training(m, 1), ACC_OK);
  EXPECT_EQ(adamw_mse_losses(m, input, target, 3, seed), c["losses"].get<std::vector<double>>());
  expect_params(m, c["trained"]);
  acc_model_free(m);
}

// Each of `tensors` (names to fixture tensors) is in `list` under `prefix` and its name, of its
// shape and values.
inline void expect_list_holds(acc_tensor_list* list, const nlohmann::json& tensors, const std::string& prefix) {
  for (const auto& item : tensors.items()) {
    acc_tensor* t = nullptr;
    ASSERT_EQ(acc_tensor_list_find(list, (prefix + item.key()).c_str(), &t), ACC_OK) << item.key();
    EXPECT_EQ(acc_test::shape(t), item.value()["shape"].get<std::vector<int64_t>>()) << item.key();
    EXPECT_EQ(to_floats(t), acc_test::float_values(item.value())) << item.key();
    acc_tensor_free(t);
  }
}

// A model whose adapters start as the identity (`before`: its outputs without them; to rounding
// where not `exact_start`) trains 5 steps to a lower loss and other outputs, and merging the adapters
// keeps those outputs.
inline void expect_trains_then_merges(acc_model* m, const std::vector<float>& before, bool exact_start = true) {
  const auto start = outputs(m);
  if (exact_start) acc_test::expect_equal_but_for_freezing(start, before);
  ASSERT_EQ(start.size(), before.size());
  for (size_t i = 0; i < start.size(); ++i) EXPECT_NEAR(start[i], before[i], 1e-5);
  const auto losses = train(m, 5);
  ASSERT_FALSE(losses.empty());
  EXPECT_LT(losses.back(), losses.front());
  const auto trained = outputs(m);
  EXPECT_NE(trained, before);
  ASSERT_EQ(acc_model_merge_lora(m), ACC_OK) << acc_last_error_message();
  const auto merged = outputs(m);
  ASSERT_EQ(merged.size(), trained.size());
  for (size_t i = 0; i < merged.size(); ++i) EXPECT_NEAR(merged[i], trained[i], 1e-5);
}

// The number of tensors the state of the test data's model `file` holds.
inline size_t state_entries(const std::string& file) {
  acc_model* base = eager_data_model(file);
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_model_state_dict(base, &state), ACC_OK);
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(state, &n), ACC_OK);
  acc_tensor_list_free(state);
  acc_model_free(base);
  return n;
}

// A PEFT method's adding function (acc_model_add_loha, ...).
using AddAdapters = acc_status (*)(acc_model*, const char*, const acc_options*, size_t*);

// The test data's model `file` (eager_data_model) given `add`'s adapters on `targets` with `o` (freed
// here), the global generator seeded `seed` first, as a case's draws were made; `count` layers adapted.
inline acc_model* adapted_case_model(const std::string& file, AddAdapters add, const std::string& targets,
                                     acc_options* o, uint64_t seed, size_t count) {
  acc_model* m = eager_data_model(file);
  EXPECT_EQ(acc_set_seed(seed), ACC_OK);
  size_t adapted = 0;
  EXPECT_EQ(add(m, targets.c_str(), o, &adapted), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(adapted, count);
  acc_options_free(o);
  return m;
}

// The spec network (net()) given `add`'s adapters on `targets` with options of `kind` (`settings`:
// keys with integer values, a bool key given 0 or 1) adapts `count` layers, and the adapters start
// as the identity, train and merge (expect_trains_then_merges).
inline void expect_spec_adapters_train_and_merge(AddAdapters add, acc_options_kind kind,
                                                 std::initializer_list<std::pair<const char*, int64_t>> settings,
                                                 const char* targets, size_t count, bool exact_start = true) {
  acc_model* m = net();
  const auto before = outputs(m);
  acc_options* o = nullptr;
  ASSERT_EQ(acc_options_create(kind, &o), ACC_OK);
  for (const auto& [key, value] : settings)
    ASSERT_EQ(acc_options_set(o, key, std::to_string(value).c_str()), ACC_OK) << key;
  size_t adapted = 0;
  ASSERT_EQ(add(m, targets, o, &adapted), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  EXPECT_EQ(adapted, count);
  expect_trains_then_merges(m, before, exact_start);
  acc_model_free(m);
}

// acc_save_model of `m` writes `merged` (names to fixture tensors: the merged weights), bit for bit,
// and `entries` tensors in all (no adapter tensor).
inline void expect_saved_model_merged(acc_model* m, const nlohmann::json& merged, size_t entries,
                                      const std::string& folder) {
  const std::string dir = acc_test::temp_path(folder);
  std::filesystem::remove_all(dir);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  ASSERT_EQ(acc_save_model(acc, m, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  acc_accelerator_free(acc);
  acc_tensor_list* saved = nullptr;
  ASSERT_EQ(acc_tensor_list_load_safetensors((dir + "/model.safetensors").c_str(), &saved), ACC_OK);
  for (const auto& item : merged.items()) {
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_find(saved, item.key().c_str(), &t), ACC_OK) << item.key();
    if (t) EXPECT_EQ(to_floats(t), acc_test::float_values(item.value())) << item.key();
    acc_tensor_free(t);
  }
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(saved, &n), ACC_OK);
  EXPECT_EQ(n, entries);
  acc_tensor_list_free(saved);
}

// The tensors of the adapter folder `dir`'s adapter_model.safetensors, by name.
inline acc_tensor_list* adapter_file_tensors(const std::string& dir) {
  acc_tensor_list* list = nullptr;
  EXPECT_EQ(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &list), ACC_OK);
  return list;
}

// Rewrites `dir`'s adapter_model.safetensors with its entry `name` replaced by `replacement` (left
// out where null), the other entries as they were.
inline void replace_adapter_tensor(const std::string& dir, const std::string& name, const acc_tensor* replacement) {
  acc_tensor_list *list = adapter_file_tensors(dir), *changed = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&changed), ACC_OK);
  size_t n = 0;
  ASSERT_EQ(acc_tensor_list_size(list, &n), ACC_OK);
  for (size_t i = 0; i < n; ++i) {
    const char* entry = nullptr;
    acc_tensor* t = nullptr;
    ASSERT_EQ(acc_tensor_list_name(list, i, &entry), ACC_OK);
    ASSERT_EQ(acc_tensor_list_get(list, i, &t), ACC_OK);
    if (entry != name) EXPECT_EQ(acc_tensor_list_append(changed, entry, t), ACC_OK);
    acc_tensor_free(t);
  }
  if (replacement) EXPECT_EQ(acc_tensor_list_append(changed, name.c_str(), replacement), ACC_OK);
  EXPECT_EQ(acc_tensor_list_save_safetensors(changed, (dir + "/adapter_model.safetensors").c_str()), ACC_OK);
  acc_tensor_list_free(changed);
  acc_tensor_list_free(list);
}

// The same with float32 zeros of the entry's shape in its place.
inline void zero_adapter_tensor(const std::string& dir, const std::string& name) {
  acc_tensor_list* list = adapter_file_tensors(dir);
  acc_tensor *t = nullptr, *zeros = nullptr;
  ASSERT_EQ(acc_tensor_list_find(list, name.c_str(), &t), ACC_OK) << name;
  const std::vector<int64_t> dims = acc_test::shape(t);
  ASSERT_EQ(acc_tensor_zeros(dims.data(), dims.size(), ACC_DTYPE_FLOAT32, nullptr, &zeros), ACC_OK);
  replace_adapter_tensor(dir, name, zeros);
  acc_tensor_free(zeros);
  acc_tensor_free(t);
  acc_tensor_list_free(list);
}

// The evaluation outputs of `m` on `input` under bf16 autocast, as float32, with its adapters and
// disabled: the case's autocast_output and autocast_disabled_output, in its autocast_dtypes (PEFT's
// layers return their input's dtype either way). The adapters are enabled after.
inline void expect_autocast_outputs(acc_model* m, const nlohmann::json& input, const nlohmann::json& c) {
  ASSERT_EQ(acc_model_set_training(m, 0), ACC_OK);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"mixed_precision", "bf16"}});
  for (const char* key : {"autocast_output", "autocast_disabled_output"}) {
    const bool enabled = std::string(key) == "autocast_output";
    EXPECT_EQ(acc_model_set_lora_enabled(m, enabled), ACC_OK);
    acc_tensor *x = acc_test::from_json(input), *low = nullptr, *floats = nullptr;
    EXPECT_EQ(acc_autocast_begin(acc, 1), ACC_OK);
    EXPECT_EQ(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &low), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_autocast_end(acc), ACC_OK);
    acc_dtype dtype = ACC_DTYPE_FLOAT32;
    EXPECT_EQ(acc_tensor_dtype(low, &dtype), ACC_OK);
    EXPECT_EQ(dtype, c["autocast_dtypes"][enabled ? 0 : 1] == "torch.float32" ? ACC_DTYPE_FLOAT32 : ACC_DTYPE_BFLOAT16)
        << key;
    EXPECT_EQ(acc_tensor_to(low, nullptr, ACC_DTYPE_FLOAT32, &floats), ACC_OK);
    EXPECT_EQ(to_floats(floats), acc_test::float_values(c[key])) << key;
    for (acc_tensor* t : {x, low, floats}) acc_tensor_free(t);
  }
  EXPECT_EQ(acc_model_set_lora_enabled(m, 1), ACC_OK);
  acc_accelerator_free(acc);
}

// A training forward of the case's input under bf16 autocast (the global generator seeded `seed`
// first where given: dropout), its output and the gradients of its sum (in float32) as the case's
// autocast_train_output and autocast_grads; the gradients zeroed after.
inline void expect_autocast_step(acc_model* m, const nlohmann::json& c, std::optional<uint64_t> seed = std::nullopt) {
  ASSERT_EQ(acc_model_set_training(m, 1), ACC_OK);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"mixed_precision", "bf16"}});
  if (seed) ASSERT_EQ(acc_set_seed(*seed), ACC_OK);
  ASSERT_EQ(acc_autocast_begin(acc, 1), ACC_OK);
  acc_tensor *x = acc_test::from_json(c["input"]), *low = nullptr, *floats = nullptr, *sum = nullptr;
  ASSERT_EQ(acc_model_forward1(m, x, 0, &low), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_autocast_end(acc), ACC_OK);
  ASSERT_EQ(acc_tensor_to(low, nullptr, ACC_DTYPE_FLOAT32, &floats), ACC_OK);
  EXPECT_EQ(to_floats(floats), acc_test::float_values(c["autocast_train_output"]));
  ASSERT_EQ(acc_tensor_sum(floats, &sum), ACC_OK);
  ASSERT_EQ(acc_tensor_backward(sum), ACC_OK);
  for (const auto& item : c["autocast_grads"].items()) {
    acc_tensor *p = nullptr, *g = nullptr;
    ASSERT_EQ(acc_model_parameter(m, item.key().c_str(), &p), ACC_OK) << item.key();
    ASSERT_EQ(acc_tensor_grad(p, &g), ACC_OK);
    ASSERT_NE(g, nullptr) << item.key();
    EXPECT_EQ(to_floats(g), acc_test::float_values(item.value())) << item.key();
    acc_tensor_free(g);
    acc_tensor_free(p);
  }
  EXPECT_EQ(acc_model_zero_grad(m), ACC_OK);
  for (acc_tensor* t : {x, low, floats, sum}) acc_tensor_free(t);
  acc_accelerator_free(acc);
}

// A case's adapted model `m` as recorded right after adding: the global stream after its draws, its
// chosen tensors, its evaluation output, and under bf16 autocast its evaluation outputs and a
// training step (the generator seeded train_seed first).
inline void expect_case_draws_and_outputs(acc_model* m, const nlohmann::json& c) {
  EXPECT_EQ(acc_test::next_global_draws(), acc_test::float_values(c["next_draw"]));
  expect_params(m, c["chosen"]);
  EXPECT_EQ(eval_outputs(m, c), acc_test::float_values(c["eval_output"]));
  expect_autocast_outputs(m, c["input"], c);
  expect_autocast_step(m, c, c["train_seed"].get<uint64_t>());
}

// A case's adapted model `m` (freed here): a training step as the case's (train_seed: its output and
// gradients), the base model's output (`base_output`) while disabled, and save_model's (`entries`
// tensors in `folder`) and merge's weights the case's merged ones.
inline void expect_case_step_disabling_and_merges(acc_model* m, const nlohmann::json& c,
                                                  const std::vector<float>& base_output, size_t entries,
                                                  const std::string& folder) {
  expect_training_step(m, c["input"], c["train_seed"].get<uint64_t>(), c["train_output"], c["grads"]);
  EXPECT_EQ(acc_model_set_lora_enabled(m, 0), ACC_OK);
  EXPECT_EQ(eval_outputs(m, c), base_output);
  EXPECT_EQ(acc_model_set_lora_enabled(m, 1), ACC_OK);
  expect_saved_model_merged(m, c["merged"], entries, folder);
  EXPECT_EQ(acc_model_merge_lora(m), ACC_OK) << acc_last_error_message();
  for (const auto& item : c["merged"].items())
    EXPECT_EQ(param(m, item.key()), acc_test::float_values(item.value())) << item.key();
  acc_model_free(m);
}

// PEFT's add_weighted_adapter combines LoRA and IA3 adapters only: on `m`, whose adapters are of
// `method` ("LoHa", ...), it is refused naming the method.
inline void expect_no_weighted_adapter(acc_model* m, const std::string& method) {
  const char* names[] = {"default"};
  const double weights[] = {1.0};
  EXPECT_EQ(acc_model_add_weighted_adapter(m, names, weights, 1, "mix", "linear", 0, nullptr),
            ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("PEFT's " + method + " has no add_weighted_adapter"),
            std::string::npos)
      << acc_last_error_message();
}

// One of its cases ("spec", "dora", "lora_bias"), empty where it lacks it.
inline nlohmann::json lora_case(const char* name) {
  const nlohmann::json cases = lora_cases();
  EXPECT_TRUE(cases.contains(name)) << name;
  return cases.value(name, nlohmann::json::object());
}

}  // namespace lora_test
