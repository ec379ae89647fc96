// LoRA on a TorchScript model's convolutions (PEFT's Conv1d/Conv2d LoRA layers): lora_A a convolution
// of the layer's kernel, stride and padding, lora_B 1 x 1. Checked against PEFT's layer restated in
// export_lora_cases.py (its "conv" case): the draws and the rest of the global stream, the outputs in
// evaluation and in training mode with dropout, the gradients, the merged weights (PEFT's
// get_delta_weight, 1 x 1 and wider kernels), bit for bit; PEFT's files; what PEFT's adapter would
// not compute as its layer does is refused.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::from_json;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

std::vector<float> values(const json& t) { return t["values"].get<std::vector<float>>(); }

acc_model* conv_model(const char* file = "conv_model.pt") {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/" + file).c_str(), &m), ACC_OK)
      << acc_last_error_message();
  if (m) EXPECT_EQ(acc_model_set_graph_optimization(m, 0), ACC_OK);  // PyTorch's eager arithmetic
  return m;
}

acc_status add(acc_model* m, const json& c, const char* targets = nullptr, const char* extra_key = nullptr,
               const char* extra_value = nullptr) {
  acc_options* o = lora_options(c["r"], c["lora_alpha"]);
  EXPECT_EQ(acc_options_set_double(o, "lora_dropout", c["lora_dropout"]), ACC_OK);
  if (extra_key) EXPECT_EQ(acc_options_set(o, extra_key, extra_value), ACC_OK);
  const std::string t = targets ? targets : c["targets"].get<std::string>();
  const acc_status status = acc_model_add_lora(m, t.c_str(), o, nullptr);
  acc_options_free(o);
  return status;
}

// The case's B weights, put in place of the zero ones.
void choose_b(acc_model* m, const json& c) {
  acc_tensor_list* chosen = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&chosen), ACC_OK);
  for (const auto& item : c["chosen_b"].items()) {
    acc_tensor* b = from_json(item.value());
    ASSERT_EQ(acc_tensor_list_append(chosen, (item.key() + ".lora_B.weight").c_str(), b), ACC_OK);
    acc_tensor_free(b);
  }
  ASSERT_EQ(acc_model_load_state_dict(m, chosen, 0), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(chosen);
}

std::vector<float> eval_output(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, from_json(c["input"]));
}

}  // namespace

TEST(LoraConv, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv");
  acc_model* m = conv_model();
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(add(m, c));
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 5u);
  for (const auto& item : c["initial_a"].items()) {
    EXPECT_EQ(param(m, item.key() + ".lora_A.weight"), values(item.value())) << item.key();
    acc_tensor* a = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(m, (item.key() + ".lora_A.weight").c_str(), &a));
    EXPECT_EQ(acc_test::shape(a), item.value()["shape"].get<std::vector<int64_t>>()) << item.key();
    acc_tensor_free(a);
  }
  EXPECT_EQ(acc_test::next_global_draws(), values(c["next_draw"]));
  choose_b(m, c);

  EXPECT_EQ(eval_output(m, c), values(c["eval_output"]));
  // Training mode: dropout on each adapted layer's input, drawn in the forward's order.
  ACC_ASSERT_OK(acc_model_set_training(m, 1));
  ACC_ASSERT_OK(acc_set_seed(c["train_seed"].get<uint64_t>()));
  acc_tensor *x = from_json(c["input"]), *y = nullptr, *sum = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &y));
  EXPECT_EQ(to_floats(y), values(c["train_output"]));
  ACC_ASSERT_OK(acc_tensor_sum(y, &sum));
  ACC_ASSERT_OK(acc_tensor_backward(sum));
  for (const auto& item : c["grads"].items()) {
    acc_tensor *p = nullptr, *g = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(m, item.key().c_str(), &p));
    ACC_ASSERT_OK(acc_tensor_grad(p, &g));
    EXPECT_EQ(to_floats(g), values(item.value())) << item.key();
    acc_tensor_free(p);
    acc_tensor_free(g);
  }
  for (acc_tensor* t : {x, y, sum}) acc_tensor_free(t);
  ACC_ASSERT_OK(acc_model_zero_grad(m));

  // PEFT's files: the convolutions' adapters keep their kernels' dimensions.
  const std::string dir = acc_test::temp_path("lora_conv");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  acc_tensor* b3 = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(saved, "base_model.model.conv3.lora_B.weight", &b3));
  EXPECT_EQ(acc_test::shape(b3), (std::vector<int64_t>{3, 2, 1, 1}));
  acc_tensor_free(b3);
  acc_tensor_list_free(saved);
  acc_model* loaded = conv_model();
  ACC_ASSERT_OK(acc_model_load_lora(loaded, dir.c_str()));
  EXPECT_EQ(eval_output(loaded, c), values(c["eval_output"]));
  // An adapter whose kernel does not fit its layer's is refused, naming it.
  {
    acc_tensor* wrong = floats(std::vector<float>(2 * 4), {2, 4, 1, 1});
    acc_test::replace_saved_tensor(dir + "/adapter_model.safetensors", "base_model.model.conv1.lora_A.weight", wrong);
    acc_tensor_free(wrong);
    acc_model* fresh = conv_model();
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "the adapter of 'conv1' (lora_A [2, 4, 1, 1], lora_B [4, 2, 1, 1]) does not fit");
    acc_model_free(fresh);
  }
  fs::remove_all(dir);

  // Merged as PEFT merges (a product for 1 x 1 kernels, a convolution for the others).
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  for (const auto& item : c["merged"].items()) EXPECT_EQ(param(m, item.key()), values(item.value())) << item.key();
  EXPECT_LT(acc_test::max_difference(eval_output(m, c), values(c["eval_output"])), 1e-5f);
  acc_model_free(loaded);
  acc_model_free(m);
}

