// DoRA (PEFT's use_dora): each adapted layer trains a magnitude per output beside its adapters and
// computes with m * (W + (B A) * scaling) / ||W + (B A) * scaling||. Checked against PEFT's
// DoraLinearLayer restated in export_lora_cases.py (its "dora" case): the magnitudes PEFT starts
// with, the outputs in training mode with dropout and in evaluation, the merged weights; PEFT's
// files round-trip with the magnitudes under PEFT's names.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::from_json;
using acc_test::max_difference;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_options* dora_options(int64_t r, double alpha, double dropout) {
  acc_options* o = lora_options(r, alpha);
  EXPECT_EQ(acc_options_set_double(o, "lora_dropout", dropout), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "use_dora", 1), ACC_OK);
  return o;
}

std::vector<float> forward_no_grad(acc_model* m, const json& input) { return outputs_on(m, from_json(input)); }

// Adds the case's DoRA adapters to `m` (after its seed: PEFT's draws) and checks what PEFT starts
// with, then loads the case's chosen B matrices and magnitudes. `module` names a spec layer in `m`.
void add_case_adapters(acc_model* m, const json& c, const std::string& targets,
                       const std::function<std::string(const std::string&)>& module) {
  ASSERT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  acc_options* o = dora_options(c["r"], c["lora_alpha"], c["lora_dropout"]);
  size_t count = 0;
  ASSERT_EQ(acc_model_add_lora(m, targets.c_str(), o, &count), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  EXPECT_EQ(count, 3u);
  for (const auto& item : c["initial_a"].items())
    EXPECT_EQ(param(m, module(item.key()) + ".lora_A.weight"), item.value()["values"].get<std::vector<float>>());
  for (const auto& item : c["initial_magnitude"].items())
    EXPECT_EQ(param(m, module(item.key()) + ".lora_magnitude_vector"), item.value()["values"].get<std::vector<float>>())
        << item.key();
  acc_tensor_list* chosen = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&chosen), ACC_OK);
  for (const auto& [key, suffix] : {std::pair<const char*, const char*>{"chosen_b", ".lora_B.weight"},
                                    {"chosen_magnitude", ".lora_magnitude_vector"}})
    for (const auto& item : c[key].items()) {
      acc_tensor* t = from_json(item.value());
      EXPECT_EQ(acc_tensor_list_append(chosen, (module(item.key()) + suffix).c_str(), t), ACC_OK);
      acc_tensor_free(t);
    }
  EXPECT_EQ(acc_model_load_state_dict(m, chosen, 0), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(chosen);
}

acc_model* case_spec_model() {
  const json spec_case = lora_case("spec");  // the same network and weights
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(spec_case["spec"].dump().c_str(), &m), ACC_OK) << acc_last_error_message();
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_tensor_list_create(&state), ACC_OK);
  for (const auto& item : spec_case["state"].items()) {
    acc_tensor* t = from_json(item.value());
    EXPECT_EQ(acc_tensor_list_append(state, item.key().c_str(), t), ACC_OK);
    acc_tensor_free(t);
  }
  EXPECT_EQ(acc_model_load_state_dict(m, state, 1), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(state);
  return m;
}

}  // namespace

