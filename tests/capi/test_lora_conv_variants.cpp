// LoRA on grouped and depthwise convolutions with lora_bias, and DoRA on convolutions (grouped ones too), as PEFT
// computes them (export_lora_cases.py's "conv_variants" case, PEFT's _ConvNd and _DoraConvNdLayer restated), bit for
// bit, on a TorchScript model and on its twin written as a layer spec (whose "conv2d" layers take adapters too): the
// draws and the rest of the global stream, outputs in evaluation and in training with dropout, gradients, PEFT's files
// and DoRA's merged weights; merging a grouped convolution's adapter is refused as PEFT refuses it.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"
#include "twin_support.h"

using acc_test::float_values;
using acc_test::from_json;
using json = nlohmann::json;
using namespace lora_test;
using namespace twin_test;
namespace fs = std::filesystem;

namespace {

// VariantConvNet as a layer spec: its layers named by position (the case's spec_names).
constexpr const char* kSpec = R"([
  {"type":"conv2d","in_channels":2,"out_channels":4,"kernel_size":3,"stride":2,"padding":1},{"type":"relu"},
  {"type":"conv2d","in_channels":4,"out_channels":6,"kernel_size":3,"padding":1,"groups":2},{"type":"relu"},
  {"type":"conv2d","in_channels":6,"out_channels":6,"kernel_size":3,"padding":1,"groups":6},{"type":"tanh"},
  {"type":"conv2d","in_channels":6,"out_channels":3,"kernel_size":1},{"type":"flatten"},
  {"type":"linear","in_features":27,"out_features":2}])";

std::vector<Twin> conv_twins(const json& c) { return twins("conv_variants_model.pt", kSpec, c["spec_names"]); }

std::vector<float> eval_output(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, from_json(c["input"]));
}

// DoRA added as case `k` says on `m`: PEFT's draws and the stream after them, its magnitudes (a
// convolution's in PEFT's shape, 1 x out x 1 x 1: its output channels' norms), and with the case's
// chosen B and magnitudes its outputs in evaluation and in training, and its gradients.
void expect_dora_as_peft(acc_model* m, const json& c, const json& k, const Twin& twin) {
  ACC_ASSERT_OK(acc_set_seed(k["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(add_case_lora(m, k, targets(k["targets"], twin), {{"use_dora", "true"}}));
  for (const auto& item : k["initial_a"].items())
    EXPECT_EQ(param(m, twin.name(item.key()) + ".lora_A.weight"), float_values(item.value())) << item.key();
  for (const auto& item : k["initial_magnitude"].items()) {
    const std::string name = twin.name(item.key()) + ".lora_magnitude_vector";
    EXPECT_EQ(param(m, name), float_values(item.value())) << name;
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(m, name.c_str(), &t));
    EXPECT_EQ(acc_test::shape(t), item.value()["shape"].get<std::vector<int64_t>>()) << name;
    acc_tensor_free(t);
  }
  EXPECT_EQ(acc_test::next_global_draws(), float_values(k["next_draw"]));
  choose(m, k["chosen"], twin);
  EXPECT_EQ(eval_output(m, c), float_values(k["eval_output"]));
  expect_training(m, from_json(c["input"]), k, twin);
}

// `m`'s adapters saved into `dir` (left there) and loaded into a fresh twin: the DoRA magnitude of
// `module` saved in PEFT's `shape`, the loaded model computing the case's evaluation output.
void expect_reloads(acc_model* m, const json& c, const json& k, const Twin& twin, const std::string& dir,
                    const std::string& module, const std::vector<int64_t>& shape) {
  acc_model* loaded = reloaded(m, dir, twin);
  EXPECT_EQ(saved_shape(dir, twin.name(module + ".lora_magnitude_vector")), shape);
  EXPECT_EQ(eval_output(loaded, c), float_values(k["eval_output"]));
  acc_model_free(loaded);
}

}  // namespace

TEST(LoraConvVariants, GroupedConvolutionsWithLoraBiasComputeAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv_variants"), k = c["grouped"];
  for (const Twin& twin : conv_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ACC_ASSERT_OK(acc_set_seed(k["seed"].get<uint64_t>()));
    ACC_ASSERT_OK(add_case_lora(m, k, targets(k["targets"], twin), {{"lora_bias", "true"}}));
    // lora_A takes all input channels, lora_B r / groups per output, drawn as nn.Conv2d draws them.
    for (const auto& item : k["initial_a"].items()) {
      const std::string module = twin.name(item.key());
      EXPECT_EQ(param(m, module + ".lora_A.weight"), float_values(item.value())) << module;
      acc_tensor* b = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(m, (module + ".lora_B.weight").c_str(), &b));
      EXPECT_EQ(acc_test::shape(b), k["initial_b_shape"][item.key()].get<std::vector<int64_t>>()) << module;
      acc_tensor_free(b);
    }
    EXPECT_EQ(acc_test::next_global_draws(), float_values(k["next_draw"]));
    choose(m, k["chosen"], twin);
    EXPECT_EQ(eval_output(m, c), float_values(k["eval_output"]));
    expect_training(m, from_json(c["input"]), k, twin);

    // PEFT's files: a grouped lora_B keeps r / groups inputs; read back, the model computes alike.
    const std::string dir = acc_test::temp_path("lora_conv_groups");
    acc_model* loaded = reloaded(m, dir, twin);
    EXPECT_EQ(saved_shape(dir, twin.name("depthwise.lora_B.weight")), (std::vector<int64_t>{6, 1, 1, 1}));
    EXPECT_EQ(eval_output(loaded, c), float_values(k["eval_output"]));
    acc_model_free(loaded);
    {  // a lora_B of r inputs on a layer of 2 groups does not fit it
      acc_tensor* wrong = floats(std::vector<float>(6 * 6), {6, 6, 1, 1});
      acc_test::replace_saved_tensor(dir + "/adapter_model.safetensors",
                                     "base_model.model." + twin.name("grouped.lora_B.weight"), wrong);
      acc_tensor_free(wrong);
      expect_load_refused(twin, dir, ACC_ERR_INVALID_ARGUMENT, "does not fit");
    }
    fs::remove_all(dir);

    // A grouped convolution's adapter is no weight of the layer's shape: merging is refused as PEFT
    // refuses it, and nothing changes.
    const std::vector<float> weight = param(m, twin.name("grouped.weight"));
    ACC_EXPECT_ERROR(acc_model_merge_lora(m), ACC_ERR_UNSUPPORTED, "with groups 2");
    ACC_EXPECT_ERROR(acc_model_save_torchscript(m, acc_test::temp_path("grouped.pt").c_str()), ACC_ERR_UNSUPPORTED,
                     "with groups");
    EXPECT_EQ(param(m, twin.name("grouped.weight")), weight);
    EXPECT_EQ(eval_output(m, c), float_values(k["eval_output"]));
    acc_model_free(m);
  }
}

