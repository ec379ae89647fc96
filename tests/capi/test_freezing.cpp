// Freezing parameters by name and optimizer groups chosen by name patterns: exactly the matching
// parameters change behaviour, frozen ones get no gradient, no state and no update, and a
// checkpoint of a partly frozen model resumes.
#include <filesystem>
#include <string>
#include <vector>

#include "support.h"

using acc_test::floats;
using acc_test::to_floats;

namespace {

// linear(4->3), layernorm(3), linear(3->2): "0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias".
const char* kNet = R"([{"type":"linear","in_features":4,"out_features":3},{"type":"layernorm","normalized_shape":3},
                       {"type":"linear","in_features":3,"out_features":2}])";

acc_model* net() {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(kNet, &m), ACC_OK) << acc_last_error_message();
  return m;
}

std::vector<float> param(acc_model* m, const char* name) {
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name, &t), ACC_OK) << acc_last_error_message();
  auto v = to_floats(t);
  acc_tensor_free(t);
  return v;
}

void train_step(acc_model* m, acc_optimizer* opt) {
  acc_tensor* x = floats({0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f}, {2, 4});
  acc_tensor* y = floats({1, 0, 0, 1}, {2, 2});
  acc_tensor *out = nullptr, *loss = nullptr;
  ASSERT_EQ(acc_model_forward1(m, x, 0, &out), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  ASSERT_EQ(acc_tensor_backward(loss), ACC_OK);
  ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
  ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
  for (acc_tensor* t : {x, y, out, loss}) acc_tensor_free(t);
}

size_t trainable(acc_model* m) {
  size_t tensors = 0;
  int64_t elements = 0;
  EXPECT_EQ(acc_model_parameter_count(m, &tensors, &elements), ACC_OK);
  return tensors;
}

}  // namespace

TEST(Freezing, FrozenParametersGetNoGradientAndNoUpdate) {
  acc_model* m = net();
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "0.*", 0, &count));
  EXPECT_EQ(count, 2u);
  const auto w0 = param(m, "0.weight"), b0 = param(m, "0.bias"), w2 = param(m, "2.weight");
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "adamw", nullptr, &opt));
  // A frozen parameter is in no group: moving it into one is refused with its name.
  const char* frozen[] = {"0.weight"};
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, frozen, 1, nullptr), ACC_ERR_INVALID_ARGUMENT, "0.weight");
  train_step(m, opt);
  EXPECT_EQ(param(m, "0.weight"), w0);
  EXPECT_EQ(param(m, "0.bias"), b0);
  EXPECT_NE(param(m, "2.weight"), w2);
  acc_optimizer_free(opt);
  acc_model_free(m);
}

TEST(Freezing, PatternsAreGlobListsAndAMissIsAnError) {
  acc_model* m = net();
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "*.bias, 1.*", 0, &count));
  EXPECT_EQ(count, 4u);  // 0.bias, 1.weight, 1.bias, 2.bias
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "1.weight", 1, nullptr));  // unfreeze one again
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "sgd", nullptr, &opt));
  const auto bias = param(m, "2.bias"), norm = param(m, "1.weight");
  train_step(m, opt);
  EXPECT_EQ(param(m, "2.bias"), bias);
  EXPECT_NE(param(m, "1.weight"), norm);
  ACC_EXPECT_ERROR(acc_model_set_requires_grad(m, "encoder.*", 0, &count), ACC_ERR_INVALID_ARGUMENT,
                   "no parameter name matches 'encoder.*'");
  for (const char* listed : {"0.weight,,2.weight", "0.weight,", ",0.weight"})  // an empty pattern anywhere
    ACC_EXPECT_ERROR(acc_model_set_requires_grad(m, listed, 0, &count), ACC_ERR_INVALID_ARGUMENT, "empty pattern");
  ACC_EXPECT_ERROR(acc_model_set_requires_grad(m, nullptr, 0, &count), ACC_ERR_INVALID_ARGUMENT, "patterns");
  acc_optimizer_free(opt);
  acc_model_free(m);
}

TEST(Freezing, APreparedModelIsRefused) {
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* m = net();
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(a, m, ACC_PLACEMENT_DEFAULT, &prepared));
  ACC_EXPECT_ERROR(acc_model_set_requires_grad(prepared, "0.*", 0, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "before preparing");
  acc_model_free(prepared);
  acc_model_free(m);
  acc_accelerator_free(a);
}

