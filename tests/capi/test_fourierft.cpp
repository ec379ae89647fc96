// PEFT's FourierFT (acc_model_add_fourierft): a sparse spectrum of each layer's delta trained, the
// delta its inverse 2-D FFT. Checked against PEFT's layer restated in lora_fourierft_case.py (the
// "fourierft" case of export_lora_cases.py) on a TorchScript model of two nn.Linear layers and
// transformers' Conv1D, with n_frequency_pattern giving the last layer its own count: the draws and
// the stream after them, the outputs in evaluation, in training and under bf16 autocast (enabled and
// disabled), the gradients, three AdamW steps and the merged weights (merge and save_model), bit for
// bit; PEFT's files both ways; what PEFT refuses.
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

acc_model* fourierft_model() { return eager_data_model("fourierft_model.pt"); }

acc_options* fourierft_options(const json& c, bool init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_FOURIERFT, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "n_frequency", c["n_frequency"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "scaling", c["scaling"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "random_loc_seed", c["random_loc_seed"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "n_frequency_pattern", c["n_frequency_pattern"].dump().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, bool init) {
  return adapted_case_model("fourierft_model.pt", acc_model_add_fourierft, c["targets"].get<std::string>(),
                            fourierft_options(c, init), c["seed"].get<uint64_t>(), 3);
}

}  // namespace

TEST(Fourierft, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("fourierft");
  acc_model* base = fourierft_model();
  const auto base_output = eval_outputs(base, c);
  acc_model_free(base);
  acc_model* m = adapted(c, /*init=*/true);  // randn drawn, then zeros: the model unchanged
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
  expect_params(m, c["zeros"]);
  EXPECT_EQ(eval_outputs(m, c), base_output);
  acc_model_free(m);

  m = adapted(c, /*init=*/false);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
  expect_params(m, c["chosen"]);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
  expect_autocast_outputs(m, c["input"], c);
  expect_case_step_disabling_and_merges(m, c, base_output, 6, "fourierft_saved_model");
  expect_case_training(adapted(c, /*init=*/false), c["input"], c["target"], c, std::nullopt);
}

TEST(Fourierft, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("fourierft");
  acc_model* m = adapted(c, /*init=*/false);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("fourierft_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "FOURIERFT");
  EXPECT_EQ(config["n_frequency"], 12);
  EXPECT_EQ(config["scaling"], 5.0);
  EXPECT_EQ(config["random_loc_seed"], 229);
  EXPECT_EQ(config["n_frequency_pattern"], c["n_frequency_pattern"]);
  EXPECT_EQ(config["init_weights"], false);
  EXPECT_EQ(config["bias"], "none");
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  acc_tensor_list_free(saved);
  // The places come from random_loc_seed again: the same outputs.
  acc_model* fresh = fourierft_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // Into FourierFT adapters of another scaling: they would compute otherwise, refused.
  {
    acc_options* o = fourierft_options(c, /*init=*/false);
    ACC_ASSERT_OK(acc_options_set_double(o, "scaling", 6.0));
    acc_model* other = adapted_case_model("fourierft_model.pt", acc_model_add_fourierft,
                                          c["targets"].get<std::string>(), o, c["seed"].get<uint64_t>(), 3);
    ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "holds FourierFT adapters of scaling 5 and random_loc_seed 229; the model's have scaling 6");
    acc_model_free(other);
  }
  // Another seed: other places, other outputs; another count: refused before anything changes.
  {
    json j = config;
    j["random_loc_seed"] = 230;
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = fourierft_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_NE(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  {
    json j = config;
    j["n_frequency_pattern"] = json::object();
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = fourierft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "'head.fourierft_spectrum' has shape [5]; with n_frequency 12");
  size_t n = 1;
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);

  // Nulls PEFT computes with (its TypeError or AttributeError), and a pattern key Python's re refuses.
  for (const char* key : {"random_loc_seed", "scaling", "n_frequency_pattern", "bias", "n_frequency"}) {
    json j = config;
    j[key] = nullptr;
    std::ofstream(dir + "/adapter_config.json") << j.dump();
    fresh = fourierft_model();
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "'" + std::string(key) + "' is null");
    acc_model_free(fresh);
  }
  {
    json j = config;
    j["n_frequency_pattern"] = {{"q)|(.*", 2}};
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = fourierft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "q)|(.*");
  acc_model_free(fresh);

  // What PEFT's FourierFT refuses: more entries than the weight has; convolutions and embeddings.
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_FOURIERFT, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "n_frequency", 16));
  acc_model* other = fourierft_model();
  ACC_EXPECT_ERROR(acc_model_add_fourierft(other, "head", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "n_frequency 16 is more than its weight's 15 entries");
  ACC_EXPECT_ERROR(acc_options_set_int(o, "n_frequency", 0), ACC_ERR_INVALID_ARGUMENT, "n_frequency");
  acc_options_free(o);
  ACC_ASSERT_OK(acc_model_lora_count(other, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(other);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_fourierft(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "FourierFT cannot adapt 'embed'");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "FourierFT");
  acc_model_free(m);
}

// PEFT's n_frequency_pattern keys: the first whose ".*\.key$" matches the name from its start (a
// nested layer by its last part, an expression), else the key equal to the name.
TEST(Fourierft, CountsOfTheirOwnAsPeftFindsThem) {
  acc_model* m = acc_test::spec_model(
      R"([{"type":"linear","in_features":4,"out_features":4},{"type":"tanh"},
          {"type":"linear","in_features":4,"out_features":4}])");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_FOURIERFT, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "n_frequency", 3));
  // An expression Python's re refuses (an unbalanced parenthesis) is refused, nothing added.
  ACC_ASSERT_OK(acc_options_set_string(o, "n_frequency_pattern", R"({"0)|(.*": 2})"));
  ACC_EXPECT_ERROR(acc_model_add_fourierft(m, "0,2", o, nullptr), ACC_ERR_INVALID_ARGUMENT, "0)|(.*");
  ACC_ASSERT_OK(acc_options_set_string(o, "n_frequency_pattern", R"({"2": 5, "0|x": 7})"));
  ACC_ASSERT_OK(acc_model_add_fourierft(m, "0,2", o, nullptr));
  acc_options_free(o);
  std::vector<int64_t> shape;
  acc_tensor* p = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "0.fourierft_spectrum", &p));
  EXPECT_EQ(acc_test::shape(p), std::vector<int64_t>{3});  // "0|x" matches no name from its start after a dot
  acc_tensor_free(p);
  ACC_ASSERT_OK(acc_model_parameter(m, "2.fourierft_spectrum", &p));
  EXPECT_EQ(acc_test::shape(p), std::vector<int64_t>{5});  // the key equal to the name
  acc_tensor_free(p);
  acc_model_free(m);
}

TEST(Fourierft, SpecModelTrainsAndMerges) {  // (zeros at the start: the identity)
  expect_spec_adapters_train_and_merge(acc_model_add_fourierft, ACC_OPTIONS_FOURIERFT,
                                       {{"n_frequency", 16}, {"init_weights", 1}}, "linear1,linear2", 2);
}
