#include "model/peft/loha.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

enum Factor { kW1A, kW1B, kW2A, kW2B, kT1, kT2 };

const at::Tensor& factor(const NamedTensors& factors, Factor f) {
  const at::Tensor* t = find_factor(factors, kLohaSuffixes[f]);
  if (!t) fail(Status::Internal, "LoHa's factor ", kLohaSuffixes[f], " is missing");
  return *t;
}

// PEFT's HadaWeightCP: the product of the two rebuilt weights, and its gradients computed by hand
// with PEFT's einsums (their letters too: einsum orders its work by them).
struct HadaWeightCp : torch::autograd::Function<HadaWeightCp> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& t1, const at::Tensor& w1a,
                            const at::Tensor& w1b, const at::Tensor& t2, const at::Tensor& w2a, const at::Tensor& w2b,
                            const at::Tensor& scale) {
    ctx->save_for_backward({t1, w1a, w1b, t2, w2a, w2b, scale});
    const at::Tensor rebuild1 = at::einsum("i j k l, j r, i p -> p r k l", {t1, w1b, w1a});
    const at::Tensor rebuild2 = at::einsum("i j k l, j r, i p -> p r k l", {t2, w2b, w2a});
    return rebuild1 * rebuild2 * scale;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor grad_out = grad_outputs[0] * saved[6];
    torch::autograd::variable_list grads;
    // Each half's gradients through the other half's rebuilt weight: t1, w1_a, w1_b, then t2, w2_a, w2_b.
    for (const auto& [mine, other] : {std::pair{0, 3}, std::pair{3, 0}}) {
      const at::Tensor &t = saved[mine], &wa = saved[mine + 1], &wb = saved[mine + 2];
      const at::Tensor temp = at::einsum("i j k l, j r -> i r k l", {saved[other], saved[other + 2]});
      const at::Tensor grad_w = at::einsum("i j k l, i r -> r j k l", {temp, saved[other + 1]}) * grad_out;
      const at::Tensor grad_wa = at::einsum("r j k l, i j k l -> r i", {temp, grad_w});
      const at::Tensor grad_temp = at::einsum("i j k l, i r -> r j k l", {grad_w, wa.t()});
      const at::Tensor grad_wb = at::einsum("i r k l, i j k l -> r j", {t, grad_temp});
      const at::Tensor grad_t = at::einsum("i j k l, j r -> i r k l", {grad_temp, wb.t()});
      grads.insert(grads.end(), {grad_t, grad_wa, grad_wb});
    }
    grads.emplace_back();  // the scale's
    return grads;
  }
};

}  // namespace

std::vector<FactorShape> loha_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t r = config.rank_of(site.module), out = site.weight.size(0);
  const std::vector<int64_t> kernel(site.weight.sizes().begin() + 2, site.weight.sizes().end());
  int64_t kernel_size = 1;
  for (int64_t k : kernel) kernel_size *= k;
  if (site.conv && config.use_effective_conv2d && kernel_size != 1) {
    const int64_t in = site.weight.size(1);  // per group
    const std::vector<int64_t> core = {r, r, kernel[0], kernel.size() > 1 ? kernel[1] : 1};
    return {{kLohaSuffixes[kW1A], {r, out}}, {kLohaSuffixes[kW1B], {r, in}}, {kLohaSuffixes[kW2A], {r, out}},
            {kLohaSuffixes[kW2B], {r, in}},  {kLohaSuffixes[kT1], core},     {kLohaSuffixes[kT2], core}};
  }
  const int64_t in = site.weight[0].numel();
  return {{kLohaSuffixes[kW1A], {out, r}},
          {kLohaSuffixes[kW1B], {r, in}},
          {kLohaSuffixes[kW2A], {out, r}},
          {kLohaSuffixes[kW2B], {r, in}}};
}

void draw_loha_factors(const LoraConfig& config, NamedTensors& factors) {
  for (auto& [suffix, tensor] : factors) {
    if (config.loha_init_weights && suffix == kLohaSuffixes[kW2B])
      tensor.zero_();
    else
      kaiming_uniform_sqrt5(tensor);
  }
}

std::string loha_factor_set_error(const std::vector<std::string>& suffixes) {
  auto has = [&](Factor f) { return std::find(suffixes.begin(), suffixes.end(), kLohaSuffixes[f]) != suffixes.end(); };
  for (Factor f : {kW1A, kW1B, kW2A, kW2B})
    if (!has(f)) return std::string("lacks ") + (kLohaSuffixes[f] + 1);
  if (has(kT1) != has(kT2)) return "holds one of the CP form's cores (hada_t1, hada_t2) without the other";
  return "";
}

at::Tensor loha_weight(const NamedTensors& f, double scaling) {
  const at::Tensor scale = at::scalar_tensor(scaling, at::kFloat).to(factor(f, kW1A).device());
  if (find_factor(f, kLohaSuffixes[kT1]))
    return HadaWeightCp::apply(factor(f, kT1), factor(f, kW1A), factor(f, kW1B), factor(f, kT2), factor(f, kW2A),
                               factor(f, kW2B), scale);
  // PEFT's HadaWeight, whose hand-written backward is autograd's own here.
  return (at::matmul(factor(f, kW1A), factor(f, kW1B)) * at::matmul(factor(f, kW2A), factor(f, kW2B))) * scale;
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
