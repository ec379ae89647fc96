// A TorchScript fixture and its twin written as a layer spec, for tests that check both against the
// same recorded numbers: the spec model takes the TorchScript model's weights, and each twin names
// the fixture's modules its own way ("embed.lora_embedding_A" is "0.lora_embedding_A" in a spec).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "json_tensors.h"
#include "support.h"

namespace twin_test {

using json = nlohmann::json;

struct Twin {
  const char* form;
  std::function<acc_model*()> make;
  std::function<std::string(const std::string&)> name;  // the fixture's name of a module or tensor, here
};

// The TorchScript fixture `file` (under ACC_TEST_DATA), computing with PyTorch's eager arithmetic.
inline acc_model* script_model(const std::string& file) {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/" + file).c_str(), &m), ACC_OK)
      << acc_last_error_message();
  if (m) EXPECT_EQ(acc_model_set_graph_optimization(m, 0), ACC_OK);
  return m;
}

// `file` alone, for a fixture no layer spec can restate (a layer kind specs lack), named as it is.
inline Twin script_only(const std::string& file) {
  return {"TorchScript", [file] { return script_model(file); }, [](const std::string& n) { return n; }};
}

// Loads `from`'s tensors into `to` under other names (pairs of from's name and to's), strictly.
inline void copy_renamed(acc_model* from, acc_model* to,
                         const std::vector<std::pair<std::string, std::string>>& names) {
  acc_tensor_list *state = nullptr, *renamed = nullptr;
  ASSERT_EQ(acc_model_state_dict(from, &state), ACC_OK);
  ASSERT_EQ(acc_tensor_list_create(&renamed), ACC_OK);
  for (const auto& [name, new_name] : names) {
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_find(state, name.c_str(), &t), ACC_OK) << name;
    EXPECT_EQ(acc_tensor_list_append(renamed, new_name.c_str(), t), ACC_OK);
    acc_tensor_free(t);
  }
  EXPECT_EQ(acc_model_load_state_dict(to, renamed, 1), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(state);
  acc_tensor_list_free(renamed);
}

// Both forms of `file`: as loaded, and `spec` with its weights, whose layers `spec_names` maps the
// fixture's modules to (each module's parameters, its submodules' too).
inline std::vector<Twin> twins(const std::string& file, const std::string& spec, const json& spec_names) {
  auto spec_model = [file, spec, spec_names] {
    acc_model* m = nullptr;
    EXPECT_EQ(acc_model_from_spec(spec.c_str(), &m), ACC_OK) << acc_last_error_message();
    acc_model* script = script_model(file);
    const auto own = acc_test::parameter_names(script);
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& item : spec_names.items())
      for (const auto& name : own)
        if (name.rfind(item.key() + ".", 0) == 0)
          names.emplace_back(name, item.value().get<std::string>() + name.substr(item.key().size()));
    copy_renamed(script, m, names);
    acc_model_free(script);
    return m;
  };
  return {{"TorchScript", [file] { return script_model(file); }, [](const std::string& n) { return n; }},
          {"layer spec", spec_model, [spec_names](const std::string& n) {
             const size_t dot = n.find('.');
             return spec_names.at(n.substr(0, dot)).get<std::string>() +
                    (dot == std::string::npos ? "" : n.substr(dot));
           }}};
}

// ACC_OPTIONS_LORA keys and values.
using LoraSettings = std::vector<std::pair<const char*, const char*>>;

// Adds a case's LoRA (its r and lora_alpha, and its lora_dropout where it has one) on `targets`,
// with `settings`.
inline acc_status add_case_lora(acc_model* m, const json& k, const std::string& targets,
                                const LoraSettings& settings = {}) {
  acc_options* o = acc_test::lora_options(k["r"], k["lora_alpha"]);
  if (k.contains("lora_dropout")) EXPECT_EQ(acc_options_set_double(o, "lora_dropout", k["lora_dropout"]), ACC_OK);
  for (const auto& [key, value] : settings) EXPECT_EQ(acc_options_set(o, key, value), ACC_OK);
  const acc_status status = acc_model_add_lora(m, targets.c_str(), o, nullptr);
  acc_options_free(o);
  return status;
}

// The fixture's module names (a JSON list) as `twin` names them, separated by commas.
inline std::string targets(const json& names, const Twin& twin) {
  std::string out;
  for (const auto& t : names) out += (out.empty() ? "" : ",") + twin.name(t.get<std::string>());
  return out;
}

// `chosen` (tensors by the fixture's names) put in place of the model's.
inline void choose(acc_model* m, const json& chosen, const Twin& twin) {
  acc_tensor_list* list = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&list), ACC_OK);
  for (const auto& item : chosen.items()) {
    acc_tensor* t = acc_test::from_json(item.value());
    ASSERT_EQ(acc_tensor_list_append(list, twin.name(item.key()).c_str(), t), ACC_OK);
    acc_tensor_free(t);
  }
  ASSERT_EQ(acc_model_load_state_dict(m, list, 0), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(list);
}

