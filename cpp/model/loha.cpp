#include "model/loha.h"

#include <cmath>

#include "model/lora_draws.h"

namespace acc {

std::vector<FactorShape> loha_factor_shapes(const LinearSite& site, int64_t r) {
  const int64_t out = site.weight.size(0), in = site.weight[0].numel();
  return {{kLohaSuffixes[0], {out, r}},
          {kLohaSuffixes[1], {r, in}},
          {kLohaSuffixes[2], {out, r}},
          {kLohaSuffixes[3], {r, in}}};
}

void draw_loha_factors(const LoraConfig& config, NamedTensors& factors) {
  for (size_t k = 0; k < 3; ++k) kaiming_uniform_sqrt5(factors[k].second);
  if (config.loha_init_weights)
    factors[3].second.zero_();
  else
    kaiming_uniform_sqrt5(factors[3].second);
}

at::Tensor loha_weight(const NamedTensors& f, double scaling) {
  // PEFT's HadaWeight, whose hand-written backward is autograd's own here.
  const at::Tensor scale = at::scalar_tensor(scaling, at::kFloat).to(f[0].second.device());
  return (at::matmul(f[0].second, f[1].second) * at::matmul(f[2].second, f[3].second)) * scale;
}

at::Tensor loha_rank_dropout(const at::Tensor& weight, double p) {
  at::Tensor drop = (at::rand({weight.size(0)}) > p).to(weight.scalar_type());
  std::vector<int64_t> shape(static_cast<size_t>(weight.dim()), 1);
  shape[0] = -1;
  drop = drop.view(shape).to(weight.device());
  drop.div_(drop.mean());
  return weight.mul_(drop);
}

}  // namespace acc
