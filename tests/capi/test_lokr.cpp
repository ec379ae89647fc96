// PEFT's LoKr (acc_model_add_lokr): W + kron(w1, w2) * alpha / r on linear layers and convolutions.
// Checked against PEFT's layers restated in lora_lokr_case.py (the "lokr" case of
// export_lora_cases.py) on a TorchScript model with a dilated 2-D and a 1-D convolution and two
// linear layers, in two configurations ("cp": decompose_both, the CP form of both convolutions,
// rank_dropout_scale; "plain": decompose_factor 2, a 1-D convolution's whole 3-D w2, LyCORIS'
// draws): the draws and the stream after them, the outputs in evaluation and in training (rank and
// module dropout drawn where PEFT draws them), the gradients, three AdamW steps and the merged
// weights, bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
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

acc_model* lokr_model() { return eager_data_model("lokr_model.pt"); }

// The options of one of the case's configurations; `init` "" for the configuration's own.
acc_options* lokr_options(const json& c, const std::string& init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_LOKR, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "alpha", c["alpha"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "rank_pattern", c["rank_pattern"].dump().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "decompose_both", c["decompose_both"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "decompose_factor", c["decompose_factor"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "use_effective_conv2d", c["use_effective_conv2d"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "rank_dropout_scale", c["rank_dropout_scale"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "rank_dropout", c["rank_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "module_dropout", c["module_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "init_weights", (init.empty() ? c["init"].get<std::string>() : init).c_str()), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, const std::string& init = "false") {
  return adapted_case_model("lokr_model.pt", acc_model_add_lokr, "conv,seq,fc1,head", lokr_options(c, init),
                            c["seed"].get<uint64_t>(), 4);
}

// Each layer's weight and bias, then its factors in PEFT's registration order.
std::vector<std::string> expected_names(const json& c) {
  std::vector<std::string> names;
  std::string layer;
  for (const auto& name : c["names"]) {
    const std::string n = name.get<std::string>(), module = n.substr(0, n.find('.'));
    if (module != layer) names.insert(names.end(), {module + ".weight", module + ".bias"}), layer = module;
    names.push_back(n);
  }
  return names;
}

}  // namespace

TEST(Lokr, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json lokr = lora_case("lokr");
  acc_model* base = lokr_model();
  const auto base_output = eval_outputs(base, lokr);
  for (const char* config : {"cp", "plain"}) {
    SCOPED_TRACE(config);
    const json& c = lokr[config];
    // The configuration's own draws (w1 zero, or LyCORIS' w2 zero): the model starts unchanged.
    acc_model* m = adapted(c, "");
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    expect_params(m, c["initial"]);
    EXPECT_EQ(eval_outputs(m, lokr), base_output);
    EXPECT_EQ(acc_test::parameter_names(m), expected_names(c));
    acc_model_free(m);

    // init_weights false: every factor drawn; the case's chosen factors are those draws.
    m = adapted(c);
    expect_params(m, c["chosen"]);
    EXPECT_EQ(eval_outputs(m, lokr), float_values(c["eval_output"]));
    // Training mode: module dropout (torch.rand(1) per layer) and rank dropout drawn in the forward.
    expect_training_step(m, lokr["input"], c["train_seed"].get<uint64_t>(), c["train_output"], c["grads"]);
    // Disabled: the base model's outputs.
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    EXPECT_EQ(eval_outputs(m, lokr), base_output);
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
    // save_model writes the merged weights (the four layers' weights and biases, no factor); PEFT's
    // merge: W plus the delta.
    expect_saved_model_merged(m, c["merged"], 8, "lokr_saved_model");
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    for (const auto& item : c["merged"].items())
      EXPECT_EQ(param(m, item.key()), float_values(item.value())) << item.key();
    acc_model_free(m);
  }
  acc_model_free(base);
}

TEST(Lokr, TrainsAsPeftWithDropoutAndAdamW) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json lokr = lora_case("lokr");
  for (const char* config : {"cp", "plain"}) {
    SCOPED_TRACE(config);
    const json& c = lokr[config];
    expect_case_training(adapted(c), lokr["input"], lokr["target"], c, c["train_seed"].get<uint64_t>());
  }
}

TEST(Lokr, PeftFilesBothWaysAndRefusals) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json lokr = lora_case("lokr");
  const json& c = lokr["cp"];
  acc_model* m = adapted(c);
  const auto output = eval_outputs(m, lokr);
  const std::string dir = acc_test::temp_path("lokr_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LOKR");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["alpha"], 3.0);
  EXPECT_EQ(config["rank_pattern"], (json{{"conv", 1}, {"seq", 1}}));
  EXPECT_EQ(config["decompose_both"], true);
  EXPECT_EQ(config["decompose_factor"], -1);
  EXPECT_EQ(config["use_effective_conv2d"], true);
  EXPECT_EQ(config["rank_dropout_scale"], true);
  EXPECT_EQ(config["init_weights"], false);
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, c["names"].size());
  acc_tensor* t = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(saved, "base_model.model.seq.lokr_t2", &t));
  EXPECT_EQ(acc_test::shape(t), (std::vector<int64_t>{1, 1, 2, 1}));  // a 1-D kernel's CP core, as PEFT's
  acc_tensor_free(t);
  acc_tensor_list_free(saved);
  acc_model* fresh = lokr_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, lokr), output);
  acc_model_free(fresh);

  // As PEFT writes it (keys sorted, its own fields).
  auto write_config = [&](const char* text) {
    std::ofstream out(dir + "/adapter_config.json");
    out << text;
  };
  write_config(R"({"alpha": 3, "alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": null,
      "decompose_both": true, "decompose_factor": -1, "exclude_modules": null, "inference_mode": true,
      "init_weights": true, "layers_pattern": null, "layers_to_transform": null, "module_dropout": 0.0,
      "modules_to_save": null, "peft_type": "LOKR", "peft_version": "0.18.0", "r": 2, "rank_dropout": 0.0,
      "rank_dropout_scale": false, "rank_pattern": {"conv": 1, "seq": 1}, "revision": null,
      "target_modules": ["head", "fc1", "seq", "conv"], "task_type": null, "use_effective_conv2d": true})");
  fresh = lokr_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, lokr), output);
  acc_model_free(fresh);
  // Without decompose_both and the CP form the configuration makes other factors: refused naming
  // one, nothing added.
  write_config(R"({"peft_type": "LOKR", "r": 2, "alpha": 3, "rank_pattern": {"conv": 1, "seq": 1},
      "target_modules": ["head", "fc1", "seq", "conv"]})");
  fresh = lokr_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "the LoKr adapter of 'conv' lacks 'conv.lokr_w1'");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);
  write_config(R"({"peft_type": "LOKR", "init_weights": 2, "target_modules": ["head"]})");
  fresh = lokr_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "'init_weights' must be true or false");
  acc_model_free(fresh);

  // A null alpha: PEFT divides by it (its TypeError), refused by name.
  write_config(R"({"peft_type": "LOKR", "r": 2, "alpha": null, "target_modules": ["head"]})");
  fresh = lokr_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "'alpha' is null");
  acc_model_free(fresh);

  // A file whose factors are no set LoKr makes (w1 beside w1_a and w1_b) is refused naming the module.
  write_config(R"({"peft_type": "LOKR", "r": 2, "alpha": 3, "decompose_both": true, "use_effective_conv2d": true,
      "rank_pattern": {"conv": 1, "seq": 1}, "target_modules": ["head", "fc1", "seq", "conv"]})");
  {
    acc_tensor_list* list = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &list));
    acc_tensor* w = nullptr;
    const int64_t dims[] = {3, 2};
    ACC_ASSERT_OK(acc_tensor_zeros(dims, 2, ACC_DTYPE_FLOAT32, nullptr, &w));
    ACC_ASSERT_OK(acc_tensor_list_append(list, "base_model.model.conv.lokr_w1", w));
    ACC_ASSERT_OK(acc_tensor_list_save_safetensors(list, (dir + "/adapter_model.safetensors").c_str()));
    acc_tensor_free(w);
    acc_tensor_list_free(list);
  }
  fresh = lokr_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO,
                   "the LoKr adapter of 'conv' (base_model.model.conv) holds neither lokr_w1 alone");
  acc_model_free(fresh);

  // What PEFT's LoKr refuses.
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_lokr(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "LoKr cannot adapt 'c_fc'");  // transformers' Conv1D: PEFT's TypeError
  ACC_EXPECT_ERROR(acc_model_add_lokr(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "LoKr cannot adapt 'embed'");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "LoKr");
  ACC_EXPECT_ERROR(acc_model_add_loha(m, "fc1", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "the model already has LoKr adapters");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LOKR, &o));
  ACC_EXPECT_ERROR(acc_options_set(o, "init_weights", "gaussian"), ACC_ERR_INVALID_ARGUMENT, "init_weights");
  acc_options_free(o);
  acc_model_free(m);
}

