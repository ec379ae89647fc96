// PEFT's VeRA (acc_model_add_vera): frozen random projections shared by the targeted layers and two
// trained vectors per layer. Checked against PEFT's layers restated in lora_vera_case.py (the "vera"
// case of export_lora_cases.py) on a TorchScript model with two nn.Linear layers and transformers'
// Conv1D: the projections drawn from their own seeded generator, the vectors' draws and the stream
// after them, the outputs in evaluation and in training (vera_dropout), the gradients, three AdamW
// steps and the merged weights, bit for bit; PEFT's files both ways, with and without the
// projections; what PEFT refuses.
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

acc_model* vera_model() { return eager_data_model("vera_model.pt"); }

acc_model* adapted(const json& c, bool init, bool save_projection = true) {
  acc_model* m = vera_model();
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_VERA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "projection_prng_key", c["projection_prng_key"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "d_initial", c["d_initial"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "vera_dropout", c["vera_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "save_projection", save_projection), ACC_OK);
  EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  size_t count = 0;
  EXPECT_EQ(acc_model_add_vera(m, c["targets"].get<std::string>().c_str(), o, &count), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(count, 3u);
  acc_options_free(o);
  return m;
}

}  // namespace

TEST(Vera, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("vera");
  acc_model* base = vera_model();
  const auto base_output = eval_outputs(base, c);
  acc_model* m = adapted(c, /*init=*/true);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));  // one torch.randn(r) per layer
  expect_params(m, c["initial"]);
  EXPECT_EQ(eval_outputs(m, c), base_output);  // lambda_b zero: the model starts unchanged
  EXPECT_EQ(acc_test::parameter_names(m),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc1.vera_lambda_b", "fc1.vera_lambda_d", "proj.weight",
                                      "proj.bias", "proj.vera_lambda_b", "proj.vera_lambda_d", "head.weight",
                                      "head.bias", "head.vera_lambda_b", "head.vera_lambda_d"}));
  acc_model_free(m);

  // init_weights false: torch.randn's lambda_d and ones; the case's chosen vectors are those.
  m = adapted(c, /*init=*/false);
  expect_params(m, c["chosen"]);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
  // Training mode: vera_dropout on each layer's input, drawn in the forward's order.
  expect_training_step(m, c["input"], c["train_seed"].get<uint64_t>(), c["train_output"], c["grads"]);
  // Disabled: the base model's outputs.
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(eval_outputs(m, c), base_output);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
  // save_model writes the merged weights (no vector, no projection); PEFT's merge: W plus the delta
  // (a Conv1D's transposed).
  expect_saved_model_merged(m, c["merged"], 6, "vera_saved_model");  // the three layers' weights and biases
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  for (const auto& item : c["merged"].items())
    EXPECT_EQ(param(m, item.key()), float_values(item.value())) << item.key();
  acc_model_free(m);
  acc_model_free(base);
}

TEST(Vera, TrainsAsPeftWithDropoutAndAdamW) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("vera");
  expect_case_training(adapted(c, /*init=*/false), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
}

