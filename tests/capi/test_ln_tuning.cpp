// PEFT's LN tuning (acc_model_add_ln_tuning): the targeted modules, two nn.LayerNorm of a TorchScript
// model, train themselves, every other parameter frozen. Checked against PEFT restated in
// lora_ln_tuning_case.py (the "ln_tuning" case of export_lora_cases.py): the outputs unchanged at
// the start, three AdamW steps' losses and tensors bit for bit; disabling, unload and merge; PEFT's
// files both ways; what is refused.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::float_values;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* tuned_model(const json& c) {
  acc_model* m = eager_data_model("ln_model.pt");
  size_t count = 0;
  EXPECT_EQ(acc_model_add_ln_tuning(m, c["targets"].get<std::string>().c_str(), nullptr, &count), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(count, 2u);
  return m;
}

// The model's outputs on the case's input without gradients (a disabled forward needs none).
std::vector<float> outputs_without_grad(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  acc_tensor *x = acc_test::from_json(c["input"]), *y = nullptr;
  EXPECT_EQ(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y), ACC_OK) << acc_last_error_message();
  std::vector<float> out = y ? to_floats(y) : std::vector<float>{};
  acc_tensor_free(x);
  acc_tensor_free(y);
  return out;
}

}  // namespace

TEST(LnTuning, TrainsTheModulesThemselvesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("ln_tuning");
  acc_model* m = tuned_model(c);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["base_output"]));  // the copies start as the modules
  size_t n = 0;
  ACC_ASSERT_OK(acc_model_lora_count(m, &n));
  EXPECT_EQ(n, 2u);
  ACC_ASSERT_OK(acc_model_set_training(m, 1));
  EXPECT_EQ(adamw_mse_losses(m, c["input"], c["target"], 3), c["losses"].get<std::vector<double>>());
  expect_params(m, c["trained"]);
  EXPECT_EQ(param(m, "fc1.weight"), param(eager_data_model("ln_model.pt"), "fc1.weight"));  // frozen
  EXPECT_EQ(outputs_without_grad(m, c), float_values(c["trained_output"]));
  // Disabled: the modules as they were.
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(outputs_without_grad(m, c), float_values(c["base_output"]));
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));

  // PEFT's files: the copies' tensors under "<module>.ln_tuning_layers.<tensor>".
  const std::string dir = acc_test::temp_path("ln_tuning_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LN_TUNING");
  EXPECT_EQ(config["target_modules"], json::array({"norm1", "norm2"}));
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  json in_file;
  for (const auto& item : c["trained"].items()) {
    const std::string name = item.key(), module = name.substr(0, name.find('.'));
    in_file[module + ".ln_tuning_layers" + name.substr(module.size())] = item.value();
  }
  expect_list_holds(saved, in_file, "base_model.model.");
  size_t entries = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &entries));
  EXPECT_EQ(entries, 4u);
  acc_tensor_list_free(saved);
  acc_model* fresh = eager_data_model("ln_model.pt");
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs_without_grad(fresh, c), float_values(c["trained_output"]));
  ACC_ASSERT_OK(acc_model_set_lora_enabled(fresh, 0));
  EXPECT_EQ(outputs_without_grad(fresh, c), float_values(c["base_output"]));
  acc_model_free(fresh);

  // Unload puts the modules back (PEFT's unload); merge keeps the trained ones (merge_and_unload).
  fresh = eager_data_model("ln_model.pt");
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  ACC_ASSERT_OK(acc_model_unload_lora(fresh));
  EXPECT_EQ(outputs_without_grad(fresh, c), float_values(c["base_output"]));
  acc_model_free(fresh);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  ACC_ASSERT_OK(acc_model_lora_count(m, &n));
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(outputs_without_grad(m, c), float_values(c["trained_output"]));
  acc_model_free(m);
}

TEST(LnTuning, RefusesWhatPeftCannotDo) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("ln_tuning");
  acc_model* m = eager_data_model("ln_model.pt");
  ACC_EXPECT_ERROR(acc_model_add_ln_tuning(m, "nowhere", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "match no module");
  size_t n = 1;
  ACC_ASSERT_OK(acc_model_lora_count(m, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(m);
  // A module inside another targeted one: PEFT wraps a module once.
  acc_model* spec = acc_test::spec_model(
      R"([{"type":"transformer_encoder_layer","d_model":8,"nhead":2,"dim_feedforward":16,"dropout":0.0}])");
  ACC_EXPECT_ERROR(acc_model_add_ln_tuning(spec, "0,norm1", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "match '0' and '0.norm1' inside it");
  ACC_ASSERT_OK(acc_model_add_ln_tuning(spec, "norm1,norm2", nullptr, &n));  // a spec's layer norms
  EXPECT_EQ(n, 2u);
  acc_model_free(spec);
  // A second named adapter beside LN tuning is not built.
  m = tuned_model(c);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LN_TUNING, &o));
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "other", "norm1", o, nullptr), ACC_ERR_UNSUPPORTED,
                   "beside LN tuning are not built");
  acc_options_free(o);
  // A file whose tensors are not the tuned modules' is refused before anything changes.
  const std::string dir = acc_test::temp_path("ln_tuning_bad");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  {
    json j = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
    j["target_modules"] = json::array({"norm1"});
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  acc_model* fresh = eager_data_model("ln_model.pt");
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "norm2");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);
  acc_model_free(m);
}

