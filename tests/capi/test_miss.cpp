// PEFT's MiSS (acc_model_add_miss): one shard per layer shared by the input's r-wide blocks, in
// PEFT's three variants. Checked against PEFT's layer restated in lora_miss_case.py (the "miss" case
// of export_lora_cases.py) on three nn.Linear layers: Kaiming draws with r 4 over inputs of 6
// (zero-padded) and 8 with dropout ("balance"); "mini" (r 3, mini_r 2, the biases trained); "bat"
// (r 4, the weight's square blocks). The draws and the stream after them, the outputs in evaluation
// and in training (also under bf16 autocast), the gradients, three AdamW steps and the merged weights
// (merge and save_model), bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::float_values;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* miss_model() { return eager_data_model("miss_model.pt"); }

acc_options* miss_options(const json& c, const std::string& init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_MISS, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "mini_r", c["mini_r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "miss_dropout", c["miss_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "bias", c["bias"].get<std::string>().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "init_weights", init.c_str()), ACC_OK);
  return o;
}

size_t layers_of(const json& c) {
  const std::string targets = c["targets"].get<std::string>();
  return static_cast<size_t>(std::count(targets.begin(), targets.end(), ',') + 1);
}

// The case's model as its draws were made: the global generator seeded the case's seed first.
acc_model* drawn(const json& c, const std::string& init) {
  return adapted_case_model("miss_model.pt", acc_model_add_miss, c["targets"].get<std::string>(), miss_options(c, init),
                            c["seed"].get<uint64_t>(), layers_of(c));
}

// The case's adapted model with its blocks: the draws, or the case's values set in the zeros.
acc_model* adapted(const json& c) {
  acc_model* m = drawn(c, c["init_weights"].get<std::string>());
  if (c["init_weights"] != "false") load_case_tensors(m, c["chosen"]);
  return m;
}

}  // namespace