TEST(Vera, PeftFilesBothWaysWithAndWithoutTheProjections) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("vera");
  acc_model* m = adapted(c, /*init=*/false);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("vera_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "VERA");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["projection_prng_key"], 7);
  EXPECT_EQ(config["save_projection"], true);
  EXPECT_EQ(config["vera_dropout"], 0.25);
  EXPECT_EQ(config["d_initial"], 0.2);
  EXPECT_EQ(config["fan_in_fan_out"], false);  // the last adapted layer's kind (head), as PEFT writes it
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["init_weights"], false);
  // The projections under PEFT's names, bit for bit as PEFT draws them.
  acc_tensor_list* saved = adapter_file_tensors(dir);
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 8u);
  for (const char* name : {"vera_A", "vera_B"}) {
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_find(saved, (std::string("base_model.") + name).c_str(), &t));
    EXPECT_EQ(acc_test::shape(t), c[name]["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(to_floats(t), float_values(c[name])) << name;
    acc_tensor_free(t);
  }
  acc_tensor_list_free(saved);
  acc_model* fresh = vera_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);

  // The file's projections are the ones used: changed in the file, the outputs change with them.
  zero_adapter_tensor(dir, "base_model.vera_A");
  acc_model* plain = vera_model();
  const auto base_output = eval_outputs(plain, c);
  acc_model_free(plain);
  fresh = vera_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), base_output);  // vera_A zero: no branch
  acc_model_free(fresh);

  // save_projection false: no projections in the file; loading draws them again from the seed.
  acc_model* unsaved = adapted(c, /*init=*/false, /*save_projection=*/false);
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(unsaved, dir.c_str()));
  acc_model_free(unsaved);
  saved = adapter_file_tensors(dir);
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 6u);
  acc_tensor_list_free(saved);
  fresh = vera_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // A file whose configuration says it saves them but holds none is refused, naming them.
  {
    json j = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
    j["save_projection"] = true;
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = vera_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "lacks VeRA's projections (base_model.vera_A");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);
  // As PEFT writes it (keys sorted, its own fields), another r: the vectors do not fit.
  std::ofstream(dir + "/adapter_config.json")
      << R"({"auto_mapping": null, "base_model_name_or_path": null, "bias": "none", "d_initial": 0.2,
      "fan_in_fan_out": false, "inference_mode": true, "init_weights": false, "layers_pattern": null,
      "layers_to_transform": null, "modules_to_save": null, "peft_type": "VERA", "peft_version": "0.18.0",
      "projection_prng_key": 7, "r": 5, "revision": null, "save_projection": false,
      "target_modules": ["head", "proj", "fc1"], "task_type": null, "vera_dropout": 0.25})";
  fresh = vera_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "vera_lambda_d' has shape [4]");
  acc_model_free(fresh);

  // d_initial beyond float32's range (lambda_d holds it in float32): refused when set, as when read.
  {
    acc_options* o = nullptr;
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_VERA, &o));
    ACC_EXPECT_ERROR(acc_options_set_double(o, "d_initial", 1e308), ACC_ERR_INVALID_ARGUMENT, "d_initial");
    acc_options_free(o);
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OFT, &o));
    ACC_EXPECT_ERROR(acc_options_set_double(o, "eps", 1e39), ACC_ERR_INVALID_ARGUMENT, "eps");
    acc_options_free(o);
  }

  // What PEFT's VeRA refuses.
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_vera(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "VeRA cannot adapt 'embed'");
  acc_model_free(lm);
  acc_model* conv = data_model("lokr_model.pt");
  ACC_EXPECT_ERROR(acc_model_add_vera(conv, "conv", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "VeRA cannot adapt 'conv'");
  acc_model_free(conv);
  expect_no_weighted_adapter(m, "VeRA");
  acc_model_free(m);
}

TEST(Vera, SpecModelTrainsAndMerges) {
  expect_spec_adapters_train_and_merge(acc_model_add_vera, ACC_OPTIONS_VERA, {{"r", 4}}, "0,linear1,linear2", 3);
}

// Several named VeRA adapters (PEFT's add_adapter): each keeps its own projections (its seed and
// rank); switching gives each its outputs back, and each saves and loads by name.
TEST(Vera, NamedAdaptersKeepTheirOwnProjections) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("vera");
  acc_model* m = vera_model();
  auto add = [&](const char* name, int64_t r, int64_t key, bool save_projection = true) {
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_VERA, &o), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "r", r), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "projection_prng_key", key), ACC_OK);
    EXPECT_EQ(acc_options_set_bool(o, "save_projection", save_projection), ACC_OK);
    EXPECT_EQ(acc_options_set_bool(o, "init_weights", 0), ACC_OK);
    const acc_status status = acc_model_add_lora_named(m, name, "fc1,head", o, nullptr);
    acc_options_free(o);
    return status;
  };
  ACC_ASSERT_OK(add("first", 4, 7));
  ACC_ASSERT_OK(add("second", 2, 7));
  // PEFT's VeRA takes one key and one save_projection for every adapter (its ValueErrors).
  ACC_EXPECT_ERROR(add("third", 2, 3), ACC_ERR_INVALID_ARGUMENT, "takes one key for every adapter");
  ACC_EXPECT_ERROR(add("third", 2, 7, false), ACC_ERR_INVALID_ARGUMENT, "saves the projections of every adapter");
  const auto first = eval_outputs(m, c);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "second"));
  const auto second = eval_outputs(m, c);
  EXPECT_NE(first, second);
  const std::string dir = acc_test::temp_path("vera_named");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));  // each in its folder, as PEFT's save_pretrained
  ACC_ASSERT_OK(acc_model_set_adapter(m, "first"));
  EXPECT_EQ(eval_outputs(m, c), first);
  acc_model* fresh = vera_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, (dir + "/second").c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), second);
  acc_model_free(fresh);
  acc_model_free(m);
}

