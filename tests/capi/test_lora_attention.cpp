// LoRA on nn.MultiheadAttention as PEFT's lora.MultiheadAttention adapts it: targeting the attention
// adapts its in_proj (one adapter for q, k and v: lora_A r x E, lora_B 3E x r) and its out_proj, both
// with the attention's rank, and the attention computes with the adapted weights its forward reads.
// Checked against PEFT's layer restated in export_lora_cases.py (its "attention" case): PEFT's draws
// (its out_proj's adapters drawn twice), outputs in evaluation and in training (no dropout on the
// attention's adapters, as PEFT; the head's LoRA beside keeps its own), gradients, PEFT's files and
// names, merged weights; what PEFT's layer does not take is refused. On a TorchScript model bit for
// bit, and on its layer-spec twin to rounding.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"
#include "twin_support.h"

using json = nlohmann::json;
using namespace twin_test;
using acc_test::float_values;
using lora_test::lora_case;
using lora_test::lora_options;
using lora_test::outputs_on;
namespace fs = std::filesystem;

namespace {

const Twin kScript = script_only("attention_model.pt");

// AttnNet as a layer spec: "0" proj, "2" attn, "3" head.
constexpr const char* kSpec = R"([{"type":"linear","in_features":6,"out_features":8},{"type":"tanh"},
  {"type":"multihead_attention","embed_dim":8,"num_heads":2,"dropout":0.1,"batch_first":true},
  {"type":"linear","in_features":8,"out_features":3}])";

std::vector<Twin> attention_twins(const json& c) { return twins("attention_model.pt", kSpec, c["spec_names"]); }

// Exactly on the TorchScript model, which computes with the adapted weights as PEFT's layer does; to
// rounding on the layer spec, whose attention adds the adapters' branch to its projections instead.
void expect_values(const std::vector<float>& got, const json& expected, const Twin& twin, const std::string& what) {
  const std::vector<float> want = float_values(expected);
  if (std::string(twin.form) == "TorchScript") {
    EXPECT_EQ(got, want) << what;
    return;
  }
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_LT(acc_test::max_difference(got, want), 2e-5f) << what;
}

// Each parameter's gradient as expect_values takes it.
void expect_grads_of(acc_model* m, const json& grads, const Twin& twin) {
  for (const auto& item : grads.items()) {
    acc_tensor *p = nullptr, *g = nullptr;
    ASSERT_EQ(acc_model_parameter(m, twin.name(item.key()).c_str(), &p), ACC_OK) << item.key();
    ASSERT_EQ(acc_tensor_grad(p, &g), ACC_OK) << item.key();
    expect_values(acc_test::to_floats(g), item.value(), twin, item.key());
    acc_tensor_free(p);
    acc_tensor_free(g);
  }
}

acc_tensor* input(const json& c) { return acc_test::from_json(c["input"]); }

std::vector<float> eval_output(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, input(c));
}

// `chosen` without the entries of modules `but` names.
json without(const json& chosen, const std::string& but) {
  json out = json::object();
  for (const auto& item : chosen.items())
    if (item.key().rfind(but + ".", 0) != 0) out[item.key()] = item.value();
  return out;
}