TEST(LoraConv, TrainsUnderTheUsualLoop) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv");
  acc_model* m = conv_model();
  ACC_ASSERT_OK(add(m, c, "conv1,conv3"));
  const std::vector<float> base = param(m, "conv1.weight"), b = param(m, "conv1.lora_B.weight");
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  acc_tensor* x = from_json(c["input"]);
  for (int step = 0; step < 3; ++step) {
    acc_tensor *y = nullptr, *sum = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &y));
    ACC_ASSERT_OK(acc_tensor_sum(y, &sum));
    ACC_ASSERT_OK(acc_tensor_backward(sum));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(y);
    acc_tensor_free(sum);
  }
  EXPECT_EQ(param(m, "conv1.weight"), base) << "the base weight stays frozen";
  EXPECT_NE(param(m, "conv1.lora_B.weight"), b) << "the adapter trains";
  acc_tensor_free(x);
  acc_optimizer_free(opt);
  acc_model_free(m);
}

TEST(LoraConv, RefusesWhatPeftsAdapterWouldNotComputeAsItsLayer) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv");
  struct Case {
    const char* targets;
    const char* key;
    const char* value;
    const char* message;
  };
  const Case cases[] = {
      {"dilated", nullptr, nullptr, "'dilated': it has a dilation"},
      {"reflect", nullptr, nullptr, "'reflect': its padding_mode is not \"zeros\""},
      {"same", nullptr, nullptr, "'same': its stride, padding, dilation or groups"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.targets);
    acc_model* m = conv_model("odd_convs_model.pt");
    ASSERT_NE(m, nullptr);
    const auto names = acc_test::parameter_names(m);
    ACC_EXPECT_ERROR(add(m, c, k.targets), ACC_ERR_UNSUPPORTED, k.message);
    EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
    acc_model_free(m);
  }
  const Case settings[] = {
      {"conv1", "init_lora_weights", "olora", "init_lora_weights olora on the convolution 'conv1': PEFT's"},
      {"conv2", "init_lora_weights", "pissa", "init_lora_weights pissa on the convolution 'conv2': PEFT's"},
      {"conv2", "init_lora_weights", "orthogonal", "init_lora_weights orthogonal on the convolution 'conv2'"},
  };
  for (const Case& k : settings) {  // PEFT's _ConvNd: "Unknown initialization" (ValueError)
    SCOPED_TRACE(k.key);
    acc_model* m = conv_model();
    ACC_EXPECT_ERROR(add(m, c, k.targets, k.key, k.value), ACC_ERR_INVALID_ARGUMENT, k.message);
    acc_model_free(m);
  }
}

// A spec's conv2d with padding "same" has no numbers PEFT's lora_A would pad with (PyTorch keeps the
// string): refused as a TorchScript layer padded so is, naming it; so is one of another padding_mode.
TEST(LoraConv, APaddingOfSameOrAnotherModeIsRefused) {
  acc_model* m = acc_test::spec_model(
      R"([{"type":"conv2d","in_channels":2,"out_channels":3,"kernel_size":3,"padding":"same"}])");
  ASSERT_NE(m, nullptr);
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "0", nullptr, nullptr), ACC_ERR_UNSUPPORTED, "\"same\"");
  EXPECT_EQ(acc_test::parameter_names(m), (std::vector<std::string>{"0.weight", "0.bias"}));
  acc_model_free(m);
  // Nor another padding_mode than zeros, which PEFT's lora_A pads with.
  m = acc_test::spec_model(
      R"([{"type":"conv2d","in_channels":2,"out_channels":3,"kernel_size":3,"padding":1,"padding_mode":"reflect"}])");
  ASSERT_NE(m, nullptr);
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "0", nullptr, nullptr), ACC_ERR_UNSUPPORTED, "padding_mode");
  acc_model_free(m);
}

// A forward that reads the convolution's weight itself (F.conv2d(x, self.conv.weight, ...)): no call
// to add a branch to, so without dropout the layer computes with the adapted weight, PEFT's merged
// weight (the same outputs to rounding); with dropout it is refused.
TEST(LoraConv, AWeightTheForwardReadsComputesAsTheMergedModel) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv");
  acc_model* m = conv_model("conv_weight_read_model.pt");
  ACC_EXPECT_ERROR(add(m, c, "conv"), ACC_ERR_UNSUPPORTED, "lora_dropout");
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "false"));  // B not zero: the adapter changes the output
  ACC_ASSERT_OK(acc_model_add_lora(m, "conv", o, nullptr));
  acc_options_free(o);
  const json x = c["input"];
  const std::vector<float> adapted = outputs_on(m, from_json(x));
  acc_model* plain = conv_model("conv_weight_read_model.pt");
  EXPECT_GT(acc_test::max_difference(adapted, outputs_on(plain, from_json(x))), 1e-3f) << "the adapter counts";
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  EXPECT_LT(acc_test::max_difference(outputs_on(m, from_json(x)), adapted), 1e-5f);
  acc_model_free(plain);
  acc_model_free(m);
}
