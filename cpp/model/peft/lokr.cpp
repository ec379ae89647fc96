#include "model/peft/lokr.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/error.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

enum Factor { kW1, kW1A, kW1B, kW2, kW2A, kW2B, kT2 };

bool has(const std::set<std::string>& names, Factor f) { return names.count(kLokrSuffixes[f]) > 0; }

const at::Tensor* find_factor(const NamedTensors& factors, Factor f) {
  return acc::find_factor(factors, kLokrSuffixes[f]);
}

const at::Tensor& factor(const NamedTensors& factors, Factor f) {
  const at::Tensor* t = find_factor(factors, f);
  if (!t) fail(Status::Internal, "LoKr's factor ", kLokrSuffixes[f], " is missing");
  return *t;
}

}  // namespace

std::pair<int64_t, int64_t> lokr_factorization(int64_t dimension, int64_t factor) {
  if (factor > 0 && dimension % factor == 0) return {factor, dimension / factor};
  if (factor == -1) factor = dimension;
  // m grows through the divisors of `dimension` while m < n and m stays within `factor`.
  int64_t m = 1, n = dimension;
  while (m < n) {
    int64_t next = m + 1;
    while (dimension % next != 0) ++next;
    if (next > factor) break;
    m = next;
    n = dimension / next;
  }
  if (m > n) std::swap(m, n);
  return {m, n};
}

std::vector<FactorShape> lokr_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const at::Tensor& w = site.weight;
  const int64_t r = config.rank_of(site.module);
  // out = a b, in (a convolution's input channels per group) = c d.
  const auto [a, b] = lokr_factorization(w.size(0), config.decompose_factor);
  const auto [c, d] = lokr_factorization(w.size(1), config.decompose_factor);
  const std::vector<int64_t> kernel(w.sizes().begin() + 2, w.sizes().end());
  int64_t kernel_size = 1;
  for (int64_t k : kernel) kernel_size *= k;
  // PEFT compares r with half the larger side as a float.
  const bool whole_w1 = !(config.decompose_both && static_cast<double>(r) < std::max(a, c) / 2.0);
  const bool whole_w2 = !(static_cast<double>(r) < std::max(b, d) / 2.0);
  const bool cp = site.conv && config.use_effective_conv2d && kernel_size != 1;
  std::vector<FactorShape> shapes;
  if (whole_w1)
    shapes.push_back({kLokrSuffixes[kW1], {a, c}});
  else
    shapes.push_back({kLokrSuffixes[kW1A], {a, r}}), shapes.push_back({kLokrSuffixes[kW1B], {r, c}});
  if (whole_w2) {
    std::vector<int64_t> w2 = {b, d};
    w2.insert(w2.end(), kernel.begin(), kernel.end());
    shapes.push_back({kLokrSuffixes[kW2], w2});
  } else if (cp) {  // a 1-D kernel's core as PEFT makes it: r x r x k x 1
    shapes.push_back({kLokrSuffixes[kW2A], {r, b}});
    shapes.push_back({kLokrSuffixes[kW2B], {r, d}});
    shapes.push_back({kLokrSuffixes[kT2], {r, r, kernel[0], kernel.size() > 1 ? kernel[1] : 1}});
  } else {
    shapes.push_back({kLokrSuffixes[kW2A], {b, r}});
    shapes.push_back({kLokrSuffixes[kW2B], {r, d * kernel_size}});
  }
  return shapes;
}

void draw_lokr_factors(const LoraConfig& config, NamedTensors& factors) {
  const std::string& init = config.lokr_init_weights;
  for (auto& [suffix, tensor] : factors) {
    const bool zero = (init == "true" && (suffix == kLokrSuffixes[kW1] || suffix == kLokrSuffixes[kW1A])) ||
                      (init == "lycoris" && (suffix == kLokrSuffixes[kW2] || suffix == kLokrSuffixes[kW2B]));
    if (zero)
      tensor.zero_();
    else
      kaiming_uniform_sqrt5(tensor);
  }
}

std::string lokr_factor_set_error(const std::vector<std::string>& suffixes) {
  const std::set<std::string> names(suffixes.begin(), suffixes.end());
  const bool w1 = has(names, kW1), w1_pair = has(names, kW1A) && has(names, kW1B);
  if (w1 == w1_pair || (w1 && (has(names, kW1A) || has(names, kW1B))))
    return "holds neither lokr_w1 alone nor lokr_w1_a with lokr_w1_b";
  const bool w2 = has(names, kW2), w2_pair = has(names, kW2A) && has(names, kW2B);
  if (w2 == w2_pair || (w2 && (has(names, kW2A) || has(names, kW2B) || has(names, kT2))))
    return "holds neither lokr_w2 alone nor lokr_w2_a with lokr_w2_b (and lokr_t2 for the CP form)";
  return "";
}

at::Tensor lokr_weight(const NamedTensors& factors, double scaling) {
  at::Tensor w1 =
      find_factor(factors, kW1) ? factor(factors, kW1) : at::matmul(factor(factors, kW1A), factor(factors, kW1B));
  at::Tensor w2;
  if (const at::Tensor* whole = find_factor(factors, kW2))
    w2 = *whole;
  else if (const at::Tensor* core = find_factor(factors, kT2))  // PEFT's make_weight_cp
    w2 = at::einsum("ijkl,ip,jr->prkl", {*core, factor(factors, kW2A), factor(factors, kW2B)});
  else
    w2 = at::matmul(factor(factors, kW2A), factor(factors, kW2B));
  if (w2.dim() == 4) w1 = w1.unsqueeze(2).unsqueeze(2);
  // torch.kron of a matrix and a 3-D w2 (a 1-D convolution's whole w2) takes the matrix as 1 x a x
  // c, as PEFT's make_kron leaves it; the reshape to the weight's shape follows. PEFT's
  // w2.contiguous() leaves a 1-D kernel's CP w2 (b x d x k x 1) a stride libtorch 1.13's kron cannot
  // view: a copy with plain strides (the same values: kron multiplies pairs).
  return at::kron(w1, w2.clone(at::MemoryFormat::Contiguous)) * scaling;
}

at::Tensor lokr_rank_dropout(const at::Tensor& weight, double p, bool scale) {
  at::Tensor drop = (at::rand({weight.size(0)}) > p).to(at::kFloat);
  std::vector<int64_t> shape(static_cast<size_t>(weight.dim()), 1);
  shape[0] = -1;
  drop = drop.view(shape).to(weight.device());
  if (scale) drop.div_(drop.mean());
  return weight.mul_(drop);
}

}  // namespace acc
