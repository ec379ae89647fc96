// The masks of attention as nn.MultiheadAttention takes them: a causal mask (-inf above the
// diagonal) and a key padding mask [B, S] (unbatched [S]), bool (true: that key is ignored) or
// floating (added to the scores), merged as PyTorch merges attn_mask and key_padding_mask. A query
// whose keys are all masked gets NaN weights, hence a NaN output, as in PyTorch 1.13 (from 2.5 its
// scaled_dot_product_attention, which libtorch 2.x builds call, gives zeros).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace acc {

// `mask` (undefined: none) checked against batch-first keys [B, S, E] as argument `name` of
// `layer` (unbatched: the layer's input had no batch dimension, so the mask is [S]), returned as
// [B, S]. A wrong shape, dtype or device is an InvalidArgument error that names both.
at::Tensor checked_key_padding_mask(const char* layer, const char* name, const at::Tensor& mask, bool unbatched,
                                    const at::Tensor& keys);

// What is added to the scores [B * heads, T, S] before the softmax, broadcastable to them, in
// `options`' dtype and device; undefined when there is no mask.
at::Tensor attention_bias(bool causal, const at::Tensor& key_padding_mask, int64_t heads, int64_t t, int64_t s,
                          const at::TensorOptions& options);

// The same in TorchScript: lines that set `bias` from `b`, `t`, `n` (the keys' length), `q` and the
// batch-first mask variable `key_padding_mask` (empty: none); no lines when there is no mask.
std::vector<std::string> attention_bias_script(bool causal, const std::string& key_padding_mask, int64_t heads);

}  // namespace acc