std::vector<std::string> saved_names(const std::string& dir) {
  acc_tensor_list* saved = nullptr;
  EXPECT_EQ(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved), ACC_OK);
  std::vector<std::string> names;
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(saved, &n), ACC_OK);
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    EXPECT_EQ(acc_tensor_list_name(saved, i, &name), ACC_OK);
    names.emplace_back(name);
  }
  acc_tensor_list_free(saved);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(LoraAttention, AdaptsInProjAndOutProjAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("attention");
  for (const Twin& twin : attention_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
    size_t count = 0;
    acc_options* o = lora_options(c["r"], c["lora_alpha"]);
    ACC_ASSERT_OK(acc_options_set_double(o, "lora_dropout", c["lora_dropout"]));
    ACC_ASSERT_OK(acc_model_add_lora(m, targets(json{"attn", "head"}, twin).c_str(), o, &count));
    acc_options_free(o);
    EXPECT_EQ(count, 3u) << "the in_proj, the out_proj and the head";
    // PEFT's draws: the out_proj's adapters, the in_proj's, the out_proj's again, the head's.
    expect_params(m, c["initial"], twin);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    // PEFT's order: the attention's adapters after all its base layer holds, the out_proj's among them.
    const auto names = acc_test::parameter_names(m);
    ASSERT_GE(names.size(), 10u);
    std::vector<std::string> expected;
    for (const char* name :
         {"attn.in_proj_weight", "attn.in_proj_bias", "attn.out_proj.weight", "attn.out_proj.bias",
          "attn.out_proj.lora_A.weight", "attn.out_proj.lora_B.weight", "attn.lora_A.weight", "attn.lora_B.weight"})
      expected.push_back(twin.name(name));
    EXPECT_EQ(std::vector<std::string>(names.begin() + 2, names.begin() + 10), expected);
    choose(m, c["chosen"], twin);
    {  // training: the head's dropout draws, none for the attention's adapters
      acc_tensor *x = input(c), *y = nullptr, *sum = nullptr;
      ACC_ASSERT_OK(acc_model_set_training(m, 1));
      ACC_ASSERT_OK(acc_set_seed(c["train_seed"].get<uint64_t>()));
      ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &y));
      expect_values(acc_test::to_floats(y), c["train_output"], twin, "the output in training");
      ACC_ASSERT_OK(acc_tensor_sum(y, &sum));
      ACC_ASSERT_OK(acc_tensor_backward(sum));
      expect_grads_of(m, c["grads"], twin);
      for (acc_tensor* t : {x, y, sum}) acc_tensor_free(t);
      ACC_ASSERT_OK(acc_model_zero_grad(m));
    }

    // PEFT's files: the out_proj's adapter under "<attention>.base_layer.out_proj", read back.
    const std::string dir = acc_test::temp_path("lora_attention");
    acc_model* loaded = reloaded(m, dir, twin);
    std::vector<std::string> files;
    for (const char* name : {"attn.base_layer.out_proj.lora_A.weight", "attn.base_layer.out_proj.lora_B.weight",
                             "attn.lora_A.weight", "attn.lora_B.weight", "head.lora_A.weight", "head.lora_B.weight"})
      files.push_back("base_model.model." + twin.name(name));
    std::sort(files.begin(), files.end());
    EXPECT_EQ(saved_names(dir), files);
    EXPECT_EQ(saved_shape(dir, twin.name("attn.lora_B.weight")), (std::vector<int64_t>{24, 2}));
    for (const auto& name : acc_test::parameter_names(m)) {
      acc_tensor *a = nullptr, *b = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(m, name.c_str(), &a));
      ACC_ASSERT_OK(acc_model_parameter(loaded, name.c_str(), &b));
      EXPECT_EQ(acc_test::to_floats(a), acc_test::to_floats(b)) << name;
      acc_tensor_free(a);
      acc_tensor_free(b);
    }
    acc_model_free(loaded);
    {  // PEFT's files of an EVA start (the adapters only zero B first): the attention takes them too
      const std::string config_path = dir + "/adapter_config.json";
      json config = json::parse(acc_test::read_file(config_path));
      const json saved_config = config;
      config["init_lora_weights"] = "eva";
      std::ofstream(config_path, std::ios::trunc) << config.dump();
      acc_model* eva = twin.make();
      ACC_ASSERT_OK(acc_model_load_lora(eva, dir.c_str()));
      EXPECT_EQ(eval_output(eva, c), eval_output(m, c));
      acc_model_free(eva);
      std::ofstream(config_path, std::ios::trunc) << saved_config.dump();
    }
    {  // the out_proj's adapter named as a layer of its own: refused, nothing added
      acc_tensor_list* saved = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
      acc_tensor_list* renamed = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_create(&renamed));
      size_t n = 0;
      ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
      const std::string from = twin.name("attn.base_layer.out_proj"), to = twin.name("attn.out_proj");
      for (size_t i = 0; i < n; ++i) {
        const char* name = nullptr;
        acc_tensor* t = nullptr;
        ACC_ASSERT_OK(acc_tensor_list_name(saved, i, &name));
        ACC_ASSERT_OK(acc_tensor_list_get(saved, i, &t));
        std::string new_name = name;
        if (const size_t at = new_name.find(from); at != std::string::npos) new_name.replace(at, from.size(), to);
        ACC_ASSERT_OK(acc_tensor_list_append(renamed, new_name.c_str(), t));
        acc_tensor_free(t);
      }
      ACC_ASSERT_OK(acc_tensor_list_save_safetensors(renamed, (dir + "/adapter_model.safetensors").c_str()));
      acc_tensor_list_free(saved);
      acc_tensor_list_free(renamed);
      expect_load_refused(twin, dir, ACC_ERR_INVALID_ARGUMENT, "with the attention '" + twin.name("attn") + "'");
    }
    fs::remove_all(dir);

    // Merged: W + (B A) * scaling into in_proj_weight, the out_proj's and the head's weights; the
    // TorchScript file written computes as the adapted model.
    const std::vector<float> adapted = eval_output(m, c);
    const std::string file = acc_test::temp_path("lora_attention_merged.pt");
    ACC_ASSERT_OK(acc_model_save_torchscript(m, file.c_str()));
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    expect_params(m, c["merged"], twin);
    EXPECT_LT(acc_test::max_difference(eval_output(m, c), adapted), 1e-5f);
    acc_model* written = nullptr;
    ACC_ASSERT_OK(acc_model_load_torchscript(file.c_str(), &written));
    EXPECT_LT(acc_test::max_difference(eval_output(written, c), adapted), 1e-5f);
    acc_model_free(written);
    fs::remove(file);
    acc_model_free(m);
  }
}

