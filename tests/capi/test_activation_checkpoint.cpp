// Activation checkpointing in layer specs ("checkpoint": true): the same loss and bit-identical
// gradients as the plain model, dropout included (its mask is drawn again from the same state).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accelerate.h"
#include "support.h"

namespace {

using acc_test::floats;
using acc_test::to_floats;

std::string spec(bool checkpoint) {
  const std::string c = checkpoint ? R"(,"checkpoint":true)" : "";
  return R"([{"type":"linear","in_features":6,"out_features":32)" + c + R"(},{"type":"gelu"},
             {"type":"dropout","p":0.3)" + c + R"(},
             {"type":"transformer_encoder_layer","d_model":32,"nhead":4,"dim_feedforward":64,"dropout":0.2,
              "batch_first":true)" + c + R"(},
             {"type":"linear","in_features":32,"out_features":3}])";
}

struct Pass {
  float loss = 0;
  std::vector<std::vector<float>> grads;
};

// Builds the model from seed 3, trains one forward/backward in training mode (dropout on) and
// returns the loss and every parameter's gradient.
Pass forward_backward(bool checkpoint) {
  Pass run;
  EXPECT_EQ(acc_set_seed(3), ACC_OK);
  acc_model* model = nullptr;
  EXPECT_EQ(acc_model_from_spec(spec(checkpoint).c_str(), &model), ACC_OK) << acc_last_error_message();
  std::vector<float> x;
  for (int i = 0; i < 2 * 5 * 6; ++i) x.push_back(static_cast<float>((i * 37) % 11) / 7.0f - 0.6f);
  acc_tensor* input = floats(x, {2, 5, 6});
  acc_tensor* target = floats(std::vector<float>(2 * 5 * 3, 0.25f), {2, 5, 3});
  acc_tensor *out = nullptr, *loss = nullptr;
  EXPECT_EQ(acc_set_seed(9), ACC_OK);  // the dropout masks
  EXPECT_EQ(acc_model_forward1(model, input, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_loss_mse(out, target, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  EXPECT_EQ(acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
  run.loss = to_floats(loss)[0];
  acc_string_list* names = nullptr;
  EXPECT_EQ(acc_model_parameter_names(model, &names), ACC_OK);
  size_t n = 0;
  EXPECT_EQ(acc_string_list_size(names, &n), ACC_OK);
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    acc_tensor *p = nullptr, *g = nullptr;
    EXPECT_EQ(acc_string_list_get(names, i, &name), ACC_OK);
    EXPECT_EQ(acc_model_parameter(model, name, &p), ACC_OK);
    EXPECT_EQ(acc_tensor_grad(p, &g), ACC_OK);
    run.grads.push_back(g ? to_floats(g) : std::vector<float>{});
    acc_tensor_free(p);
    acc_tensor_free(g);
  }
  acc_string_list_free(names);
  for (acc_tensor* t : {input, target, out, loss}) acc_tensor_free(t);
  acc_model_free(model);
  return run;
}

}  // namespace

TEST(ActivationCheckpoint, GradientsEqualThePlainRunBitForBit) {
  const Pass plain = forward_backward(false), checkpointed = forward_backward(true);
  EXPECT_EQ(plain.loss, checkpointed.loss);
  ASSERT_EQ(plain.grads.size(), checkpointed.grads.size());
  ASSERT_GT(plain.grads.size(), 4u);
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_FALSE(plain.grads[i].empty()) << "parameter " << i << " got no gradient";
    EXPECT_EQ(plain.grads[i], checkpointed.grads[i]) << "parameter " << i;
  }
}

TEST(ActivationCheckpoint, TheFlagIsABoolean) {
  acc_model* model = nullptr;
  EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":2,"checkpoint":1}])", &model),
            ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("'checkpoint' must be true or false"), std::string::npos)
      << acc_last_error_message();
}
