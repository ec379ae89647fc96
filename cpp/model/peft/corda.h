// CorDA (Yang et al. 2024, "Context-oriented Decomposition Adaptation"), PEFT's preprocess_corda and
// corda_init: a linear layer's weight W is decomposed along the covariance C of the inputs it sees
// on data: W C = U S Vh, and V = (Vh C^-1)^T, so that U S V^T = W. The adapters start from r of its
// components, the largest (IPM, instruction-previewed) or the smallest (KPM, knowledge-preserved):
// A = sqrt(S / scaling) V^T, B = U sqrt(S / scaling), and W keeps the residual W - scaling B A, so the
// model starts computing as before, to rounding. Model::add_lora_corda runs the data and hands the
// components to LoraAdapters::add through LoraConfig::corda.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

#include "model/peft/lora_init.h"

namespace acc {

// PEFT's calibration hook: each call of the layer adds the covariance of its input (its rows;
// PEFT's input[0].squeeze(0), which takes one sequence per call), the input first divided by the
// absolute value of its largest entry, in float32 (or the input's dtype with
// corda_use_float16_for_covariance); covariance() is the sum over the calls divided by their count.
class CovarianceSum {
 public:
  // `layer` names it in errors (an input with a NaN or an infinity is InvalidArgument).
  void add(const at::Tensor& input, bool keep_dtype, const std::string& layer);
  int64_t calls() const { return calls_; }
  at::Tensor covariance() const;

 private:
  at::Tensor sum_;
  int64_t calls_ = 0;
};

// A layer's cropped components (PEFT's CordaEigens): S (r), U (out x r), V (in x r), float32.
struct CordaComponents {
  at::Tensor s, u, v;
};

// PEFT's collect_eigens_for_layer and crop_corda_eigens: `weight` in nn.Linear's layout (out x in),
// `covariance` (in x in); the covariance is damped (its mean diagonal times 0.01, doubled until
// its inverse is within 0.05 of one); `method` "ipm" keeps the r largest components, "kpm" the r
// smallest.
CordaComponents corda_components(const at::Tensor& weight, const at::Tensor& covariance, int64_t r,
                                 const std::string& method);

// PEFT's corda_init of a layer (`module`, for errors): A, B and the residual weight (in `weight`'s
// dtype; `weight` in nn.Linear's layout) for the adapter's scaling.
WeightDecomposition corda_start(const std::string& module, const at::Tensor& weight,
                                const CordaComponents& components, double scaling);

// The components add() starts the adapters from, by module name (LoraConfig::corda).
using CordaStarts = std::map<std::string, CordaComponents>;

}  // namespace acc
