// PEFT's per-module LoRA settings: rank_pattern and alpha_pattern give a module its own rank and
// lora_alpha (the first key that matches it), layers_to_transform and layers_pattern adapt only the
// layers listed; both read and written in PEFT's adapter_config.json, as PEFT matches them.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lora_support.h"
#include "support.h"
#include "twin_support.h"

using json = nlohmann::ordered_json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

std::vector<int64_t> shape_of(const acc_model* m, const std::string& name) {
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name.c_str(), &t), ACC_OK) << acc_last_error_message();
  std::vector<int64_t> dims(8);
  size_t ndim = 0;
  if (t) EXPECT_EQ(acc_tensor_shape(t, dims.data(), dims.size(), &ndim), ACC_OK);
  acc_tensor_free(t);
  dims.resize(ndim);
  return dims;
}

// The modules that hold adapters, in the model's order.
std::vector<std::string> adapted(const acc_model* m) {
  std::vector<std::string> modules;
  const std::string suffix = ".lora_A.weight";
  for (const auto& name : acc_test::parameter_names(m))
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      modules.push_back(name.substr(0, name.size() - suffix.size()));
  return modules;
}

acc_status add_lora_with(acc_model* m, const char* targets, const std::vector<std::pair<const char*, const char*>>& set,
                         size_t* count) {
  acc_options* o = lora_options(2, 4);
  for (const auto& [key, value] : set) EXPECT_EQ(acc_options_set(o, key, value), ACC_OK) << key;
  const acc_status st = acc_model_add_lora(m, targets, o, count);
  acc_options_free(o);
  return st;
}

// The scripted model with blocks one level down: body.blocks.{0,1,2}.fc and a head.
acc_model* wrapped() {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/wrapped.pt").c_str(), &m), ACC_OK)
      << acc_last_error_message();
  return m;
}

std::vector<float> wrapped_outputs(acc_model* m) {
  return outputs_on(m, acc_test::longs({1, 4, 7, 2, 0, 3, 5, 6}, {2, 4}));
}

