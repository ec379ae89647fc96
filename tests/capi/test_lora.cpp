// LoRA adapters: they start as the base model, only they train, PEFT's initialisation draws and
// arithmetic are reproduced on a scripted PyTorch model, merging gives the adapted model's outputs,
// PEFT's files round-trip, and whatever cannot be honoured is refused before anything changes.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::floats;
using acc_test::from_json;
using acc_test::lora_options;
using acc_test::max_difference;
using acc_test::to_floats;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using namespace lora_test;

}  // namespace

TEST(Lora, AdaptersStartAsTheBaseModelAndFreezeEverythingElse) {
  acc_model* m = net();
  const auto before = outputs(m);
  size_t base_tensors = 0;
  int64_t base_elements = 0;
  ACC_ASSERT_OK(acc_model_parameter_count(m, &base_tensors, &base_elements));
  EXPECT_EQ(add_lora(m), 3u);
  // Adapter parameters are named after the module they adapt and listed right after its own
  // parameters, where PEFT's layer lists them (base_layer's, then lora_A, lora_B): the order
  // optimizers and clipping's total norm follow.
  const auto n = acc_test::parameter_names(m);
  for (const std::string module : {"0", "1.self_attn.out_proj", "1.linear1"}) {
    const auto bias = std::find(n.begin(), n.end(), module + ".bias");
    ASSERT_TRUE(bias != n.end() && bias + 2 < n.end()) << module;
    EXPECT_EQ(*(bias + 1), module + ".lora_A.weight");
    EXPECT_EQ(*(bias + 2), module + ".lora_B.weight");
  }
  EXPECT_EQ(n.back(), "2.bias") << "the last layer has no adapter";
  EXPECT_EQ(param(m, "0.lora_A.weight").size(), 2u * 6u);
  EXPECT_EQ(param(m, "1.linear1.lora_B.weight").size(), 16u * 2u);
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 3u);
  size_t tensors = 0;
  int64_t elements = 0;
  ACC_ASSERT_OK(acc_model_parameter_count(m, &tensors, &elements));
  EXPECT_EQ(tensors, base_tensors + 6);
  EXPECT_EQ(elements, base_elements + 2 * 6 + 8 * 2 + 2 * 8 + 8 * 2 + 2 * 8 + 16 * 2);
  // B starts at zero: W + 0 is W, bit for bit. From 2.0 torch's matmul folds attention's
  // sequence-first view of the input into one product or not by whether the weight requires grad,
  // so freezing the base moves the last bits (in PyTorch's own nn.MultiheadAttention too).
  const json info = json::parse(acc_build_info());
  if (std::stoi(info.at("libtorch").get<std::string>()) < 2)
    EXPECT_EQ(outputs(m), before);
  else
    EXPECT_LE(max_difference(outputs(m), before), 1e-6f);
  acc_model_free(m);
}

TEST(Lora, OnlyTheAdaptersChangeWhenTraining) {
  acc_model* m = net();
  add_lora(m);
  const auto names_before = acc_test::parameter_names(m);
  std::vector<std::vector<float>> base;
  for (const auto& name : names_before)
    if (name.find("lora_") == std::string::npos) base.push_back(param(m, name));
  const auto b_before = param(m, "1.linear1.lora_B.weight");
  const auto losses = train(m, 30);
  EXPECT_LT(losses.back(), 0.7 * losses.front());
  size_t i = 0;
  for (const auto& name : names_before)
    if (name.find("lora_") == std::string::npos) EXPECT_EQ(param(m, name), base[i++]) << name;
  EXPECT_NE(param(m, "1.linear1.lora_B.weight"), b_before);
  acc_model_free(m);
}

TEST(Lora, ReproducesPeftOnAScriptedPyTorchModel) {
  const std::string dir = acc_test::data_dir();
  if (dir.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_cases();
  ASSERT_FALSE(c.empty());
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((dir + "/lora_model.pt").c_str(), &m));
  ACC_ASSERT_OK(acc_model_set_training(m, 0));

  // PEFT's draws from the global generator, in its module order, and the stream after them.
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  const std::string targets = c["targets"];
  EXPECT_EQ(add_lora(m, targets.c_str(), c["r"], c["lora_alpha"]), c["modules"].size());
  for (const auto& module : c["modules"]) {
    const std::string name = module;
    EXPECT_EQ(param(m, name + ".lora_A.weight"), c["initial_a"][name]["values"].get<std::vector<float>>()) << name;
  }
  const int64_t three = 3;
  acc_tensor* draw = nullptr;
  ACC_ASSERT_OK(acc_tensor_rand(&three, 1, &draw));
  EXPECT_EQ(to_floats(draw), c["next_draw"]["values"].get<std::vector<float>>());
  acc_tensor_free(draw);

  // PEFT's output base(x) + B(A(x)) * scaling, with trained-looking B: the same operations, the
  // same bits (the adapters run on the layers' outputs, model/script_lora.h).
  acc_tensor_list* b = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&b));
  for (const auto& item : c["chosen_b"].items()) {
    acc_tensor* t = from_json(item.value());
    ACC_ASSERT_OK(acc_tensor_list_append(b, (item.key() + ".lora_B.weight").c_str(), t));
    acc_tensor_free(t);
  }
  ACC_ASSERT_OK(acc_model_load_state_dict(m, b, 0));
  acc_tensor_list_free(b);
  acc_tensor* x = from_json(c["input"]);
  const auto expected = c["output"]["values"].get<std::vector<float>>();
  acc_tensor* y = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  EXPECT_EQ(to_floats(y), expected);
  acc_tensor_free(y);

  // Merged: PEFT's W + (B A) * scaling, no adapters left, the same outputs.
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  size_t count = 1;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 0u);
  for (const auto& item : c["merged"].items())
    EXPECT_LT(max_difference(param(m, item.key()), item.value()["values"].get<std::vector<float>>()), 1e-6f)
        << item.key();
  for (const auto& name : acc_test::parameter_names(m)) EXPECT_EQ(name.find("lora_"), std::string::npos) << name;
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  EXPECT_LT(max_difference(to_floats(y), expected), 1e-5f);
  acc_tensor_free(y);
  acc_tensor_free(x);
  acc_model_free(m);
}

// The spec case's adapters (lora_cases.json): A as PEFT drew them, then its chosen B loaded; the
// case names layers by spec index, `module` names them in the model.
void expect_spec_case_adapters(acc_model* m, const json& c,
                               const std::function<std::string(const std::string&)>& module) {
  for (const auto& item : c["initial_a"].items())
    EXPECT_EQ(param(m, module(item.key()) + ".lora_A.weight"), item.value()["values"].get<std::vector<float>>())
        << item.key();
  acc_tensor_list* b = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&b), ACC_OK);
  for (const auto& item : c["chosen_b"].items()) {
    acc_tensor* t = from_json(item.value());
    EXPECT_EQ(acc_tensor_list_append(b, (module(item.key()) + ".lora_B.weight").c_str(), t), ACC_OK);
    acc_tensor_free(t);
  }
  EXPECT_EQ(acc_model_load_state_dict(m, b, 0), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(b);
}

TEST(Lora, SpecModelsComputeAsPeftWithDropout) {
  // Layer-spec linear layers add B(A(dropout(x))) * scaling to their output, as PEFT's LoRA layer:
  // the same dropout masks from the same seed, the same operations, the same numbers.
  const std::string dir = acc_test::data_dir();
  if (dir.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json cases = lora_cases();
  ASSERT_TRUE(cases.contains("spec"));
  const json& c = cases["spec"];
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(c["spec"].dump().c_str(), &m));
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&state));
  for (const auto& item : c["state"].items()) {
    acc_tensor* t = from_json(item.value());
    ACC_ASSERT_OK(acc_tensor_list_append(state, item.key().c_str(), t));
    acc_tensor_free(t);
  }
  ACC_ASSERT_OK(acc_model_load_state_dict(m, state, 1));
  acc_tensor_list_free(state);

  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  acc_options* o = lora_options(c["r"], c["lora_alpha"]);
  ACC_ASSERT_OK(acc_options_set_double(o, "lora_dropout", c["lora_dropout"]));
  const std::string targets = c["targets"];
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora(m, targets.c_str(), o, &count));
  acc_options_free(o);
  EXPECT_EQ(count, 3u);
  expect_spec_case_adapters(m, c, [](const std::string& layer) { return layer; });
  ACC_ASSERT_OK(acc_model_set_training(m, 1));
  acc_tensor* x = from_json(c["input"]);
  acc_tensor* y = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  EXPECT_EQ(to_floats(y), c["train_output"]["values"].get<std::vector<float>>());
  acc_tensor_free(y);
  acc_tensor_free(x);
  acc_model_free(m);
}

