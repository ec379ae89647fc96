// PEFT's disable_adapter_layers / enable_adapter_layers (its `with model.disable_adapter():`, how
// TRL computes a reference model's outputs from the model it trains): disabled, an adapted layer
// returns its base layer's output before anything of the adapter runs, so the model computes as
// the base model did (frozen, as adding adapters leaves it: see frozen_outputs), bit for bit, and
// draws no dropout mask from the global generator.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lora_support.h"
#include "support.h"

using acc_test::max_difference;
using namespace lora_test;

namespace {

int lora_enabled(const acc_model* m) {
  int enabled = -1;
  EXPECT_EQ(acc_model_lora_enabled(m, &enabled), ACC_OK) << acc_last_error_message();
  return enabled;
}

// The next global draws after acc_set_seed(seed) and `between`.
std::vector<float> draws_after(uint64_t seed, const std::function<void()>& between) {
  EXPECT_EQ(acc_set_seed(seed), ACC_OK);
  between();
  return acc_test::next_global_draws();
}

}  // namespace

TEST(LoraDisable, AdaptedLayersComputeAsTheBaseModelAndDrawNothing) {
  for (const char* flag : {"", "use_dora", "lora_bias"}) {
    SCOPED_TRACE(flag);
    acc_model* m = net();
    ACC_ASSERT_OK(acc_model_set_training(m, 1));
    const auto base = frozen_outputs(m);  // the encoder layer's own dropout is 0
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_options_set_double(o, "lora_dropout", 0.25));
    if (*flag) ACC_ASSERT_OK(acc_options_set_bool(o, flag, 1));
    ACC_ASSERT_OK(acc_model_add_lora(m, kTargets, o, nullptr));
    acc_options_free(o);
    EXPECT_EQ(lora_enabled(m), 1) << "new adapters start enabled";
    train(m, 3);
    ACC_ASSERT_OK(acc_model_set_training(m, 0));
    const auto adapted = outputs(m);
    ASSERT_GT(max_difference(adapted, base), 1e-3f) << "trained adapters change the outputs";
    ACC_ASSERT_OK(acc_model_set_training(m, 1));
    // Enabled, the adapters' dropout draws masks in training mode: the check below can see a draw.
    EXPECT_NE(draws_after(11, [&] { outputs(m); }), draws_after(11, [] {}));

    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    EXPECT_EQ(lora_enabled(m), 0);
    std::vector<float> disabled;
    EXPECT_EQ(draws_after(11, [&] { disabled = outputs(m); }), draws_after(11, [] {})) << "no dropout mask drawn";
    EXPECT_EQ(disabled, base) << "the base model's outputs, in training mode";
    ACC_ASSERT_OK(acc_model_set_training(m, 0));
    EXPECT_EQ(outputs(m), base) << "and in evaluation";
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));  // again: still disabled, nothing else changes
    EXPECT_EQ(outputs(m), base);

    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
    EXPECT_EQ(lora_enabled(m), 1);
    EXPECT_EQ(outputs(m), adapted) << "enabled again, the adapters compute as before";

    // Merging while disabled merges the adapters as they are (PEFT's merge_and_unload): the merged
    // model computes as the adapted one, and has no adapters left to disable.
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    EXPECT_EQ(lora_enabled(m), 0);
    EXPECT_LT(max_difference(outputs(m), adapted), 1e-5f);
    ACC_EXPECT_ERROR(acc_model_set_lora_enabled(m, 1), ACC_ERR_INVALID_ARGUMENT, "no LoRA adapters");
    add_lora(m);
    EXPECT_EQ(lora_enabled(m), 1) << "adapters added after a merge start enabled";
    acc_model_free(m);
  }
}

