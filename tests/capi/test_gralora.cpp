// PEFT's GraLoRA (acc_model_add_gralora): each layer's delta cut into k x k blocks, each a low-rank
// product of rank r / k, with an optional plain LoRA pair beside them. Checked against PEFT's layer
// restated in lora_gralora_case.py (the "gralora" case of export_lora_cases.py): r 4 and k 2 on three
// nn.Linear layers, B drawn, dropout, a 3-D input ("blocks"); r 2, k 2 and hybrid_r 2 from zeros with
// gralora_only biases ("hybrid"); k 1 and hybrid_r 1 on transformers' Conv1D, dropout ("conv1d"). The
// draws and the stream after them, the outputs in evaluation and in training (also under bf16
// autocast, enabled and disabled), the gradients, three AdamW steps and the merged weights (merge and
// save_model), bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <algorithm>
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

acc_options* gralora_options(const json& c) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_GRALORA, &o), ACC_OK);
  for (const char* key : {"r", "gralora_k", "hybrid_r"})
    EXPECT_EQ(acc_options_set_int(o, key, c[key].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "alpha", c["alpha"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "gralora_dropout", c["gralora_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", c["init_weights"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "bias", c["bias"].get<std::string>().c_str()), ACC_OK);
  return o;
}

acc_model* adapted(const json& c) {
  const std::string targets = c["targets"].get<std::string>();
  const size_t layers = static_cast<size_t>(std::count(targets.begin(), targets.end(), ',') + 1);
  return adapted_case_model(c["model"].get<std::string>(), acc_model_add_gralora, targets, gralora_options(c),
                            c["seed"].get<uint64_t>(), layers);
}

// `config` with `key` set to `value`.
json with_value(json config, const char* key, const json& value) {
  config[key] = value;
  return config;
}

}  // namespace

TEST(Gralora, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json gralora = lora_case("gralora");
  for (const char* variant : {"blocks", "hybrid", "conv1d"}) {
    SCOPED_TRACE(variant);
    const json& c = gralora[variant];
    acc_model* base = eager_data_model(c["model"].get<std::string>());
    const auto base_output = eval_outputs(base, c);
    acc_model_free(base);
    acc_model* m = adapted(c);
    expect_case_draws_and_outputs(m, c);
    if (c["init_weights"].get<bool>()) EXPECT_EQ(eval_outputs(m, c), base_output);  // B zeros
    expect_case_step_disabling_and_merges(m, c, base_output, state_entries(c["model"].get<std::string>()),
                                          std::string("gralora_saved_model_") + variant);
    expect_case_training(adapted(c), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
  }
}

TEST(Gralora, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("gralora")["hybrid"];
  acc_model* m = adapted(c);
  ASSERT_EQ(acc_model_set_training(m, 1), ACC_OK);
  adamw_mse_losses(m, c["input"], c["target"], 2);  // B and the general B away from zero
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("gralora_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "GRALORA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["hybrid_r"], 2);
  EXPECT_EQ(config["gralora_k"], 2);
  EXPECT_TRUE(config["alpha"].is_number_integer());  // (PEFT's int)
  EXPECT_EQ(config["alpha"], 6);
  EXPECT_EQ(config["bias"], "gralora_only");
  acc_tensor_list* saved = adapter_file_tensors(dir);
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 10u);  // four tensors and the bias of two layers
  acc_tensor_list_free(saved);
  acc_model* fresh = eager_data_model(c["model"].get<std::string>());
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // A file whose configuration does not make the hybrid pair it holds, or makes one it lacks, is
  // refused naming the tensor; r not a multiple of gralora_k as PEFT's GraloraConfig refuses it.
  std::ofstream(dir + "/adapter_config.json") << with_value(config, "hybrid_r", 0).dump();
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "holds factors its configuration does not make");
  acc_model_free(fresh);
  std::ofstream(dir + "/adapter_config.json") << with_value(config, "hybrid_r", 3).dump();
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "gralora_A_general.weight' has shape");
  acc_model_free(fresh);
  std::ofstream(dir + "/adapter_config.json") << with_value(config, "gralora_k", 4).dump();
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "'gralora_k' must divide r");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);

  // What PEFT's GraLoRA refuses: r not a multiple of gralora_k; a layer whose sides gralora_k does
  // not divide (its ValueErrors); an embedding (its TypeError).
  acc_options* o = gralora_options(c);
  EXPECT_EQ(acc_options_set_int(o, "gralora_k", 3), ACC_OK);
  acc_model* other = eager_data_model(c["model"].get<std::string>());
  ACC_EXPECT_ERROR(acc_model_add_gralora(other, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "GraLoRA's r must be a multiple of gralora_k");
  EXPECT_EQ(acc_options_set_int(o, "r", 3), ACC_OK);
  ACC_EXPECT_ERROR(acc_model_add_gralora(other, "fc2", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "GraLoRA cannot adapt 'fc2': its 8 inputs are not a multiple of gralora_k 3");
  ACC_ASSERT_OK(acc_model_lora_count(other, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(other);
  acc_options_free(o);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_gralora(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "GraLoRA cannot adapt 'embed'");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "GraLoRA");
  acc_model_free(m);
}

TEST(Gralora, SpecModelTrainsAndMergesAlsoOnInputsOfFourDimensions) {
  expect_spec_adapters_train_and_merge(acc_model_add_gralora, ACC_OPTIONS_GRALORA,
                                       {{"r", 4}, {"hybrid_r", 2}, {"gralora_k", 2}}, "linear1,linear2", 2);
  // A 4-D input (PEFT's layer takes 2-D and 3-D ones) computes as its rows one by one.
  acc_model* m = nullptr;
  ASSERT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":6,"out_features":4}])", &m), ACC_OK);
  acc_options* o = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_GRALORA, &o), ACC_OK);
  ASSERT_EQ(acc_options_set_int(o, "r", 4), ACC_OK);
  ASSERT_EQ(acc_options_set_bool(o, "init_weights", 0), ACC_OK);
  ACC_ASSERT_OK(acc_model_add_gralora(m, "0", o, nullptr));
  acc_options_free(o);
  std::vector<float> values(2 * 2 * 4 * 6);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::cos(0.21f * static_cast<float>(i));
  const auto folded = outputs_on(m, floats(values, {2, 2, 4, 6}));
  std::vector<float> row_by_row;
  for (size_t half = 0; half < 2; ++half) {
    const auto rows = outputs_on(
        m, floats(std::vector<float>(values.begin() + half * 48, values.begin() + half * 48 + 48), {2, 4, 6}));
    row_by_row.insert(row_by_row.end(), rows.begin(), rows.end());
  }
  ASSERT_EQ(folded.size(), row_by_row.size());
  for (size_t i = 0; i < folded.size(); ++i) EXPECT_NEAR(folded[i], row_by_row[i], 1e-6) << i;
  acc_model_free(m);
}