// The attention alone: its output in evaluation is the scripted model's with the adapted weights.
TEST(LoraAttention, ComputesWithTheAdaptedWeights) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("attention");
  for (const Twin& twin : attention_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));  // the attention's draws come first
    ACC_ASSERT_OK(add_case_lora(m, c, twin.name("attn").c_str()));
    choose(m, without(c["chosen"], "head"), twin);
    expect_values(eval_output(m, c), c["eval_output"], twin, "the output in evaluation");
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    acc_model* base = twin.make();
    // Frozen as the adapted model's base is (libtorch 2.x's matmul folds by requires_grad).
    ACC_ASSERT_OK(acc_model_set_requires_grad(base, "*", 0, nullptr));
    EXPECT_EQ(eval_output(m, c), eval_output(base, c)) << "disabled: the base model";
    acc_model_free(base);
    acc_model_free(m);
  }
}

TEST(LoraAttention, TakesTheAttentionsRankAndRefusesWhatPeftsLayerDoesNot) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("attention");
  {  // rank_pattern for the attention gives its out_proj that rank too (PEFT passes it on)
    acc_model* m = kScript.make();
    ACC_ASSERT_OK(add_case_lora(m, c, "attn", {{"rank_pattern", R"({"attn": 3})"}}));
    for (const char* name : {"attn.lora_A.weight", "attn.out_proj.lora_A.weight"}) {
      acc_tensor* t = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(m, name, &t));
      EXPECT_EQ(acc_test::shape(t), (std::vector<int64_t>{3, 8})) << name;
      acc_tensor_free(t);
    }
    acc_model_free(m);
  }
  {  // the out_proj targeted by its own name is a layer of its own (PEFT's file names it so)
    acc_model* m = kScript.make();
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_model_add_lora(m, "out_proj", o, nullptr));
    acc_options_free(o);
    const std::string dir = acc_test::temp_path("lora_attention_out_proj");
    acc_model* loaded = reloaded(m, dir, kScript);
    EXPECT_EQ(saved_names(dir), (std::vector<std::string>{"base_model.model.attn.out_proj.lora_A.weight",
                                                          "base_model.model.attn.out_proj.lora_B.weight"}));
    acc_model_free(loaded);
    fs::remove_all(dir);
    acc_model_free(m);
  }
  struct Case {
    const char* targets;
    std::pair<const char*, const char*> setting;
    acc_status status;
    const char* message;
  };
  const Case cases[] = {
      {"attn,out_proj", {"r", "2"}, ACC_ERR_INVALID_ARGUMENT, "matches both the attention 'attn' and its out_proj"},
      {"attn", {"use_dora", "true"}, ACC_ERR_INVALID_ARGUMENT, "does not take DoRA"},
      {"attn", {"init_lora_weights", "pissa"}, ACC_ERR_UNSUPPORTED, "init_lora_weights pissa on the attention"},
      {"attn", {"init_lora_weights", "mica"}, ACC_ERR_UNSUPPORTED, "init_lora_weights mica on the attention"},
      {"attn", {"lora_bias", "true"}, ACC_ERR_UNSUPPORTED, "lora_bias on the attention"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.targets) + " " + k.setting.first);
    acc_model* m = kScript.make();
    const auto names = acc_test::parameter_names(m);
    ACC_EXPECT_ERROR(add_case_lora(m, c, k.targets, {k.setting}), k.status, k.message);
    EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
    acc_model_free(m);
  }
}

