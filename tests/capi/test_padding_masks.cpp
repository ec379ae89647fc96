// Padding masks of the transformer layers (src_/tgt_key_padding_mask, memory_key_padding_mask,
// multihead_attention's key_padding_mask) beyond the outputs test_transformer.cpp checks against
// PyTorch: padded positions reach no other position's output, a padded batch trains, and bad masks
// are errors that name the layer and the mask.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accelerate.h"
#include "support.h"

namespace {

using acc_test::bools;
using acc_test::forward;
using acc_test::longs;
using acc_test::to_floats;

// Source ids [2, 6] and target ids [2, 5] in; logits [2, 5, 10] out. Layer 1 (encoder) and layer 3
// (decoder) read the source mask (input 2) and the target mask (input 3).
const char* const kPaddedEncoderDecoder = R"([
  {"type":"embedding","num_embeddings":10,"embedding_dim":16},
  {"type":"transformer_encoder_layer","d_model":16,"nhead":2,"dim_feedforward":32,"dropout":0.0,"batch_first":true,
   "src_key_padding_mask":{"input":2}},
  {"type":"embedding","num_embeddings":10,"embedding_dim":16,"from":{"input":1}},
  {"type":"transformer_decoder_layer","d_model":16,"nhead":2,"dim_feedforward":32,"dropout":0.0,"batch_first":true,
   "memory":{"layer":1},"tgt_key_padding_mask":{"input":3},"memory_key_padding_mask":{"input":2}},
  {"type":"linear","in_features":16,"out_features":10}])";

// Row 1 of the source ends in 2 pads; rows 0 and 1 of the target in 1 and 2.
const std::vector<uint8_t> kSourcePads = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
const std::vector<uint8_t> kTargetPads = {0, 0, 0, 0, 1, 0, 0, 0, 1, 1};

// The logits for these ids and pad flags.
std::vector<float> logits(acc_model* m, const std::vector<int64_t>& source, const std::vector<int64_t>& target,
                          const std::vector<uint8_t>& source_pads, const std::vector<uint8_t>& target_pads) {
  std::vector<acc_tensor*> in = {longs(source, {2, 6}), longs(target, {2, 5}), bools(source_pads, {2, 6}),
                                 bools(target_pads, {2, 5})};
  acc_tensor* y = forward(m, in, ACC_FORWARD_NO_GRAD);
  std::vector<float> out = y ? to_floats(y) : std::vector<float>{};
  acc_tensor_free(y);
  for (acc_tensor* t : in) acc_tensor_free(t);
  return out;
}

// The logits of the target positions that `pads` marks as `padded`, in order.
std::vector<float> positions(const std::vector<float>& logits, const std::vector<uint8_t>& pads, bool padded) {
  std::vector<float> out;
  for (size_t p = 0; p < pads.size(); ++p)
    if (static_cast<bool>(pads[p]) == padded)
      out.insert(out.end(), logits.begin() + p * 10, logits.begin() + (p + 1) * 10);
  return out;
}

}  // namespace

TEST(PaddingMasks, PaddedTokensReachNoOtherOutput) {
  ACC_ASSERT_OK(acc_set_seed(5));
  acc_model* m = acc_test::spec_model(kPaddedEncoderDecoder);
  ASSERT_NE(m, nullptr);
  ACC_ASSERT_OK(acc_model_set_training(m, 0));
  const std::vector<int64_t> source = {1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 0, 0}, target = {7, 8, 9, 1, 0, 2, 3, 4, 0, 0};
  const auto base = logits(m, source, target, kSourcePads, kTargetPads);
  ASSERT_EQ(base.size(), 100u);

  // Other tokens under the source's pads: the encoder's padded rows change, but no key reads them.
  auto other_source = source;
  other_source[10] = 9;
  other_source[11] = 8;
  EXPECT_EQ(logits(m, other_source, target, kSourcePads, kTargetPads), base);
  // Without the masks they do reach the output (the check above can fail).
  const std::vector<uint8_t> no_source_pads(12, 0), no_target_pads(10, 0);
  EXPECT_NE(logits(m, other_source, target, no_source_pads, no_target_pads),
            logits(m, source, target, no_source_pads, no_target_pads));

  // Other tokens under the target's pads: only the padded positions' own outputs change.
  auto other_target = target;
  for (size_t p : {4u, 8u, 9u}) other_target[p] = 5;
  const auto changed = logits(m, source, other_target, kSourcePads, kTargetPads);
  EXPECT_EQ(positions(changed, kTargetPads, false), positions(base, kTargetPads, false));
  EXPECT_NE(positions(changed, kTargetPads, true), positions(base, kTargetPads, true));
  acc_model_free(m);
}