// The projections are buffers of the model's state ("vera_A", "vera_B"): the state dict holds them,
// loading a state puts them back (a model drawn from another seed then computes as the saved one),
// and acc_model_to moves them with the vectors. Loading a file into VeRA adapters of another seed is
// refused, nothing changed.
TEST(Vera, ProjectionsAreStateBuffersThatLoadAndMove) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("vera");
  auto with_key = [&](int64_t key, bool save_projection) {
    acc_model* m = vera_model();
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_VERA, &o), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "r", 4), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "projection_prng_key", key), ACC_OK);
    EXPECT_EQ(acc_options_set_bool(o, "save_projection", save_projection), ACC_OK);
    EXPECT_EQ(acc_options_set_bool(o, "init_weights", 0), ACC_OK);
    EXPECT_EQ(acc_model_add_vera(m, "fc1,proj,head", o, nullptr), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    return m;
  };
  acc_model* seven = with_key(7, true);
  const auto output = eval_outputs(seven, c);
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(seven, &state));
  // Last, as PEFT's state_dict() lists its model's own buffers after the base model's layers.
  const auto names = acc_test::tensor_names(state);
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(std::vector<std::string>(names.end() - 2, names.end()), (std::vector<std::string>{"vera_A", "vera_B"}));
  acc_tensor* projection = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(state, "vera_A", &projection));
  EXPECT_EQ(to_floats(projection), float_values(c["vera_A"]));
  acc_tensor_free(projection);
  acc_model* eight = with_key(8, true);
  EXPECT_NE(eval_outputs(eight, c), output);
  ACC_ASSERT_OK(acc_model_load_state_dict(eight, state, 1));
  EXPECT_EQ(eval_outputs(eight, c), output);
  acc_tensor_list_free(state);

  // A file of seed 7 without its projections into adapters of seed 9: refused, nothing changed.
  acc_model* unsaved = with_key(7, false);
  const std::string dir = acc_test::temp_path("vera_seed");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(unsaved, dir.c_str()));
  acc_model* nine = with_key(9, false);
  const auto nine_output = eval_outputs(nine, c);
  ACC_EXPECT_ERROR(acc_model_load_lora(nine, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "projection_prng_key 7");
  EXPECT_EQ(eval_outputs(nine, c), nine_output);

  // float64: vectors and projections move together, and the model computes in it.
  ACC_ASSERT_OK(acc_model_to(seven, nullptr, ACC_DTYPE_FLOAT64));
  acc_tensor *x = from_json(c["input"]), *x64 = nullptr, *y = nullptr, *y32 = nullptr;
  ACC_ASSERT_OK(acc_tensor_to(x, nullptr, ACC_DTYPE_FLOAT64, &x64));
  ACC_ASSERT_OK(acc_model_set_training(seven, 0));
  ACC_ASSERT_OK(acc_model_forward1(seven, x64, ACC_FORWARD_NO_GRAD, &y));
  ACC_ASSERT_OK(acc_tensor_to(y, nullptr, ACC_DTYPE_FLOAT32, &y32));
  const auto wide = to_floats(y32);
  ASSERT_EQ(wide.size(), output.size());
  for (size_t i = 0; i < wide.size(); ++i) EXPECT_NEAR(wide[i], output[i], 1e-5);
  for (acc_tensor* t : {x, x64, y, y32}) acc_tensor_free(t);
  for (acc_model* m : {seven, eight, unsaved, nine}) acc_model_free(m);
}
