// PEFT's HiRA (acc_model_add_hira): each adapted layer's weight computes as W + W * (B A), the
// low-rank product's Hadamard product with the weight. Checked against PEFT's layer restated in
// lora_hira_case.py (the "hira" case of export_lora_cases.py): r 2 with fc2's 3 by rank_pattern,
// Kaiming A and zero B, dropout, a 3-D input ("kaiming"); A and B as torch.randn drew them
// ("randn"); gaussian A on transformers' Conv1D with dropout ("gaussian"). The draws and the stream
// after them, the outputs in evaluation and in training (also under bf16 autocast, enabled and
// disabled), the gradients, three AdamW steps and the merged weights (merge and save_model), bit for
// bit; PEFT's files both ways; what PEFT refuses and what is not built.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_options* hira_options(const json& c) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_HIRA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "rank_pattern", c["rank_pattern"].dump().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "hira_dropout", c["hira_dropout"].get<double>()), ACC_OK);
  const std::string init = c["init_weights"].is_boolean() ? (c["init_weights"].get<bool>() ? "true" : "false")
                                                          : c["init_weights"].get<std::string>();
  EXPECT_EQ(acc_options_set_string(o, "init_weights", init.c_str()), ACC_OK);
  return o;
}

acc_model* adapted(const json& c) {
  const std::string targets = c["targets"].get<std::string>();
  const size_t layers = static_cast<size_t>(std::count(targets.begin(), targets.end(), ',') + 1);
  return adapted_case_model(c["model"].get<std::string>(), acc_model_add_hira, targets, hira_options(c),
                            c["seed"].get<uint64_t>(), layers);
}

}  // namespace

TEST(Hira, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json hira = lora_case("hira");
  for (const char* variant : {"kaiming", "randn", "gaussian"}) {
    SCOPED_TRACE(variant);
    const json& c = hira[variant];
    acc_model* base = eager_data_model(c["model"].get<std::string>());
    const auto base_output = eval_outputs(base, c);
    acc_model_free(base);
    acc_model* m = adapted(c);
    expect_case_draws_and_outputs(m, c);
    if (c["init_weights"] != false) EXPECT_EQ(eval_outputs(m, c), base_output);  // B zeros
    expect_case_step_disabling_and_merges(m, c, base_output, state_entries(c["model"].get<std::string>()),
                                          std::string("hira_saved_model_") + variant);
    expect_case_training(adapted(c), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
  }
}

TEST(Hira, PeftFilesBothWaysAndWhatIsRefused) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("hira")["randn"];
  acc_model* m = adapted(c);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("hira_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "HIRA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["init_weights"], false);
  EXPECT_EQ(config["hira_dropout"], 0.0);
  EXPECT_FALSE(config.contains("bias"));  // (PEFT's HiraConfig has none)
  acc_tensor_list* saved = adapter_file_tensors(dir);
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 4u);  // A and B of two layers
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  acc_tensor_list_free(saved);
  acc_model* fresh = eager_data_model(c["model"].get<std::string>());
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // "gaussian" in any case, as PEFT's init_weights.lower() takes it, in files and options.
  json gaussian = config;
  gaussian["init_weights"] = "GAUSSIAN";
  std::ofstream(dir + "/adapter_config.json") << gaussian.dump();
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  std::ofstream(dir + "/adapter_config.json") << config.dump();
  acc_options* o = hira_options(c);
  ASSERT_EQ(acc_options_set_string(o, "init_weights", "Gaussian"), ACC_OK);
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_ASSERT_OK(acc_model_add_hira(fresh, "fc1", o, nullptr));
  ASSERT_EQ(acc_options_set_string(o, "init_weights", "uniform"), ACC_OK);
  acc_model* other = eager_data_model(c["model"].get<std::string>());
  ACC_EXPECT_ERROR(acc_model_add_hira(other, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "HiRA's init_weights must be true, false or gaussian");
  acc_model_free(other);
  acc_model_free(fresh);
  acc_options_free(o);
  // A file lacking a factor is refused, naming it; nothing changes.
  replace_adapter_tensor(dir, "base_model.model.head.hira_B", nullptr);
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "lacks base_model.model.head.hira_B");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);
  // PEFT's HiRA layers for embeddings and convolutions are not built here: said so, nothing drawn.
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_hira(lm, "embed", nullptr, nullptr), ACC_ERR_UNSUPPORTED,
                   "HiRA on 'embed' is not built");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "HiRA");
  acc_model_free(m);
}

// PEFT's HiRA merges several adapters on the weight from before any merge: W + W * (d1 + d2) (its
// _base_weight_before_merge), not (W + W d1) + (W + W d1) d2 as merging on the last merge would.
TEST(Hira, SeveralNamedAdaptersMergeOnTheWeightFromBeforeAnyMerge) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("hira")["randn"];
  acc_model* m = eager_data_model(c["model"].get<std::string>());
  ASSERT_EQ(acc_set_seed(3), ACC_OK);
  acc_options* o = hira_options(c);
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "first", "head", o, nullptr));
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "second", "head", o, nullptr));
  acc_options_free(o);
  const std::vector<float> w = param(m, "head.weight");  // 4 x 8
  std::vector<float> expected = w;
  for (const char* name : {"first", "second"}) {
    ACC_ASSERT_OK(acc_model_set_adapter(m, name));
    const std::vector<float> a = param(m, "head.hira_A"), b = param(m, "head.hira_B");  // 2 x 8, 4 x 2
    for (size_t i = 0; i < 4; ++i)
      for (size_t j = 0; j < 8; ++j) {
        float delta = 0;
        for (size_t k = 0; k < 2; ++k) delta += b[i * 2 + k] * a[k * 8 + j];
        expected[i * 8 + j] += w[i * 8 + j] * delta;
      }
  }
  const char* names[] = {"first", "second"};
  ACC_ASSERT_OK(acc_model_merge_lora_adapters(m, names, 2));
  const std::vector<float> merged = param(m, "head.weight");
  ASSERT_EQ(merged.size(), expected.size());
  for (size_t i = 0; i < merged.size(); ++i)
    EXPECT_NEAR(merged[i], expected[i], 1e-4 * (1 + std::abs(expected[i]))) << i;
  acc_model_free(m);
}

TEST(Hira, SpecModelTrainsAndMerges) {  // (B zeros: the layer exactly unchanged at the start)
  expect_spec_adapters_train_and_merge(acc_model_add_hira, ACC_OPTIONS_HIRA, {{"r", 2}}, "linear1,linear2", 2);
}
