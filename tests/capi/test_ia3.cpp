// PEFT's (IA)^3 (acc_model_add_ia3): a trained vector scaling each targeted layer's output, or a
// feedforward module's input. Checked against PEFT's layers restated in lora_ia3_case.py (the
// "ia3" case of export_lora_cases.py) on a TorchScript model with convolutions, a linear layer and
// transformers' Conv1D: the draws and the rest of the global stream, the outputs, the gradients,
// three AdamW steps and the merged weights, bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::float_values;
using acc_test::from_json;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* ia3_model() { return eager_data_model("ia3_model.pt"); }

acc_status add_ia3(acc_model* m, const std::string& targets, const std::string& feedforward, bool init = true) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_IA3, &o), ACC_OK);
  if (!feedforward.empty()) EXPECT_EQ(acc_options_set(o, "feedforward_modules", feedforward.c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_ia3_weights", init ? 1 : 0), ACC_OK);
  const acc_status status = acc_model_add_ia3(m, targets.c_str(), o, nullptr);
  acc_options_free(o);
  return status;
}

acc_model* adapted(const json& c, bool init = true) {
  acc_model* m = ia3_model();
  EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  EXPECT_EQ(add_ia3(m, c["targets"], c["feedforward"], init), ACC_OK) << acc_last_error_message();
  return m;
}

std::vector<float> output(acc_model* m, const json& c) { return outputs_on(m, from_json(c["input"])); }

void expect_vectors(const acc_model* m, const json& vectors) {
  for (const auto& item : vectors.items()) {
    EXPECT_EQ(param(m, item.key() + ".ia3_l"), float_values(item.value())) << item.key();
    acc_tensor* v = nullptr;
    ASSERT_EQ(acc_model_parameter(m, (item.key() + ".ia3_l").c_str(), &v), ACC_OK);
    EXPECT_EQ(acc_test::shape(v), item.value()["shape"].get<std::vector<int64_t>>()) << item.key();
    acc_tensor_free(v);
  }
}

}  // namespace

