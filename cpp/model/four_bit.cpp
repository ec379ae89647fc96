#include "model/four_bit.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/json_input.h"
#include "common/python_text.h"
#include "tensor/blockwise_8bit.h"
#include "tensor/host.h"

namespace acc {
namespace {

// bitsandbytes' get_4bit_type: NF4's quantiles of N(0, 1) scaled to [-1, 1] with an exact zero;
// FP4's values [0, 0.0625, 8, 12, 4, 6, 2, 3, -0, -0.0625, -8, -12, -4, -6, -2, -3] over 12. The
// nibble is the index.
const std::array<float, 16>& code_values(FourBitType type) {
  static const std::array<float, 16> nf4 = {-1.0f,
                                            -0.6961928009986877f,
                                            -0.5250730514526367f,
                                            -0.39491748809814453f,
                                            -0.28444138169288635f,
                                            -0.18477343022823334f,
                                            -0.09105003625154495f,
                                            0.0f,
                                            0.07958029955625534f,
                                            0.16093020141124725f,
                                            0.24611230194568634f,
                                            0.33791524171829224f,
                                            0.44070982933044434f,
                                            0.5626170039176941f,
                                            0.7229568362236023f,
                                            1.0f};
  static const std::array<float, 16> fp4 = [] {
    const float twelfths[16] = {0, 0.0625f, 8, 12, 4, 6, 2, 3, -0.0f, -0.0625f, -8, -12, -4, -6, -2, -3};
    std::array<float, 16> out{};
    for (size_t i = 0; i < 16; ++i) out[i] = twelfths[i] / 12.0f;
    return out;
  }();
  return type == FourBitType::Nf4 ? nf4 : fp4;
}

// The codes in ascending order, as torch.argsort orders them in bitsandbytes' quantize_4bit: FP4's
// +0 (index 0) before its -0 (index 8), so that values just above zero take -0's nibble.
const std::array<int64_t, 16>& ascending(FourBitType type) {
  static const std::array<int64_t, 16> nf4 = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  static const std::array<int64_t, 16> fp4 = {11, 10, 13, 12, 15, 14, 9, 0, 8, 1, 6, 7, 4, 5, 2, 3};
  return type == FourBitType::Nf4 ? nf4 : fp4;
}

at::Tensor code_tensor(FourBitType type, const at::Device& device) {
  const auto& values = code_values(type);
  return at::tensor(at::ArrayRef<float>(values.data(), values.size()), at::kFloat).to(device);
}

// The weight's values scaled into [-1, 1] block by block, and each block's maximum, as
// quantize_4bit computes them: whole blocks times the reciprocal of their maximum (at least 1e-38;
// the maximum kept unclamped), a last shorter block divided by its own, clamped maximum.
std::pair<at::Tensor, at::Tensor> scaled_blocks(const at::Tensor& flat) {
  const int64_t n = flat.numel(), rem = n % kFourBitBlock, full = n - rem, blocks = full / kFourBitBlock;
  at::Tensor absmax = at::empty({0}, flat.options()), scaled = at::empty({0}, flat.options());
  if (blocks > 0) {
    const at::Tensor whole = flat.slice(0, 0, full).reshape({blocks, kFourBitBlock});
    absmax = std::get<0>(whole.abs().max(-1));
    scaled = at::clamp(whole * absmax.clamp_min(1e-38).reciprocal().view({-1, 1}), -1, 1).reshape(-1);
  }
  if (rem > 0) {
    const at::Tensor tail_max = flat.slice(0, full).abs().max().clamp_min(1e-38);
    absmax = at::cat({absmax, tail_max.unsqueeze(0)});
    scaled = at::cat({scaled, at::clamp(flat.slice(0, full) / tail_max, -1, 1)});
  }
  return {scaled, absmax};
}

// Each scaled value's nibble: the nearest code by the midpoints of the ascending codes (a value on
// a midpoint takes the lower code), as torch.bucketize.
at::Tensor nibbles_of(const at::Tensor& scaled, FourBitType type) {
  const auto& values = code_values(type);
  const auto& order = ascending(type);
  std::array<float, 15> bounds{};
  for (size_t i = 0; i < 15; ++i) bounds[i] = (values[order[i]] + values[order[i + 1]]) / 2.0f;
  const at::Tensor edges =
      at::tensor(at::ArrayRef<float>(bounds.data(), bounds.size()), at::kFloat).to(scaled.device());
  const at::Tensor ranks = at::bucketize(scaled, edges, /*out_int32=*/false, /*right=*/false);
  const at::Tensor nibble_of_rank = at::tensor(at::ArrayRef<int64_t>(order.data(), order.size())).to(scaled.device());
  return nibble_of_rank.index_select(0, ranks);
}

// str(dtype).strip("torch."), as QuantState writes it.
std::string dtype_text(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kDouble:
      return "float64";
    default:
      fail(Status::InvalidArgument, "a 4-bit weight's dtype must be floating-point, not ", dtype);
  }
}

at::Tensor text_bytes(const std::string& text, const at::Device& device) {
  return tensor_from_host_copy(text.data(), text.size(), {static_cast<int64_t>(text.size())}, at::kByte).to(device);
}

std::string text_of(const at::Tensor& bytes) {
  std::string text(static_cast<size_t>(bytes.numel()), '\0');
  tensor_to_host(bytes, text.data(), text.size());
  return text;
}

}  // namespace

