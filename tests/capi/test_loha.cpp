// PEFT's LoHa (acc_model_add_loha): W + ((w1_a w1_b) * (w2_a w2_b)) * alpha / r on linear layers and
// convolutions. Checked against PEFT's layers restated in lora_loha_case.py (the "loha" case of
// export_lora_cases.py) on a TorchScript model with a 2-D and a 1-D convolution and two linear
// layers: the draws and the stream after them, the outputs in evaluation and in training (rank and
// module dropout drawn where PEFT draws them), the gradients through PEFT's HadaWeight, three AdamW
// steps and the merged weights, bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::float_values;
using acc_test::from_json;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* loha_model() { return eager_data_model("loha_model.pt"); }

acc_options* loha_options(const json& c, bool init, bool dropout, bool cp) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_LOHA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "alpha", c["alpha"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "rank_pattern", c["rank_pattern"].dump().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init ? 1 : 0), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "use_effective_conv2d", cp ? 1 : 0), ACC_OK);
  if (dropout) {
    EXPECT_EQ(acc_options_set_double(o, "rank_dropout", c["rank_dropout"].get<double>()), ACC_OK);
    EXPECT_EQ(acc_options_set_double(o, "module_dropout", c["module_dropout"].get<double>()), ACC_OK);
  }
  return o;
}

acc_model* adapted(const json& c, bool init, bool dropout = false, bool cp = false) {
  return adapted_case_model("loha_model.pt", acc_model_add_loha, c["targets"].get<std::string>(),
                            loha_options(c, init, dropout, cp), c["seed"].get<uint64_t>(), 4);
}

}  // namespace

TEST(Loha, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("loha");
  acc_model* base = loha_model();
  const auto base_output = eval_outputs(base, c);
  acc_model* m = adapted(c, /*init=*/true);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
  expect_params(m, c["initial"]);
  EXPECT_EQ(eval_outputs(m, c), base_output);  // w2_b zero: the model starts unchanged
  EXPECT_EQ(acc_test::parameter_names(m),
            (std::vector<std::string>{
                "conv.weight", "conv.bias", "conv.hada_w1_a", "conv.hada_w1_b", "conv.hada_w2_a", "conv.hada_w2_b",
                "seq.weight",  "seq.bias",  "seq.hada_w1_a",  "seq.hada_w1_b",  "seq.hada_w2_a",  "seq.hada_w2_b",
                "fc1.weight",  "fc1.bias",  "fc1.hada_w1_a",  "fc1.hada_w1_b",  "fc1.hada_w2_a",  "fc1.hada_w2_b",
                "head.weight", "head.bias", "head.hada_w1_a", "head.hada_w1_b", "head.hada_w2_a", "head.hada_w2_b"}));
  acc_model_free(m);

  // init_weights false: every factor drawn; the case's chosen factors are those draws.
  m = adapted(c, /*init=*/false, /*dropout=*/true);
  expect_params(m, c["chosen"]);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
  // Training mode: module dropout (torch.rand(1) per layer) and rank dropout drawn in the forward.
  expect_training_step(m, c["input"], c["train_seed"].get<uint64_t>(), c["train_output"], c["grads"]);
  // Disabled: the base model's outputs.
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(eval_outputs(m, c), base_output);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
  // PEFT's merge: W plus the delta.
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  for (const auto& item : c["merged"].items())
    EXPECT_EQ(param(m, item.key()), float_values(item.value())) << item.key();
  acc_model_free(m);
  acc_model_free(base);
}

TEST(Loha, TrainsAsPeftWithDropoutAndAdamW) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("loha");
  expect_case_training(adapted(c, /*init=*/false, /*dropout=*/true), c["input"], c["target"], c,
                       c["train_seed"].get<uint64_t>());
}