TEST(Lokr, SpecModelTrainsAndMerges) {
  expect_spec_adapters_train_and_merge(acc_model_add_lokr, ACC_OPTIONS_LOKR, {{"r", 1}, {"decompose_both", 1}},
                                       "0,linear1,linear2", 3);
}

// LoHa and LoKr on dilated convolutions (PEFT's layers pass the layer's dilation to F.conv): the
// branch follows the layer's geometry, so merging changes no output.
TEST(Lokr, DilatedSpecConvolutionsMergeToTheSameOutputs) {
  const char* spec = R"([{"type":"conv2d","in_channels":2,"out_channels":4,"kernel_size":3,"dilation":2,"padding":2},
    {"type":"conv2d","in_channels":4,"out_channels":2,"kernel_size":3,"dilation":[1,2],"padding":[1,2]}])";
  for (acc_options_kind kind : {ACC_OPTIONS_LOHA, ACC_OPTIONS_LOKR}) {
    SCOPED_TRACE(kind);
    ACC_ASSERT_OK(acc_set_seed(3));
    acc_model* m = nullptr;
    ACC_ASSERT_OK(acc_model_from_spec(spec, &m));
    acc_options* o = nullptr;
    ACC_ASSERT_OK(acc_options_create(kind, &o));
    ACC_ASSERT_OK(acc_options_set_int(o, "r", 1));
    ACC_ASSERT_OK(acc_options_set(o, "init_weights", "false"));
    if (kind == ACC_OPTIONS_LOKR) ACC_ASSERT_OK(acc_options_set_bool(o, "use_effective_conv2d", 1));
    ACC_ASSERT_OK(kind == ACC_OPTIONS_LOHA ? acc_model_add_loha(m, "0,1", o, nullptr)
                                           : acc_model_add_lokr(m, "0,1", o, nullptr));
    acc_options_free(o);
    std::vector<float> v(2 * 2 * 6 * 6);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.3f * static_cast<float>(i));
    const auto adapted = outputs_on(m, floats(v, {2, 2, 6, 6}));
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    const auto merged = outputs_on(m, floats(v, {2, 2, 6, 6}));
    ASSERT_EQ(merged.size(), adapted.size());
    for (size_t i = 0; i < merged.size(); ++i) EXPECT_NEAR(merged[i], adapted[i], 1e-5);
    acc_model_free(m);
  }
}