TEST(Lora, ScriptedModelsComputeAsPeftWithDropout) {
  // A TorchScript model's adapted layers get PEFT's B(A(dropout(x))) * scaling on their output from
  // the marked forward (model/script_lora.h): the spec case's network, weights, seed and adapters,
  // the same dropout masks, the same numbers.
  const std::string dir = acc_test::data_dir();
  if (dir.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json cases = lora_cases();
  ASSERT_TRUE(cases.contains("spec"));
  const json& c = cases["spec"];
  const std::map<std::string, std::string> module_of = {{"0", "fc1"}, {"2", "block.0"}, {"5", "head"}};
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((dir + "/lora_model.pt").c_str(), &m));
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  acc_options* o = lora_options(c["r"], c["lora_alpha"]);
  ACC_ASSERT_OK(acc_options_set_double(o, "lora_dropout", c["lora_dropout"]));
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora(m, "fc1,block.0,head", o, &count));
  acc_options_free(o);
  EXPECT_EQ(count, 3u);
  expect_spec_case_adapters(m, c, [&](const std::string& layer) { return module_of.at(layer); });
  ACC_ASSERT_OK(acc_model_set_training(m, 1));
  acc_tensor* x = from_json(c["input"]);
  acc_tensor* y = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  EXPECT_EQ(to_floats(y), c["train_output"]["values"].get<std::vector<float>>());
  acc_tensor_free(y);
  // The adapters train through the markers.
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_DEFAULT, &y));
  acc_tensor* loss = nullptr;
  ACC_ASSERT_OK(acc_tensor_sum(y, &loss));
  ACC_ASSERT_OK(acc_tensor_backward(loss));
  acc_tensor *b_head = nullptr, *grad = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "head.lora_B.weight", &b_head));
  ACC_ASSERT_OK(acc_tensor_grad(b_head, &grad));
  acc_tensor_free(b_head);
  ASSERT_NE(grad, nullptr);
  float largest = 0;
  for (float g : to_floats(grad)) largest = std::max(largest, std::fabs(g));
  EXPECT_GT(largest, 0.0f);
  for (acc_tensor* t : {y, loss, grad}) acc_tensor_free(t);
  // In evaluation the branch adds B A x * scaling (no dropout); merged, the weights compute the same.
  ACC_ASSERT_OK(acc_model_set_training(m, 0));
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  const std::vector<float> adapted = to_floats(y);
  acc_tensor_free(y);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  EXPECT_LT(max_difference(to_floats(y), adapted), 1e-5f);
  acc_tensor_free(y);
  acc_tensor_free(x);
  acc_model_free(m);

  // A layer the forward never calls as a module (its weight read directly) has no input to drop.
  ACC_ASSERT_OK(acc_model_load_torchscript((dir + "/direct_weight.pt").c_str(), &m));
  o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set_double(o, "lora_dropout", 0.1));
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "fc", o, nullptr), ACC_ERR_UNSUPPORTED, "never calls it as a module");
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 0u) << "a refused add changes nothing";
  acc_options_free(o);
  acc_model_free(m);
}

TEST(Lora, LayersTheForwardCallsKeepPeftsArithmeticBesideAWeightReadDirectly) {
  // direct_head.pt calls its blocks' fc layers and reads its head's weight itself. Adapting both,
  // the fc layers still add PEFT's branch to their outputs (only the head takes the adapted weight),
  // so with the head's B still zero the model computes exactly as with the fc layers alone adapted.
  const std::string dir = acc_test::data_dir();
  if (dir.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  auto adapted = [&](const char* targets, double dropout, acc_status expected) {
    acc_model* m = nullptr;
    EXPECT_EQ(acc_model_load_torchscript((dir + "/direct_head.pt").c_str(), &m), ACC_OK);
    EXPECT_EQ(acc_set_seed(3), ACC_OK);
    acc_options* o = lora_options(2, 4);
    EXPECT_EQ(acc_options_set_double(o, "lora_dropout", dropout), ACC_OK);
    size_t count = 0;
    EXPECT_EQ(acc_model_add_lora(m, targets, o, &count), expected) << acc_last_error_message();
    acc_options_free(o);
    if (expected != ACC_OK) {
      EXPECT_NE(std::string(acc_last_error_message()).find("'head'"), std::string::npos) << acc_last_error_message();
      acc_model_free(m);
      return std::vector<float>{};
    }
    EXPECT_EQ(count, std::string(targets) == "fc" ? 3u : 4u);
    acc_tensor_list* b = nullptr;
    EXPECT_EQ(acc_tensor_list_create(&b), ACC_OK);
    for (int i = 0; i < 3; ++i) {  // the fc layers' B, the same in both models (A drawn in module order)
      std::vector<float> values(6 * 2);
      for (size_t k = 0; k < values.size(); ++k) values[k] = std::sin(0.7f * static_cast<float>(k + 13 * i));
      acc_tensor* t = floats(values, {6, 2});
      const std::string name = "blocks." + std::to_string(i) + ".fc.lora_B.weight";
      EXPECT_EQ(acc_tensor_list_append(b, name.c_str(), t), ACC_OK);
      acc_tensor_free(t);
    }
    EXPECT_EQ(acc_model_load_state_dict(m, b, 0), ACC_OK) << acc_last_error_message();
    acc_tensor_list_free(b);
    const int64_t ids_data[] = {1, 5, 2, 7, 0, 3, 3, 6};
    acc_tensor* ids = nullptr;
    const int64_t dims[] = {2, 4};
    EXPECT_EQ(acc_tensor_from_host(ids_data, sizeof ids_data, dims, 2, ACC_DTYPE_INT64, &ids), ACC_OK);
    acc_tensor* y = nullptr;
    EXPECT_EQ(acc_model_forward1(m, ids, ACC_FORWARD_NO_GRAD, &y), ACC_OK) << acc_last_error_message();
    auto out = y ? to_floats(y) : std::vector<float>{};
    acc_tensor_free(y);
    acc_tensor_free(ids);
    acc_model_free(m);
    return out;
  };
  const auto fc_alone = adapted("fc", 0, ACC_OK);
  ASSERT_FALSE(fc_alone.empty());
  EXPECT_EQ(adapted("fc,head", 0, ACC_OK), fc_alone);
  adapted("fc,head", 0.1, ACC_ERR_UNSUPPORTED);  // dropout needs the head's input, which no call gives
}

TEST(Lora, WithoutDropoutAWeightTheForwardReadsItselfIsAdaptedThroughIt) {
  // No input to add PEFT's branch to: the layer computes with W + B A * scaling instead, which
  // is the merged model's weight, so its outputs are the merged model's.
  const std::string dir = acc_test::data_dir();
  if (dir.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((dir + "/direct_weight.pt").c_str(), &m));
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_model_add_lora(m, "fc", o, nullptr));
  acc_options_free(o);
  acc_tensor_list* b = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&b));
  acc_tensor* chosen = nullptr;
  const int64_t dims[] = {4, 2};
  ACC_ASSERT_OK(acc_tensor_rand(dims, 2, &chosen));
  ACC_ASSERT_OK(acc_tensor_list_append(b, "fc.lora_B.weight", chosen));
  acc_tensor_free(chosen);
  ACC_ASSERT_OK(acc_model_load_state_dict(m, b, 0));
  acc_tensor_list_free(b);
  const int64_t input_dims[] = {3, 4};
  acc_tensor *x = nullptr, *y = nullptr;
  ACC_ASSERT_OK(acc_tensor_rand(input_dims, 2, &x));
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  const std::vector<float> adapted = to_floats(y);
  acc_tensor_free(y);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  EXPECT_EQ(to_floats(y), adapted);
  acc_tensor_free(y);
  acc_tensor_free(x);
  acc_model_free(m);
}

TEST(Lora, PeftFilesRoundTrip) {
  acc_model* m = net();
  add_lora(m);
  train(m, 5);
  const auto trained = outputs(m);
  const std::string dir = acc_test::temp_path("lora_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));

  // PEFT's configuration and tensor names.
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["lora_alpha"], 4.0);
  EXPECT_EQ(config["target_modules"], (json{"0", "linear1", "out_proj"}));
  EXPECT_EQ(config["bias"], "none");
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  std::vector<std::string> saved_names;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_name(saved, i, &name));
    saved_names.emplace_back(name);
  }
  std::sort(saved_names.begin(), saved_names.end());
  EXPECT_EQ(saved_names, (std::vector<std::string>{
                             "base_model.model.0.lora_A.weight", "base_model.model.0.lora_B.weight",
                             "base_model.model.1.linear1.lora_A.weight", "base_model.model.1.linear1.lora_B.weight",
                             "base_model.model.1.self_attn.out_proj.lora_A.weight",
                             "base_model.model.1.self_attn.out_proj.lora_B.weight"}));
  acc_tensor_list_free(saved);

  // A fresh base model (same seed, same weights) with the adapters loaded computes the same.
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs(fresh), trained);
  // Loading again into a model that has them replaces the values; another rank is refused.
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  acc_model* other = net();
  add_lora(other, kTargets, 4, 4);
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "adapts '0' with r 2, lora_alpha 4: scaling 2; the model's adapter has r 4");
  acc_model_free(other);
  // Another scaling alone is named as such (both sides printed alike before).
  acc_model* rescaled = net();
  add_lora(rescaled, kTargets, 2, 8);
  ACC_EXPECT_ERROR(
      acc_model_load_lora(rescaled, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
      "adapts '0' with r 2, lora_alpha 4: scaling 2; the model's adapter has r 2, lora_alpha 8: scaling 4");
  acc_model_free(rescaled);
  // The same layers named otherwise (PEFT writes target_modules from a set, in any order, or as a
  // regular expression) take the file's adapters.
  for (const char* targets : {"out_proj,linear1,0", "re:(0|1\\.linear1|1\\.self_attn\\.out_proj)"}) {
    acc_model* renamed = net();
    add_lora(renamed, targets);
    ACC_ASSERT_OK(acc_model_load_lora(renamed, dir.c_str()));
    EXPECT_EQ(outputs(renamed), trained) << targets;
    acc_model_free(renamed);
  }
  // Other layers are still refused.
  acc_model* fewer = net();
  add_lora(fewer, "0,linear1");
  ACC_EXPECT_ERROR(acc_model_load_lora(fewer, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "holds adapters of other layers (0,linear1,out_proj) than the model's (0,linear1)");
  acc_model_free(fewer);
  acc_model_free(fresh);
  acc_model_free(m);
}

// PEFT's older saves (many adapters on the Hub) hold the weights as torch.save's pickle,
// adapter_model.bin, which PEFT reads where there is no safetensors file: such a folder was refused
// for lack of adapter_model.safetensors (a hunt's finding).
TEST(Lora, AFolderWithPeftsPickledWeightsLoads) {
  acc_model* m = net();
  add_lora(m);
  train(m, 5);
  const std::string dir = acc_test::fresh_dir("lora_adapter_pickled");
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const std::string command = std::string("'") + ACC_TEST_PYTHON + "' '" + ACC_PICKLE_ADAPTER + "' '" + dir + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  fs::remove(dir + "/adapter_model.safetensors");
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs(fresh), outputs(m));
  // A damaged pickle is refused naming it, the model as it was.
  std::ofstream(dir + "/adapter_model.bin", std::ios::trunc) << "not a zip";
  acc_model* other = net();
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_IO, "adapter_model.bin");
  acc_model_free(other);
  acc_model_free(fresh);
  acc_model_free(m);
}

