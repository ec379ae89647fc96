// What the tests of quantised base models share (test_four_bit.cpp, test_eight_bit.cpp): their
// fixtures' cases, the state dict read as float values, the outputs and the few AdamW steps each
// case trains, as the exporters (tests/data/export_*_bit_cases.py) compute them.
#pragma once

#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

namespace quantized_test {

using lora_test::data_model;
using lora_test::joined;
using nlohmann::json;

inline json cases_in(const std::string& file) {
  std::ifstream in(acc_test::data_dir() + "/" + file);
  return in ? json::parse(in) : json();
}

struct Entry {
  acc_dtype dtype;
  std::vector<float> values;
};

// A tensor list's entries as float values with their dtypes (the list stays the caller's).
inline std::map<std::string, Entry> entries_of(const acc_tensor_list* list) {
  std::map<std::string, Entry> out;
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(list, &n), ACC_OK);
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    acc_tensor *t = nullptr, *f = nullptr;
    EXPECT_EQ(acc_tensor_list_name(list, i, &name), ACC_OK);
    EXPECT_EQ(acc_tensor_list_get(list, i, &t), ACC_OK);
    Entry e{};
    EXPECT_EQ(acc_tensor_dtype(t, &e.dtype), ACC_OK);
    EXPECT_EQ(acc_tensor_to(t, nullptr, ACC_DTYPE_FLOAT32, &f), ACC_OK);
    e.values = acc_test::to_floats(f);
    out[name] = std::move(e);
    acc_tensor_free(t);
    acc_tensor_free(f);
  }
  return out;
}

inline std::map<std::string, Entry> state_of(const acc_model* m) {
  acc_tensor_list* list = nullptr;
  EXPECT_EQ(acc_model_state_dict(m, &list), ACC_OK) << acc_last_error_message();
  auto out = entries_of(list);
  acc_tensor_list_free(list);
  return out;
}