namespace {

// One SGD step (lr 0.1, weight_decay 0.5) with the parameters matching `no_decay` in a group without
// weight decay, on an input of zeros: the first layer's weight gets no gradient, so only decay moves
// it. Returns its values before and after.
std::pair<std::vector<float>, std::vector<float>> decay_step(const char* no_decay_patterns, size_t* moved) {
  acc_model* m = net();
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "lr", "0.1"), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "weight_decay", "0.5"), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(m, "sgd", o, &opt), ACC_OK);
  acc_options* no_decay = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &no_decay), ACC_OK);
  EXPECT_EQ(acc_options_set(no_decay, "weight_decay", "0"), ACC_OK);
  EXPECT_EQ(acc_optimizer_add_param_group_matching(opt, no_decay_patterns, no_decay, moved), ACC_OK)
      << acc_last_error_message();
  const auto before = param(m, "0.weight");
  acc_tensor* x = floats(std::vector<float>(8, 0.0f), {2, 4});
  acc_tensor *out = nullptr, *loss = nullptr;
  EXPECT_EQ(acc_model_forward1(m, x, 0, &out), ACC_OK);
  EXPECT_EQ(acc_tensor_sum(out, &loss), ACC_OK);
  EXPECT_EQ(acc_tensor_backward(loss), ACC_OK);
  EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
  const auto after = param(m, "0.weight");
  for (acc_tensor* t : {x, out, loss}) acc_tensor_free(t);
  acc_options_free(o);
  acc_options_free(no_decay);
  acc_optimizer_free(opt);
  acc_model_free(m);
  return {before, after};
}

}  // namespace

TEST(ParamGroups, NoWeightDecayForBiasesAndNormsIsOneCall) {
  size_t moved = 0;
  auto [w0, w1] = decay_step("*.bias,1.weight", &moved);
  EXPECT_EQ(moved, 4u);  // three biases and the norm's weight
  for (size_t i = 0; i < w0.size(); ++i) EXPECT_FLOAT_EQ(w1[i], w0[i] * 0.95f) << "decayed: w - lr * wd * w";
  auto [v0, v1] = decay_step("*.bias,1.weight,0.weight", &moved);
  EXPECT_EQ(moved, 5u);
  EXPECT_EQ(v1, v0) << "in the group without decay, and without a gradient, it does not move";

  acc_model* m = net();
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "sgd", nullptr, &opt));
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group_matching(opt, "nothing.*", nullptr, &moved), ACC_ERR_INVALID_ARGUMENT,
                   "no parameter name matches");
  acc_optimizer_free(opt);
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "2.*", 0, nullptr));
  ACC_ASSERT_OK(acc_optimizer_create(m, "sgd", nullptr, &opt));
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group_matching(opt, "2.*", nullptr, &moved), ACC_ERR_INVALID_ARGUMENT,
                   "frozen");
  acc_optimizer_free(opt);
  acc_model_free(m);
}

TEST(Freezing, APartlyFrozenModelCheckpointsAndResumes) {
  namespace fs = std::filesystem;
  const std::string dir = acc_test::temp_path("frozen_ckpt");
  fs::remove_all(dir);
  std::vector<float> after;
  {
    acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}});
    acc_model* m = net();
    ACC_ASSERT_OK(acc_model_set_requires_grad(m, "0.*", 0, nullptr));
    EXPECT_EQ(trainable(m), 6u) << "the count is of every parameter tensor";
    acc_optimizer* opt = nullptr;
    ACC_ASSERT_OK(acc_optimizer_create(m, "adam", nullptr, &opt));
    ACC_ASSERT_OK(acc_prepare(a, &m, &opt, nullptr, nullptr));
    train_step(m, opt);
    ACC_ASSERT_OK(acc_save_state(a, dir.c_str(), nullptr));
    train_step(m, opt);
    after = param(m, "2.weight");
    acc_optimizer_free(opt);
    acc_model_free(m);
    acc_accelerator_free(a);
  }
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* m = net();
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "0.*", 0, nullptr));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "adam", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(a, &m, &opt, nullptr, nullptr));
  ACC_ASSERT_OK(acc_load_state(a, dir.c_str(), nullptr));
  train_step(m, opt);
  EXPECT_EQ(param(m, "2.weight"), after);
  acc_optimizer_free(opt);
  acc_model_free(m);
  acc_accelerator_free(a);
  fs::remove_all(dir);
}