// A head whose weight is the embedding's (GPT-2's, Llama's tie_word_embeddings) trains with
// adapters, and its adapters save, but merging them would change the embedding too (PEFT merges in
// place, warning so): merging and the merged save_model are refused, naming both, changing nothing.
TEST(Lora, AdaptersOnATiedHeadTrainAndSaveButDoNotMerge) {
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/tied.pt").c_str(), &m));
  size_t count = 0;
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set_string(o, "init_lora_weights", "gaussian"));
  ACC_ASSERT_OK(acc_model_add_lora(m, "head", o, &count));
  acc_options_free(o);
  EXPECT_EQ(count, 1u);
  const auto before = acc_test::parameter_names(m);
  acc_accelerator* acc = acc_test::make_accelerator({});
  const std::string dir = acc_test::temp_path("lora_tied_model");
  fs::remove_all(dir);
  ACC_EXPECT_ERROR(acc_save_model(acc, m, dir.c_str(), nullptr), ACC_ERR_UNSUPPORTED,
                   "LoRA adapts 'head', whose weight is tied to 'embed.weight'");
  EXPECT_FALSE(fs::exists(dir));
  ACC_EXPECT_ERROR(acc_model_merge_lora(m), ACC_ERR_UNSUPPORTED, "tied to 'embed.weight'");
  ACC_EXPECT_ERROR(acc_model_save_torchscript(m, acc_test::temp_path("lora_tied.pt").c_str()), ACC_ERR_UNSUPPORTED,
                   "tied to 'embed.weight'");
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(acc_test::parameter_names(m), before);
  const std::string adapter = acc_test::temp_path("lora_tied_adapter");
  fs::remove_all(adapter);
  ACC_ASSERT_OK(acc_model_save_lora(m, adapter.c_str()));
  acc_accelerator_free(acc);
  acc_model_free(m);
  // The head made first: the shared weight is listed under its own name, and still known as tied.
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/tied_head_first.pt").c_str(), &m));
  ACC_ASSERT_OK(acc_model_add_lora(m, "head", nullptr, &count));
  ACC_EXPECT_ERROR(acc_model_merge_lora(m), ACC_ERR_UNSUPPORTED,
                   "LoRA adapts 'head', whose weight is tied to 'embed.weight'");
  acc_model_free(m);
  // The refusal names the method that adapts the tied layer (it said LoRA for every one).
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/tied.pt").c_str(), &m));
  ACC_ASSERT_OK(acc_model_add_loha(m, "head", nullptr, &count));
  ACC_EXPECT_ERROR(acc_model_merge_lora(m), ACC_ERR_UNSUPPORTED, "LoHa adapts 'head', whose weight is tied to");
  acc_model_free(m);
}

// Accelerate's unwrap_model(...).merge_and_unload() to save the merged model (or PEFT's unload to get
// the base model back): the prepared model's engine holds the parameters of the time, so its next
// forward is refused (PyTorch's DDP fails at the next step) rather than train without the adapters.
TEST(Lora, AMergeOrUnloadThroughTheUnwrappedHandleEndsTraining) {
  for (const bool merge : {true, false}) {
    SCOPED_TRACE(merge ? "merge" : "unload");
    acc_model* m = net();
    const auto base = outputs(m);
    add_lora(m);
    train(m, 2);  // B away from zero
    acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
    acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
    ACC_ASSERT_OK(acc_prepare(acc, &m, &opt, nullptr, nullptr));
    const auto before = outputs(m);
    EXPECT_NE(before, base);
    acc_model* unwrapped = nullptr;
    ACC_ASSERT_OK(acc_unwrap_model(acc, m, &unwrapped));
    ACC_ASSERT_OK(merge ? acc_model_merge_lora(unwrapped) : acc_model_unload_lora(unwrapped));
    acc_tensor *x = input(), *y = nullptr;
    ACC_EXPECT_ERROR(acc_model_forward1(m, x, 0, &y), ACC_ERR_INVALID_ARGUMENT, "merged or unloaded after acc_prepare");
    // The merged model computes as the adapted one did (to rounding); the unloaded one as the base.
    const auto after = outputs(unwrapped);
    if (merge) {
      ASSERT_EQ(after.size(), before.size());
      for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i], 1e-5);
    } else {
      acc_test::expect_equal_but_for_freezing(after, base);  // (the base stays frozen, as PEFT's unload leaves it)
    }
    acc_tensor_free(x);
    acc_model_free(unwrapped);
    acc_optimizer_free(opt);
    acc_model_free(m);
    acc_accelerator_free(acc);
  }
}

// Every process of a job may save the adapters into one folder at once (the README's loop does):
// they take turns, and the folder holds one whole adapter after (two threads racing here).
TEST(Lora, SavesIntoOneFolderAtOnceTakeTurns) {
  acc_model* m = net();
  add_lora(m);
  const std::string dir = acc_test::temp_path("lora_racing");
  fs::remove_all(dir);
  std::atomic<int> failures{0};
  auto save = [&] {
    for (int i = 0; i < 20; ++i)
      if (acc_model_save_lora(m, dir.c_str()) != ACC_OK) ++failures;
  };
  std::thread first(save), second(save);
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0) << acc_last_error_message();
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs(fresh), outputs(m));
  acc_model_free(fresh);
  acc_model_free(m);
}

TEST(Lora, DamagedOrForeignAdapterFilesChangeNothing) {
  acc_model* m = net();
  add_lora(m);
  const std::string dir = acc_test::temp_path("lora_damaged");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const std::string config_text = acc_test::read_file(dir + "/adapter_config.json");
  auto write_config = [&](const json& j) { std::ofstream(dir + "/adapter_config.json") << j.dump(); };
  acc_model* fresh = net();
  const auto names_before = acc_test::parameter_names(fresh);
  auto expect_refused = [&](acc_status code, const char* needle) {
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), code, needle);
    EXPECT_EQ(acc_test::parameter_names(fresh), names_before);  // no adapter was added
  };
  json j = json::parse(config_text);
  j["peft_type"] = "POLY";  // one of PEFT's methods not built here: a feature missing, said so
  write_config(j);
  expect_refused(ACC_ERR_UNSUPPORTED, "PEFT's POLY adapters are not built here");
  j["peft_type"] = "NOT_A_METHOD";  // no PEFT method: a damaged file
  write_config(j);
  expect_refused(ACC_ERR_IO, "peft_type");
  j = json::parse(config_text);
  j["use_dora"] = true;  // DoRA without its magnitudes
  write_config(j);
  expect_refused(ACC_ERR_IO, "lacks DoRA's magnitude (base_model.model.0.lora_magnitude_vector)");
  j = json::parse(config_text);
  j["rank_pattern"] = {{"linear1", 4}};  // linear1's tensors have rank 2
  write_config(j);
  expect_refused(ACC_ERR_IO, "'base_model.model.1.linear1.lora_A.weight' has shape [2, 8], but the adapter's rank r = 4");
  j = json::parse(config_text);
  j["r"] = 3;  // the tensors have rank 2
  write_config(j);
  expect_refused(ACC_ERR_IO, "rank r = 3");
  j = json::parse(config_text);
  j["target_modules"] = json{"0", "linear1"};  // the file also adapts out_proj
  write_config(j);
  expect_refused(ACC_ERR_INVALID_ARGUMENT, "out_proj");
  j = json::parse(config_text);
  j["lora_dropout"] = 1.5;
  write_config(j);
  expect_refused(ACC_ERR_IO, "lora_dropout");
  std::ofstream(dir + "/adapter_config.json") << "{\"peft_type\": \"LORA\", \"r\":";
  expect_refused(ACC_ERR_IO, "adapter_config.json");
  // A target that is not a linear layer, refused naming the folder, also where the model has adapters.
  j = json::parse(config_text);
  j["target_modules"] = json{"0", "linear1", "out_proj", "norm1"};
  write_config(j);
  expect_refused(ACC_ERR_INVALID_ARGUMENT, "lora_damaged': target_modules");
  acc_model* adapted = net();
  add_lora(adapted);
  ACC_EXPECT_ERROR(acc_model_load_lora(adapted, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "matches '1.norm1', which is not a linear layer");
  acc_model_free(adapted);
  write_config(json::parse(config_text));
  // A tensor whose name holds no module between PEFT's prefix and the suffix.
  {
    acc_tensor_list* bad = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_create(&bad));
    acc_tensor* a = floats(std::vector<float>(12, 0.5f), {2, 6});
    ACC_ASSERT_OK(acc_tensor_list_append(bad, "base_model.model.lora_A.weight", a));
    ACC_ASSERT_OK(acc_tensor_list_save_safetensors(bad, (dir + "/adapter_model.safetensors").c_str()));
    acc_tensor_free(a);
    acc_tensor_list_free(bad);
    expect_refused(ACC_ERR_IO, "tensor 'base_model.model.lora_A.weight' names no module");
  }
  std::ofstream(dir + "/adapter_model.safetensors") << "not a safetensors file";
  expect_refused(ACC_ERR_IO, "adapter_model.safetensors");
  acc_model_free(fresh);
  acc_model_free(m);
}