// Gives every adapter's B values, so that the adapters change the outputs.
void perturb_adapters(acc_model* m) {
  acc_tensor_list* values = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&values), ACC_OK);
  for (const auto& module : adapted(m)) {
    const auto dims = shape_of(m, module + ".lora_B.weight");
    std::vector<float> v(static_cast<size_t>(dims[0] * dims[1]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
    acc_tensor* b = acc_test::floats(v, dims);
    EXPECT_EQ(acc_tensor_list_append(values, (module + ".lora_B.weight").c_str(), b), ACC_OK);
    acc_tensor_free(b);
  }
  EXPECT_EQ(acc_model_load_state_dict(m, values, /*strict=*/0), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(values);
}

}  // namespace

TEST(LoraPatterns, RankAndAlphaPatternsGiveModulesTheirOwn) {
  acc_model* m = net();
  size_t count = 0;
  // PEFT's get_pattern_key: the first key, in the object's order, that matches the module's name or
  // its end after a dot. "1.linear1" meets "linear1" first; "1.self_attn.out_proj" only "1\..*";
  // "0" no rank key (the default r 2) but alpha_pattern's "0"; "ocks" would not match "blocks".
  ACC_ASSERT_OK(add_lora_with(
      m, kTargets,
      {{"rank_pattern", R"({"linear1": 3, "1\\..*": 5})"}, {"alpha_pattern", R"({"out_proj": 10, "0": 1})"}}, &count));
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(shape_of(m, "0.lora_A.weight"), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(shape_of(m, "1.linear1.lora_A.weight"), (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(shape_of(m, "1.linear1.lora_B.weight"), (std::vector<int64_t>{16, 3}));
  EXPECT_EQ(shape_of(m, "1.self_attn.out_proj.lora_A.weight"), (std::vector<int64_t>{5, 8}));
  train(m, 3);
  const auto trained = outputs(m);

  // Each module's (B A) * its lora_alpha / its r is what merging adds to its weight.
  const std::pair<std::string, double> scalings[] = {
      {"0", 1.0 / 2}, {"1.linear1", 4.0 / 3}, {"1.self_attn.out_proj", 10.0 / 5}};
  std::vector<std::vector<double>> expected;
  for (const auto& [module, scaling] : scalings) {
    const auto w = param(m, module + ".weight"), a = param(m, module + ".lora_A.weight"),
               b = param(m, module + ".lora_B.weight");
    const auto a_dims = shape_of(m, module + ".lora_A.weight");
    const int64_t r = a_dims[0], in = a_dims[1], out = static_cast<int64_t>(w.size()) / in;
    std::vector<double> merged(w.begin(), w.end());
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t k = 0; k < r; ++k) merged[o * in + i] += scaling * b[o * r + k] * a[k * in + i];
    expected.push_back(merged);
  }

  const std::string dir = acc_test::temp_path("lora_patterns");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  // Written in the configuration's order (PEFT sorts its keys, which can change which one wins).
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["rank_pattern"].dump(), R"({"linear1":3,"1\\..*":5})");
  EXPECT_EQ(config["alpha_pattern"].dump(), R"({"out_proj":10.0,"0":1.0})");
  EXPECT_EQ(config["r"], 2);

  ACC_ASSERT_OK(acc_model_merge_lora(m));
  for (size_t k = 0; k < std::size(scalings); ++k) {
    const auto w = param(m, scalings[k].first + ".weight");
    ASSERT_EQ(w.size(), expected[k].size());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], expected[k][i], 1e-5) << scalings[k].first << " " << i;
  }

  // Loaded back into the base model: the same adapters, the same outputs.
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs(fresh), trained);
  EXPECT_EQ(shape_of(fresh, "1.self_attn.out_proj.lora_A.weight"), (std::vector<int64_t>{5, 8}));
  // Into a model whose adapters are scaled otherwise: refused, naming the first module that differs.
  acc_model* plain = net();
  add_lora(plain);
  ACC_EXPECT_ERROR(
      acc_model_load_lora(plain, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
      "adapts '0' with r 2, lora_alpha 1: scaling 0.5; the model's adapter has r 2, lora_alpha 4: scaling 2");
  acc_model_free(plain);

  // The file's order decides: with "1\..*" first, 1.linear1's rank is 5, which its tensors are not.
  json reordered = config;
  reordered["rank_pattern"] = json::parse(R"({"1\\..*": 5, "linear1": 3})");
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << reordered.dump(2);
  acc_model* other = net();
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_IO,
                   "'base_model.model.1.linear1.lora_A.weight' has shape [3, 8], but the adapter's rank r = 5");
  EXPECT_TRUE(adapted(other).empty());
  acc_model_free(other);

  fs::remove_all(dir);
  acc_model_free(fresh);
  acc_model_free(m);
}