TEST(LoraConvVariants, GroupedConvolutionsRefuseWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv_variants");
  for (const Twin& twin : conv_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    const auto names = acc_test::parameter_names(m);
    // r must divide among the groups (PEFT's ValueError): r 4 on the depthwise layer's 6.
    acc_options* o = lora_options(4, 4);
    ACC_EXPECT_ERROR(acc_model_add_lora(m, twin.name("depthwise").c_str(), o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                     "r 4 is not divisible by its groups");
    EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
    // rank_pattern gives it a rank that does.
    ACC_ASSERT_OK(acc_options_set(o, "rank_pattern", R"({"depthwise": 6, "4": 6})"));
    EXPECT_EQ(acc_model_add_lora(m, (twin.name("depthwise") + "," + twin.name("grouped")).c_str(), o, nullptr), ACC_OK)
        << acc_last_error_message();
    acc_options_free(o);
    acc_model_free(m);
  }
  // A spec convolution with a dilation: PEFT's lora_A would not follow it.
  acc_model* dilated = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(
      R"([{"type":"conv2d","in_channels":2,"out_channels":2,"kernel_size":3,"dilation":2,"padding":2}])", &dilated));
  acc_options* o = lora_options(2, 4);
  ACC_EXPECT_ERROR(acc_model_add_lora(dilated, "0", o, nullptr), ACC_ERR_UNSUPPORTED, "'0': it has a dilation");
  acc_options_free(o);
  acc_model_free(dilated);
}

TEST(LoraConvVariants, DoraOnConvolutionsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv_variants"), k = c["dora"];
  for (const Twin& twin : conv_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ASSERT_NO_FATAL_FAILURE(expect_dora_as_peft(m, c, k, twin));

    // PEFT's files hold the magnitude in its shape; a vector for a convolution is refused.
    const std::string dir = acc_test::temp_path("lora_conv_dora");
    expect_reloads(m, c, k, twin, dir, "conv0", {1, 4, 1, 1});
    acc_tensor* vector = floats(std::vector<float>(4, 1.0f), {4});
    acc_test::replace_saved_tensor(dir + "/adapter_model.safetensors",
                                   "base_model.model." + twin.name("conv0.lora_magnitude_vector"), vector);
    acc_tensor_free(vector);
    acc_model* fresh = twin.make();
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "a convolution's is 1 x out x 1");
    acc_model_free(fresh);
    fs::remove_all(dir);

    // PEFT's DoRA merge: m / ||W + delta|| per output channel times W + delta.
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    expect_params(m, k["merged"], twin);
    EXPECT_LT(acc_test::max_difference(eval_output(m, c), float_values(k["eval_output"])), 1e-5f);
    acc_model_free(m);
  }
}

// DoRA on the grouped and depthwise convolutions, as PEFT's _DoraConvNdLayer computes it there: the norms
// of W + scaling * (B A), B A the product of the flattened kernels (B viewed as out/groups x r) laid
// into the weight's shape. Merging stays refused, as PEFT refuses it for any convolution with groups.
TEST(LoraConvVariants, DoraOnGroupedConvolutionsComputesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv_variants"), k = c["dora_grouped"];
  for (const Twin& twin : conv_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ASSERT_NO_FATAL_FAILURE(expect_dora_as_peft(m, c, k, twin));

    const std::string dir = acc_test::temp_path("lora_conv_dora_grouped");
    expect_reloads(m, c, k, twin, dir, "depthwise", {1, 6, 1, 1});
    fs::remove_all(dir);

    ACC_EXPECT_ERROR(acc_model_merge_lora(m), ACC_ERR_UNSUPPORTED, "with groups 2");
    EXPECT_EQ(eval_output(m, c), float_values(k["eval_output"])) << "a refused merge changes nothing";
    acc_model_free(m);
  }
}