// PEFT's exclude_modules leaves modules the targets match unadapted; the base model's name, revision
// and task type (what PEFT's AutoPeftModel loads the base model with) travel through a load and a
// save; init_lora_weights that only initialise the adapters ("eva", "orthogonal") load, those that
// need what a file cannot give (CorDA's residual) or lack their settings (LoftQ's loftq_config) and
// settings not implemented are refused by name.
TEST(Lora, PeftSettingsItHonoursAreKeptAndTheOthersNamed) {
  acc_model* m = net();
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "exclude_modules", "linear1"));
  ACC_ASSERT_OK(acc_options_set(o, "base_model_name_or_path", "my-org/tiny-model"));
  ACC_ASSERT_OK(acc_options_set(o, "revision", "main"));
  ACC_ASSERT_OK(acc_options_set(o, "task_type", "CAUSAL_LM"));
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora(m, kTargets, o, &count));
  acc_options_free(o);
  EXPECT_EQ(count, 2u);  // 0 and out_proj: linear1 is excluded
  train(m, 3);
  const auto trained = outputs(m);
  const std::string dir = acc_test::temp_path("lora_peft_settings"), again = dir + "_again";
  fs::remove_all(dir);
  fs::remove_all(again);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["exclude_modules"], json{"linear1"});
  EXPECT_EQ(config["base_model_name_or_path"], "my-org/tiny-model");
  EXPECT_EQ(config["revision"], "main");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");

  // As PEFT writes them: exclude_modules as a regular expression, EVA's initialisation.
  config["exclude_modules"] = "1\\.linear1";
  config["init_lora_weights"] = "eva";
  std::ofstream(dir + "/adapter_config.json") << config.dump();
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs(fresh), trained);
  ACC_ASSERT_OK(acc_model_save_lora(fresh, again.c_str()));
  const json resaved = json::parse(acc_test::read_file(again + "/adapter_config.json"));
  for (const char* key : {"exclude_modules", "init_lora_weights", "base_model_name_or_path", "revision", "task_type"})
    EXPECT_EQ(resaved[key], config[key]) << key;
  acc_model_free(fresh);

  auto expect_refused = [&](const char* key, const json& value, const char* needle) {
    json changed = config;
    changed[key] = value;
    std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << changed.dump();
    acc_model* other = net();
    const auto names_before = acc_test::parameter_names(other);
    ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_IO, needle);
    EXPECT_EQ(acc_test::parameter_names(other), names_before);
    acc_model_free(other);
  };
  expect_refused("init_lora_weights", "loftq", "'loftq_config' must hold");  // without PEFT's LoftQConfig
  expect_refused("init_lora_weights", "corda", "cannot rebuild");  // its residual weights (PEFT cannot either)
  expect_refused("lora_bias", true, "'lora_bias' is true with init_lora_weights \"eva\"");  // PEFT's ValueError
  config["init_lora_weights"] = true;
  expect_refused("lora_bias", true, "lacks lora_B's bias");  // lora_bias without the biases
  config["init_lora_weights"] = "eva";
  expect_refused("layer_replication", json::array({json::array({0, 1})}), "layer_replication");
  // PEFT's variants, which would compute otherwise than plain LoRA: refused by name.
  expect_refused("alora_invocation_tokens", json::array({5, 6}), "alora_invocation_tokens' is set");
  for (const char* variant :
       {"velora_config", "monteclora_config", "use_bdlora", "arrow_config", "kasa_config", "megatron_config"})
    expect_refused(variant, json::object(), variant);
  expect_refused("use_qalora", true, "QALoRA");
  expect_refused("ensure_weight_tying", "yes", "ensure_weight_tying");
  expect_refused("target_parameters", "0.weight", "target_parameters must be a list");  // PEFT's TypeError
  expect_refused("trainable_token_indices", "1,2", "trainable_token_indices must be a list of token indices");
  expect_refused("exclude_modules", 3, "exclude_modules");
  expect_refused("task_type", 7, "task_type");
  // One PEFT does not know (its ValueError: found by a hunt, written and read back as given), in
  // files and in options.
  expect_refused("task_type", "causal_lm", "'task_type' is 'causal_lm', none of PEFT's task types");
  {
    acc_options* bad = lora_options(2, 4);
    ACC_EXPECT_ERROR(acc_options_set(bad, "task_type", "FOO"), ACC_ERR_INVALID_ARGUMENT, "task_type");
    acc_options_free(bad);
  }
  fs::remove_all(dir);
  fs::remove_all(again);
  acc_model_free(m);
}

// The tensor names a safetensors file holds (its header's keys but the metadata).
std::vector<std::string> safetensors_names(const std::string& path) {
  const std::string bytes = acc_test::read_file(path);
  uint64_t length = 0;
  for (int i = 0; i < 8 && bytes.size() >= 8; ++i) length |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  const json header = json::parse(bytes.substr(8, length));
  std::vector<std::string> names;
  for (const auto& entry : header.items())
    if (entry.key() != "__metadata__") names.push_back(entry.key());
  std::sort(names.begin(), names.end());
  return names;
}

// PEFT's files for bias "all" beside modules_to_save also hold its wrapper's copies' biases
// ("<module>.original_module.bias", "<module>.modules_to_save.bias", which its bias setting takes as
// biases too): read as PEFT reads them (found by a hunt: refused as no tensor of the model).
TEST(Lora, BiasAllBesideModulesToSaveReadsPeftsWrapperCopies) {
  acc_model* m = net();
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "bias", "all"));
  ACC_ASSERT_OK(acc_options_set(o, "modules_to_save", "2"));
  ACC_ASSERT_OK(acc_model_add_lora(m, "0,linear1", o, nullptr));
  acc_options_free(o);
  const std::string dir = acc_test::temp_path("lora_bias_all_wrapper");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  acc_tensor_list* saved = adapter_file_tensors(dir);
  acc_tensor* head_bias = nullptr;
  ASSERT_EQ(acc_tensor_list_find(saved, "base_model.model.2.bias", &head_bias), ACC_OK);
  acc_tensor_list_free(saved);
  for (const char* copy : {"base_model.model.2.original_module.bias", "base_model.model.2.modules_to_save.bias"})
    replace_adapter_tensor(dir, copy, head_bias);
  acc_tensor_free(head_bias);
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(outputs(fresh), outputs(m));
  acc_model_free(fresh);
  acc_model_free(m);
  fs::remove_all(dir);
}