TEST(Ia3, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("ia3");
  acc_model* base = ia3_model();
  const auto base_output = output(base, c);

  // Ones of PEFT's shapes after its torch.randn draws; the model starts unchanged.
  acc_model* m = adapted(c);
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 5u);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
  json ones = c["drawn"];
  for (auto& v : ones) std::fill(v["values"].begin(), v["values"].end(), 1.0);
  expect_vectors(m, ones);
  EXPECT_EQ(output(m, c), base_output);
  // Only the vectors train, each listed after its layer's own parameters (PEFT's order).
  EXPECT_EQ(acc_test::parameter_names(m),
            (std::vector<std::string>{"conv.weight", "conv.bias", "conv.ia3_l", "conv_ff.weight", "conv_ff.bias",
                                      "conv_ff.ia3_l", "fc1.weight", "fc1.bias", "fc1.ia3_l", "proj.weight",
                                      "proj.bias", "proj.ia3_l", "head.weight", "head.bias", "head.ia3_l"}));
  for (const auto& name : acc_test::parameter_names(m)) {
    acc_tensor* p = nullptr;
    int requires_grad = -1;
    ACC_ASSERT_OK(acc_model_parameter(m, name.c_str(), &p));
    ACC_ASSERT_OK(acc_tensor_requires_grad(p, &requires_grad));
    EXPECT_EQ(requires_grad, name.find(".ia3_l") != std::string::npos ? 1 : 0) << name;
    acc_tensor_free(p);
  }
  acc_model_free(m);

  // init_ia3_weights false keeps the draws.
  m = adapted(c, /*init=*/false);
  expect_vectors(m, c["drawn"]);
  acc_model_free(m);

  // Chosen vectors: PEFT's outputs and gradients, bit for bit.
  m = adapted(c);
  load_case_tensors(m, c["chosen"], ".ia3_l");
  acc_tensor *x = from_json(c["input"]), *y = nullptr, *sum = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &y));
  EXPECT_EQ(to_floats(y), float_values(c["output"]));
  ACC_ASSERT_OK(acc_tensor_sum(y, &sum));
  ACC_ASSERT_OK(acc_tensor_backward(sum));
  for (const auto& item : c["grads"].items()) {
    acc_tensor *p = nullptr, *g = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(m, (item.key() + ".ia3_l").c_str(), &p));
    ACC_ASSERT_OK(acc_tensor_grad(p, &g));
    EXPECT_EQ(to_floats(g), float_values(item.value())) << item.key();
    acc_tensor_free(p);
    acc_tensor_free(g);
  }
  const std::vector<float> adapted_output = to_floats(y);
  for (acc_tensor* t : {x, y, sum}) acc_tensor_free(t);

  // Under bf16 autocast, PEFT's casts: a linear layer's output scaled and cast back to bf16, a
  // convolution's computed in float32 and returned in its input's dtype.
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"mixed_precision", "bf16"}});
  ACC_ASSERT_OK(acc_autocast_begin(acc, 1));
  acc_tensor *low = nullptr, *low_floats = nullptr;
  x = from_json(c["input"]);
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &low));
  ACC_ASSERT_OK(acc_autocast_end(acc));
  ACC_ASSERT_OK(acc_tensor_to(low, nullptr, ACC_DTYPE_FLOAT32, &low_floats));
  EXPECT_EQ(to_floats(low_floats), float_values(c["autocast_output"]));
  for (acc_tensor* t : {x, low, low_floats}) acc_tensor_free(t);

  // save_model writes the merged weights, the adapters left in the model.
  const std::string saved_dir = acc_test::temp_path("ia3_saved_model");
  fs::remove_all(saved_dir);
  ACC_ASSERT_OK(acc_save_model(acc, m, saved_dir.c_str(), nullptr));
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((saved_dir + "/model.safetensors").c_str(), &saved));
  for (const auto& item : c["merged"].items()) {
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_find(saved, item.key().c_str(), &t));
    EXPECT_EQ(to_floats(t), float_values(item.value())) << item.key();
    acc_tensor_free(t);
  }
  acc_tensor* vector = nullptr;
  EXPECT_NE(acc_tensor_list_find(saved, "fc1.ia3_l", &vector), ACC_OK);
  acc_tensor_list_free(saved);
  acc_accelerator_free(acc);

  // Disabled: the base model's outputs; enabled again: the adapted ones.
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(output(m, c), base_output);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
  EXPECT_EQ(output(m, c), adapted_output);

  // PEFT's merge: weights (and output-scaled layers' biases) scaled, the vectors gone.
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  for (const auto& item : c["merged"].items())
    EXPECT_EQ(param(m, item.key()), float_values(item.value())) << item.key();
  for (const char* frozen : {"conv_ff.bias", "proj.bias"})  // feedforward: their biases stay
    EXPECT_EQ(param(m, frozen), param(base, frozen)) << frozen;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 0u);
  const auto merged_output = output(m, c);
  for (size_t i = 0; i < merged_output.size(); ++i) EXPECT_NEAR(merged_output[i], adapted_output[i], 1e-5);
  acc_model_free(m);
  acc_model_free(base);
}

TEST(Ia3, TrainsAsPeftWithAdamW) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("ia3");
  acc_model* m = adapted(c);
  load_case_tensors(m, c["chosen"], ".ia3_l");
  const auto fc1_weight = param(m, "fc1.weight");
  EXPECT_EQ(adamw_mse_losses(m, c["input"], c["target"], 3), c["losses"].get<std::vector<double>>());
  expect_vectors(m, c["trained"]);
  EXPECT_EQ(param(m, "fc1.weight"), fc1_weight);  // frozen
  acc_model_free(m);
}