// A TorchScript model: its blocks' fc layers adapted through their outputs (markers), its head
// through the weight the forward reads itself; prepared by an accelerator, the prepared handle
// disables them.
TEST(LoraDisable, TorchScriptLayersOfAPreparedModelComputeAsTheBaseModel) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/direct_head.pt").c_str(), &m));
  auto run = [&] { return outputs_on(m, acc_test::longs({1, 4, 7, 2, 0, 3, 5, 6}, {2, 4})); };
  const auto base = run();
  ACC_ASSERT_OK(acc_set_seed(3));
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "false"));  // nn.Linear's draws: B is not zero
  ACC_ASSERT_OK(acc_model_add_lora(m, "head,fc", o, nullptr));
  acc_options_free(o);
  acc_accelerator* acc = acc_test::make_accelerator({});
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  ACC_ASSERT_OK(acc_prepare(acc, &m, &opt, nullptr, nullptr));
  const auto adapted = run();
  ASSERT_GT(max_difference(adapted, base), 1e-3f);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(lora_enabled(m), 0);
  EXPECT_EQ(run(), base);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
  EXPECT_EQ(run(), adapted);
  acc_optimizer_free(opt);
  acc_model_free(m);
  acc_accelerator_free(acc);
}

TEST(LoraDisable, RefusedWhereItCannotBeHonoured) {
  acc_model* m = net();
  EXPECT_EQ(lora_enabled(m), 0) << "no adapters";
  ACC_EXPECT_ERROR(acc_model_set_lora_enabled(m, 0), ACC_ERR_INVALID_ARGUMENT,
                   "no LoRA adapters or trainable tokens to disable");
  ACC_EXPECT_ERROR(acc_model_set_lora_enabled(nullptr, 0), ACC_ERR_INVALID_HANDLE, "model");
  ACC_EXPECT_ERROR(acc_model_lora_enabled(m, nullptr), ACC_ERR_INVALID_ARGUMENT, "out");
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_model_add_lora(m, kTargets, o, nullptr));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));  // enabling what is enabled is allowed
  acc_model_free(m);
}

// A module to save trains in place here; PEFT's ModulesToSaveWrapper trains a copy and keeps the
// original, which its disabled model computes with. The model keeps the originals too: disabled,
// it computes with them, as the base model did, bit for bit; enabled again, as trained.
TEST(LoraDisable, ModulesToSaveComputeAsTheyWereWhileDisabled) {
  acc_model* m = net();
  const auto base = frozen_outputs(m);
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "modules_to_save", "norm2"));
  ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "false"));  // B random: the adapters change the output
  ACC_ASSERT_OK(acc_model_add_lora(m, kTargets, o, nullptr));
  acc_options_free(o);
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "adamw", nullptr, &opt));
  acc_tensor* x = input();
  std::vector<float> target(2 * 4 * 3, 0.25f);
  acc_tensor* y = floats(target, {2, 4, 3});
  for (int step = 0; step < 3; ++step) {
    acc_tensor *out = nullptr, *loss = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &out));
    ACC_ASSERT_OK(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss));
    ACC_ASSERT_OK(acc_tensor_backward(loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
  const auto trained = outputs(m);
  const auto trained_norm = param(m, "1.norm2.weight");
  ASSERT_NE(trained_norm, std::vector<float>(8, 1.0f)) << "the module to save trained";

  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(outputs(m), base);
  // With gradients it would reach the trained tensors: refused, nothing changed.
  acc_tensor* out = nullptr;
  ACC_EXPECT_ERROR(acc_model_forward1(m, x, 0, &out), ACC_ERR_UNSUPPORTED, "needs no gradients (ACC_FORWARD_NO_GRAD)");
  EXPECT_EQ(param(m, "1.norm2.weight"), trained_norm);
  int requires_grad = 0;
  acc_tensor* norm = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "1.norm2.weight", &norm));
  ACC_ASSERT_OK(acc_tensor_requires_grad(norm, &requires_grad));
  EXPECT_EQ(requires_grad, 1) << "it trains again after the disabled forward";
  acc_tensor_free(norm);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
  EXPECT_EQ(outputs(m), trained);
  // Moved to another dtype, the originals follow.
  ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_FLOAT64));
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  acc_tensor* x64 = nullptr;
  ACC_ASSERT_OK(acc_tensor_to(x, nullptr, ACC_DTYPE_FLOAT64, &x64));
  ACC_ASSERT_OK(acc_model_forward1(m, x64, ACC_FORWARD_NO_GRAD, &out));
  acc_tensor* out32 = nullptr;
  ACC_ASSERT_OK(acc_tensor_to(out, nullptr, ACC_DTYPE_FLOAT32, &out32));
  EXPECT_LT(max_difference(to_floats(out32), base), 1e-5);
  for (acc_tensor* t : {x, x64, y, out, out32}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  acc_model_free(m);
}
