// LoRA on transformers' Conv1D (GPT-2's c_attn, c_proj, c_fc: a linear layer whose weight is in x out),
// which PEFT adapts as a linear layer with fan_in_fan_out. Checked bit for bit against PEFT's layer
// restated in export_lora_cases.py (its "conv1d" case, on a TorchScript GPT-2 MLP whose Conv1D has
// transformers' module path): the draws and the rest of the global stream, outputs in evaluation and in
// training with dropout, gradients, PEFT's files (fan_in_fan_out as PEFT writes it), merged weights;
// DoRA, PiSSA and MiCA on the transposed weight; OLoRA, which PEFT would get wrong there, refused.
#include <nlohmann/json.hpp>

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

const Twin kScript = script_only("conv1d_model.pt");  // no layer spec has its layers

acc_tensor* input(const json& c) { return acc_test::from_json(c["input"]); }

std::vector<float> eval_output(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, input(c));
}

json adapter_config(const std::string& dir) {
  std::ifstream file(dir + "/adapter_config.json");
  return json::parse(file);
}

}  // namespace

TEST(LoraConv1d, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv1d");
  acc_model* m = kScript.make();
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(add_case_lora(m, c, c["targets"]));
  // lora_A r x in and lora_B out x r, whichever way the layer stores its weight; PEFT's draws.
  expect_params(m, c["initial"], kScript);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
  const auto names = acc_test::parameter_names(m);
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names[0], "c_fc.weight");
  EXPECT_EQ(names[1], "c_fc.bias");
  EXPECT_EQ(names[2], "c_fc.lora_A.weight");
  EXPECT_EQ(names[3], "c_fc.lora_B.weight");
  choose(m, c["chosen"], kScript);
  EXPECT_EQ(eval_output(m, c), float_values(c["eval_output"]));
  expect_training(m, input(c), c, kScript);

  // PEFT's files: its config says fan_in_fan_out false (the last adapted layer, the head, is an
  // nn.Linear, and PEFT sets the flag per layer as it goes); read back, each layer's kind decides.
  const std::string dir = acc_test::temp_path("lora_conv1d");
  acc_model* loaded = reloaded(m, dir, kScript);
  EXPECT_EQ(adapter_config(dir)["fan_in_fan_out"], false);
  EXPECT_EQ(saved_shape(dir, "c_fc.lora_A.weight"), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(saved_shape(dir, "c_fc.lora_B.weight"), (std::vector<int64_t>{12, 2}));
  EXPECT_EQ(eval_output(loaded, c), float_values(c["eval_output"]));
  acc_model_free(loaded);
  {  // an adapter laid out as the weight is (in x out) does not fit, and nothing is added
    acc_tensor* wrong = acc_test::floats(std::vector<float>(2 * 12), {2, 12});
    acc_test::replace_saved_tensor(dir + "/adapter_model.safetensors", "base_model.model.c_fc.lora_A.weight", wrong);
    acc_tensor_free(wrong);
    expect_load_refused(kScript, dir, ACC_ERR_INVALID_ARGUMENT, "does not fit");
  }
  fs::remove_all(dir);

  // Merged as PEFT merges: W + (B @ A)^T * scaling into the Conv1D, W + (B @ A) * scaling into the head;
  // the TorchScript file written then computes as the adapted model.
  expect_merges(m, c, kScript, acc_test::temp_path("lora_conv1d_merged.pt"),
                [&](acc_model* model) { return eval_output(model, c); });
  acc_model_free(m);
}

// DoRA on the Conv1D layers: a magnitude per output (the norms of W^T + s B A), PEFT's forward and merge.
TEST(LoraConv1d, DoraComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv1d"), k = c["dora"];
  acc_model* m = kScript.make();
  ACC_ASSERT_OK(acc_set_seed(k["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(add_case_lora(m, k, k["targets"], {{"use_dora", "true"}}));
  expect_params(m, k["initial"], kScript);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(k["next_draw"]));
  choose(m, k["chosen"], kScript);
  EXPECT_EQ(eval_output(m, c), float_values(k["eval_output"]));
  expect_training(m, input(c), k, kScript);
  const std::string dir = acc_test::temp_path("lora_conv1d_dora");
  acc_model* loaded = reloaded(m, dir, kScript);
  EXPECT_EQ(adapter_config(dir)["fan_in_fan_out"], true) << "the last adapted layer is a Conv1D";
  EXPECT_EQ(saved_shape(dir, "c_fc.lora_magnitude_vector"), (std::vector<int64_t>{12}));
  EXPECT_EQ(eval_output(loaded, c), float_values(k["eval_output"]));
  acc_model_free(loaded);
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  expect_params(m, k["merged"], kScript);
  EXPECT_LT(acc_test::max_difference(eval_output(m, c), float_values(k["eval_output"])), 1e-5f);
  acc_model_free(m);
}

// PiSSA and MiCA decompose the weight as PEFT does, transposed to nn.Linear's layout (PiSSA's residual
// transposed back); OLoRA, which PEFT applies to the weight as stored (adapters of the wrong shape, or
// a changed output), is refused; lora_bias merges into the Conv1D's bias.
TEST(LoraConv1d, InitialisationsTakeTheWeightAsNnLinearHoldsIt) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv1d"), k = c["init"];
  for (const auto& [init, expected] : k["cases"].items()) {
    SCOPED_TRACE(init);
    acc_model* m = kScript.make();
    const std::vector<float> base = eval_output(m, c);
    ACC_ASSERT_OK(acc_set_seed(k["seed"].get<uint64_t>()));
    ACC_ASSERT_OK(add_case_lora(m, k, k["targets"], {{"init_lora_weights", init.c_str()}}));
    expect_params(m, expected["initial"], kScript);
    expect_params(m, expected["weights"], kScript);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(expected["next_draw"]));
    EXPECT_LT(acc_test::max_difference(eval_output(m, c), base), 1e-5f) << "the adapted model starts as the base";
    acc_model_free(m);
  }
  acc_model* m = kScript.make();
  const auto names = acc_test::parameter_names(m);
  ACC_EXPECT_ERROR(add_case_lora(m, k, k["targets"], {{"init_lora_weights", "olora"}}), ACC_ERR_UNSUPPORTED,
                   "init_lora_weights olora on");
  EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
  // lora_bias: lora_B's bias merges into the layer's (Conv1D's bias is its outputs').
  ACC_ASSERT_OK(add_case_lora(m, k, k["targets"], {{"lora_bias", "true"}, {"init_lora_weights", "false"}}));
  choose(m, json{{"c_fc.lora_B.bias", json{{"shape", {12}}, {"values", std::vector<float>(12, 0.25f)}}}}, kScript);
  const std::vector<float> adapted = eval_output(m, c);
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  EXPECT_LT(acc_test::max_difference(eval_output(m, c), adapted), 1e-5f);
  acc_model_free(m);
}