TEST(Dora, SpecAndScriptedModelsComputeAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("dora");
  ASSERT_TRUE(c.contains("train_output"));
  const std::map<std::string, std::string> script_module = {{"0", "fc1"}, {"2", "block.0"}, {"5", "head"}};
  for (const bool scripted : {false, true}) {
    SCOPED_TRACE(scripted ? "TorchScript model" : "spec model");
    acc_model* m = nullptr;
    std::function<std::string(const std::string&)> module = [](const std::string& layer) { return layer; };
    if (scripted) {
      ASSERT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/lora_model.pt").c_str(), &m), ACC_OK);
      module = [&](const std::string& layer) { return script_module.at(layer); };
      add_case_adapters(m, c, "fc1,block.0,head", module);
    } else {
      m = case_spec_model();
      add_case_adapters(m, c, c["targets"], module);
    }
    // The same dropout masks from the same stream, PEFT's operations: the same bits.
    ASSERT_EQ(acc_model_set_training(m, 1), ACC_OK);
    EXPECT_EQ(forward_no_grad(m, c["input"]), c["train_output"]["values"].get<std::vector<float>>());
    ASSERT_EQ(acc_model_set_training(m, 0), ACC_OK);
    const auto evaluated = forward_no_grad(m, c["input"]);
    EXPECT_EQ(evaluated, c["eval_output"]["values"].get<std::vector<float>>());
    // Merged as PEFT merges DoRA: m / ||W + delta|| times W + delta, per row.
    ASSERT_EQ(acc_model_merge_lora(m), ACC_OK) << acc_last_error_message();
    for (const auto& item : c["merged"].items()) {
      const std::string layer = item.key().substr(0, item.key().find('.'));
      EXPECT_LT(max_difference(param(m, module(layer) + ".weight"), item.value()["values"].get<std::vector<float>>()),
                1e-6f)
          << item.key();
    }
    EXPECT_LT(max_difference(forward_no_grad(m, c["input"]), evaluated), 1e-5f);
    acc_model_free(m);
  }
}

TEST(Dora, StartsAsTheBaseModelTrainsTheMagnitudesAndRoundTrips) {
  acc_model* m = net();
  const auto base = frozen_outputs(m);
  acc_options* o = dora_options(2, 4, 0);
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora(m, kTargets, o, &count));
  acc_options_free(o);
  EXPECT_EQ(count, 3u);
  // B is zero and m the weight's row norms: exactly the base model.
  EXPECT_EQ(outputs(m), base);
  // PEFT's order: the layer's own parameters, lora_A, lora_B, the magnitude.
  const auto names = acc_test::parameter_names(m);
  const auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  EXPECT_EQ(at("1.linear1.lora_A.weight"), at("1.linear1.bias") + 1);
  EXPECT_EQ(at("1.linear1.lora_magnitude_vector"), at("1.linear1.lora_B.weight") + 1);
  EXPECT_EQ(param(m, "1.linear1.lora_magnitude_vector").size(), 16u);
  const auto magnitude_before = param(m, "0.lora_magnitude_vector");
  const auto losses = train(m, 4);
  EXPECT_LT(losses.back(), losses.front());
  EXPECT_NE(param(m, "0.lora_magnitude_vector"), magnitude_before) << "the magnitudes train";
  const auto trained = outputs(m);

  const std::string dir = acc_test::temp_path("lora_dora");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["use_dora"], true);
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  acc_tensor* magnitude = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(saved, "base_model.model.1.self_attn.out_proj.lora_magnitude_vector", &magnitude));
  EXPECT_EQ(acc_test::to_floats(magnitude), param(m, "1.self_attn.out_proj.lora_magnitude_vector"));
  acc_tensor_free(magnitude);
  acc_tensor_list_free(saved);

  // Into the base model: DoRA adapters with the trained magnitudes, the same outputs.
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs(fresh), trained);
  acc_model_free(fresh);
  // Into a model with plain adapters: refused, naming the difference.
  acc_model* plain = net();
  add_lora(plain);
  ACC_EXPECT_ERROR(acc_model_load_lora(plain, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "holds DoRA adapters (use_dora true), the model plain LoRA adapters");
  acc_model_free(plain);
  // save_model writes the merged weights, which compute as the adapted model.
  acc_accelerator* acc = acc_test::make_accelerator({});
  const std::string merged = acc_test::temp_path("lora_dora_merged");
  fs::remove_all(merged);
  ACC_ASSERT_OK(acc_save_model(acc, m, merged.c_str(), nullptr));
  acc_model* base_model = net();
  ACC_ASSERT_OK(acc_model_load_safetensors(base_model, merged.c_str(), 1, nullptr, nullptr));
  EXPECT_LT(max_difference(outputs(base_model), trained), 1e-5f);
  acc_model_free(base_model);
  acc_accelerator_free(acc);

  // A file without the magnitudes, or with magnitudes but use_dora false: refused, changing nothing.
  json changed = config;
  changed["use_dora"] = false;
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << changed.dump(2);
  acc_model* other = net();
  const auto before = acc_test::parameter_names(other);
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_IO, "is DoRA's magnitude, but use_dora is false");
  EXPECT_EQ(acc_test::parameter_names(other), before);
  acc_model_free(other);
  fs::remove_all(dir);
  acc_model_free(m);
}

