// LoRA on parameters (PEFT's target_parameters, its lora.ParamWrapper): a mixture of experts' 3-D
// expert weights, is_transposed ones, and a linear layer's weight, beside LoRA on a layer. Checked
// bit for bit against PEFT's wrapper restated in export_lora_cases.py (its "parameters" case, on
// moe_model.pt): the draws (target_modules' first) and the rest of the global stream, the parameters'
// order and names (a module's first targeted parameter one wrapper deeper), rank_pattern read against
// the parameters' names, outputs in evaluation and training, gradients, PEFT's files, the merged
// weights; and what PEFT refuses, refused before anything changes.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"
#include "twin_support.h"

using json = nlohmann::json;
using namespace twin_test;
using acc_test::float_values;
using lora_test::joined;
using lora_test::lora_case;
using lora_test::outputs_on;
namespace fs = std::filesystem;

namespace {

const Twin kScript = script_only("moe_model.pt");  // no layer spec has 3-D parameters

// The case's settings: its target_parameters and rank_pattern.
LoraSettings settings_of(const json& c, std::string* parameters, std::string* ranks) {
  *parameters = joined(c["target_parameters"]);
  *ranks = c["rank_pattern"].dump();
  return {{"target_parameters", parameters->c_str()}, {"rank_pattern", ranks->c_str()}};
}

acc_status add_case(acc_model* m, const json& c, const std::string& targets, const LoraSettings& extra = {}) {
  std::string parameters, ranks;
  LoraSettings settings = settings_of(c, &parameters, &ranks);
  settings.insert(settings.end(), extra.begin(), extra.end());
  return add_case_lora(m, c, targets, settings);
}

std::vector<float> eval_output(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, acc_test::from_json(c["input"]));
}

json adapter_config(const std::string& dir) {
  std::ifstream file(dir + "/adapter_config.json");
  return json::parse(file);
}

void write_config(const std::string& dir, const json& config) { std::ofstream(dir + "/adapter_config.json") << config; }

}  // namespace

TEST(LoraParameters, DrawsComputesSavesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("parameters");
  acc_model* m = kScript.make();
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(add_case(m, c, c["targets"]));
  expect_params(m, c["initial"], kScript);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
  EXPECT_EQ(acc_test::parameter_names(m), c["parameter_order"].get<std::vector<std::string>>());
  choose(m, c["chosen"], kScript);
  EXPECT_EQ(eval_output(m, c), float_values(c["eval_output"]));
  expect_training(m, acc_test::from_json(c["input"]), c, kScript);

  // PEFT's files: target_parameters as a list, each wrapper's adapter under its nested name.
  const std::string dir = acc_test::temp_path("lora_parameters");
  acc_model* loaded = reloaded(m, dir, kScript);
  const json config = adapter_config(dir);
  EXPECT_EQ(config["target_parameters"], c["target_parameters"]);
  EXPECT_EQ(config["target_modules"], json::array({"head"}));
  EXPECT_EQ(saved_shape(dir, "experts.base_layer.lora_A.weight"), (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(saved_shape(dir, "experts.lora_B.weight"), (std::vector<int64_t>{4, 12}));
  EXPECT_EQ(saved_shape(dir, "shared.base_layer.lora_A.weight"), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(eval_output(loaded, c), float_values(c["eval_output"]));
  acc_model_free(loaded);
  {  // read with another rank for the down_proj parameters, the adapters no longer fit: nothing is added
    json other = config;
    other["rank_pattern"] = json::object();
    write_config(dir, other);
    expect_load_refused(kScript, dir, ACC_ERR_INVALID_ARGUMENT, "with r 2");
  }
  fs::remove_all(dir);

  // acc_save_model writes the base model's layout with the deltas merged (the state dict's path),
  // which loads strictly into the model without adapters and gives PEFT's merged weights.
  {
    acc_accelerator* acc = acc_test::make_accelerator({});
    const std::string saved = acc_test::temp_path("lora_parameters_model");
    fs::remove_all(saved);
    ACC_ASSERT_OK(acc_save_model(acc, m, saved.c_str(), nullptr));
    acc_model* base = kScript.make();
    ACC_ASSERT_OK(acc_model_load_safetensors(base, saved.c_str(), 1, nullptr, nullptr));
    expect_params(base, c["merged"], kScript);
    acc_model_free(base);
    acc_accelerator_free(acc);
    fs::remove_all(saved);
  }
  // Merged as PEFT merges (W + delta in W's dtype); the TorchScript file written computes alike.
  expect_merges(m, c, kScript, acc_test::temp_path("lora_parameters_merged.pt"),
                [&](acc_model* model) { return eval_output(model, c); });
  acc_model_free(m);
}

// target_modules empty (PEFT's None): the parameters alone; PEFT's file with target_modules null
// loads, and disabling the adapters gives the base model.
TEST(LoraParameters, AloneWithoutTargetModules) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("parameters");
  acc_model* m = kScript.make();
  const auto base = eval_output(m, c);
  size_t count = 0;
  acc_options* o = acc_test::lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "target_parameters", R"(["experts.gate_up_proj", "shared.down_proj"])"));
  ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "false"));  // B not zero: the adapters act
  ACC_ASSERT_OK(acc_model_add_lora(m, "", o, &count));
  acc_options_free(o);
  EXPECT_EQ(count, 2u);
  const auto names = acc_test::parameter_names(m);
  EXPECT_NE(std::find(names.begin(), names.end(), "experts.lora_A.weight"), names.end());  // one wrapper: no base_layer
  EXPECT_NE(std::find(names.begin(), names.end(), "shared.lora_B.weight"), names.end());
  const auto adapted = eval_output(m, c);
  EXPECT_NE(adapted, base);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(eval_output(m, c), base);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
  // Only the adapters train.
  acc_tensor* expert = nullptr;
  int trains = 1;
  ACC_ASSERT_OK(acc_model_parameter(m, "experts.gate_up_proj", &expert));
  ACC_ASSERT_OK(acc_tensor_requires_grad(expert, &trains));
  EXPECT_EQ(trains, 0);
  acc_tensor_free(expert);

  const std::string dir = acc_test::temp_path("lora_parameters_alone");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  json config = adapter_config(dir);
  EXPECT_TRUE(config["target_modules"].is_null());
  config["target_parameters"] = json::array({"shared.down_proj", "experts.gate_up_proj"});  // any order
  write_config(dir, config);
  acc_model* loaded = kScript.make();
  ACC_ASSERT_OK(acc_model_load_lora(loaded, dir.c_str()));
  EXPECT_EQ(eval_output(loaded, c), adapted);
  acc_model_free(loaded);
  fs::remove_all(dir);
  acc_model_free(m);
}

