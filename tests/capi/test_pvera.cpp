// PEFT's PVeRA (acc_model_add_pvera): VeRA's shared frozen projections (pvera_A with 2 r rows) and two
// trained vectors per layer, the middle sampled from the mean and log-variance lambda_d gives it.
// Checked against PEFT's layers restated in lora_pvera_case.py (the "pvera" case of
// export_lora_cases.py): on two nn.Linear layers and transformers' Conv1D, the global generator's
// samples ("global": draws, both starts, the outputs in evaluation (the mean) and in training
// (dropout, then the samples), also under bf16 autocast, the gradients, three AdamW steps and the
// merged weights, bit for bit); on three nn.Linear layers, each layer's own generator seeded
// generator_seed, sampling at inference too ("seeded"); PEFT's files both ways; what is refused.
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

acc_options* pvera_options(const json& c, bool init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_PVERA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "projection_prng_key", c["projection_prng_key"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "d_initial", c["d_initial"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "pvera_dropout", c["pvera_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "sample_at_inference", c["sample_at_inference"].get<bool>()), ACC_OK);
  if (!c["generator_seed"].is_null())
    EXPECT_EQ(acc_options_set_int(o, "generator_seed", c["generator_seed"].get<int64_t>()), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, bool init) {
  return adapted_case_model(c["model"].get<std::string>(), acc_model_add_pvera, c["targets"].get<std::string>(),
                            pvera_options(c, init), c["seed"].get<uint64_t>(), 3);
}

}  // namespace

TEST(Pvera, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("pvera")["global"];
  acc_model* base = eager_data_model(c["model"].get<std::string>());
  const auto base_output = eval_outputs(base, c);
  acc_model_free(base);
  acc_model* m = adapted(c, /*init=*/true);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));  // one torch.randn(2 r) per layer
  expect_params(m, c["initial"]);
  EXPECT_EQ(eval_outputs(m, c), base_output);  // lambda_b zero: the model starts unchanged
  EXPECT_EQ(acc_test::parameter_names(m),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc1.pvera_lambda_b", "fc1.pvera_lambda_d",
                                      "proj.weight", "proj.bias", "proj.pvera_lambda_b", "proj.pvera_lambda_d",
                                      "head.weight", "head.bias", "head.pvera_lambda_b", "head.pvera_lambda_d"}));
  acc_model_free(m);

  m = adapted(c, /*init=*/false);
  expect_params(m, c["chosen"]);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));  // the mean: no draw
  expect_autocast_outputs(m, c["input"], c);
  expect_autocast_step(m, c, c["train_seed"].get<uint64_t>());
  // save_model's entries: the three layers' weights and biases (no vector, no projection).
  expect_case_step_disabling_and_merges(m, c, base_output, 6, "pvera_saved_model");
  expect_case_training(adapted(c, /*init=*/false), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
}

TEST(Pvera, LayersOwnGeneratorsGoOnFromForwardToForward) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("pvera")["seeded"];
  acc_model* m = adapted(c, /*init=*/false);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));  // the layers' samples take none
  expect_params(m, c["chosen"]);
  // Sampling at inference: each evaluation draws again from the layers' generators.
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_outputs"][0]));
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_outputs"][1]));
  expect_training_step(m, c["input"], /*seed=*/12345, c["train_output"],
                       c["grads"]);  // (the global seed plays no part)
  acc_model_free(m);
}