// PEFT's LN tuning and ModulesToSaveWrapper train a copy of each module, untying a tensor it shares
// with a module outside; here modules train in place, which would train that module too: refused,
// naming both, nothing added. A modules_to_save beside LN tuning that matches nothing is refused as
// beside any other method (its tuned modules do not count).
TEST(LnTuning, RefusesSharedTensorsAndModulesToSaveMatchingNothing) {
  const std::string tied = acc_test::data_dir() + "/tied.pt";  // embed.weight is head.weight
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(tied.c_str(), &m));
  const auto names = acc_test::parameter_names(m);
  ACC_EXPECT_ERROR(acc_model_add_ln_tuning(m, "embed", nullptr, nullptr), ACC_ERR_UNSUPPORTED,
                   "LN tuning would train 'embed.weight', which 'head.weight' shares (tied)");
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set_string(o, "modules_to_save", "embed"));
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "head", o, nullptr), ACC_ERR_UNSUPPORTED,
                   "modules_to_save would train 'embed.weight', which 'head.weight' shares (tied)");
  // The tie's other name, which the model lists under the first: refused alike.
  ACC_ASSERT_OK(acc_options_set_string(o, "modules_to_save", "head"));
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "embed", o, nullptr), ACC_ERR_UNSUPPORTED,
                   "modules_to_save would train 'head.weight', which 'embed.weight' shares (tied)");
  acc_options_free(o);
  size_t n = 1;
  ACC_ASSERT_OK(acc_model_lora_count(m, &n));
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(acc_test::parameter_names(m), names);
  acc_model_free(m);

  m = eager_data_model("ln_model.pt");
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LN_TUNING, &o));
  ACC_ASSERT_OK(acc_options_set_string(o, "modules_to_save", "haed"));
  ACC_EXPECT_ERROR(acc_model_add_ln_tuning(m, "norm1", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "modules_to_save 'haed' matches no module that holds parameters");
  acc_options_free(o);
  ACC_ASSERT_OK(acc_model_lora_count(m, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(m);
}

// PEFT's unload after training puts LN tuning's modules back as its frozen base_layer: the values
// they had, frozen, so the training's optimizer leaves them alone after; a module to save beside
// them keeps its trained values (PEFT's unload keeps its wrapper's copy).
TEST(LnTuning, UnloadAfterTrainingPutsTheModulesBackFrozen) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("ln_tuning");
  acc_model* m = eager_data_model("ln_model.pt");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LN_TUNING, &o));
  ACC_ASSERT_OK(acc_options_set_string(o, "modules_to_save", "head"));
  ACC_ASSERT_OK(acc_model_add_ln_tuning(m, c["targets"].get<std::string>().c_str(), o, nullptr));
  acc_options_free(o);
  const auto start = param(m, "norm1.weight"), head_start = param(m, "head.weight");
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  acc_tensor *x = acc_test::from_json(c["input"]), *y = nullptr, *sum = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &y));
  ACC_ASSERT_OK(acc_tensor_sum(y, &sum));
  ACC_ASSERT_OK(acc_tensor_backward(sum));
  ACC_ASSERT_OK(acc_optimizer_step(opt));
  EXPECT_NE(param(m, "norm1.weight"), start);
  const auto head_trained = param(m, "head.weight");
  EXPECT_NE(head_trained, head_start);
  ACC_ASSERT_OK(acc_model_unload_lora(m));
  EXPECT_EQ(param(m, "norm1.weight"), start);
  EXPECT_EQ(param(m, "head.weight"), head_trained);
  acc_tensor* weight = nullptr;
  int requires_grad = 1;
  ACC_ASSERT_OK(acc_model_parameter(m, "norm1.weight", &weight));
  ACC_ASSERT_OK(acc_tensor_requires_grad(weight, &requires_grad));
  EXPECT_EQ(requires_grad, 0);
  ACC_ASSERT_OK(acc_optimizer_step(opt));  // (no gradient: nothing to step)
  EXPECT_EQ(param(m, "norm1.weight"), start);
  for (acc_tensor* t : {x, y, sum, weight}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  acc_model_free(m);
}
