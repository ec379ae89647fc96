// bitsandbytes' blockwise 8-bit quantisation (tensor/blockwise_8bit.h): the tensor-operation form,
// which CUDA tensors take, gives the CPU loop's codes and maxima exactly.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "tensor/blockwise_8bit.h"

namespace {

// Normal values over 4096 blocks and a short last one (so many that a rounding apart would move
// some codes): a block of zeros, a block with its maximum repeated at both signs, tiny and large
// magnitudes.
at::Tensor awkward_values() {
  at::manual_seed(11);
  at::Tensor v = at::randn({4096 * 256 + 77}, at::kFloat);
  v.slice(0, 256, 512).zero_();
  v.slice(0, 512, 768).mul_(1e-6);
  v[600] = 3.0f;
  v[601] = -3.0f;
  v.slice(0, 768, 1024).mul_(1e4);
  return v.view({27, 38839});  // 4096 * 256 + 77 values
}

}  // namespace

TEST(Blockwise8bit, TensorOperationsGiveTheLoopsCodesAndMaxima) {
  const at::Tensor values = awkward_values();
  for (bool is_signed : {true, false}) {
    SCOPED_TRACE(is_signed);
    const at::Tensor input = is_signed ? values : values.abs();  // the unsigned code holds second moments
    const auto [loop_codes, loop_maxima] = acc::quantize_blockwise_loop(input, is_signed);
    const auto [ops_codes, ops_maxima] = acc::quantize_blockwise_ops(input, is_signed);
    EXPECT_EQ(ops_codes.sizes(), input.sizes());
    EXPECT_TRUE(at::equal(ops_codes, loop_codes));
    EXPECT_TRUE(at::equal(ops_maxima, loop_maxima));
    EXPECT_EQ(loop_maxima[1].item<float>(), 0.0f);
    EXPECT_EQ(loop_codes.reshape(-1).slice(0, 256, 512).sum().item<int64_t>(), 0) << "a block of zeros takes code 0";
    // Dequantised, every value is within half a step of the code around it: at most 1/2 of the
    // largest gap between codes times the block's maximum.
    const at::Tensor code = acc::dynamic_code_tensor(is_signed, at::kCPU);
    const at::Tensor back = acc::dequantize_blockwise(loop_codes, loop_maxima, code);
    const float gap = (code.slice(0, 1) - code.slice(0, 0, -1)).max().item<float>();
    const at::Tensor bound = loop_maxima.repeat_interleave(256).slice(0, 0, input.numel()).view(input.sizes()) * gap;
    EXPECT_TRUE(((back - input).abs() <= bound).all().item<bool>());
  }
}