// PEFT's modules_to_save (what its task_type SEQ_CLS sets for a classifier head): the module trains
// whole beside the adapters, as PEFT's ModulesToSaveWrapper trains its copy, and travels with them
// in adapter_model.safetensors under PEFT's names.
TEST(Lora, ModulesToSaveTrainWholeAndTravelWithTheAdapters) {
  auto with_head = [](const char* modules_to_save) {
    acc_options* o = lora_options(2, 4);
    EXPECT_EQ(acc_options_set(o, "modules_to_save", modules_to_save), ACC_OK);
    return o;
  };
  acc_model* m = net();
  acc_options* o = with_head("norm2");
  ACC_ASSERT_OK(acc_model_add_lora(m, kTargets, o, nullptr));
  const auto norm = param(m, "1.norm2.weight"), frozen = param(m, "2.weight");
  train(m, 3);
  EXPECT_NE(param(m, "1.norm2.weight"), norm) << "the module to save trains";
  EXPECT_EQ(param(m, "2.weight"), frozen) << "the rest stays frozen";
  const auto trained = outputs(m);
  const std::string dir = acc_test::temp_path("lora_modules_to_save");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  EXPECT_EQ(json::parse(acc_test::read_file(dir + "/adapter_config.json"))["modules_to_save"], json{"norm2"});
  const auto names = safetensors_names(dir + "/adapter_model.safetensors");
  for (const char* name :
       {"base_model.model.1.norm2.weight", "base_model.model.1.norm2.bias", "base_model.model.0.lora_A.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  EXPECT_EQ(names.size(), 8u) << "three adapters and the norm's two tensors";

  acc_model* fresh = net(6);  // another initialisation: everything the file holds is loaded
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(param(fresh, "1.norm2.weight"), param(m, "1.norm2.weight"));
  EXPECT_NE(outputs(fresh), trained) << "net(6)'s frozen base differs";
  acc_model* same_base = net();
  ACC_ASSERT_OK(acc_model_load_lora(same_base, dir.c_str()));
  EXPECT_EQ(outputs(same_base), trained);
  const auto before = param(same_base, "1.norm2.weight");
  train(same_base, 1);
  EXPECT_NE(param(same_base, "1.norm2.weight"), before) << "a loaded module to save trains on";

  // Into a model whose adapters keep the norm frozen: refused, changing nothing.
  acc_model* plain = net();
  add_lora(plain);
  const auto plain_norm = param(plain, "1.norm2.weight");
  ACC_EXPECT_ERROR(acc_model_load_lora(plain, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "trains '1.norm2.weight' whole");
  EXPECT_EQ(param(plain, "1.norm2.weight"), plain_norm);
  // A file without one of the module's tensors.
  json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  config["modules_to_save"] = json{"norm2", "norm1"};  // 1.norm1's tensors are not there
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << config.dump();
  acc_model* other = net();
  const auto names_before = acc_test::parameter_names(other);
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "holds no '1.norm1.");
  EXPECT_EQ(acc_test::parameter_names(other), names_before);

  // A module matches a name its own name ends with, as PEFT's endswith: "2" is the last layer, and
  // 1.linear2 and 1.norm2 too.
  acc_model* ends = net();
  acc_options* two = with_head("2");
  ACC_ASSERT_OK(acc_model_add_lora(ends, kTargets, two, nullptr));
  acc_options_free(two);
  const auto before_two = param(ends, "1.linear2.weight"), before_layer = param(ends, "2.weight");
  train(ends, 1);
  EXPECT_NE(param(ends, "1.linear2.weight"), before_two);
  EXPECT_NE(param(ends, "2.weight"), before_layer);
  acc_model_free(ends);

  // A target inside a module to save stays whole, unadapted, as PEFT leaves it ("0" is both here).
  acc_model* inside = net();
  acc_options* zero = with_head("0");
  size_t adapted = 0;
  ACC_ASSERT_OK(acc_model_add_lora(inside, kTargets, zero, &adapted));
  acc_options_free(zero);
  EXPECT_EQ(adapted, 2u) << "linear1 and out_proj";
  const auto first = param(inside, "0.weight");
  train(inside, 1);
  EXPECT_NE(param(inside, "0.weight"), first);
  acc_model_free(inside);

  // PEFT's sequence classification trains its head whole: task_type SEQ_CLS adds "classifier" and
  // "score" (this model has neither: no error, as in PEFT) and writes them as PEFT does.
  acc_model* seq_cls = net();
  acc_options* task = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(task, "task_type", "SEQ_CLS"));
  ACC_ASSERT_OK(acc_model_add_lora(seq_cls, kTargets, task, nullptr));
  acc_options_free(task);
  ACC_ASSERT_OK(acc_model_save_lora(seq_cls, dir.c_str()));
  EXPECT_EQ(json::parse(acc_test::read_file(dir + "/adapter_config.json"))["modules_to_save"],
            (json{"classifier", "score"}));
  acc_model_free(seq_cls);

  // What cannot be honoured, refused before anything changes.
  for (const auto& [saved, needle] :
       std::vector<std::pair<const char*, const char*>>{{"nothing", "matches no module that holds parameters"},
                                                        {"inear1", "which target_modules adapts"},
                                                        {"norm2,,norm1", "has an empty name"}}) {
    acc_options* bad = with_head(saved);
    acc_model* n = net();
    ACC_EXPECT_ERROR(acc_model_add_lora(n, kTargets, bad, nullptr), ACC_ERR_INVALID_ARGUMENT, needle);
    size_t adapters = 1;
    ACC_ASSERT_OK(acc_model_lora_count(n, &adapters));
    EXPECT_EQ(adapters, 0u) << saved;
    acc_options_free(bad);
    acc_model_free(n);
  }
  fs::remove_all(dir);
  acc_options_free(o);
  for (acc_model* model : {m, fresh, same_base, plain, other}) acc_model_free(model);
}

// PEFT's bias setting: "all" trains every parameter named "*.bias", "lora_only" the adapted layers'
// biases; they travel with the adapters, an adapted layer's under PEFT's "<module>.base_layer.bias".
TEST(Lora, BiasSettingsTrainAndSaveTheBiasesPeftDoes) {
  const std::string dir = acc_test::temp_path("lora_bias");
  for (const char* bias : {"lora_only", "all"}) {
    SCOPED_TRACE(bias);
    acc_model* m = net();
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_options_set(o, "bias", bias));
    ACC_ASSERT_OK(acc_model_add_lora(m, kTargets, o, nullptr));
    acc_options_free(o);
    const auto adapted_bias = param(m, "1.linear1.bias"), other_bias = param(m, "2.bias"),
               weight = param(m, "1.linear1.weight");
    train(m, 3);
    EXPECT_NE(param(m, "1.linear1.bias"), adapted_bias) << "an adapted layer's bias trains";
    EXPECT_EQ(param(m, "2.bias") != other_bias, std::string(bias) == "all");
    EXPECT_EQ(param(m, "1.linear1.weight"), weight) << "weights stay frozen";
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    EXPECT_EQ(json::parse(acc_test::read_file(dir + "/adapter_config.json"))["bias"], bias);
    const auto names = safetensors_names(dir + "/adapter_model.safetensors");
    auto holds = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
    EXPECT_TRUE(holds("base_model.model.1.linear1.base_layer.bias"));
    EXPECT_TRUE(holds("base_model.model.0.base_layer.bias"));
    EXPECT_EQ(holds("base_model.model.2.bias"), std::string(bias) == "all");
    EXPECT_EQ(holds("base_model.model.1.norm1.bias"), std::string(bias) == "all");
    acc_model* same_base = net();
    ACC_ASSERT_OK(acc_model_load_lora(same_base, dir.c_str()));
    EXPECT_EQ(outputs(same_base), outputs(m));
    EXPECT_EQ(param(same_base, "1.linear1.bias"), param(m, "1.linear1.bias"));
    acc_model_free(same_base);
    acc_model_free(m);
  }
  // Into a model whose adapters keep the biases frozen: refused, naming one.
  acc_model* plain = net();
  add_lora(plain);
  ACC_EXPECT_ERROR(acc_model_load_lora(plain, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, ".bias' whole");
  acc_model_free(plain);
  acc_options* o = lora_options(2, 4);
  EXPECT_EQ(acc_options_set(o, "bias", "some"), ACC_ERR_INVALID_ARGUMENT);
  acc_options_free(o);
  fs::remove_all(dir);
}

TEST(Lora, SavedModelsHoldMergedWeights) {
  acc_model* m = net();
  add_lora(m);
  train(m, 5);
  const auto adapted = outputs(m);
  acc_accelerator* acc = acc_test::make_accelerator({});
  const std::string dir = acc_test::temp_path("lora_saved_model");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_save_model(acc, m, dir.c_str(), nullptr));
  // The base model's layout: loads strictly into the model without adapters.
  acc_model* base = net();
  ACC_ASSERT_OK(acc_model_load_safetensors(base, dir.c_str(), 1, nullptr, nullptr));
  EXPECT_LT(max_difference(outputs(base), adapted), 1e-5f);
  // TorchScript as well; the model keeps its adapters.
  const std::string pt = acc_test::temp_path("lora_saved_model.pt");
  ACC_ASSERT_OK(acc_model_save_torchscript(m, pt.c_str()));
  acc_model* script = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(pt.c_str(), &script));
  EXPECT_LT(max_difference(outputs(script), adapted), 1e-5f);
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(outputs(m), adapted);
  acc_model_free(script);
  acc_model_free(base);
  acc_accelerator_free(acc);
  acc_model_free(m);
}

