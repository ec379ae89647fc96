// PEFT's RandLoRA (acc_model_add_randlora): frozen random bases shared by the layers, each layer's
// lambda and gamma scaling them. Checked against PEFT's layers restated in lora_randlora_case.py (the
// "randlora" case of export_lora_cases.py) on three nn.Linear layers (6 to 8, 8 to 8, 8 to 4: each
// side the smaller one somewhere): Kaiming bases in bfloat16, r 3, dropout, a 3-D input ("dense");
// sparse bases, r 2, randlora_only biases ("sparse"). The bases, the draws and the stream after them,
// the outputs in evaluation and in training (also under bf16 autocast, enabled and disabled), the
// gradients through PEFT's hand-written backward, three AdamW steps and the merged weights (merge and
// save_model), bit for bit; PEFT's files both ways, with and without the bases; the bases as state
// buffers; what PEFT refuses.
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

acc_model* randlora_model() { return eager_data_model("randlora_model.pt"); }

acc_options* randlora_options(const json& c, bool init_weights) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_RANDLORA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "randlora_alpha", c["randlora_alpha"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "projection_prng_key", c["projection_prng_key"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "sparse", c["sparse"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "randlora_dropout", c["randlora_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "bias", c["bias"].get<std::string>().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init_weights ? 1 : 0), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, bool init_weights = false) {
  return adapted_case_model("randlora_model.pt", acc_model_add_randlora, c["targets"].get<std::string>(),
                            randlora_options(c, init_weights), c["seed"].get<uint64_t>(), 3);
}

// The model's state entry `name` (a buffer: the bases).
std::vector<float> state_entry(acc_model* m, const char* name) {
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_model_state_dict(m, &state), ACC_OK);
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_tensor_list_find(state, name, &t), ACC_OK) << name;
  std::vector<float> values = t ? to_floats(t) : std::vector<float>();
  acc_tensor_free(t);
  acc_tensor_list_free(state);
  return values;
}

}  // namespace

TEST(Randlora, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json randlora = lora_case("randlora");
  acc_model* base = randlora_model();
  for (const char* variant : {"dense", "sparse"}) {
    SCOPED_TRACE(variant);
    const json& c = randlora[variant];
    const auto base_output = eval_outputs(base, c);
    acc_model* initial = adapted(c, true);  // lambda zeros: the layer unchanged
    expect_params(initial, c["initial"]);
    EXPECT_EQ(eval_outputs(initial, c), base_output);
    acc_model_free(initial);
    acc_model* m = adapted(c);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    expect_params(m, c["chosen"]);
    EXPECT_EQ(state_entry(m, "randlora_A"), float_values(c["randlora_A"]));
    EXPECT_EQ(state_entry(m, "randlora_B"), float_values(c["randlora_B"]));
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    expect_autocast_outputs(m, c["input"], c);
    expect_autocast_step(m, c, c["train_seed"].get<uint64_t>());
    expect_case_step_disabling_and_merges(m, c, base_output, 6, std::string("randlora_saved_model_") + variant);
    expect_case_training(adapted(c), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
  }
  acc_model_free(base);
}

TEST(Randlora, PeftFilesBothWaysWithAndWithoutTheBases) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("randlora")["dense"];
  acc_model* m = adapted(c);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("randlora_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "RANDLORA");
  EXPECT_EQ(config["r"], 3);
  EXPECT_EQ(config["projection_prng_key"], 11);
  EXPECT_EQ(config["save_projection"], true);
  EXPECT_EQ(config["sparse"], false);
  EXPECT_EQ(config["randlora_alpha"], 6.0);
  EXPECT_EQ(config["randlora_dropout"], 0.25);
  EXPECT_EQ(config["init_weights"], false);
  EXPECT_FALSE(config.contains("exclude_modules"));
  // The bases at the top and under each layer's name (PEFT's layers hold them too), as PEFT draws them.
  acc_tensor_list* saved = adapter_file_tensors(dir);
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 14u);  // lambda and gamma of three layers, the bases, and three layers' copies of them
  for (const std::string prefix : {"base_model.", "base_model.model.fc1.", "base_model.model.head."})
    for (const char* name : {"randlora_A", "randlora_B"}) {
      acc_tensor* t = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_find(saved, (prefix + name).c_str(), &t));
      EXPECT_EQ(acc_test::shape(t), c[name]["shape"].get<std::vector<int64_t>>()) << prefix << name;
      EXPECT_EQ(to_floats(t), float_values(c[name])) << prefix << name;
      acc_tensor_free(t);
    }
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  acc_tensor_list_free(saved);
  acc_model* fresh = randlora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);

  // The file's bases are the ones used: zeroed there, the branch computes nothing.
  zero_adapter_tensor(dir, "base_model.randlora_A");
  acc_model* plain = randlora_model();
  const auto base_output = eval_outputs(plain, c);
  acc_model_free(plain);
  fresh = randlora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), base_output);
  acc_model_free(fresh);

  // Without save_projection the file holds none and the seed draws them again; with it, a file
  // lacking them is refused.
  json without = config;
  without["save_projection"] = false;
  std::ofstream(dir + "/adapter_config.json") << without.dump();
  fresh = randlora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));  // (the file's zeroed bases ignored, as PEFT)
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  acc_model* unsaved = adapted(c);
  acc_options* o = randlora_options(c, false);
  ACC_ASSERT_OK(acc_options_set_bool(o, "save_projection", 0));
  acc_model_free(unsaved);
  unsaved = adapted_case_model("randlora_model.pt", acc_model_add_randlora, c["targets"].get<std::string>(), o,
                               c["seed"].get<uint64_t>(), 3);
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(unsaved, dir.c_str()));
  saved = adapter_file_tensors(dir);
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 6u);
  acc_tensor_list_free(saved);
  fresh = randlora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  acc_model_free(unsaved);
  json claiming = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  claiming["save_projection"] = true;
  std::ofstream(dir + "/adapter_config.json") << claiming.dump();
  fresh = randlora_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO,
                   "lacks RandLoRA's projections (base_model.randlora_A");
  acc_model_free(fresh);

  // What PEFT's RandLoRA refuses: embeddings (its ValueError); its config has no exclude_modules.
  o = randlora_options(c, false);
  EXPECT_EQ(acc_options_set_string(o, "exclude_modules", "fc2"), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(acc_options_set_string(o, "bias", "lora_only"), ACC_ERR_INVALID_ARGUMENT);
  acc_options_free(o);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_randlora(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "RandLoRA cannot adapt 'embed'");
  acc_model_free(lm);
  // PEFT's RandLoRA takes one key and one save_projection for every adapter of a model.
  for (const auto& [key, value] : {std::pair{"projection_prng_key", "5"}, std::pair{"save_projection", "0"}}) {
    o = randlora_options(c, false);
    ACC_ASSERT_OK(acc_options_set(o, key, value));
    ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "other", c["targets"].get<std::string>().c_str(), o, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "PEFT's RandLoRA");
    acc_options_free(o);
  }
  expect_no_weighted_adapter(m, "RandLoRA");
  acc_model_free(m);
}