TEST(Ia3, PeftFilesBothWays) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("ia3");
  acc_model* m = adapted(c);
  load_case_tensors(m, c["chosen"], ".ia3_l");
  const std::string dir = acc_test::temp_path("ia3_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "IA3");
  EXPECT_EQ(config["target_modules"], (json{"conv", "conv_ff", "fc1", "proj", "head"}));
  EXPECT_EQ(config["feedforward_modules"], (json{"conv_ff", "proj"}));
  EXPECT_EQ(config["init_ia3_weights"], true);
  EXPECT_EQ(config["fan_in_fan_out"], false);  // the last linear layer adapted, head, is nn.Linear (PEFT's)
  EXPECT_TRUE(config["modules_to_save"].is_null());
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_name(saved, i, &name));
    names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"base_model.model.conv.ia3_l", "base_model.model.conv_ff.ia3_l",
                                             "base_model.model.fc1.ia3_l", "base_model.model.head.ia3_l",
                                             "base_model.model.proj.ia3_l"}));
  acc_tensor_list_free(saved);

  acc_model* fresh = ia3_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(output(fresh, c), float_values(c["output"]));
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));  // again, into the adapters it has
  acc_model_free(fresh);

  // As PEFT writes it (keys sorted, its own fields, a regular expression for the feedforward modules).
  {
    std::ofstream out(dir + "/adapter_config.json");
    out << R"json({"auto_mapping": null, "base_model_name_or_path": null, "exclude_modules": null,
      "fan_in_fan_out": false, "feedforward_modules": ".*(conv_ff|proj)", "inference_mode": true,
      "init_ia3_weights": true, "modules_to_save": null, "peft_type": "IA3", "peft_version": "0.18.0",
      "revision": null, "target_modules": ["head", "proj", "fc1", "conv_ff", "conv"], "task_type": null})json";
  }
  fresh = ia3_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(output(fresh, c), float_values(c["output"]));
  acc_model_free(fresh);

  // A file whose feedforward modules differ puts the vectors where they do not fit: refused, the
  // model left without adapters.
  {
    std::ofstream out(dir + "/adapter_config.json");
    out << R"({"peft_type": "IA3", "target_modules": ["head", "proj", "fc1", "conv_ff", "conv"],
      "feedforward_modules": ["proj"]})";
  }
  fresh = ia3_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "the IA3 vector of 'conv_ff' has shape [1, 4, 1, 1]");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  // Nor does PEFT take feedforward modules that are not targets.
  {
    std::ofstream out(dir + "/adapter_config.json");
    out << R"({"peft_type": "IA3", "target_modules": ["head"], "feedforward_modules": ["proj"]})";
  }
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "feedforward_modules 'proj' is not among");
  acc_model_free(fresh);

  // A LoRA adapter's files do not load into IA3 adapters, nor the other way round.
  const std::string lora_dir = acc_test::temp_path("ia3_lora_adapter");
  fs::remove_all(lora_dir);
  acc_model* lora = ia3_model();
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_model_add_lora(lora, "fc1", o, nullptr));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_model_save_lora(lora, lora_dir.c_str()));
  ACC_EXPECT_ERROR(acc_model_load_lora(m, lora_dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "holds LORA adapters, the model IA3 adapters");
  ACC_EXPECT_ERROR(add_ia3(lora, "head", ""), ACC_ERR_INVALID_ARGUMENT, "already has LoRA adapters");
  acc_model_free(lora);
  acc_model_free(m);
}