// Merging changes biases too where a method's merge does ((IA)^3 scaling a layer's output, LoRA's
// lora_bias): save_torchscript writes them merged and gives the model back its own.
TEST(Lora, SavingTorchScriptGivesBackTheBiasesItsMergeChanged) {
  for (const char* method : {"ia3", "lora_bias"}) {
    SCOPED_TRACE(method);
    acc_model* m = net();
    acc_options* o = nullptr;
    if (std::string(method) == "ia3") {
      ASSERT_EQ(acc_options_create(ACC_OPTIONS_IA3, &o), ACC_OK);
      ASSERT_EQ(acc_options_set_bool(o, "init_ia3_weights", 0), ACC_OK);  // drawn: the biases scale
      ACC_ASSERT_OK(acc_model_add_ia3(m, "0,linear1", o, nullptr));
    } else {
      o = lora_options(2, 4);
      ASSERT_EQ(acc_options_set_bool(o, "lora_bias", 1), ACC_OK);
      ACC_ASSERT_OK(acc_model_add_lora(m, "0,linear1", o, nullptr));
      train(m, 3);  // lora_B's bias away from zero
    }
    acc_options_free(o);
    const auto adapted = outputs(m);
    const std::string pt = acc_test::temp_path("merged_biases.pt");
    ACC_ASSERT_OK(acc_model_save_torchscript(m, pt.c_str()));
    EXPECT_EQ(outputs(m), adapted);
    acc_model* script = nullptr;
    ACC_ASSERT_OK(acc_model_load_torchscript(pt.c_str(), &script));
    EXPECT_LT(max_difference(outputs(script), adapted), 1e-5f);
    acc_model_free(script);
    acc_model_free(m);
  }
}

// A layer-spec model saved as TorchScript and loaded back keeps its linear layers linear (as a
// scripted nn.Linear is): the same targets take adapters there, initialised alike from the same
// seed, and the two compute the same (weight form against output form: float rounding).
TEST(Lora, ASpecModelLoadedBackFromTorchScriptTakesTheSameAdapters) {
  acc_model* m = net();
  const std::string pt = acc_test::temp_path("lora_spec_export.pt");
  ACC_ASSERT_OK(acc_model_save_torchscript(m, pt.c_str()));
  acc_model* script = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(pt.c_str(), &script));
  ACC_ASSERT_OK(acc_set_seed(9));
  EXPECT_EQ(add_lora(m), 3u);
  ACC_ASSERT_OK(acc_set_seed(9));
  EXPECT_EQ(add_lora(script), 3u);
  EXPECT_EQ(acc_test::parameter_names(script), acc_test::parameter_names(m));
  train(m, 3);
  train(script, 3);
  EXPECT_LT(max_difference(outputs(script), outputs(m)), 1e-5f);
  acc_model_free(script);
  acc_model_free(m);
}

namespace {

// `n` steps of a prepared job on the spec network's input towards 0.25 everywhere (MSE).
void prepared_steps(acc_accelerator* acc, acc_model* model, acc_optimizer* opt, int n) {
  acc_tensor *x = input(), *y = floats(std::vector<float>(2 * 4 * 3, 0.25f), {2, 4, 3});
  for (int i = 0; i < n; ++i) {
    acc_tensor *out = nullptr, *loss = nullptr;
    ASSERT_EQ(acc_model_forward1(model, x, 0, &out), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    ASSERT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
  acc_tensor_free(x);
  acc_tensor_free(y);
}

}  // namespace

TEST(Lora, SaveStateResumesAdaptersAndTheirOptimizerState) {
  // A prepared LoRA job saved after 3 steps and resumed elsewhere takes the same next 2 steps.
  struct Run {
    acc_accelerator* acc = acc_test::make_accelerator({});
    acc_model* model = net();
    acc_optimizer* opt = nullptr;
    Run() {
      add_lora(model);
      EXPECT_EQ(acc_optimizer_create(model, "adamw", nullptr, &opt), ACC_OK);
      EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    }
    ~Run() {
      acc_optimizer_free(opt);
      acc_model_free(model);
      acc_accelerator_free(acc);
    }
    void steps(int n) { prepared_steps(acc, model, opt, n); }
  };
  const std::string dir = acc_test::temp_path("lora_state");
  fs::remove_all(dir);
  Run first;
  first.steps(3);
  ACC_ASSERT_OK(acc_save_state(first.acc, dir.c_str(), nullptr));
  first.steps(2);
  Run resumed;
  ACC_ASSERT_OK(acc_load_state(resumed.acc, dir.c_str(), nullptr));
  resumed.steps(2);
  for (const auto& name : acc_test::parameter_names(first.model))
    EXPECT_EQ(param(resumed.model, name), param(first.model, name)) << name;
  EXPECT_EQ(outputs(resumed.model), outputs(first.model));
}

// Accelerate's save_state writes the model's state_dict, which holds PEFT's original_module of each
// module to save: a resumed run whose own module starts otherwise (a classifier head drawn anew)
// computes a disabled forward, and unloads, with the values of the run it resumes.
TEST(Lora, SaveStateKeepsTheModulesToSaveAsTheyWere) {
  struct Run {
    acc_accelerator* acc = acc_test::make_accelerator({});
    acc_model* model;
    acc_optimizer* opt = nullptr;
    explicit Run(uint64_t seed) : model(net(seed)) {
      acc_options* o = lora_options(2, 4);
      EXPECT_EQ(acc_options_set_string(o, "modules_to_save", "2"), ACC_OK);
      EXPECT_EQ(acc_model_add_lora(model, "0", o, nullptr), ACC_OK) << acc_last_error_message();
      acc_options_free(o);
      opt = acc_test::optimizer(model, "adamw", 1e-2);
      EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    }
    ~Run() {
      acc_optimizer_free(opt);
      acc_model_free(model);
      acc_accelerator_free(acc);
    }
    void steps(int n) { prepared_steps(acc, model, opt, n); }
    std::vector<float> disabled() {
      EXPECT_EQ(acc_model_set_lora_enabled(model, 0), ACC_OK);
      auto out = outputs(model);
      EXPECT_EQ(acc_model_set_lora_enabled(model, 1), ACC_OK);
      return out;
    }
  };
  const std::string dir = acc_test::temp_path("lora_state_saved_modules");
  fs::remove_all(dir);
  Run first(5);
  first.steps(3);
  ACC_ASSERT_OK(acc_save_state(first.acc, dir.c_str(), nullptr));
  Run resumed(9);  // its module "2" drawn otherwise
  EXPECT_NE(resumed.disabled(), first.disabled());
  ACC_ASSERT_OK(acc_load_state(resumed.acc, dir.c_str(), nullptr));
  EXPECT_EQ(outputs(resumed.model), outputs(first.model));
  EXPECT_EQ(resumed.disabled(), first.disabled());
  acc_model *first_inner = nullptr, *resumed_inner = nullptr;
  ACC_ASSERT_OK(acc_unwrap_model(first.acc, first.model, &first_inner));
  ACC_ASSERT_OK(acc_unwrap_model(resumed.acc, resumed.model, &resumed_inner));
  ACC_ASSERT_OK(acc_model_unload_lora(first_inner));
  ACC_ASSERT_OK(acc_model_unload_lora(resumed_inner));
  EXPECT_EQ(param(resumed_inner, "2.weight"), param(first_inner, "2.weight"));
  acc_model_free(first_inner);
  acc_model_free(resumed_inner);
  // The file holds them under PEFT's names, beside the weights; a file holding some of them (here
  // all but the bias's) is refused, naming the one it lacks, before anything changes.
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/model.safetensors").c_str(), &saved));
  acc_tensor* original = nullptr;
  EXPECT_EQ(acc_tensor_list_find(saved, "2.original_module.weight", &original), ACC_OK);
  acc_tensor_free(original);
  acc_tensor_list* partial = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&partial));
  size_t entries = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &entries));
  for (size_t i = 0; i < entries; ++i) {
    const char* name = nullptr;
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_name(saved, i, &name));
    ACC_ASSERT_OK(acc_tensor_list_get(saved, i, &t));
    if (std::string(name) != "2.original_module.bias") ACC_ASSERT_OK(acc_tensor_list_append(partial, name, t));
    acc_tensor_free(t);
  }
  acc_tensor_list_free(saved);
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(partial, (dir + "/model.safetensors").c_str()));
  acc_tensor_list_free(partial);
  Run other(13);
  const auto before = other.disabled();
  ACC_EXPECT_ERROR(acc_load_state(other.acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "holds some of the original values of the modules to save, but not '2.original_module.bias'");
  EXPECT_EQ(other.disabled(), before);
  fs::remove_all(dir);
}

TEST(Lora, CheckpointedLayersRecomputeWithTheAdapters) {
  // The encoder layer recomputed in backward must run its adapters again, with the same dropout masks.
  std::string spec = kNet;
  spec.replace(spec.find("\"batch_first\":true}"), 19, "\"batch_first\":true,\"checkpoint\":true}");
  std::vector<std::vector<float>> grads[2];
  for (int checkpointed = 0; checkpointed < 2; ++checkpointed) {
    ACC_ASSERT_OK(acc_set_seed(5));
    acc_model* m = nullptr;
    ACC_ASSERT_OK(acc_model_from_spec(checkpointed ? spec.c_str() : kNet, &m));
    add_lora(m, kTargets, 2, 4, 0.2);
    train(m, 3);  // B moves away from zero, so A gets gradients too
    acc_tensor* x = input();
    acc_tensor *out = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &out));
    ACC_ASSERT_OK(acc_tensor_sum(out, &loss));
    ACC_ASSERT_OK(acc_tensor_backward(loss));
    for (const auto& name : acc_test::parameter_names(m)) {
      if (name.find("lora_") == std::string::npos) continue;
      acc_tensor *p = nullptr, *g = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(m, name.c_str(), &p));
      ACC_ASSERT_OK(acc_tensor_grad(p, &g));
      grads[checkpointed].push_back(to_floats(g));
      acc_tensor_free(g);
      acc_tensor_free(p);
    }
    for (acc_tensor* t : {x, out, loss}) acc_tensor_free(t);
    acc_model_free(m);
  }
  ASSERT_EQ(grads[0].size(), 6u);
  EXPECT_EQ(grads[0], grads[1]);
}