TEST(PaddingMasks, APaddedBatchTrains) {
  // Sequences of 3 to 8 tokens (2..9) right-padded to 8 with random tokens under the pads; every
  // real position learns to name the sequence's first token, padded positions are ignored (-100).
  const int64_t vocab = 10, batch = 8, length = 8;
  const std::string block = R"({"type":"transformer_encoder_layer","d_model":32,"nhead":4,"dim_feedforward":64,
      "dropout":0.0,"batch_first":true,"norm_first":true,"src_key_padding_mask":{"input":1}})";
  const std::string spec = R"([{"type":"embedding","num_embeddings":10,"embedding_dim":32},
      {"type":"positional_embedding","num_embeddings":8,"embedding_dim":32},)" + block + "," + block + R"(,
      {"type":"layernorm","normalized_shape":32},{"type":"linear","in_features":32,"out_features":10}])";
  ACC_ASSERT_OK(acc_set_seed(0));
  acc_model* m = acc_test::spec_model(spec.c_str());
  ASSERT_NE(m, nullptr);
  std::vector<int64_t> ids, targets;
  std::vector<uint8_t> pads;
  uint32_t state = 777;
  auto draw = [&](uint32_t n) {
    state = state * 1103515245u + 12345u;
    return static_cast<int64_t>((state >> 16) % n);
  };
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t real = 3 + b % 6, first = 2 + draw(8);
    for (int64_t t = 0; t < length; ++t) {
      ids.push_back(t == 0 ? first : t < real ? 2 + draw(8) : draw(10));
      targets.push_back(t < real ? first : -100);
      pads.push_back(t >= real);
    }
  }
  std::vector<acc_tensor*> in = {longs(ids, {batch, length}), bools(pads, {batch, length})};
  acc_tensor* target = longs(targets, {batch, length});
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 3e-3);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    acc_tensor* out = forward(m, in, ACC_FORWARD_DEFAULT);
    ASSERT_NE(out, nullptr);
    acc_tensor* loss = acc_test::sequence_loss(out, target, vocab);
    ACC_ASSERT_OK(acc_tensor_item(loss, step == 0 ? &first : &last));
    ACC_ASSERT_OK(acc_tensor_backward(loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    acc_tensor_free(loss);
    acc_tensor_free(out);
  }
  EXPECT_GT(first, 1.5);  // about log(8) at the start
  EXPECT_LT(last, 0.25 * first) << "first " << first << ", last " << last;
  acc_optimizer_free(opt);
  for (acc_tensor* t : in) acc_tensor_free(t);
  acc_tensor_free(target);
  acc_model_free(m);
}

TEST(PaddingMasks, BadMasksAreErrorsThatNameTheLayerAndTheMask) {
  ACC_ASSERT_OK(acc_set_seed(5));
  acc_model* m = acc_test::spec_model(kPaddedEncoderDecoder);
  ASSERT_NE(m, nullptr);
  acc_tensor* source = longs(std::vector<int64_t>(12, 1), {2, 6});
  acc_tensor* target = longs(std::vector<int64_t>(10, 1), {2, 5});
  acc_tensor* source_pads = bools(kSourcePads, {2, 6});
  acc_tensor* target_pads = bools(kTargetPads, {2, 5});
  acc_tensor* longs_mask = longs(std::vector<int64_t>(12, 0), {2, 6});
  acc_tensor* flat_mask = bools(kSourcePads, {12});
  acc_tensor* short_mask = bools(kTargetPads, {2, 5});
  auto expect_error = [&](std::vector<acc_tensor*> in, const char* needle) {
    acc_tensor_list* out = nullptr;
    ACC_EXPECT_ERROR(acc_model_forward(m, in.data(), in.size(), ACC_FORWARD_DEFAULT, &out), ACC_ERR_INVALID_ARGUMENT,
                     needle);
    EXPECT_EQ(out, nullptr);
  };
  expect_error({source, target, longs_mask, target_pads},
               "layer 1: transformer_encoder_layer: src_key_padding_mask must be a bool (true: ignore that key) or "
               "floating (added to the scores) tensor [batch, keys] = [2, 6], got Long [2, 6]");
  expect_error({source, target, flat_mask, target_pads}, "src_key_padding_mask must be a bool");
  expect_error({source, target, short_mask, target_pads}, "got Bool [2, 5]");
  expect_error({source, target, source_pads, source_pads},
               "layer 3: transformer_decoder_layer: tgt_key_padding_mask must be");
  acc_model_free(m);
  // The memory's mask is checked against the memory, multihead_attention's against its keys.
  m = acc_test::spec_model(R"([{"type":"multihead_attention","embed_dim":4,"num_heads":2,"key_value":{"input":1},
                      "key_padding_mask":{"input":2}}])");
  ASSERT_NE(m, nullptr);
  acc_tensor* query = acc_test::floats(std::vector<float>(24, 0.5f), {3, 2, 4});
  acc_tensor* memory = acc_test::floats(std::vector<float>(40, 0.5f), {5, 2, 4});
  acc_tensor* query_mask = bools(std::vector<uint8_t>(6, 0), {2, 3});  // the query's length, not the keys'
  expect_error({query, memory, query_mask}, "layer 0: multihead_attention: key_padding_mask must be a bool");
  acc_tensor* float_mask = acc_test::floats(std::vector<float>(10, 0.0f), {2, 5});
  acc_tensor* y = forward(m, {query, memory, float_mask}, ACC_FORWARD_NO_GRAD);
  EXPECT_NE(y, nullptr);
  acc_tensor_free(y);
  acc_model_free(m);
  // In the spec: a mask is a source, and only the layers' own names are accepted.
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"multihead_attention","embed_dim":4,"num_heads":2,
                                           "key_padding_mask":true}])", &m),
                   ACC_ERR_INVALID_ARGUMENT, "'key_padding_mask' must be {\"input\": k}");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"transformer_encoder_layer","d_model":4,"nhead":2,
                                           "memory_key_padding_mask":{"input":1}}])", &m),
                   ACC_ERR_INVALID_ARGUMENT, "unknown argument 'memory_key_padding_mask'");
  for (acc_tensor* t : {source, target, source_pads, target_pads, longs_mask, flat_mask, short_mask, query, memory,
                        query_mask, float_mask})
    acc_tensor_free(t);
}