TEST(LoraPatterns, BadPatternsAreRefusedBeforeAnythingChanges) {
  const std::pair<std::vector<std::pair<const char*, const char*>>, const char*> cases[] = {
      {{{"rank_pattern", R"({"linear1": 0})"}}, "rank_pattern's 'linear1' must be a rank from 1 to 1048576, got 0"},
      {{{"rank_pattern", R"({"linear1": 2.5})"}}, "rank_pattern's 'linear1' must be an integer rank"},
      {{{"rank_pattern", "[4]"}}, "rank_pattern must be a JSON object"},
      {{{"rank_pattern", R"({"linear1": 4)"}}, "rank_pattern is not valid JSON"},
      {{{"rank_pattern", R"({"(linear1": 4})"}}, "is invalid"},
      {{{"rank_pattern", R"({"(a+)+b": 4})"}}, "repeats a group"},
      {{{"alpha_pattern", R"({"linear1": "x"})"}}, "alpha_pattern's 'linear1' must be a number"},
      {{{"alpha_pattern", R"({"linear1": 1e39})"}}, "alpha_pattern's 'linear1' must be an alpha in [-3.40282e+38, "},
      {{{"layers_to_transform", "0,x"}}, "layers_to_transform '0,x' must be layer numbers separated by commas"},
      {{{"layers_pattern", "layers"}}, "layers_pattern is set without layers_to_transform"},
      {{{"layers_to_transform", "1"}, {"layers_pattern", "(h"}}, "layers_pattern regular expression"},
  };
  for (const auto& [settings, needle] : cases) {
    acc_model* m = net();
    const auto names = acc_test::parameter_names(m);
    size_t count = 0;
    ACC_EXPECT_ERROR(add_lora_with(m, kTargets, settings, &count), ACC_ERR_INVALID_ARGUMENT, needle);
    EXPECT_EQ(acc_test::parameter_names(m), names) << needle;
    acc_model_free(m);
  }
  // As PEFT's LoraConfig: the layer settings need target_modules as names.
  acc_model* m = net();
  size_t count = 0;
  ACC_EXPECT_ERROR(add_lora_with(m, "re:.*linear1", {{"layers_to_transform", "0"}}, &count), ACC_ERR_INVALID_ARGUMENT,
                   "layers_to_transform and layers_pattern need target_modules as names");
  acc_model_free(m);
}

TEST(LoraPatterns, LayersToTransformAdaptOnlyTheLayersListed) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  struct Case {
    const char* targets;
    std::vector<std::pair<const char*, const char*>> settings;
    std::vector<std::string> modules;
  };
  // PEFT's rule: the number after the first component that follows a dot ("body.blocks.2.fc": 2),
  // or after a component layers_pattern matches; a module named exactly is adapted in any layer.
  const Case cases[] = {
      {"fc", {{"layers_to_transform", "0,2"}}, {"body.blocks.0.fc", "body.blocks.2.fc"}},
      {"fc", {{"layers_to_transform", "1"}, {"layers_pattern", "blocks"}}, {"body.blocks.1.fc"}},
      {"fc",
       {{"layers_to_transform", "0, 2"}, {"layers_pattern", "x,bl.*s"}},
       {"body.blocks.0.fc", "body.blocks.2.fc"}},
      {"fc,head", {{"layers_to_transform", "1"}}, {"body.blocks.1.fc", "head"}},
      {"body.blocks.0.fc,fc", {{"layers_to_transform", "2"}}, {"body.blocks.0.fc", "body.blocks.2.fc"}},
      {"blocks.0.fc,fc", {{"layers_to_transform", "2"}}, {"body.blocks.2.fc"}},
  };
  for (const auto& c : cases) {
    acc_model* m = wrapped();
    size_t count = 0;
    ACC_ASSERT_OK(add_lora_with(m, c.targets, c.settings, &count));
    EXPECT_EQ(adapted(m), c.modules) << c.targets;
    EXPECT_EQ(count, c.modules.size());
    acc_model_free(m);
  }
  // "body" is the first component, with no dot before it: PEFT finds no layer there.
  acc_model* m = wrapped();
  size_t count = 0;
  ACC_EXPECT_ERROR(add_lora_with(m, "fc", {{"layers_to_transform", "0"}, {"layers_pattern", "body"}}, &count),
                   ACC_ERR_INVALID_ARGUMENT, "matches no linear layer");
  EXPECT_TRUE(adapted(m).empty());

  // Saved as PEFT writes them, loaded back into the base model with the same layers.
  ACC_ASSERT_OK(add_lora_with(m, "fc", {{"layers_to_transform", "0,2"}, {"layers_pattern", "blocks"}}, &count));
  perturb_adapters(m);
  const auto before = wrapped_outputs(m);
  const std::string dir = acc_test::temp_path("lora_layers");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["layers_to_transform"].dump(), "[0,2]");
  EXPECT_EQ(config["layers_pattern"].dump(), R"(["blocks"])");
  acc_model* fresh = wrapped();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(adapted(fresh), (std::vector<std::string>{"body.blocks.0.fc", "body.blocks.2.fc"}));
  EXPECT_EQ(wrapped_outputs(fresh), before);
  acc_model_free(fresh);

  // PEFT's other forms: one number, one expression. The file's layer 1 is not where its tensors are.
  config["layers_to_transform"] = 1;
  config["layers_pattern"] = "blocks";
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << config.dump(2);
  acc_model* other = wrapped();
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "holds an adapter for 'body.blocks.0.fc', which is not a linear layer of this model that its "
                   "target_modules selects");
  EXPECT_TRUE(adapted(other).empty());
  // A layers_pattern without layers_to_transform, as PEFT's LoraConfig, is refused.
  config["layers_to_transform"] = nullptr;
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << config.dump(2);
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_IO,
                   "layers_pattern is set without layers_to_transform");
  acc_model_free(other);
  fs::remove_all(dir);
  acc_model_free(m);
}