TEST(Lora, RefusesWhatItCannotHonour) {
  acc_model* m = net();
  const auto names_before = acc_test::parameter_names(m);
  ACC_EXPECT_ERROR(acc_model_add_lora(nullptr, "0", nullptr, nullptr), ACC_ERR_INVALID_HANDLE, "model");
  ACC_EXPECT_ERROR(acc_model_add_lora(m, nullptr, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "target_modules");
  ACC_EXPECT_ERROR(acc_model_add_lora(m, " ", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "target_modules");
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "q_proj", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "matches no linear layer");
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "norm1", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "not a linear layer");
  // The attention and its out_proj named both: the attention adapts its out_proj with it.
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "self_attn,out_proj", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "matches both the attention '1.self_attn' and its out_proj");
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "re:(", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "regular expression");
  // An empty expression was taken for no target_modules: nothing adapted, yet the model frozen.
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "re:", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "'re:' has no regular expression after it");
  // adapter_config.json holds UTF-8 only: refused here, not when the adapters are saved.
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "linear1,x\xff", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "target_modules 'linear1,x\\xFF' is not valid UTF-8");
  for (const char* listed : {"0,", ",0", "0,,linear1"})
    ACC_EXPECT_ERROR(acc_model_add_lora(m, listed, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "empty name");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LORA, &o));
  ACC_EXPECT_ERROR(acc_options_set_int(o, "r", 0), ACC_ERR_INVALID_ARGUMENT, "r");
  ACC_EXPECT_ERROR(acc_options_set_string(o, "init_lora_weights", "loftq_nf4"), ACC_ERR_INVALID_ARGUMENT,
                   "init_lora_weights");
  acc_options_free(o);
  acc_options* wrong_kind = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &wrong_kind));
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "0", wrong_kind, nullptr), ACC_ERR_INVALID_ARGUMENT, "lora options");
  acc_options_free(wrong_kind);
  ACC_EXPECT_ERROR(acc_model_merge_lora(m), ACC_ERR_INVALID_ARGUMENT, "no LoRA adapters");
  ACC_EXPECT_ERROR(acc_model_save_lora(m, acc_test::temp_path("lora_none").c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "no LoRA adapters");
  EXPECT_EQ(acc_test::parameter_names(m), names_before);  // nothing above changed the model

  // A regular expression over whole names (PEFT's string form); adapters cannot be added twice.
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora(m, "re:1\\.linear[12]", nullptr, &count));
  EXPECT_EQ(count, 2u);
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "0", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "already has");

  // A prepared model's parameters are fixed: adapters come before acc_prepare.
  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_model* plain = net();
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(acc, plain, ACC_PLACEMENT_DEFAULT, &prepared));
  ACC_EXPECT_ERROR(acc_model_add_lora(prepared, "0", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "before preparing");
  acc_model_free(prepared);
  acc_model_free(plain);
  acc_accelerator_free(acc);
  acc_model_free(m);
}

// The handle from before acc_prepare (or one from acc_unwrap_model) reaches the same model: its
// trainable set is fixed as well. An optimizer fixes it too: a parameter added or unfrozen after
// it would never be trained (freezing is still allowed, as in PyTorch, until the model is prepared).
TEST(Lora, TheTrainableSetIsFixedOnceAnOptimizerOrAPreparedModelHoldsIt) {
  acc_model* m = net();
  const auto names = acc_test::parameter_names(m);
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "0", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "before creating it");
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "0.*", 0, &count));
  ACC_EXPECT_ERROR(acc_model_set_requires_grad(m, "0.*", 1, &count), ACC_ERR_INVALID_ARGUMENT, "never be trained");
  acc_optimizer_free(opt);
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "0.*", 1, &count));  // the hold ended with the optimizer

  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(acc, m, ACC_PLACEMENT_DEFAULT, &prepared));
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "0", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "before preparing it");
  ACC_EXPECT_ERROR(acc_model_set_requires_grad(m, "0.*", 0, &count), ACC_ERR_INVALID_ARGUMENT, "before preparing it");
  const std::string dir = acc_test::temp_path("lora_for_prepared");
  acc_model* donor = net();
  add_lora(donor);
  ACC_ASSERT_OK(acc_model_save_lora(donor, dir.c_str()));
  ACC_EXPECT_ERROR(acc_model_load_lora(m, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "before preparing it");
  EXPECT_EQ(acc_test::parameter_names(m), names) << "no adapter came in";
  acc_model_free(donor);
  acc_model_free(prepared);
  acc_model_free(m);
  acc_accelerator_free(acc);
  std::system(("rm -rf " + dir).c_str());
}

// Merging in the unwrapped model once training is done, then saving the state: the optimizer
// still steps the merged adapters, so the save is refused with the reason, not an internal error.
TEST(Lora, SaveStateAfterMergingSaysWhy) {
  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_model* m = net();
  add_lora(m, "0");
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  ACC_ASSERT_OK(acc_prepare(acc, &m, &opt, nullptr, nullptr));
  acc_model* inner = nullptr;
  ACC_ASSERT_OK(acc_unwrap_model(acc, m, &inner));
  ACC_ASSERT_OK(acc_model_merge_lora(inner));
  const std::string dir = acc_test::temp_path("merged_state");
  ACC_EXPECT_ERROR(acc_save_state(acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT, "before merging");
  acc_model_free(inner);
  acc_optimizer_free(opt);
  acc_model_free(m);
  acc_accelerator_free(acc);
  std::system(("rm -rf " + dir).c_str());
}

// A save that fails halfway leaves the adapter that was in the folder loadable.
TEST(Lora, AFailedSaveKeepsTheAdapterThatWasThere) {
  const std::string dir = acc_test::temp_path("lora_kept");
  acc_model* first = net();
  add_lora(first, kTargets, 2);
  ACC_ASSERT_OK(acc_model_save_lora(first, dir.c_str()));
  ASSERT_EQ(std::system(("mkdir -p " + dir + "/adapter_config.json.new/blocker").c_str()), 0);
  acc_model* second = net(6);
  add_lora(second, kTargets, 4);
  ACC_EXPECT_ERROR(acc_model_save_lora(second, dir.c_str()), ACC_ERR_IO, "adapter_config.json.new");
  acc_model* reader = net();
  ACC_ASSERT_OK(acc_model_load_lora(reader, dir.c_str()));
  EXPECT_EQ(outputs(reader), outputs(first));
  for (acc_model* m : {first, second, reader}) acc_model_free(m);
  std::system(("rm -rf " + dir).c_str());
}

// std::regex recurses and backtracks: patterns nested thousands deep or repeating a repeated group
// are refused at once (they would overflow the stack or run for minutes).
TEST(Lora, RegularExpressionsThatWouldNotEndAreRefused) {
  acc_model* m = net();
  const std::string deep = "re:" + std::string(50000, '(') + std::string(50000, ')');
  ACC_EXPECT_ERROR(acc_model_add_lora(m, deep.c_str(), nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "characters long");
  ACC_EXPECT_ERROR(
      acc_model_add_lora(m, ("re:" + std::string(40, '(') + "0" + std::string(40, ')')).c_str(), nullptr, nullptr),
      ACC_ERR_INVALID_ARGUMENT, "deeper than");
  // Also ambiguous patterns without nested repetition: a repeated choice, choices or repetitions in
  // a row (each ran for minutes on a name like "1.self_attn.out_proj"); and in a PEFT adapter folder.
  std::string choices_in_a_row = "re:", repetitions_in_a_row = "re:";
  for (int i = 0; i < 11; ++i) choices_in_a_row += "(.|.)";
  for (int i = 0; i < 20; ++i) repetitions_in_a_row += ".*";
  for (const std::string& pattern :
       {std::string("re:(.*)*x"), std::string("re:(.*.*)*x"), std::string("re:(a+)+"), std::string("re:((0)+\\.)*x"),
        std::string("re:(.*){2,}x"), std::string("re:(.|.|.|.)*z"), std::string("re:(?:a|b)+z"), choices_in_a_row + "z",
        repetitions_in_a_row + "z"})
    ACC_EXPECT_ERROR(acc_model_add_lora(m, pattern.c_str(), nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "exponential");
  const std::string dir = acc_test::temp_path("lora_slow_pattern");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/adapter_config.json") << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4,
      "target_modules": "(.|.|.|.)*z"})";
  ACC_EXPECT_ERROR(acc_model_load_lora(m, dir.c_str()), ACC_ERR_IO, "exponential");
  std::filesystem::remove_all(dir);
  // What PEFT users write still works: one level of repetition, bounded repetitions of groups.
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora(m, "re:(.*\\.)?(linear1|out_proj)|[0]", nullptr, &count));
  EXPECT_EQ(count, 3u);
  acc_model_free(m);
  m = net();
  // PEFT's usual shapes: a few repetitions and choices, a non-capturing group, a bounded count.
  ACC_ASSERT_OK(
      acc_model_add_lora(m, "re:.*\\d{1,3}\\.(?:self_attn\\.)?(linear1|out_proj|k_proj|v_proj).*", nullptr, &count));
  EXPECT_EQ(count, 2u);
  acc_model_free(m);
}