const char* four_bit_type_name(FourBitType type) { return type == FourBitType::Nf4 ? "nf4" : "fp4"; }

FourBitWeight quantize_4bit(const std::string& module, const at::Tensor& weight, FourBitType type, bool nested) {
  at::NoGradGuard no_grad;
  require(weight.is_floating_point(), "cannot quantise '", module, "' to 4 bits: its weight is ", weight.scalar_type());
  const at::Tensor flat = weight.detach().reshape(-1).to(at::kFloat);
  require(flat.isfinite().all().item<bool>(), "cannot quantise '", module, "' to 4 bits: its weight holds inf or NaN");
  FourBitWeight out;
  out.type = type;
  out.shape = weight.sizes().vec();
  out.dtype = weight.scalar_type();
  auto [scaled, absmax] = scaled_blocks(flat);
  if (scaled.numel() % 2 != 0) scaled = at::constant_pad_nd(scaled, {0, 1}, 0);  // a zero beside the last
  const at::Tensor nibbles = nibbles_of(scaled, type).to(at::kByte).view({-1, 2});
  out.packed = nibbles.select(1, 0).__lshift__(4).bitwise_or(nibbles.select(1, 1)).unsqueeze(1).contiguous();
  out.quant_map = code_tensor(type, flat.device());
  if (nested) {
    out.nested = true;
    out.nested_offset = absmax.mean();
    auto [codes, maxima] = quantize_blockwise(absmax - out.nested_offset, /*is_signed=*/true);
    out.absmax = codes;
    out.nested_absmax = maxima;
    out.nested_quant_map = dynamic_code_tensor(/*is_signed=*/true, flat.device());
  } else {
    out.absmax = absmax;
  }
  out.packed_state = text_bytes(four_bit_state_text(out), flat.device());
  return out;
}

at::Tensor dequantize_4bit(const FourBitWeight& weight, at::ScalarType dtype) {
  at::Tensor absmax = weight.absmax;
  if (weight.nested)  // dequantize_blockwise in float32, then the mean added back
    absmax = dequantize_blockwise(weight.absmax, weight.nested_absmax, weight.nested_quant_map) + weight.nested_offset;
  int64_t n = 1;
  for (int64_t size : weight.shape) n *= size;
  // Each byte's two values at once (row b: code[b >> 4], code[b & 15]), which keeps the index a
  // quarter of one per value.
  const at::Tensor pairs = at::stack({weight.quant_map.repeat_interleave(16), weight.quant_map.repeat({16})}, 1);
  const at::Tensor values = pairs.index_select(0, weight.packed.reshape(-1).to(at::kLong)).reshape(-1).slice(0, 0, n);
  // code * absmax in float32, block by block (the last one may be shorter), then one rounding.
  if (n % kFourBitBlock == 0)
    return (values.view({-1, kFourBitBlock}) * absmax.view({-1, 1})).to(dtype).view(weight.shape);
  // A shorter last block: each value's own maximum.
  return (values * absmax.repeat_interleave(kFourBitBlock).slice(0, 0, n)).to(dtype).view(weight.shape);
}

FourBitWeight with_delta_4bit(const std::string& module, const FourBitWeight& weight, const at::Tensor& delta) {
  at::NoGradGuard no_grad;
  const at::Tensor sum = dequantize_4bit(weight, weight.dtype) + delta.to(weight.packed.device());
  return quantize_4bit(module, sum, weight.type, weight.nested);
}