TEST(Ia3, RefusesWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = ia3_model();
  // feedforward_modules outside target_modules: PEFT's IA3Config ValueError.
  ACC_EXPECT_ERROR(add_ia3(m, "fc1,head", "proj"), ACC_ERR_INVALID_ARGUMENT,
                   "feedforward_modules 'proj' is not among target_modules");
  ACC_EXPECT_ERROR(add_ia3(m, "nothing_here", ""), ACC_ERR_INVALID_ARGUMENT, "nothing_here");
  ACC_EXPECT_ERROR(acc_model_add_ia3(m, nullptr, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "target_modules");
  acc_options* lora = lora_options(2, 4);  // options of another kind
  ACC_EXPECT_ERROR(acc_model_add_ia3(m, "fc1", lora, nullptr), ACC_ERR_INVALID_ARGUMENT, "ia3 options are needed");
  acc_options_free(lora);
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 0u);
  // One PEFT method per model: a LoRA adapter beside IA3 ones is refused.
  ACC_ASSERT_OK(add_ia3(m, "fc1", ""));
  acc_options* o = lora_options(2, 4);
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "other", "head", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "one method per model");
  acc_options_free(o);
  acc_model_free(m);

  // An embedding: PEFT's IA3 takes linear layers and 2-D and 3-D convolutions only.
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(add_ia3(lm, "embed", ""), ACC_ERR_INVALID_ARGUMENT, "IA3 cannot adapt 'embed'");
  // all-linear: c_fc (Conv1D) and fc, not lm_head; "_fc" (PEFT's endswith) makes c_fc a feedforward
  // module. Its file names it in full, which reads back (PEFT's subset check wants it among the
  // targets, which all-linear wrote as full names).
  ACC_ASSERT_OK(add_ia3(lm, "all-linear", "_fc", /*init=*/false));
  ACC_ASSERT_OK(acc_model_lora_count(lm, &count));
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(param(lm, "c_fc.ia3_l").size(), 6u);  // 1 x in: its input
  const std::string dir = acc_test::temp_path("ia3_all_linear");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(lm, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["target_modules"], (json{"c_fc", "fc"}));
  EXPECT_EQ(config["feedforward_modules"], (json{"c_fc"}));
  acc_model* fresh = data_model("transformers_lm.pt");
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  const std::vector<int64_t> ids = {1, 4, 2, 0, 9, 3};
  EXPECT_EQ(outputs_on(fresh, acc_test::longs(ids, {2, 3})), outputs_on(lm, acc_test::longs(ids, {2, 3})));
  acc_model_free(fresh);
  acc_model_free(lm);
  // A convolution whose weight the forward reads itself has no output to scale as PEFT's layer does.
  acc_model* reads = data_model("conv_weight_read_model.pt");
  ACC_EXPECT_ERROR(add_ia3(reads, "re:.*", ""), ACC_ERR_UNSUPPORTED, "never calls it as a module");
  acc_model_free(reads);
}

TEST(Ia3, SpecModelScalesOutputsAndInputs) {
  // A layer spec's linear layers: ones leave the outputs as they were; trained vectors change them,
  // and merging keeps what they compute (to rounding).
  acc_model* m = net();
  const auto before = outputs(m);
  ACC_ASSERT_OK(add_ia3(m, "0,linear1,linear2", "linear2"));
  EXPECT_EQ(param(m, "1.linear2.ia3_l").size(), 16u);  // 1 x dim_feedforward: its input
  EXPECT_EQ(param(m, "0.ia3_l").size(), 8u);           // 8 x 1: its output
  expect_trains_then_merges(m, before);
  acc_model_free(m);
}