// lora_alpha is the scaling's numerator: one that overflows float32 would make every output NaN.
// Otherwise either sign, and lora_dropout up to 1, as PEFT takes them (found by a hunt: a folder
// saved with lora_dropout 1 was refused on reading, a negative alpha refused): a negative alpha
// makes the adapters' change the opposite of the same positive one's.
TEST(Lora, AlphaMustKeepTheScalingFiniteAndMayBeNegative) {
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LORA, &o));
  ACC_EXPECT_ERROR(acc_options_set_double(o, "lora_alpha", 1e308), ACC_ERR_INVALID_ARGUMENT, "lora_alpha");
  acc_options_free(o);
  // One linear layer: its output is the base's plus the adapters' change, whose sign alpha gives.
  auto layer = [] {
    EXPECT_EQ(acc_set_seed(5), ACC_OK);
    return acc_test::spec_model(R"([{"type":"linear","in_features":6,"out_features":8}])");
  };
  auto adapted = [&](double alpha, double dropout) {
    acc_model* m = layer();
    acc_options* options = lora_options(2, alpha);
    EXPECT_EQ(acc_options_set(options, "init_lora_weights", "false"), ACC_OK);  // B not zero: the adapters act
    EXPECT_EQ(acc_options_set_double(options, "lora_dropout", dropout), ACC_OK);
    EXPECT_EQ(acc_model_add_lora(m, "0", options, nullptr), ACC_OK) << acc_last_error_message();
    acc_options_free(options);
    EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);  // (no dropout)
    return m;
  };
  acc_model* base = layer();
  ACC_ASSERT_OK(acc_model_set_training(base, 0));
  const auto base_out = outputs(base);
  acc_model_free(base);
  acc_model* plus = adapted(4, 0);
  acc_model* minus = adapted(-4, 1);
  const auto plus_out = outputs(plus), minus_out = outputs(minus);
  ASSERT_EQ(plus_out.size(), base_out.size());
  ASSERT_EQ(minus_out.size(), base_out.size());
  float largest_change = 0;
  for (size_t i = 0; i < base_out.size(); ++i) {
    EXPECT_NEAR(minus_out[i] - base_out[i], -(plus_out[i] - base_out[i]), 1e-5) << i;
    largest_change = std::max(largest_change, std::abs(plus_out[i] - base_out[i]));
  }
  EXPECT_GT(largest_change, 1e-3f);
  const std::string dir = acc_test::temp_path("lora_alpha");
  ACC_ASSERT_OK(acc_model_save_lora(minus, dir.c_str()));
  acc_model* fresh = layer();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  ACC_ASSERT_OK(acc_model_set_training(fresh, 0));
  EXPECT_EQ(outputs(fresh), minus_out);
  acc_model_free(fresh);
  auto config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  config["lora_alpha"] = 1e308;
  std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << config.dump();
  fresh = layer();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "lora_alpha");
  acc_model_free(fresh);
  acc_model_free(plus);
  acc_model_free(minus);
  std::system(("rm -rf " + dir).c_str());
}

// PEFT's ensure_weight_tying: read and written back; where it would tie the adapters of layers that
// share their weight (not built: a tied head, or the embedding whose weight it holds) the file is
// refused before anything changes, elsewhere it changes nothing (PEFT warns).
TEST(Lora, EnsureWeightTyingIsKeptAndRefusedWhereItWouldTie) {
  auto save_with_tying = [](acc_model* m, const char* targets, const std::string& dir) {
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_model_add_lora(m, targets, o, nullptr));
    acc_options_free(o);
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
    EXPECT_EQ(config["ensure_weight_tying"], false);
    config["ensure_weight_tying"] = true;
    std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << config.dump();
  };
  const std::string dir = acc_test::temp_path("lora_weight_tying"), again = dir + "_again";
  acc_model* m = net();
  save_with_tying(m, kTargets, dir);
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  fs::remove_all(again);
  ACC_ASSERT_OK(acc_model_save_lora(fresh, again.c_str()));
  EXPECT_EQ(json::parse(acc_test::read_file(again + "/adapter_config.json"))["ensure_weight_tying"], true);
  acc_model_free(fresh);
  acc_model_free(m);

  const std::string tied = acc_test::data_dir() + "/tied.pt";
  for (const char* targets : {"head", "embed"}) {
    SCOPED_TRACE(targets);
    acc_model* model = nullptr;
    ACC_ASSERT_OK(acc_model_load_torchscript(tied.c_str(), &model));
    save_with_tying(model, targets, dir);
    acc_model* other = nullptr;
    ACC_ASSERT_OK(acc_model_load_torchscript(tied.c_str(), &other));
    const auto names = acc_test::parameter_names(other);
    ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_UNSUPPORTED,
                     "ensure_weight_tying on a model whose '");
    EXPECT_EQ(acc_test::parameter_names(other), names);
    acc_model_free(other);
    acc_model_free(model);
  }
  // A TorchScript model without ties loads it (found by a hunt: each layer was taken for tied with
  // its own weight, listed again as a parameter site).
  {
    const std::string untied = acc_test::data_dir() + "/stacked.pt";
    acc_model* model = nullptr;
    ACC_ASSERT_OK(acc_model_load_torchscript(untied.c_str(), &model));
    save_with_tying(model, "blocks.0.fc", dir);
    acc_model* other = nullptr;
    ACC_ASSERT_OK(acc_model_load_torchscript(untied.c_str(), &other));
    EXPECT_EQ(acc_model_load_lora(other, dir.c_str()), ACC_OK) << acc_last_error_message();
    acc_model_free(other);
    acc_model_free(model);
  }
  fs::remove_all(dir);
  fs::remove_all(again);
}

// A refusal changes nothing, the global random stream included: PEFT's nn.Linear draws come before
// the check of a decomposing start's rank. Loaded from a file, the refusal names the folder.
TEST(Lora, RefusalsLeaveTheRandomStreamAndTheFolderAsTheyWere) {
  acc_model* m = net();
  ACC_ASSERT_OK(acc_set_seed(21));
  const auto expected = acc_test::next_global_draws();
  ACC_ASSERT_OK(acc_set_seed(21));
  acc_options* o = lora_options(7, 8);  // beyond '0''s rank bound min(8, 6)
  ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "pissa"));
  ACC_EXPECT_ERROR(acc_model_add_lora(m, kTargets, o, nullptr), ACC_ERR_INVALID_ARGUMENT, "exceeds");
  acc_options_free(o);
  EXPECT_EQ(acc_test::next_global_draws(), expected);

  const std::string dir = acc_test::temp_path("lora_refusals");
  fs::remove_all(dir);
  acc_model* wide = net();
  add_lora(wide, kTargets, 7, 8);  // rank 7 adapters, then said to be PiSSA's
  ACC_ASSERT_OK(acc_model_save_lora(wide, dir.c_str()));
  acc_model_free(wide);
  add_lora(m);
  json j = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  j["init_lora_weights"] = "pissa";
  std::ofstream(dir + "/adapter_config.json") << j.dump();
  acc_model* fresh = net();
  ACC_ASSERT_OK(acc_set_seed(21));
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, dir + "'");
  EXPECT_EQ(acc_test::next_global_draws(), expected);
  acc_model_free(fresh);

  // A configuration far beyond what PEFT writes is refused unread.
  std::ofstream(dir + "/adapter_config.json") << std::string(5 << 20, ' ') << j.dump();
  fresh = net();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "more than an adapter configuration's bound");
  acc_model_free(fresh);

  // A folder where the weights would go: refused before the configuration is replaced.
  fs::remove_all(dir);
  fs::create_directories(dir + "/adapter_model.safetensors");
  std::ofstream(dir + "/adapter_config.json") << "mine";
  ACC_EXPECT_ERROR(acc_model_save_lora(m, dir.c_str()), ACC_ERR_IO, "adapter_model.safetensors");
  EXPECT_EQ(acc_test::read_file(dir + "/adapter_config.json"), "mine");
  // An adapter named as PEFT's files would take their place in the folder.
  o = lora_options(2, 4);
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "adapter_config.json", kTargets, o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "would name a folder in place of");
  // So would one named as the lock a save takes there.
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, ".accelerate_adapter_save.lock", kTargets, o, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "in place of (or beside) the lock file");
  // PEFT's ModuleDicts refuse a '.' in an adapter's name.
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "v1.2", kTargets, o, nullptr), ACC_ERR_INVALID_ARGUMENT, "holds a '.'");
  // A mixed batch's adapter_names call the base model "__base__": an adapter of that name could not be chosen.
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "__base__", kTargets, o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "calls the base model");
  acc_options_free(o);
  acc_model_free(m);
}