// acc_save_model of a quantised model with adapters writes what merging them gives, the model left
// as it is: the file's entries equal, bit for bit, the model's own after acc_model_merge_lora (which
// this then does to `m`).
inline void expect_saved_model_is_merged(acc_model* m, const std::string& dir) {
  acc_accelerator* acc = acc_test::make_accelerator({});
  ASSERT_EQ(acc_save_model(acc, m, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  acc_accelerator_free(acc);
  acc_tensor_list* file = nullptr;
  ASSERT_EQ(acc_tensor_list_load_safetensors((dir + "/model.safetensors").c_str(), &file), ACC_OK);
  const auto saved = entries_of(file);
  acc_tensor_list_free(file);
  const auto before = state_of(m);
  ASSERT_EQ(acc_model_merge_lora(m), ACC_OK) << acc_last_error_message();
  const auto merged = state_of(m);
  EXPECT_EQ(saved.size(), merged.size());
  bool changed = false;
  for (const auto& [name, entry] : merged) {
    const auto it = saved.find(name);
    ASSERT_NE(it, saved.end()) << name << " is not in the saved file";
    EXPECT_EQ(it->second.dtype, entry.dtype) << name;
    EXPECT_EQ(it->second.values, entry.values) << name;
    const auto was = before.find(name);
    changed = changed || (was != before.end() && was->second.values != entry.values);
  }
  EXPECT_TRUE(changed) << "the merge changed no entry: the adapters did nothing to test";
}

inline acc_dtype dtype_named(const std::string& name) {
  return name == "uint8"      ? ACC_DTYPE_UINT8
         : name == "int8"     ? ACC_DTYPE_INT8
         : name == "bfloat16" ? ACC_DTYPE_BFLOAT16
                              : ACC_DTYPE_FLOAT32;
}

// Each quantised layer's state-dict entries against the fixture's: dtypes and values, bit for bit.
inline void expect_layer_states(const acc_model* m, const json& layers, const json& expected) {
  const auto state = state_of(m);
  for (const auto& layer : layers) {
    const json& entries = expected[layer.get<std::string>()];
    for (const auto& [name, dtype] : entries["dtypes"].items()) {
      auto it = state.find(name);
      ASSERT_NE(it, state.end()) << name << " is not in the state dict";
      EXPECT_EQ(it->second.dtype, dtype_named(dtype.get<std::string>())) << name;
      EXPECT_EQ(it->second.values, acc_test::float_values(entries[name])) << name;
    }
  }
}

// The case's input in the model's dtype.
inline acc_tensor* case_input(const json& all, const json& c) {
  acc_tensor *x = acc_test::from_json(all["input"]), *cast = nullptr;
  EXPECT_EQ(acc_tensor_to(x, nullptr, c["model"] == "bfloat16" ? ACC_DTYPE_BFLOAT16 : ACC_DTYPE_FLOAT32, &cast),
            ACC_OK);
  acc_tensor_free(x);
  return cast;
}

inline std::vector<float> output_of(acc_model* m, acc_tensor* x) {
  acc_tensor *y = nullptr, *f = nullptr;
  EXPECT_EQ(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y), ACC_OK) << acc_last_error_message();
  if (!y) return {};
  EXPECT_EQ(acc_tensor_to(y, nullptr, ACC_DTYPE_FLOAT32, &f), ACC_OK);
  auto values = acc_test::to_floats(f);
  acc_tensor_free(y);
  acc_tensor_free(f);
  return values;
}

inline bool under_autocast(const json& c) { return c.value("autocast", false); }

// The output (float32) without gradients; for a case under autocast, inside Accelerate's bf16 autocast.
inline std::vector<float> case_output(acc_model* m, acc_tensor* x, const json& c) {
  if (!under_autocast(c)) return output_of(m, x);
  acc_accelerator* acc = acc_test::make_accelerator({{"mixed_precision", "bf16"}});
  EXPECT_EQ(acc_autocast_begin(acc, 1), ACC_OK);
  auto values = output_of(m, x);
  EXPECT_EQ(acc_autocast_end(acc), ACC_OK);
  acc_accelerator_free(acc);
  return values;
}

// Three AdamW steps (lr 1e-2) on the MSE of the float32 output against the case's target; a case
// under autocast trains the model prepared by a bf16 accelerator (freed by the caller after it).
inline std::vector<double> train_case(acc_model*& m, const json& all, const json& c, acc_accelerator** acc = nullptr) {
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  acc_accelerator* prepared = nullptr;
  if (under_autocast(c)) {
    prepared = acc_test::make_accelerator({{"mixed_precision", "bf16"}});
    EXPECT_EQ(acc_prepare(prepared, &m, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  }
  acc_tensor *x = case_input(all, c), *target = acc_test::from_json(all["target"]);
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    acc_tensor *y = nullptr, *f = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(m, x, 0, &y), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_tensor_to(y, nullptr, ACC_DTYPE_FLOAT32, &f), ACC_OK);
    EXPECT_EQ(acc_loss_mse(f, target, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    losses.push_back(acc_test::item(loss));
    EXPECT_EQ(prepared ? acc_backward(prepared, loss) : acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    for (acc_tensor* t : {y, f, loss}) acc_tensor_free(t);
  }
  for (acc_tensor* t : {x, target}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  if (acc)
    *acc = prepared;
  else
    acc_accelerator_free(prepared);
  return losses;
}

inline size_t add_case_lora(acc_model* m, const json& c) {
  acc_options* o = acc_test::lora_options(c["r"].get<int64_t>(), c["lora_alpha"].get<double>());
  size_t count = 0;
  EXPECT_EQ(acc_model_add_lora(m, joined(c["targets"]).c_str(), o, &count), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return count;
}

// A job prepared with bf16 autocast (LoRA as case `c` asks, over the model of `file` that
// `quantize` quantises) saved after 3 steps and resumed by a process whose model was quantised from
// other weights: the checkpoint brings the codes and their states, and the next 2 steps are the
// same, every state-dict entry bit for bit.
inline void expect_resumes_exactly(const json& all, const json& c, const std::string& file,
                                   const std::function<void(acc_model*)>& quantize) {
  struct Run {
    acc_accelerator* acc = acc_test::make_accelerator({{"mixed_precision", "bf16"}});
    acc_model* model = nullptr;
    acc_optimizer* opt = nullptr;
    Run(const json& c, const std::string& file, const std::function<void(acc_model*)>& quantize, bool other_weights) {
      model = data_model(file);
      if (other_weights) acc_test::fill_state(model, 0.25f);
      quantize(model);
      EXPECT_EQ(acc_set_seed(5), ACC_OK);
      add_case_lora(model, c);
      EXPECT_EQ(acc_optimizer_create(model, "adamw", nullptr, &opt), ACC_OK);
      EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    }
    ~Run() {
      acc_optimizer_free(opt);
      acc_model_free(model);
      acc_accelerator_free(acc);
    }
    void steps(const json& all, const json& c, int n) {
      acc_tensor *x = case_input(all, c), *target = acc_test::from_json(all["target"]);
      for (int i = 0; i < n; ++i) {
        acc_tensor *out = nullptr, *loss = nullptr;
        ASSERT_EQ(acc_model_forward1(model, x, 0, &out), ACC_OK) << acc_last_error_message();
        ASSERT_EQ(acc_loss_mse(out, target, ACC_REDUCTION_MEAN, &loss), ACC_OK) << acc_last_error_message();
        ASSERT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
        ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
        ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
        acc_tensor_free(out);
        acc_tensor_free(loss);
      }
      acc_tensor_free(x);
      acc_tensor_free(target);
    }
  };
  const std::string dir = acc_test::fresh_dir(file + "_state");
  Run first(c, file, quantize, false);
  first.steps(all, c, 3);
  ASSERT_EQ(acc_save_state(first.acc, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  first.steps(all, c, 2);
  Run resumed(c, file, quantize, true);
  ASSERT_EQ(acc_load_state(resumed.acc, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  resumed.steps(all, c, 2);
  const auto expected = state_of(first.model), got = state_of(resumed.model);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [name, entry] : expected) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).dtype, entry.dtype) << name;
    EXPECT_EQ(got.at(name).values, entry.values) << name;
  }
  acc_tensor* x = case_input(all, c);
  EXPECT_EQ(output_of(resumed.model, x), output_of(first.model, x));
  acc_tensor_free(x);
}

#define REQUIRE_CASES(all, file)                                                \
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set"; \
  const json all = quantized_test::cases_in(file);                              \
  ASSERT_TRUE(all.contains("cases")) << file << " was not exported"

}  // namespace quantized_test