TEST(Pvera, PeftFilesBothWaysAndWhatIsRefused) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("pvera")["global"];
  acc_model* m = adapted(c, /*init=*/false);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("pvera_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "PVERA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["projection_prng_key"], 7);
  EXPECT_EQ(config["pvera_dropout"], 0.25);
  EXPECT_FALSE(config.contains("vera_dropout"));
  EXPECT_EQ(config["sample_at_inference"], false);
  EXPECT_TRUE(config["generator_seed"].is_null());
  EXPECT_EQ(config["init_weights"], false);
  // The projections under PEFT's names, bit for bit as PEFT draws them, and the vectors.
  acc_tensor_list* saved = adapter_file_tensors(dir);
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 8u);
  for (const char* name : {"pvera_A", "pvera_B"}) {
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_find(saved, (std::string("base_model.") + name).c_str(), &t));
    EXPECT_EQ(acc_test::shape(t), c[name]["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(to_floats(t), float_values(c[name])) << name;
    acc_tensor_free(t);
  }
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  acc_tensor_list_free(saved);
  acc_model* fresh = eager_data_model(c["model"].get<std::string>());
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  // The projections are buffers of the model's state.
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(fresh, &state));
  for (const char* name : {"pvera_A", "pvera_B"}) {
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_find(state, name, &t), ACC_OK) << name;
    acc_tensor_free(t);
  }
  acc_tensor_list_free(state);
  acc_model_free(fresh);

  // A file's sample_at_inference and generator_seed are taken: evaluation then samples from the seed.
  json sampling = config;
  sampling["sample_at_inference"] = true;
  sampling["generator_seed"] = 5;
  std::ofstream(dir + "/adapter_config.json") << sampling.dump();
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  const auto first = eval_outputs(fresh, c);
  EXPECT_NE(first, output);
  EXPECT_NE(eval_outputs(fresh, c), first);  // the layers' generators went on
  acc_model_free(fresh);
  std::ofstream(dir + "/adapter_config.json") << config.dump();

  // lambda_d of VeRA's length (r, not 2 r) is refused, naming it; nothing changes.
  acc_tensor* short_d = nullptr;
  const std::vector<float> values(2, 0.5f);
  const int64_t dims[] = {2};
  ACC_ASSERT_OK(
      acc_tensor_from_host(values.data(), values.size() * sizeof(float), dims, 1, ACC_DTYPE_FLOAT32, &short_d));
  replace_adapter_tensor(dir, "base_model.model.fc1.pvera_lambda_d", short_d);
  acc_tensor_free(short_d);
  fresh = eager_data_model(c["model"].get<std::string>());
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "'fc1.pvera_lambda_d' has shape [2]; with r 2 the layer's weight [8, 6] takes [4]");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);

  // What PEFT's PVeRA takes: nn.Linear and Conv1D; its bias names; no weighted adapters.
  acc_options* o = pvera_options(c, false);
  ASSERT_EQ(acc_options_set_string(o, "bias", "vera_only"), ACC_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(acc_options_set_string(o, "bias", "pvera_only"), ACC_OK);
  acc_model* conv = data_model("lokr_model.pt");
  ACC_EXPECT_ERROR(acc_model_add_pvera(conv, "conv", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "PVeRA cannot adapt 'conv'");
  acc_model_free(conv);
  acc_options_free(o);
  expect_no_weighted_adapter(m, "PVeRA");
  acc_model_free(m);
}

// On a spec model: the adapters start as the identity, train (sampling), and merging keeps the
// evaluation's outputs (the mean; training's are samples).
TEST(Pvera, SpecLayersStartUnchangedTrainAndMergeTheirMean) {
  acc_model* m = net();
  const auto before = outputs(m);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PVERA, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "r", 2));
  size_t adapted = 0;
  ACC_ASSERT_OK(acc_model_add_pvera(m, "0,linear1,linear2", o, &adapted));
  acc_options_free(o);
  EXPECT_EQ(adapted, 3u);
  acc_test::expect_equal_but_for_freezing(outputs(m), before);  // lambda_b zero, whatever the samples
  // (Five noisy steps need not lower the loss: the case's AdamW steps are PEFT's to the bit instead.)
  EXPECT_EQ(train(m, 5).size(), 5u);
  ACC_ASSERT_OK(acc_model_set_training(m, 0));
  const auto trained = outputs(m);
  EXPECT_NE(trained, before);
  EXPECT_EQ(outputs(m), trained);  // the mean: no draw
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  const auto merged = outputs(m);
  ASSERT_EQ(merged.size(), trained.size());
  for (size_t i = 0; i < merged.size(); ++i) EXPECT_NEAR(merged[i], trained[i], 1e-5);
  acc_model_free(m);
}