TEST(Randlora, ConvOneDLayersAndSpecModelsTrainAndMerge) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  // transformers' Conv1D (its weight in x out; the VeRA case's "proj"): adapted as PEFT's RandLoRA
  // adapts it, merging the delta transposed.
  const json c = lora_case("vera");
  acc_model* m = eager_data_model("vera_model.pt");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_RANDLORA, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "r", 2));
  ACC_ASSERT_OK(acc_options_set_bool(o, "init_weights", 0));
  size_t n = 0;
  ACC_ASSERT_OK(acc_model_add_randlora(m, "proj", o, &n));
  acc_options_free(o);
  EXPECT_EQ(n, 1u);
  const auto adapted_output = eval_outputs(m, c);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  const auto merged_output = eval_outputs(m, c);
  ASSERT_EQ(merged_output.size(), adapted_output.size());
  for (size_t i = 0; i < merged_output.size(); ++i) EXPECT_NEAR(merged_output[i], adapted_output[i], 1e-4);
  acc_model_free(m);
  expect_spec_adapters_train_and_merge(acc_model_add_randlora, ACC_OPTIONS_RANDLORA, {{"r", 2}, {"randlora_alpha", 4}},
                                       "linear1,linear2", 2);
}

// PEFT places the bases in the layers' dtype (float32 again where that is half precision): a float64
// model computes and merges in float64; a model cast to bfloat16 after the adapters were added
// computes its branch and merges in float32 on the CPU (PEFT's cast_to_fp32).
TEST(Randlora, FollowsTheModelsDtype) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("randlora")["dense"];
  acc_model* single = adapted(c);
  const auto reference = eval_outputs(single, c);
  acc_model_free(single);
  auto expect_near = [](const std::vector<float>& got, const std::vector<float>& want, double bound) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], bound) << i;
  };
  auto outputs_in_float = [&](acc_model* m, acc_dtype dtype) {
    EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
    acc_tensor *x = acc_test::from_json(c["input"]), *cast = nullptr, *y = nullptr, *floats = nullptr;
    EXPECT_EQ(acc_tensor_to(x, nullptr, dtype, &cast), ACC_OK);
    EXPECT_EQ(acc_model_forward1(m, cast, ACC_FORWARD_NO_GRAD, &y), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_tensor_to(y, nullptr, ACC_DTYPE_FLOAT32, &floats), ACC_OK);
    const auto values = floats ? to_floats(floats) : std::vector<float>();
    for (acc_tensor* t : {x, cast, y, floats}) acc_tensor_free(t);
    return values;
  };
  {  // a float64 model: the same draws, computed in float64
    acc_model* m = randlora_model();
    ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_FLOAT64));
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
    acc_options* o = randlora_options(c, false);
    ACC_ASSERT_OK(acc_model_add_randlora(m, c["targets"].get<std::string>().c_str(), o, nullptr));
    acc_options_free(o);
    const auto adapted64 = outputs_in_float(m, ACC_DTYPE_FLOAT64);
    expect_near(adapted64, reference, 1e-5);
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    expect_near(outputs_in_float(m, ACC_DTYPE_FLOAT64), adapted64, 1e-6);
    acc_model_free(m);
  }
  {  // cast to bfloat16 afterwards: it still computes, trains and merges
    acc_model* m = adapted(c);
    ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16));
    const auto low = outputs_in_float(m, ACC_DTYPE_BFLOAT16);
    expect_near(low, reference, 0.1);
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    expect_near(outputs_in_float(m, ACC_DTYPE_BFLOAT16), low, 0.1);
    acc_model_free(m);
  }
}
