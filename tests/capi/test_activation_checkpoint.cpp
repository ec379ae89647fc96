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

// An encoder-decoder over float inputs [2, 5, 6] and [2, 4, 6]: the checkpointed decoder layers
// pass gradients back both to their input and to the memory (the checkpointed encoder's output).
// Padded: the layers also read padding masks of the source and the target (inputs 2 and 3).
std::string encoder_decoder_spec(bool checkpoint, bool padded = false) {
  const std::string c = checkpoint ? R"(,"checkpoint":true)" : "";
  const std::string source_mask = padded ? R"(,"src_key_padding_mask":{"input":2})" : "";
  const std::string masks =
      padded ? R"(,"tgt_key_padding_mask":{"input":3},"memory_key_padding_mask":{"input":2})" : "";
  const std::string decoder = R"({"type":"transformer_decoder_layer","d_model":32,"nhead":4,"dim_feedforward":64,
      "dropout":0.2,"batch_first":true,"causal":true,"memory":{"layer":1})" + masks + c + "}";
  return R"([{"type":"linear","in_features":6,"out_features":32},
             {"type":"transformer_encoder_layer","d_model":32,"nhead":4,"dim_feedforward":64,"dropout":0.2,
              "batch_first":true)" + source_mask + c + R"(},
             {"type":"linear","in_features":6,"out_features":32,"from":{"input":1}},)" + decoder + "," + decoder +
         R"(,{"type":"linear","in_features":32,"out_features":3}])";
}

struct Pass {
  float loss = 0;
  std::vector<std::vector<float>> grads;
};

// Builds the model from seed 3, trains one forward/backward in training mode (dropout on) on inputs
// of 5 (then 4) steps of 6 features (then, with `masks`, a padding mask for each: batch row 1's
// last steps padded) and returns the loss and every parameter's gradient. With a mixed_precision
// other than "no", through a model prepared by an accelerator of that setting (autocast).
Pass forward_backward(const std::string& spec, size_t inputs = 1, bool masks = false,
                      const char* mixed_precision = "no") {
  Pass run;
  EXPECT_EQ(acc_set_seed(3), ACC_OK);
  acc_model* model = nullptr;
  EXPECT_EQ(acc_model_from_spec(spec.c_str(), &model), ACC_OK) << acc_last_error_message();
  acc_accelerator* acc = nullptr;
  if (std::string(mixed_precision) != "no") {
    acc = acc_test::make_accelerator({{"cpu", "true"}, {"mixed_precision", mixed_precision}});
    EXPECT_EQ(acc_prepare(acc, &model, nullptr, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  }
  std::vector<acc_tensor*> in;
  int64_t out_steps = 0;  // the output has the last input's steps
  for (int64_t steps = 5; in.size() < inputs; --steps) {
    std::vector<float> x;
    for (int64_t i = 0; i < 2 * steps * 6; ++i) x.push_back(static_cast<float>((i * 37 + steps) % 11) / 7.0f - 0.6f);
    in.push_back(floats(x, {2, steps, 6}));
    out_steps = steps;
  }
  for (size_t k = 0; masks && k < 2; ++k) {
    const int64_t steps = 5 - static_cast<int64_t>(k);
    std::vector<uint8_t> pads(static_cast<size_t>(2 * steps), 0);
    for (int64_t t = 3; t < steps; ++t) pads[static_cast<size_t>(steps + t)] = 1;
    in.push_back(acc_test::bools(pads, {2, steps}));
  }
  acc_tensor* target = floats(std::vector<float>(static_cast<size_t>(2 * out_steps * 3), 0.25f), {2, out_steps, 3});
  acc_tensor_list* outputs = nullptr;
  acc_tensor *out = nullptr, *loss = nullptr;
  EXPECT_EQ(acc_set_seed(9), ACC_OK);  // the dropout masks
  EXPECT_EQ(acc_model_forward(model, in.data(), in.size(), ACC_FORWARD_DEFAULT, &outputs), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(acc_tensor_list_get(outputs, 0, &out), ACC_OK);
  acc_tensor_list_free(outputs);
  EXPECT_EQ(acc_loss_mse(out, target, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  EXPECT_EQ(acc ? acc_backward(acc, loss) : acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
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
  for (acc_tensor* t : in) acc_tensor_free(t);
  for (acc_tensor* t : {target, out, loss}) acc_tensor_free(t);
  acc_model_free(model);
  acc_accelerator_free(acc);
  return run;
}

void expect_same_pass(const Pass& plain, const Pass& checkpointed) {
  EXPECT_EQ(plain.loss, checkpointed.loss);
  ASSERT_EQ(plain.grads.size(), checkpointed.grads.size());
  ASSERT_GT(plain.grads.size(), 4u);
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_FALSE(plain.grads[i].empty()) << "parameter " << i << " got no gradient";
    EXPECT_EQ(plain.grads[i], checkpointed.grads[i]) << "parameter " << i;
  }
}

}  // namespace

TEST(ActivationCheckpoint, GradientsEqualThePlainRunBitForBit) {
  expect_same_pass(forward_backward(spec(false)), forward_backward(spec(true)));
}

TEST(ActivationCheckpoint, EncoderDecoderGradientsEqualThePlainRunBitForBit) {
  expect_same_pass(forward_backward(encoder_decoder_spec(false), 2), forward_backward(encoder_decoder_spec(true), 2));
}

TEST(ActivationCheckpoint, WithPaddingMasksGradientsEqualThePlainRunBitForBit) {
  // The masks are inputs without a gradient; the recomputation reads them again.
  expect_same_pass(forward_backward(encoder_decoder_spec(false, true), 2, true),
                   forward_backward(encoder_decoder_spec(true, true), 2, true));
}

TEST(ActivationCheckpoint, UnderBf16AutocastGradientsEqualThePlainRunBitForBit) {
  // The recomputation runs under the forward's autocast, so a checkpointed layer computes in bf16
  // as the plain one did, also where its input is a bf16 activation. (No transformer layer here:
  // PyTorch 1.13's CPU layer_norm refuses a bf16 input with float32 weights, checkpointed or not.)
  const auto mlp = [](bool checkpoint) {
    const std::string c = checkpoint ? R"(,"checkpoint":true)" : "";
    return R"([{"type":"linear","in_features":6,"out_features":32)" + c + R"(},{"type":"gelu"},
               {"type":"dropout","p":0.3)" + c + R"(},{"type":"linear","in_features":32,"out_features":32)" + c +
           R"(},{"type":"tanh"},{"type":"linear","in_features":32,"out_features":3}])";
  };
  expect_same_pass(forward_backward(mlp(false), 1, false, "bf16"), forward_backward(mlp(true), 1, false, "bf16"));
}

TEST(ActivationCheckpoint, TheFlagIsABoolean) {
  acc_model* model = nullptr;
  EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":2,"checkpoint":1}])", &model),
            ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("'checkpoint' must be true or false"), std::string::npos)
      << acc_last_error_message();
}
