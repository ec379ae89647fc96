// PEFT's C3A (acc_model_add_c3a): each layer adds its input convolved circularly, block by block,
// with a trained kernel. Checked against PEFT's layer restated in lora_c3a_case.py (the "c3a" case
// of export_lora_cases.py) on three nn.Linear layers: blocks of 2 with fc2's 4 by
// block_size_pattern, xavier_uniform draws, a 3-D input ("xavier"); gaussian draws on two layers,
// their biases trained ("gaussian"). The draws (kaiming_uniform's too) and the stream after them, the
// outputs in evaluation and in training (also under bf16 autocast), the gradients through PEFT's
// hand-written backward, three AdamW steps and the merged weights (merge and save_model), bit for
// bit; PEFT's files both ways; what PEFT refuses.
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

acc_model* c3a_model() { return eager_data_model("c3a_model.pt"); }

acc_options* c3a_options(const json& c, const std::string& init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_C3A, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "block_size", c["block_size"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "block_size_pattern", c["block_size_pattern"].dump().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "bias", c["bias"].get<std::string>().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "init_weights", init.c_str()), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, const std::string& init) {
  const std::string targets = c["targets"].get<std::string>();
  const size_t layers = static_cast<size_t>(std::count(targets.begin(), targets.end(), ',') + 1);
  return adapted_case_model("c3a_model.pt", acc_model_add_c3a, targets, c3a_options(c, init), c["seed"].get<uint64_t>(),
                            layers);
}

}  // namespace

TEST(C3a, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c3a = lora_case("c3a");
  acc_model* base = c3a_model();
  for (const char* variant : {"xavier", "gaussian"}) {
    SCOPED_TRACE(variant);
    const json& c = c3a[variant];
    const std::string init = c["init_weights"].get<std::string>();
    const auto base_output = eval_outputs(base, c);
    acc_model* kaiming = adapted(c, "kaiming_uniform");
    expect_params(kaiming, c["kaiming"]);
    acc_model_free(kaiming);
    acc_model* zeros = adapted(c, "true");  // the layer unchanged
    EXPECT_EQ(eval_outputs(zeros, c), base_output);
    acc_model_free(zeros);
    acc_model* m = adapted(c, init);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    expect_params(m, c["chosen"]);
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    expect_autocast_outputs(m, c["input"], c);
    expect_autocast_step(m, c);
    expect_case_step_disabling_and_merges(m, c, base_output, 6, std::string("c3a_saved_model_") + variant);
    expect_case_training(adapted(c, init), c["input"], c["target"], c, std::nullopt);
  }
  acc_model_free(base);
}