TEST(Ia3, NamedAdaptersSwitchAndMerge) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("ia3");
  // "default": the case's vectors on its five layers; "other": drawn vectors on fc1 and head, fc1 a
  // feedforward module there (its input scaled, where "default" scales its output).
  acc_model* m = adapted(c);
  load_case_tensors(m, c["chosen"], ".ia3_l");
  const auto chosen_output = output(m, c);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_IA3, &o));
  ACC_ASSERT_OK(acc_options_set(o, "feedforward_modules", "fc1"));
  ACC_ASSERT_OK(acc_options_set_bool(o, "init_ia3_weights", 0));
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "other", "fc1,head", o, &count));
  EXPECT_EQ(count, 2u);
  acc_options_free(o);
  EXPECT_EQ(output(m, c), chosen_output);  // kept aside
  ACC_ASSERT_OK(acc_model_set_adapter(m, "other"));
  const auto other_output = output(m, c);
  EXPECT_NE(other_output, chosen_output);
  EXPECT_EQ(param(m, "fc1.ia3_l").size(), 48u);  // 1 x in: its input
  // The same as a model with "other" alone.
  const std::string dir = acc_test::temp_path("ia3_named");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));  // "default" in dir, "other" in dir/other
  acc_model* alone = ia3_model();
  ACC_ASSERT_OK(acc_model_load_lora(alone, (dir + "/other").c_str()));
  EXPECT_EQ(output(alone, c), other_output);
  acc_model_free(alone);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
  EXPECT_EQ(output(m, c), chosen_output);
  // Loaded by name into a fresh model, switched between as before.
  acc_model* fresh = ia3_model();
  ACC_ASSERT_OK(acc_model_load_lora_named(fresh, dir.c_str(), "default"));
  ACC_ASSERT_OK(acc_model_load_lora_named(fresh, (dir + "/other").c_str(), "other"));
  EXPECT_EQ(output(fresh, c), chosen_output);
  ACC_ASSERT_OK(acc_model_set_adapter(fresh, "other"));
  EXPECT_EQ(output(fresh, c), other_output);
  acc_model_free(fresh);
  // An adapter of the same layers with other feedforward modules: switched to by exchanging tensors
  // (the layers' input and output adapters set again), it computes as it would alone.
  acc_model* same_alone = ia3_model();
  ACC_ASSERT_OK(acc_set_seed(3));
  ACC_ASSERT_OK(add_ia3(same_alone, c["targets"], "fc1,head", /*init=*/false));
  const auto same_output = output(same_alone, c);
  acc_model_free(same_alone);
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_IA3, &o));
  ACC_ASSERT_OK(acc_options_set(o, "feedforward_modules", "fc1,head"));
  ACC_ASSERT_OK(acc_options_set_bool(o, "init_ia3_weights", 0));
  ACC_ASSERT_OK(acc_set_seed(3));
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "same", c["targets"].get<std::string>().c_str(), o, nullptr));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "same"));
  EXPECT_EQ(output(m, c), same_output);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
  EXPECT_EQ(output(m, c), chosen_output);
  // PEFT's add_weighted_adapter: each layer's vector the weighted sum of the adapters' vectors there.
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_IA3, &o));
  ACC_ASSERT_OK(acc_options_set(o, "feedforward_modules", c["feedforward"].get<std::string>().c_str()));
  ACC_ASSERT_OK(acc_options_set_bool(o, "init_ia3_weights", 0));
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "twin", c["targets"].get<std::string>().c_str(), o, nullptr));
  acc_options_free(o);
  const char* sources[] = {"default", "twin"};
  const double weights[] = {0.7, -0.4};
  const char* mismatched[] = {"default", "same"};  // conv_ff scaled on its input in one, its output in the other
  ACC_EXPECT_ERROR(acc_model_add_weighted_adapter(m, mismatched, weights, 2, "bad", "linear", 0, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "the IA3 vector of 'conv_ff' has shape");
  ACC_EXPECT_ERROR(acc_model_add_weighted_adapter(m, sources, weights, 2, "bad", "svd", 0, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "combination_type");
  ACC_ASSERT_OK(acc_model_set_adapter(m, "twin"));
  std::map<std::string, std::vector<float>> twin;
  for (const auto& item : c["chosen"].items()) twin[item.key()] = param(m, item.key() + ".ia3_l");
  ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
  ACC_ASSERT_OK(acc_model_add_weighted_adapter(m, sources, weights, 2, "mix", "linear", 0, &count));
  EXPECT_EQ(count, 5u);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "mix"));
  for (const auto& item : c["chosen"].items()) {
    const auto first = float_values(item.value()), second = twin[item.key()];
    std::vector<float> expected(first.size());
    for (size_t i = 0; i < first.size(); ++i)
      expected[i] = (0.0f + first[i] * 0.7f) + second[i] * static_cast<float>(-0.4);
    EXPECT_EQ(param(m, item.key() + ".ia3_l"), expected) << item.key();
  }
  ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
  // Both merged, one after the other (PEFT's merge_and_unload(adapter_names=...)).
  const char* both[] = {"default", "other"};
  ACC_ASSERT_OK(acc_model_merge_lora_adapters(m, both, 2));
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 0u);
  acc_model_free(m);
}