// Each parameter's gradient equals `grads` (by the fixture's names).
inline void expect_grads(acc_model* m, const json& grads, const Twin& twin) {
  for (const auto& item : grads.items()) {
    acc_tensor *p = nullptr, *g = nullptr;
    ASSERT_EQ(acc_model_parameter(m, twin.name(item.key()).c_str(), &p), ACC_OK) << item.key();
    ASSERT_EQ(acc_tensor_grad(p, &g), ACC_OK) << item.key();
    EXPECT_EQ(acc_test::to_floats(g), item.value()["values"].get<std::vector<float>>()) << item.key();
    acc_tensor_free(p);
    acc_tensor_free(g);
  }
}

// Each of the model's parameters `expected` names (the fixture's names) holds its values.
inline void expect_params(const acc_model* m, const json& expected, const Twin& twin) {
  for (const auto& item : expected.items()) {
    acc_tensor* t = nullptr;
    ASSERT_EQ(acc_model_parameter(m, twin.name(item.key()).c_str(), &t), ACC_OK) << item.key();
    EXPECT_EQ(acc_test::to_floats(t), item.value()["values"].get<std::vector<float>>()) << item.key();
    acc_tensor_free(t);
  }
}

// `m`'s adapters saved into `dir` (emptied first; left for the caller to look at) and loaded into a
// fresh model of `twin`'s form, which the caller frees.
inline acc_model* reloaded(const acc_model* m, const std::string& dir, const Twin& twin) {
  std::filesystem::remove_all(dir);
  EXPECT_EQ(acc_model_save_lora(m, dir.c_str()), ACC_OK) << acc_last_error_message();
  acc_model* fresh = twin.make();
  EXPECT_EQ(acc_model_load_lora(fresh, dir.c_str()), ACC_OK) << acc_last_error_message();
  return fresh;
}

// In training mode after acc_set_seed(k["train_seed"]), the output on `x` (freed) equals
// k["train_output"] and the gradients of its sum k["grads"]; the gradients are zeroed after.
inline void expect_training(acc_model* m, acc_tensor* x, const json& k, const Twin& twin) {
  ASSERT_EQ(acc_model_set_training(m, 1), ACC_OK);
  ASSERT_EQ(acc_set_seed(k["train_seed"].get<uint64_t>()), ACC_OK);
  acc_tensor *y = nullptr, *sum = nullptr;
  ASSERT_EQ(acc_model_forward1(m, x, 0, &y), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_test::to_floats(y), k["train_output"]["values"].get<std::vector<float>>());
  ASSERT_EQ(acc_tensor_sum(y, &sum), ACC_OK);
  ASSERT_EQ(acc_tensor_backward(sum), ACC_OK);
  expect_grads(m, k["grads"], twin);
  for (acc_tensor* t : {x, y, sum}) acc_tensor_free(t);
  ASSERT_EQ(acc_model_zero_grad(m), ACC_OK);
}

// Loading the adapters in `dir` into a fresh model of `twin`'s form is refused with `status` and a
// message holding `needle`, and adds nothing.
inline void expect_load_refused(const Twin& twin, const std::string& dir, acc_status status,
                                const std::string& needle) {
  acc_model* fresh = twin.make();
  const auto before = acc_test::parameter_names(fresh);
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), status, needle);
  EXPECT_EQ(acc_test::parameter_names(fresh), before) << "nothing added";
  acc_model_free(fresh);
}

// `m` written as TorchScript (the merged weights) and merged as PEFT's merge_and_unload: its weights
// equal k["merged"], and it and the file written both give k["eval_output"] to rounding (`output`:
// a model's evaluation output). The file goes, `m` stays.
inline void expect_merges(acc_model* m, const json& k, const Twin& twin, const std::string& file,
                          const std::function<std::vector<float>(acc_model*)>& output) {
  const std::vector<float> expected = k["eval_output"]["values"].get<std::vector<float>>();
  ASSERT_EQ(acc_model_save_torchscript(m, file.c_str()), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_model_merge_lora(m), ACC_OK) << acc_last_error_message();
  expect_params(m, k["merged"], twin);
  EXPECT_LT(acc_test::max_difference(output(m), expected), 1e-5f);
  acc_model* written = nullptr;
  ASSERT_EQ(acc_model_load_torchscript(file.c_str(), &written), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_test::parameter_names(written), acc_test::parameter_names(m));
  EXPECT_LT(acc_test::max_difference(output(written), expected), 1e-5f);
  acc_model_free(written);
  std::filesystem::remove(file);
}

// The shape of `name` (PEFT's name without "base_model.model.") in `dir`'s adapter_model.safetensors.
inline std::vector<int64_t> saved_shape(const std::string& dir, const std::string& name) {
  acc_tensor_list* saved = nullptr;
  EXPECT_EQ(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved), ACC_OK);
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_tensor_list_find(saved, ("base_model.model." + name).c_str(), &t), ACC_OK) << name;
  std::vector<int64_t> shape = t ? acc_test::shape(t) : std::vector<int64_t>{};
  acc_tensor_free(t);
  acc_tensor_list_free(saved);
  return shape;
}

}  // namespace twin_test
