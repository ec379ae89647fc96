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
#include <filesystem>
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

// The number of tensors the base model's state holds.
size_t state_entries(const json& c) {
  acc_model* base = eager_data_model(c["model"].get<std::string>());
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_model_state_dict(base, &state), ACC_OK);
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(state, &n), ACC_OK);
  acc_tensor_list_free(state);
  acc_model_free(base);
  return n;
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
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    expect_params(m, c["chosen"]);
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    if (c["init_weights"] != false) EXPECT_EQ(eval_outputs(m, c), base_output);  // B zeros
    expect_autocast_outputs(m, c["input"], c);
    expect_autocast_step(m, c, c["train_seed"].get<uint64_t>());
    expect_case_step_disabling_and_merges(m, c, base_output, state_entries(c),
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

TEST(Hira, SpecModelTrainsAndMerges) {  // (B zeros: the layer exactly unchanged at the start)
  expect_spec_adapters_train_and_merge(acc_model_add_hira, ACC_OPTIONS_HIRA, {{"r", 2}}, "linear1,linear2", 2);
}