TEST(Miss, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json miss = lora_case("miss");
  acc_model* base = miss_model();
  for (const char* variant : {"balance", "mini", "bat"}) {
    SCOPED_TRACE(variant);
    const json& c = miss[variant];
    const auto base_output = eval_outputs(base, c);
    const uint64_t train_seed = c["train_seed"].get<uint64_t>();
    acc_model* m = drawn(c, c["init_weights"].get<std::string>());
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    if (c["init_weights"] == "false") {
      expect_params(m, c["chosen"]);
    } else {  // zeros: the layer unchanged (W + W_blocks 0 + 0 for bat)
      EXPECT_EQ(eval_outputs(m, c), base_output);
      load_case_tensors(m, c["chosen"]);
    }
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    expect_autocast_outputs(m, c["input"], c);
    expect_autocast_step(m, c, train_seed);
    expect_case_step_disabling_and_merges(m, c, base_output, 6, std::string("miss_saved_model_") + variant);
    expect_case_training(adapted(c), c["input"], c["target"], c, train_seed);
  }
  // The default variant starts as zeros and draws nothing; PEFT's default r of 64 pads the inputs
  // of 6 and 8 to one block.
  const json& c = miss["balance"];
  ASSERT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  const auto undrawn = acc_test::next_global_draws();
  acc_model* zeros = drawn(c, "true");
  EXPECT_EQ(acc_test::next_global_draws(), undrawn);
  EXPECT_EQ(eval_outputs(zeros, c), eval_outputs(base, c));
  acc_model_free(zeros);
  acc_model* defaults = miss_model();
  size_t n = 0;
  ASSERT_EQ(acc_model_add_miss(defaults, "fc1,fc2,head", nullptr, &n), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(n, 3u);
  expect_params(defaults, json{{"fc1.miss_block", {{"shape", {64, 8}}, {"values", std::vector<double>(64 * 8, 0.0)}}}});
  acc_model_free(defaults);
  acc_model_free(base);
}

TEST(Miss, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json miss = lora_case("miss");
  for (const char* variant : {"balance", "mini", "bat"}) {
    SCOPED_TRACE(variant);
    const json& c = miss[variant];
    acc_model* m = adapted(c);
    const auto output = eval_outputs(m, c);
    const std::string dir = acc_test::temp_path(std::string("miss_adapter_") + variant);
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
    EXPECT_EQ(config["peft_type"], "MISS");
    EXPECT_EQ(config["r"], c["r"]);
    EXPECT_EQ(config["mini_r"], c["mini_r"]);
    EXPECT_EQ(config["miss_dropout"], c["miss_dropout"]);
    EXPECT_EQ(config["bias"], c["bias"]);
    // PEFT's init_weights: a bool, or the variant's name.
    if (c["init_weights"] == "false")
      EXPECT_EQ(config["init_weights"], false);
    else
      EXPECT_EQ(config["init_weights"], c["init_weights"]);
    acc_tensor_list* saved = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
    expect_list_holds(saved, c["chosen"], "base_model.model.");
    acc_tensor_list_free(saved);
    acc_model* fresh = miss_model();
    ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
    EXPECT_EQ(eval_outputs(fresh, c), output);
    acc_model_free(fresh);
    acc_model_free(m);
  }
  // A "bat" file into the additive variant's adapters of the same rank: they would compute
  // otherwise, refused before anything changes.
  const json& bat = miss["bat"];
  const std::string dir = acc_test::temp_path("miss_adapter_bat");
  {
    acc_model* other = drawn(bat, "true");
    const auto before = eval_outputs(other, bat);
    ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "holds MiSS adapters of init_weights bat; the model's have init_weights other than bat");
    EXPECT_EQ(eval_outputs(other, bat), before);
    acc_model_free(other);
  }
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  auto refused_with = [&](const json& edited, acc_status status, const std::string& says) {
    std::ofstream(dir + "/adapter_config.json") << edited.dump();
    acc_model* fresh = miss_model();
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), status, says);
    size_t n = 1;
    ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
    EXPECT_EQ(n, 0u);
    acc_model_free(fresh);
  };
  json j = config;
  j["init_weights"] = "balance";  // not one of PEFT's variants
  refused_with(j, ACC_ERR_IO, "'init_weights' must be true, false, \"bat\" or \"mini\"");
  j = config;
  j["r"] = 0;
  refused_with(j, ACC_ERR_IO, "'r'");
  j = config;
  j["init_weights"] = true;  // the additive variant: an r x out shard, which the file's is not
  refused_with(j, ACC_ERR_INVALID_ARGUMENT, "fc2.miss_block' has shape [2, 4, 4]");
  // Any "<method>_only" bias, as PEFT's tuners take it: the adapted layers' biases ("mini" trains them).
  const std::string mini_dir = acc_test::temp_path("miss_adapter_mini");
  j = json::parse(acc_test::read_file(mini_dir + "/adapter_config.json"));
  j["bias"] = "lora_only";
  std::ofstream(mini_dir + "/adapter_config.json") << j.dump();
  acc_model* fresh = miss_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, mini_dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, miss["mini"]), float_values(miss["mini"]["eval_output"]));
  acc_model_free(fresh);

  // What PEFT's MiSS refuses: "bat" where r does not divide the weight's sides, "mini" where mini_r
  // does not divide the outputs (its ValueErrors); transformers' Conv1D and embeddings (its TypeError).
  acc_model* m = miss_model();
  acc_options* o = miss_options(bat, "bat");
  ACC_EXPECT_ERROR(acc_model_add_miss(m, "fc1,fc2", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "its 8 x 6 weight is not made of 4 x 4 blocks");
  ACC_ASSERT_OK(acc_options_set_string(o, "init_weights", "mini"));
  ACC_ASSERT_OK(acc_options_set_int(o, "mini_r", 3));
  ACC_EXPECT_ERROR(acc_model_add_miss(m, "fc2", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "mini_r 3 does not divide its 8 outputs");
  EXPECT_EQ(acc_options_set_string(o, "init_weights", "balance"), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(acc_options_set_int(o, "r", 0), ACC_ERR_INVALID_ARGUMENT);
  acc_options_free(o);
  size_t count = 1;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 0u);
  acc_model_free(m);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_miss(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "MiSS cannot adapt 'c_fc'");  // transformers' Conv1D
  ACC_EXPECT_ERROR(acc_model_add_miss(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "MiSS cannot adapt 'embed'");
  acc_model_free(lm);
  m = adapted(bat);
  expect_no_weighted_adapter(m, "MiSS");
  acc_model_free(m);
}

TEST(Miss, SpecModelTrainsAndMerges) {  // (the shard starts as zeros: the layer exactly unchanged)
  expect_spec_adapters_train_and_merge(acc_model_add_miss, ACC_OPTIONS_MISS, {{"r", 2}}, "linear1,linear2", 2);
}