void add_to_4bit(const std::string& module, FourBitWeight& weight, const at::Tensor& delta) {
  at::NoGradGuard no_grad;
  FourBitWeight fresh = with_delta_4bit(module, weight, delta);  // checks before any change
  weight.packed.set_data(fresh.packed);
  weight.absmax.set_data(fresh.absmax);
  weight.quant_map.set_data(fresh.quant_map);
  if (weight.nested) {
    weight.nested_absmax.set_data(fresh.nested_absmax);
    weight.nested_quant_map.set_data(fresh.nested_quant_map);
    weight.nested_offset.set_data(fresh.nested_offset);
  }
  weight.packed_state.set_data(fresh.packed_state);
  weight.dtype = fresh.dtype;
}

at::Tensor four_bit_round_trip(const at::Tensor& weight, FourBitType type) {
  const FourBitWeight q = quantize_4bit("the weight", weight, type, /*nested=*/false);
  return dequantize_4bit(q, at::kFloat);
}

std::string four_bit_state_text(const FourBitWeight& weight) {
  std::string shape = "[";
  for (size_t i = 0; i < weight.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(weight.shape[i]);
  shape += "]";
  std::string text =
      concat("{\"quant_type\": \"", four_bit_type_name(weight.type), "\", \"blocksize\": ", kFourBitBlock,
             ", \"dtype\": \"", dtype_text(weight.dtype), "\", \"shape\": ", shape);
  if (weight.nested)
    text += concat(", \"nested_blocksize\": ", kNestedBlock, ", \"nested_dtype\": \"float32\", \"nested_offset\": ",
                   python_float_repr(weight.nested_offset.item<float>()));
  return text + "}";
}

NamedTensors four_bit_state_entries(const std::string& weight_name, const FourBitWeight& weight) {
  NamedTensors out;
  out.emplace_back(weight_name + ".absmax", weight.absmax);
  out.emplace_back(weight_name + ".quant_map", weight.quant_map);
  if (weight.nested) {
    out.emplace_back(weight_name + ".nested_absmax", weight.nested_absmax);
    out.emplace_back(weight_name + ".nested_quant_map", weight.nested_quant_map);
  }
  out.emplace_back(four_bit_state_text_key(weight_name, weight), weight.packed_state);
  return out;
}

std::string four_bit_state_text_key(const std::string& weight_name, const FourBitWeight& weight) {
  return weight_name + ".quant_state.bitsandbytes__" + four_bit_type_name(weight.type);
}

void check_four_bit_state_text(const std::string& key, const at::Tensor& bytes, const FourBitWeight& weight) {
  require(bytes.scalar_type() == at::kByte && bytes.dim() == 1, "'", key, "' must hold JSON text as uint8 bytes");
  const nlohmann::json given = parse_json_input(text_of(bytes), "'" + key + "' (bitsandbytes' quantisation state)");
  require(given.is_object(), "'", key, "' is not bitsandbytes' quantisation state (a JSON object)");
  const nlohmann::json own = nlohmann::json::parse(four_bit_state_text(weight));
  for (const char* field : {"quant_type", "blocksize", "dtype", "shape", "nested_blocksize", "nested_dtype"}) {
    const nlohmann::json theirs = given.value(field, nlohmann::json()), ours = own.value(field, nlohmann::json());
    require(theirs == ours, "'", key, "' describes ", field, " ", theirs.dump(), " where the model's layer has ",
            ours.dump());
  }
  if (weight.nested)  // a float32 number, as bitsandbytes keeps it
    require(given.contains("nested_offset") && given["nested_offset"].is_number() &&
                std::isfinite(given["nested_offset"].get<double>()) &&
                std::abs(given["nested_offset"].get<double>()) <= std::numeric_limits<float>::max(),
            "'", key, "' lacks the nested_offset of double quantisation (a finite float32 number)");
}

void take_four_bit_state_text(FourBitWeight& weight, const at::Tensor& bytes) {
  at::NoGradGuard no_grad;
  weight.packed_state.set_data(bytes.to(weight.packed_state.device()).clone());
  if (weight.nested) weight.nested_offset.fill_(nlohmann::json::parse(text_of(bytes))["nested_offset"].get<double>());
}

}  // namespace acc