// PEFT moves new adapters to the layer's dtype (DoRA's magnitude is computed there) and then, its
// autocast_adapter_dtype, back to float32: a bfloat16 layer's adapters start as float32 values
// rounded to bfloat16, and its magnitude as the bfloat16 row norms.
TEST(Dora, AHalfPrecisionLayersAdaptersStartRoundedToIt) {
  acc_model* full = net();
  add_lora(full);
  acc_model* half = net();
  ACC_ASSERT_OK(acc_model_to(half, nullptr, ACC_DTYPE_BFLOAT16));
  acc_options* o = dora_options(2, 4, 0);
  ACC_ASSERT_OK(acc_model_add_lora(half, kTargets, o, nullptr));
  acc_options_free(o);
  auto rounded = [](const std::vector<float>& values) {  // round to nearest even, as float -> bfloat16
    std::vector<float> out;
    for (float v : values) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
      std::memcpy(&v, &bits, 4);
      out.push_back(v);
    }
    return out;
  };
  const auto a = param(full, "1.linear1.lora_A.weight");
  EXPECT_NE(rounded(a), a) << "the draws are not all bfloat16 values";
  EXPECT_EQ(param(half, "1.linear1.lora_A.weight"), rounded(a));
  acc_tensor* magnitude = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(half, "1.linear1.lora_magnitude_vector", &magnitude));
  acc_dtype dtype = ACC_DTYPE_UNDEFINED;
  ACC_ASSERT_OK(acc_tensor_dtype(magnitude, &dtype));
  EXPECT_EQ(dtype, ACC_DTYPE_FLOAT32);
  const auto m = acc_test::to_floats(magnitude);
  EXPECT_EQ(m, rounded(m)) << "bfloat16 row norms";
  acc_tensor_free(magnitude);
  acc_model_free(half);
  acc_model_free(full);
}

// A layer whose weight the forward reads itself computes with DoRA's adapted weight (PEFT's merged
// form): with B zero and m the row norms it is the base model; trained, merging gives its outputs.
TEST(Dora, ALayerWhoseWeightTheForwardReadsTakesTheAdaptedWeight) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/direct_head.pt").c_str(), &m));
  auto run = [&] { return outputs_on(m, acc_test::longs({1, 4, 7, 2, 0, 3, 5, 6}, {2, 4})); };
  const auto base = run();
  acc_options* o = dora_options(2, 4, 0);
  ACC_ASSERT_OK(acc_model_add_lora(m, "head,fc", o, nullptr));
  acc_options_free(o);
  EXPECT_LT(max_difference(run(), base), 1e-6f);
  acc_tensor_list* chosen = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&chosen));
  std::vector<float> b(8 * 2), magnitude(8);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * std::sin(static_cast<float>(i));
  const auto norms = param(m, "head.lora_magnitude_vector");
  for (size_t i = 0; i < magnitude.size(); ++i) magnitude[i] = norms[i] * (1.0f + 0.05f * static_cast<float>(i));
  acc_tensor* tb = acc_test::floats(b, {8, 2});
  acc_tensor* tm = acc_test::floats(magnitude, {8});
  ACC_ASSERT_OK(acc_tensor_list_append(chosen, "head.lora_B.weight", tb));
  ACC_ASSERT_OK(acc_tensor_list_append(chosen, "head.lora_magnitude_vector", tm));
  ACC_ASSERT_OK(acc_model_load_state_dict(m, chosen, 0));
  for (acc_tensor* t : {tb, tm}) acc_tensor_free(t);
  acc_tensor_list_free(chosen);
  const auto adapted = run();
  EXPECT_GT(max_difference(adapted, base), 1e-3f);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  EXPECT_LT(max_difference(run(), adapted), 1e-5f);
  acc_model_free(m);
}