TEST(Loha, PeftFilesBothWaysAndRefusals) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("loha");
  acc_model* m = adapted(c, /*init=*/false);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("loha_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LOHA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["alpha"], 3.0);
  EXPECT_EQ(config["rank_pattern"], (json{{"head", 3}}));
  EXPECT_EQ(config["init_weights"], false);
  EXPECT_EQ(config["target_modules"], (json{"conv", "seq", "fc1", "head"}));
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 16u);
  acc_tensor* t = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(saved, "base_model.model.head.hada_w2_b", &t));
  EXPECT_EQ(acc_test::shape(t), (std::vector<int64_t>{3, 8}));  // rank_pattern's r 3
  acc_tensor_free(t);
  acc_tensor_list_free(saved);
  acc_model* fresh = loha_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);

  // As PEFT writes it (keys sorted, its own fields).
  {
    std::ofstream out(dir + "/adapter_config.json");
    out << R"({"alpha": 3, "alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": null,
      "exclude_modules": null, "inference_mode": true, "init_weights": false, "layers_pattern": null,
      "layers_to_transform": null, "module_dropout": 0.0, "modules_to_save": null, "peft_type": "LOHA",
      "peft_version": "0.18.0", "r": 2, "rank_dropout": 0.0, "rank_pattern": {"head": 3}, "revision": null,
      "target_modules": ["head", "fc1", "seq", "conv"], "task_type": null, "use_effective_conv2d": false})";
  }
  fresh = loha_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // Another rank for head: its factors do not fit, refused naming them, nothing added.
  {
    std::ofstream out(dir + "/adapter_config.json");
    out << R"({"peft_type": "LOHA", "r": 2, "alpha": 3, "target_modules": ["head", "fc1", "seq", "conv"]})";
  }
  fresh = loha_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "'head.hada_w1_a' has shape");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);

  // What PEFT's LoHa refuses.
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_loha(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "LoHa cannot adapt 'c_fc'");  // transformers' Conv1D: PEFT's TypeError
  ACC_EXPECT_ERROR(acc_model_add_loha(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "LoHa cannot adapt 'embed'");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "LoHa");
  acc_model_free(m);
}

// use_effective_conv2d: both convolutions (3 x 3 and a 1-D kernel of 2) in PEFT's CP form, whose
// gradients PEFT computes by hand (HadaWeightCP): draws, outputs, gradients, three AdamW steps, the
// merged weights and the files, bit for bit.
TEST(Loha, EffectiveConv2dComputesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("loha")["cp"];
  acc_model* base = loha_model();
  const auto base_output = eval_outputs(base, c);
  acc_model* m = adapted(c, /*init=*/true, /*dropout=*/false, /*cp=*/true);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
  expect_params(m, c["initial"]);
  EXPECT_EQ(eval_outputs(m, c), base_output);
  std::vector<std::string> names;
  for (const auto& name : c["names"]) names.push_back(name.get<std::string>());
  std::vector<std::string> adapter_names;
  for (const auto& name : acc_test::parameter_names(m))
    if (name.find(".hada_") != std::string::npos) adapter_names.push_back(name);
  EXPECT_EQ(adapter_names, names);
  acc_model_free(m);

  m = adapted(c, /*init=*/false, /*dropout=*/true, /*cp=*/true);
  expect_params(m, c["chosen"]);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
  expect_training_step(m, c["input"], c["train_seed"].get<uint64_t>(), c["train_output"], c["grads"]);
  const std::string dir = acc_test::temp_path("loha_cp_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  acc_model* fresh = loha_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), eval_outputs(m, c));
  acc_model_free(fresh);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  for (const auto& item : c["merged"].items())
    EXPECT_EQ(param(m, item.key()), float_values(item.value())) << item.key();
  acc_model_free(m);

  expect_case_training(adapted(c, /*init=*/false, /*dropout=*/true, /*cp=*/true), c["input"], c["target"], c,
                       c["train_seed"].get<uint64_t>());
  acc_model_free(base);
}

TEST(Loha, SpecModelTrainsAndMerges) {
  expect_spec_adapters_train_and_merge(acc_model_add_loha, ACC_OPTIONS_LOHA, {{"r", 2}}, "0,linear1,linear2", 3);
}
