// bitsandbytes' 4-bit weight storage (Params4bit and its QuantState), as transformers' load_in_4bit
// leaves a linear layer's weight for QLoRA: the flattened weight in blocks of 64, each scaled by its
// absolute maximum and rounded to one of 16 values (NF4's normal quantiles or FP4's), two per byte;
// with double quantisation the block maxima themselves in 8 bits (blocks of 256 around their mean,
// bitsandbytes' dynamic code). Computed as bitsandbytes 0.50 does on the CPU: its PyTorch formula
// for the 4-bit codes and its C++ table lookup for the 8-bit ones.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "tensor/blockwise_8bit.h"
#include "tensor/named_tensors.h"

namespace acc {

enum class FourBitType { Nf4, Fp4 };
const char* four_bit_type_name(FourBitType type);  // "nf4", "fp4"

constexpr int64_t kFourBitBlock = 64;  // Params4bit's blocksize, the one transformers uses
constexpr int64_t kNestedBlock = kBlockwiseBlock;  // quantize_blockwise's, for the block maxima

// A weight as Params4bit and its QuantState hold it. The tensors are those a state dict lists under
// the weight's name (see four_bit_state_entries); `packed` is the layer's `weight` itself.
struct FourBitWeight {
  FourBitType type = FourBitType::Nf4;
  std::vector<int64_t> shape;         // the weight's (out x in)
  at::ScalarType dtype = at::kFloat;  // the dtype it had (QuantState.dtype)
  at::Tensor packed;                  // uint8 [ceil(numel / 2), 1]: element 2i high nibble
  at::Tensor absmax;                  // float32 per block, or uint8 codes when nested
  at::Tensor quant_map;               // float32 [16]: the 4-bit code
  bool nested = false;
  at::Tensor nested_absmax;     // float32 per 256 blocks
  at::Tensor nested_quant_map;  // float32 [256]: the dynamic code
  at::Tensor nested_offset;     // float32 0-dim: the mean subtracted before
  at::Tensor packed_state;      // uint8: QuantState's JSON text (pack_dict_to_tensor)
};

// bitsandbytes' quantize_4bit (blocksize 64; compress_statistics = `nested`) of a floating-point
// weight, on its device. InvalidArgument for inf or NaN (whose blocks bitsandbytes rounds to codes
// of its own choosing), naming `module`.
FourBitWeight quantize_4bit(const std::string& module, const at::Tensor& weight, FourBitType type, bool nested);
// dequantize_4bit: code * absmax in float32 (the maxima first dequantised when nested), rounded
// once to `dtype`, in the weight's shape.
at::Tensor dequantize_4bit(const FourBitWeight& weight, at::ScalarType dtype);
// PEFT's merge into a 4-bit layer: dequantised to its dtype, `delta` added (type promotion: a
// float32 delta makes the sum, and the new QuantState's dtype, float32), quantised again with the
// same kind and double quantisation, into `weight`'s own tensors (set_data: the module and the state
// dict keep holding them).
void add_to_4bit(const std::string& module, FourBitWeight& weight, const at::Tensor& delta);
// The weight plus `delta` quantised again as `weight` was (what add_to_4bit puts in place).
FourBitWeight with_delta_4bit(const std::string& module, const FourBitWeight& weight, const at::Tensor& delta);
// The codes' values alone (float32), for LoftQ's quantise-and-back.
at::Tensor four_bit_round_trip(const at::Tensor& weight, FourBitType type);

// The state-dict entries Linear4bit._save_to_state_dict adds after "<prefix>weight": absmax,
// quant_map, nested_absmax, nested_quant_map (nested only) and quant_state.bitsandbytes__<type>,
// aliasing `weight`'s tensors.
NamedTensors four_bit_state_entries(const std::string& weight_name, const FourBitWeight& weight);
// The JSON text QuantState.as_dict(packed=True) packs (json.dumps' separators), and its state-dict
// key: "<weight_name>.quant_state.bitsandbytes__<type>".
std::string four_bit_state_text(const FourBitWeight& weight);
std::string four_bit_state_text_key(const std::string& weight_name, const FourBitWeight& weight);
// Fails (InvalidArgument, naming `key`) unless `bytes` (uint8, 1-D) holds QuantState's JSON text
// describing `weight`'s kind, block sizes, dtype and shape, with a finite nested_offset where nested.
void check_four_bit_state_text(const std::string& key, const at::Tensor& bytes, const FourBitWeight& weight);
// Takes checked text in: `packed_state` becomes a copy of it, nested_offset its value (which lives in
// the text alone; QuantState.from_dict makes it a float32 tensor).
void take_four_bit_state_text(FourBitWeight& weight, const at::Tensor& bytes);

}  // namespace acc