TEST(C3a, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("c3a")["xavier"];
  acc_model* m = adapted(c, "xavier_uniform");
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("c3a_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "C3A");
  EXPECT_EQ(config["block_size"], 2);
  EXPECT_EQ(config["block_size_pattern"], c["block_size_pattern"]);
  EXPECT_EQ(config["init_weights"], "xavier_uniform");
  EXPECT_EQ(config["bias"], "none");
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  acc_tensor_list_free(saved);
  acc_model* fresh = c3a_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  auto refused_with = [&](const json& edited, acc_status status, const std::string& says) {
    std::ofstream(dir + "/adapter_config.json") << edited.dump();
    acc_model* other = c3a_model();
    ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), status, says);
    size_t n = 1;
    ACC_ASSERT_OK(acc_model_lora_count(other, &n));
    EXPECT_EQ(n, 0u);
    acc_model_free(other);
  };
  json j = config;
  j["block_size_pattern"] = json::object();  // fc2's kernel then 4 x 4 x 2, the file's 2 x 2 x 4
  refused_with(j, ACC_ERR_INVALID_ARGUMENT, "fc2.c3a_kernel' has shape [2, 2, 4]");
  j = config;
  j["init_weights"] = "orthogonal";
  refused_with(j, ACC_ERR_IO, "'init_weights' must be true, false, \"xavier_uniform\"");
  j = config;
  j["block_size"] = 3;  // divides none of the layers
  refused_with(j, ACC_ERR_INVALID_ARGUMENT, "its block size 3 must divide both its 6 inputs and its 8 outputs");
  j = config;
  j["block_size_pattern"] = json{{"fc2", "4"}};
  refused_with(j, ACC_ERR_IO, "'block_size_pattern' 's 'fc2' must be an integer");
  j = config;
  j["block_size_pattern"] = json{{"fc2", UINT64_MAX}};
  refused_with(j, ACC_ERR_IO, "'fc2' is 18446744073709551615, past any size");
  // PEFT's C3AConfig has no exclude_modules: not written, and a file's ignored, as PEFT ignores it.
  EXPECT_FALSE(config.contains("exclude_modules"));
  j = config;
  j["exclude_modules"] = json::array({"fc2"});
  std::ofstream(dir + "/adapter_config.json") << j.dump();
  acc_model* ignoring = c3a_model();
  size_t adapted_layers = 0;
  ACC_ASSERT_OK(acc_model_load_lora(ignoring, dir.c_str()));
  ACC_ASSERT_OK(acc_model_lora_count(ignoring, &adapted_layers));
  EXPECT_EQ(adapted_layers, 3u);
  EXPECT_EQ(eval_outputs(ignoring, c), output);
  acc_model_free(ignoring);
  // A pattern key is the middle of PEFT's ".*\.key$": one that is no expression alone is still its.
  j = config;
  j["block_size_pattern"] = json{{"*", 2}};
  std::ofstream(dir + "/adapter_config.json") << j.dump();
  acc_model* starred = c3a_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(starred, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "fc2.c3a_kernel' has shape [2, 2, 4]");  // (".*\\.*$" matches every name: fc2's blocks of 2)
  acc_model_free(starred);

  // What PEFT's C3A refuses: a block size that does not divide a layer's sides (its ValueError),
  // transformers' Conv1D and embeddings (its TypeError).
  acc_options* o = c3a_options(c, "xavier_uniform");
  ACC_ASSERT_OK(acc_options_set_int(o, "block_size", 4));
  ACC_ASSERT_OK(acc_options_set_string(o, "block_size_pattern", "{}"));
  acc_model* other = c3a_model();
  ACC_EXPECT_ERROR(acc_model_add_c3a(other, "fc1,fc2", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "C3A cannot adapt 'fc1': its block size 4 must divide both its 6 inputs and its 8 outputs");
  size_t count = 1;
  ACC_ASSERT_OK(acc_model_lora_count(other, &count));
  EXPECT_EQ(count, 0u);
  acc_model_free(other);
  EXPECT_EQ(acc_options_set_string(o, "init_weights", "orthogonal"), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(acc_options_set_string(o, "exclude_modules", "fc2"), ACC_ERR_INVALID_ARGUMENT);  // (not PEFT's)
  EXPECT_EQ(acc_options_set_int(o, "block_size", 0), ACC_ERR_INVALID_ARGUMENT);
  acc_options_free(o);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_c3a(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "C3A cannot adapt 'c_fc'");  // transformers' Conv1D
  ACC_EXPECT_ERROR(acc_model_add_c3a(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "C3A cannot adapt 'embed'");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "C3A");
  acc_model_free(m);
}

TEST(C3a, SpecModelTrainsAndMerges) {  // (zeros: the layer exactly unchanged at the start)
  acc_model* m = net();
  const auto before = outputs(m);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_C3A, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "block_size", 4));
  ACC_ASSERT_OK(acc_options_set_string(o, "init_weights", "true"));
  size_t n = 0;
  ACC_ASSERT_OK(acc_model_add_c3a(m, "linear1,linear2", o, &n));
  acc_options_free(o);
  EXPECT_EQ(n, 2u);
  expect_trains_then_merges(m, before);
  acc_model_free(m);
}