// Loading into a model whose LoKr adapters have other factors for the same ranks (decompose_both,
// decompose_factor, the CP form) is refused naming the layer's factors, before anything changes.
TEST(Lokr, LoadingIntoAdaptersOfAnotherLayoutIsRefused) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json lokr = lora_case("lokr");
  auto with_lokr = [](const char* key, const char* value) {
    acc_model* m = lokr_model();
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_LOKR, &o), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "r", 1), ACC_OK);
    EXPECT_EQ(acc_options_set(o, "init_weights", "false"), ACC_OK);
    if (key) EXPECT_EQ(acc_options_set(o, key, value), ACC_OK);
    EXPECT_EQ(acc_model_add_lokr(m, "conv,fc1", o, nullptr), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    return m;
  };
  for (const auto& [key, value] : {std::pair{"decompose_both", "true"}, std::pair{"decompose_factor", "1"},
                                   std::pair{"use_effective_conv2d", "true"}}) {
    SCOPED_TRACE(key);
    acc_model* source = with_lokr(key, value);
    const std::string dir = acc_test::temp_path(std::string("lokr_layout_") + key);
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(source, dir.c_str()));
    acc_model* m = with_lokr(nullptr, nullptr);
    const auto before = eval_outputs(m, lokr);
    ACC_EXPECT_ERROR(acc_model_load_lora(m, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "the model's adapter lokr_w1");
    EXPECT_EQ(eval_outputs(m, lokr), before);
    acc_model_free(m);
    acc_model_free(source);
  }
}

// A layer without weights (nn.Linear(0, 4)): PyTorch's Kaiming draw leaves an empty tensor as it is,
// so LoRA and LoHa start there as PEFT does; LoKr cannot factor it (0 splits as the factor times 0)
// and says so.
TEST(Lokr, LayersWithoutWeightsAreDrawnOrRefusedByName) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  for (const char* method : {"lora", "loha", "lokr"}) {
    SCOPED_TRACE(method);
    acc_model* m = data_model("empty_linear_model.pt");
    ASSERT_NE(m, nullptr);
    const std::string name = method;
    if (name == "lokr") {
      ACC_EXPECT_ERROR(acc_model_add_lokr(m, "0", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                       "LoKr cannot adapt '0': its weight [4, 0] has no element to factor");
    } else {
      acc_options* o = nullptr;
      ACC_ASSERT_OK(acc_options_create(name == "lora" ? ACC_OPTIONS_LORA : ACC_OPTIONS_LOHA, &o));
      ACC_ASSERT_OK(acc_options_set(o, name == "lora" ? "init_lora_weights" : "init_weights", "false"));
      EXPECT_EQ(name == "lora" ? acc_model_add_lora(m, "0", o, nullptr) : acc_model_add_loha(m, "0", o, nullptr),
                ACC_OK)
          << acc_last_error_message();
      acc_options_free(o);
    }
    acc_model_free(m);
  }
}
