// PEFT's BOFT (acc_model_add_boft): each layer's input (a convolution's weight) rotated by butterfly
// factors of Cayley block rotations and its output scaled. Checked against PEFT's layer restated in
// lora_boft_case.py (the "boft" case of export_lora_cases.py) on a TorchScript model with a strided
// Conv2d and three nn.Linear layers, in two configurations: blocks of 2 over two butterfly factors
// with boft_dropout on two linear layers, and two blocks on the convolution and a linear layer. The
// draws and the stream after them, the outputs in evaluation and in training, the gradients, three
// AdamW steps and the merged weights (merge and save_model), bit for bit; PEFT's files both ways;
// what PEFT refuses.
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

acc_model* boft_model() { return eager_data_model("boft_model.pt"); }

acc_options* boft_options(const json& c, bool init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_BOFT, &o), ACC_OK);
  for (const char* key : {"boft_block_size", "boft_block_num", "boft_n_butterfly_factor"})
    EXPECT_EQ(acc_options_set_int(o, key, c[key].get<int64_t>()), ACC_OK) << key;
  EXPECT_EQ(acc_options_set_double(o, "boft_dropout", c["boft_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, bool init) {
  return adapted_case_model("boft_model.pt", acc_model_add_boft, c["targets"].get<std::string>(), boft_options(c, init),
                            c["seed"].get<uint64_t>(), 2);
}

}  // namespace

TEST(Boft, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json boft = lora_case("boft");
  acc_model* base = boft_model();
  for (const char* config : {"linear", "conv"}) {
    SCOPED_TRACE(config);
    const json& c = boft[config];
    const auto base_output = eval_outputs(base, c);
    acc_model* m = adapted(c, /*init=*/true);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));  // zeros and ones draw nothing
    EXPECT_EQ(eval_outputs(m, c), base_output);                              // the identity, scales of one
    acc_model_free(m);

    m = adapted(c, /*init=*/false);  // boft_R from normal(0, 0.1), then boft_s from normal(1, 0.1), per layer
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw_drawn"]));
    expect_params(m, c["chosen"]);
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    expect_autocast_outputs(m, c["input"], c);
    // Training mode: boft_dropout's draws in the forward's order.
    expect_case_step_disabling_and_merges(m, c, base_output, 8, std::string("boft_saved_model_") + config);

    expect_case_training(adapted(c, /*init=*/false), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
  }
  acc_model_free(base);
}

TEST(Boft, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("boft")["linear"];
  acc_model* m = adapted(c, /*init=*/false);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("boft_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "BOFT");
  EXPECT_EQ(config["boft_block_size"], 2);
  EXPECT_EQ(config["boft_block_num"], 0);
  EXPECT_EQ(config["boft_n_butterfly_factor"], 2);
  EXPECT_EQ(config["boft_dropout"], 0.5);
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["init_weights"], false);
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  acc_tensor_list_free(saved);
  acc_model* fresh = boft_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // Another butterfly (one factor): boft_R's shape does not fit, refused before anything changes.
  {
    json j = config;
    j["boft_n_butterfly_factor"] = 1;
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = boft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "boft_R' has shape [2, 4, 2, 2]");
  size_t n = 1;
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);
  {
    json j = config;
    j["boft_block_num"] = 2;  // both given
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = boft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "must be one 0 and the other not");
  acc_model_free(fresh);

  // What PEFT's BOFT refuses: both or neither block setting; blocks that do not divide the input
  // (fc1 takes 27); a butterfly whose blocks cannot pair; transformers' Conv1D and embeddings.
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_BOFT, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "boft_block_num", 2));
  ACC_EXPECT_ERROR(acc_model_add_boft(m, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT, "BOFT takes boft_block_size");
  acc_options_free(o);
  acc_model* other = boft_model();
  ACC_EXPECT_ERROR(acc_model_add_boft(other, "fc1", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "in_features (27) must be divisible by boft_block_size (4)");
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_BOFT, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "boft_block_size", 4));
  ACC_ASSERT_OK(acc_options_set_int(o, "boft_n_butterfly_factor", 2));
  ACC_EXPECT_ERROR(acc_model_add_boft(other, "head", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "does not split into boft_block_size (4) blocks over 2 butterfly factors");
  acc_options_free(o);
  size_t count = 1;
  ACC_ASSERT_OK(acc_model_lora_count(other, &count));
  EXPECT_EQ(count, 0u);
  acc_model_free(other);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_boft(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "BOFT cannot adapt 'c_fc'");  // transformers' Conv1D
  ACC_EXPECT_ERROR(acc_model_add_boft(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "BOFT cannot adapt 'embed'");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "BOFT");
  acc_model_free(m);
}

TEST(Boft, SpecModelTrainsAndMerges) {
  expect_spec_adapters_train_and_merge(acc_model_add_boft, ACC_OPTIONS_BOFT,
                                       {{"boft_block_size", 2}, {"boft_n_butterfly_factor", 2}}, "linear1,linear2", 2);
}