// What PEFT's ParamWrapper refuses (ValueError: InvalidArgument), what is not built (Unsupported),
// and targets that match nothing: each refused before anything changes.
TEST(LoraParameters, RefusesWhatPeftRefusesBeforeAnythingChanges) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  struct Refusal {
    const char* targets;
    const char* parameters;
    LoraSettings settings;
    acc_status status;
    const char* message;
  };
  const std::vector<Refusal> refusals = {
      {"", "experts.gate_up_proj", {{"lora_dropout", "0.1"}}, ACC_ERR_INVALID_ARGUMENT, "lora_dropout"},
      {"", "experts.gate_up_proj", {{"use_dora", "true"}}, ACC_ERR_INVALID_ARGUMENT, "use_dora"},
      {"", "experts.gate_up_proj", {{"lora_bias", "true"}}, ACC_ERR_INVALID_ARGUMENT, "lora_bias"},
      {"", "experts.gate_up_proj", {{"init_lora_weights", "pissa"}}, ACC_ERR_UNSUPPORTED, "pissa"},
      {"", "router.bias", {}, ACC_ERR_INVALID_ARGUMENT, "1-D tensor"},
      {"", "experts.no_such", {}, ACC_ERR_INVALID_ARGUMENT, "matches no parameter"},
      {"head", "head.weight", {}, ACC_ERR_UNSUPPORTED, "in the same module"},
      {"no_such", "experts.gate_up_proj", {}, ACC_ERR_INVALID_ARGUMENT, "matches no linear layer"},
      {"", "router.weight", {{"bias", "all"}}, ACC_ERR_UNSUPPORTED, "router.bias"},
  };
  for (const auto& refusal : refusals) {
    SCOPED_TRACE(std::string(refusal.parameters) + " " + refusal.message);
    acc_model* m = kScript.make();
    const auto before = acc_test::parameter_names(m);
    acc_options* o = acc_test::lora_options(2, 4);
    ACC_ASSERT_OK(acc_options_set(o, "target_parameters", refusal.parameters));
    for (const auto& [key, value] : refusal.settings) ACC_ASSERT_OK(acc_options_set(o, key, value));
    const uint64_t seed = 5;
    ACC_ASSERT_OK(acc_set_seed(seed));
    const auto draws = acc_test::next_global_draws();
    ACC_ASSERT_OK(acc_set_seed(seed));
    ACC_EXPECT_ERROR(acc_model_add_lora(m, refusal.targets, o, nullptr), refusal.status, refusal.message);
    acc_options_free(o);
    EXPECT_EQ(acc_test::parameter_names(m), before);
    EXPECT_EQ(acc_test::next_global_draws(), draws) << "a refusal drew from the global generator";
    acc_model_free(m);
  }
  // A layer-spec model computes with its layers' own tensors: no parameter to replace.
  acc_model* spec = lora_test::net();
  acc_options* o = acc_test::lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "target_parameters", "0.weight"));
  ACC_EXPECT_ERROR(acc_model_add_lora(spec, "", o, nullptr), ACC_ERR_INVALID_ARGUMENT, "TorchScript");
  acc_options_free(o);
  acc_model_free(spec);
}