// PEFT's target_modules "all-linear" (any case): every nn.Linear (an attention's out_proj too, an
// NonDynamicallyQuantizableLinear) and transformers' Conv1D, but a transformers model's output layer
// (its get_output_embeddings); written to adapter_config.json as the names it stood for, as PEFT
// writes them, and read from a file that says "all-linear" too.
TEST(LoraPatterns, AllLinearAdaptsEveryLinearLayerButTheOutputLayerAsPeft) {
  acc_model* spec = lora_test::net();
  EXPECT_EQ(add_lora(spec, "ALL-linear"), 5u);
  EXPECT_EQ(adapted(spec), (std::vector<std::string>{"0", "1.self_attn.out_proj", "1.linear1", "1.linear2", "2"}));
  const std::string dir = acc_test::temp_path("lora_all_linear");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(spec, dir.c_str()));
  json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["target_modules"], json({"0", "1.self_attn.out_proj", "1.linear1", "1.linear2", "2"}));
  config["target_modules"] = "all-linear";  // a configuration written by hand
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << config.dump();
  acc_model* loaded = lora_test::net();
  ACC_ASSERT_OK(acc_model_load_lora(loaded, dir.c_str()));
  EXPECT_EQ(outputs(loaded), outputs(spec));
  acc_model_free(loaded);
  fs::remove_all(dir);
  acc_model_free(spec);
  {  // exclude_modules applies after the expansion, as in PEFT
    acc_model* m = lora_test::net();
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_options_set(o, "exclude_modules", "linear1,linear2"));
    ACC_ASSERT_OK(acc_model_add_lora(m, "all-linear", o, nullptr));
    acc_options_free(o);
    EXPECT_EQ(adapted(m), (std::vector<std::string>{"0", "1.self_attn.out_proj", "2"}));
    acc_model_free(m);
  }
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* plain = twin_test::script_model("lora_model.pt");  // not a transformers model: its head too
  EXPECT_EQ(add_lora(plain, "all-linear"), 3u);
  EXPECT_EQ(adapted(plain), (std::vector<std::string>{"fc1", "block.0", "head"}));
  acc_model_free(plain);
  acc_model* lm = twin_test::script_model("transformers_lm.pt");  // a transformers causal LM: lm_head left out
  EXPECT_EQ(add_lora(lm, "all-linear"), 2u);
  EXPECT_EQ(adapted(lm), (std::vector<std::string>{"c_fc", "fc"}));
  acc_model_free(lm);
}

// A layer that several attributes hold (self.b = self.a, and in c) is one module under its first
// path, as Python's named_modules() lists it (found by a hunt: each path was a target of its own, so
// all-linear put three adapters on one layer, in files PEFT could not place).
TEST(LoraPatterns, ALayerSeveralAttributesHoldIsOneTargetUnderItsFirstPath) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = twin_test::script_model("shared_layer.pt");
  EXPECT_EQ(add_lora(m, "all-linear"), 2u);
  EXPECT_EQ(adapted(m), (std::vector<std::string>{"a", "c.0"}));
  acc_model_free(m);
  for (const char* alias : {"b", "c.1"}) {
    SCOPED_TRACE(alias);
    m = twin_test::script_model("shared_layer.pt");
    size_t count = 0;
    ACC_EXPECT_ERROR(add_lora_with(m, alias, {}, &count), ACC_ERR_INVALID_ARGUMENT, "matches no linear layer");
    EXPECT_TRUE(adapted(m).empty());
    acc_model_free(m);
  }
}

TEST(LoraPatterns, AllLinearOnAModelWithoutLinearLayersIsRefused) {
  acc_model* convs = nullptr;  // convolutions are not linear layers
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"conv2d","in_channels":1,"out_channels":2,"kernel_size":3}])", &convs));
  ACC_EXPECT_ERROR(acc_model_add_lora(convs, "all-linear", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "'all-linear' matches no linear layer");
  EXPECT_EQ(adapted(convs), std::vector<std::string>{});
  acc_model_free(convs);
}