// A spec's cross-attention (query from one input, keys and values from another) and a transformer
// decoder layer's: the adapted projections compute as the merged weights do, to rounding.
TEST(LoraAttention, SpecCrossAttentionComputesAsItsMergedWeights) {
  struct Case {
    const char* spec;
    const char* targets;
  };
  const Case cases[] = {
      {R"([{"type":"multihead_attention","embed_dim":4,"num_heads":2,"key_value":{"input":1}}])", "0"},
      {R"([{"type":"transformer_decoder_layer","d_model":4,"nhead":2,"dim_feedforward":8,"dropout":0.0,
            "memory":{"input":1}}])",
       "self_attn,multihead_attn"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.targets);
    acc_model* m = acc_test::spec_model(k.spec);
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "false"));  // B not zero: the adapters act
    size_t count = 0;
    ACC_ASSERT_OK(acc_model_add_lora(m, k.targets, o, &count));
    acc_options_free(o);
    EXPECT_EQ(count, std::string(k.targets) == "0" ? 2u : 4u) << "each attention's in_proj and out_proj";
    auto outputs = [&] {
      acc_tensor* x = acc_test::floats({0.5f, -1, 0.25f, 2, 1, 0, -0.5f, 0.75f, 0.3f, 0.1f, -0.2f, 0.9f}, {3, 1, 4});
      acc_tensor* memory = acc_test::floats({1, 2, -1, 0.5f, -0.3f, 0.2f, 0.7f, -1.5f}, {2, 1, 4});
      acc_tensor* y = acc_test::forward(m, {x, memory}, ACC_FORWARD_NO_GRAD);
      const std::vector<float> v = acc_test::to_floats(y);
      for (acc_tensor* t : {x, memory, y}) acc_tensor_free(t);
      return v;
    };
    ACC_ASSERT_OK(acc_model_set_training(m, 0));
    const std::vector<float> adapted = outputs();
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    const std::vector<float> base = outputs();
    EXPECT_GT(acc_test::max_difference(adapted, base), 1e-4f) << "the adapters act";
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    EXPECT_LT(acc_test::max_difference(outputs(), adapted), 1e-5f);
    acc_model_free(m);
  }
}

// The out_proj's bias under PEFT's name, "<attention>.base_layer.out_proj.base_layer.bias" (its
// lora.MultiheadAttention wraps the out_proj inside its base layer), written and read (found by a
// hunt: written as "<attention>.out_proj.base_layer.bias", and PEFT's name refused).
TEST(LoraAttention, TheOutProjsBiasUnderPeftsName) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = kScript.make();
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "bias", "lora_only"));
  ACC_ASSERT_OK(acc_model_add_lora(m, "attn", o, nullptr));
  acc_options_free(o);
  const std::string dir = acc_test::temp_path("lora_attention_bias");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  acc_tensor_list* saved = lora_test::adapter_file_tensors(dir);
  acc_tensor* bias = nullptr;
  EXPECT_EQ(acc_tensor_list_find(saved, "base_model.model.attn.base_layer.out_proj.base_layer.bias", &bias), ACC_OK);
  acc_tensor_free(bias);
  acc_tensor_list_free(saved);
  acc_model* fresh = kScript.make();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  acc_model_free(fresh);
  fs::remove_all(dir);
  acc_model_free(m);
}
