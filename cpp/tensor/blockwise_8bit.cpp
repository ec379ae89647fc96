#include "tensor/blockwise_8bit.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>

namespace acc {
namespace {

constexpr int kGrid = 65536;

std::vector<float> make_dynamic_code(bool is_signed) {
  at::NoGradGuard no_grad;
  std::vector<double> values;
  for (int64_t i = 0; i < 7; ++i) {
    const int64_t items = (int64_t{1} << (is_signed ? i : i + 1)) + 1;
    const at::Tensor bounds = at::linspace(0.1, 1, items, at::kFloat);
    const at::Tensor means = (bounds.slice(0, 0, -1) + bounds.slice(0, 1)) / 2.0;
    // Python's 10 ** (i - 6): an int 1 for i = 6, else a float.
    const double scale = i == 6 ? 1.0 : std::pow(10.0, static_cast<double>(i - 6));
    std::vector<at::Tensor> parts{means * scale};
    if (is_signed) parts.push_back(means * -scale);
    for (const at::Tensor& part : parts) {
      const at::Tensor c = part.contiguous();
      values.insert(values.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
  }
  values.push_back(0.0);
  values.push_back(1.0);
  std::sort(values.begin(), values.end());
  return std::vector<float>(values.begin(), values.end());
}

// Each grid point's code: the first whose midpoint with the next is not below it.
std::vector<uint8_t> make_grid_codes(const std::vector<float>& code) {
  std::vector<float> midpoints(code.size() - 1);
  for (size_t i = 0; i + 1 < code.size(); ++i) midpoints[i] = 0.5f * (code[i] + code[i + 1]);
  std::vector<uint8_t> out(kGrid);
  size_t c = 0;
  for (int i = 0; i < kGrid; ++i) {
    const float value = -1.0f + (2.0f * static_cast<float>(i)) / static_cast<float>(kGrid - 1);
    while (c < midpoints.size() && midpoints[c] < value) ++c;
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(c);
  }
  return out;
}

const std::vector<uint8_t>& grid_codes(bool is_signed) {
  static const std::vector<uint8_t> signed_table = make_grid_codes(dynamic_code(true));
  static const std::vector<uint8_t> unsigned_table = make_grid_codes(dynamic_code(false));
  return is_signed ? signed_table : unsigned_table;
}

uint16_t grid_index(float value) {
  value = std::clamp(value, -1.0f, 1.0f);
  const float shifted = (value + 1.0f) * 0.5f;
  const float scaled = shifted * static_cast<float>(kGrid - 1);
  return static_cast<uint16_t>(scaled + 0.5f);
}

}  // namespace

const std::vector<float>& dynamic_code(bool is_signed) {
  static const std::vector<float> signed_code = make_dynamic_code(true);
  static const std::vector<float> unsigned_code = make_dynamic_code(false);
  return is_signed ? signed_code : unsigned_code;
}

at::Tensor dynamic_code_tensor(bool is_signed, const at::Device& device) {
  const auto& code = dynamic_code(is_signed);
  return at::tensor(at::ArrayRef<float>(code.data(), code.size()), at::kFloat).to(device);
}

std::pair<at::Tensor, at::Tensor> quantize_blockwise(const at::Tensor& values, bool is_signed) {
  return values.is_cpu() ? quantize_blockwise_loop(values, is_signed) : quantize_blockwise_ops(values, is_signed);
}

std::pair<at::Tensor, at::Tensor> quantize_blockwise_loop(const at::Tensor& values, bool is_signed) {
  const at::Tensor v = values.to(at::kFloat).contiguous();
  const int64_t n = v.numel(), blocks = blockwise_blocks(n);
  at::Tensor codes = at::empty(v.sizes(), at::kByte), maxima = at::empty({blocks}, at::kFloat);
  const float* in = v.data_ptr<float>();
  uint8_t* out = codes.data_ptr<uint8_t>();
  float* absmax = maxima.data_ptr<float>();
  const auto& table = grid_codes(is_signed);
  // Blocks are independent: split among threads as bitsandbytes' OpenMP loop does.
  at::parallel_for(0, blocks, 16, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const int64_t start = b * kBlockwiseBlock, end = std::min(start + kBlockwiseBlock, n);
      float largest = 0.0f;
      for (int64_t i = start; i < end; ++i) largest = std::max(largest, std::fabs(in[i]));
      absmax[b] = largest;
      if (largest == 0.0f) {
        std::fill(out + start, out + end, uint8_t{0});
        continue;
      }
      const float inverse = 1.0f / largest;
      for (int64_t i = start; i < end; ++i) out[i] = table[grid_index(in[i] * inverse)];
    }
  });
  return {codes, maxima};
}

std::pair<at::Tensor, at::Tensor> quantize_blockwise_ops(const at::Tensor& values, bool is_signed) {
  at::NoGradGuard no_grad;
  const at::Tensor flat = values.reshape(-1).to(at::kFloat);
  const int64_t n = flat.numel(), blocks = blockwise_blocks(n);
  // Zeros pad the last block: its maximum is of absolute values, so they change nothing.
  const at::Tensor padded =
      at::constant_pad_nd(flat, {0, blocks * kBlockwiseBlock - n}, 0).view({blocks, kBlockwiseBlock});
  const at::Tensor maxima = std::get<0>(padded.abs().max(1));
  // The loop's float operations one by one: value * (1 / max), clamped, then (v + 1) * 0.5 * 65535
  // + 0.5, truncated.
  const at::Tensor scaled = at::clamp(padded * at::reciprocal(maxima).unsqueeze(1), -1.0, 1.0);
  const at::Tensor grid = (((scaled + 1.0) * 0.5) * static_cast<double>(kGrid - 1) + 0.5).to(at::kLong);
  const auto& table = grid_codes(is_signed);
  const at::Tensor lookup = at::from_blob(const_cast<uint8_t*>(table.data()), {kGrid}, at::kByte).to(values.device());
  // A block of zeros (1 / 0 made NaN of it) takes code 0.
  const at::Tensor zero_block = (maxima == 0).unsqueeze(1);
  const at::Tensor codes = lookup.index_select(0, grid.masked_fill(zero_block, 0).reshape(-1))
                               .view({blocks, kBlockwiseBlock})
                               .masked_fill(zero_block, 0);
  return {codes.reshape(-1).slice(0, 0, n).view(values.sizes()), maxima};
}

at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& code) {
  if (!codes.is_cpu()) {  // the same products as tensor operations
    const at::Tensor values = code.index_select(0, codes.reshape(-1).to(at::kLong));
    const int64_t n = values.numel(), blocks = absmax.numel();
    const at::Tensor padded = at::constant_pad_nd(values, {0, blocks * kBlockwiseBlock - n}, 0);
    return (padded.view({blocks, kBlockwiseBlock}) * absmax.view({-1, 1})).reshape(-1).slice(0, 0, n).view(codes.sizes());
  }
  const at::Tensor c = codes.contiguous(), m = absmax.to(at::kFloat).contiguous(), table = code.to(at::kFloat).contiguous();
  at::Tensor out = at::empty(codes.sizes(), codes.options().dtype(at::kFloat));
  const uint8_t* in = c.data_ptr<uint8_t>();
  const float* maxima = m.data_ptr<float>();
  const float* values = table.data_ptr<float>();
  float* result = out.data_ptr<float>();
  const int64_t n = c.numel(), blocks = blockwise_blocks(n);
  at::parallel_for(0, blocks, 16, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const float scale = maxima[b];
      for (int64_t i = b * kBlockwiseBlock, end = std::min(i + kBlockwiseBlock, n); i < end; ++i)
        result[i] = values[in[i]] * scale;
    }
  });
  return out;
}

}  // namespace acc
