#include "model/loha.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"

namespace acc {
namespace {

bool kernel_is_one(const LinearSite& site) {
  for (int64_t d = 2; d < site.weight.dim(); ++d)
    if (site.weight.size(d) != 1) return false;
  return true;
}

// PEFT's LycorisTuner takes nn.Linear, nn.Conv1d and nn.Conv2d; anything else is its TypeError.
void check_site(const LinearSite& site, const LoraConfig& config) {
  const bool conv = site.conv.has_value();
  if (site.embedding || site.attention || site.fan_in_fan_out || adapts_parameter(site) ||
      (conv && site.weight.dim() != 3 && site.weight.dim() != 4))
    fail(Status::InvalidArgument, "LoHa cannot adapt '", site.module,
         "': PEFT's LoHa takes torch.nn.Linear, torch.nn.Conv1d and torch.nn.Conv2d only");
  if (site.quantized)
    fail(Status::Unsupported, "LoHa on the quantised layer '", site.module, "' is not built (PEFT has none either)");
  if (!site.set_output_adapter)
    fail(Status::Unsupported, "LoHa cannot adapt '", site.module,
         "': the model's forward never calls it as a module (it reads its weight itself), so there is no input "
         "to add the branch's output from; call the layer as a module or leave it out of target_modules");
  if (conv && !site.conv->refusal.empty())
    fail(Status::Unsupported, "LoHa on '", site.module, "': ", site.conv->refusal);
  if (conv && config.use_effective_conv2d && !kernel_is_one(site))
    fail(Status::Unsupported, "use_effective_conv2d on '", site.module,
         "' (PEFT's CP form of its kernel, hada_t1 and hada_t2) is not built; leave it false");
}

}  // namespace

std::vector<LoraAdapter> make_loha_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config);
  std::vector<LoraAdapter> made;
  at::NoGradGuard no_grad;
  for (const LinearSite& site : chosen) {
    const int64_t r = config.rank_of(site.module), out = site.weight.size(0), in = site.weight[0].numel();
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), r, config.scaling_of(site.module)};
    // PEFT's create_adapter_parameters (torch.empty) and reset_adapter_parameters, in this order.
    std::vector<at::Tensor> hada = {at::empty({out, r}, at::kFloat), at::empty({r, in}, at::kFloat),
                                    at::empty({out, r}, at::kFloat), at::empty({r, in}, at::kFloat)};
    for (size_t k = 0; k < 3; ++k) torch::nn::init::kaiming_uniform_(hada[k], std::sqrt(5.0));
    if (config.loha_init_weights)
      hada[3].zero_();
    else
      torch::nn::init::kaiming_uniform_(hada[3], std::sqrt(5.0));
    for (at::Tensor& t : hada) t = adapter_parameter(t, site);
    adapter.hada = std::move(hada);
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor loha_delta(const std::vector<at::Tensor>& h, double scaling, c10::IntArrayRef shape, bool training,
                      double rank_dropout) {
  // PEFT's HadaWeight: ((w1_a @ w1_b) * (w2_a @ w2_b)) * torch.tensor(scaling), whose hand-written
  // backward is autograd's own here.
  const at::Tensor scale = at::scalar_tensor(scaling, at::kFloat).to(h[0].device());
  at::Tensor weight = (at::matmul(h[0], h[1]) * at::matmul(h[2], h[3])) * scale;
  weight = weight.reshape(shape);
  if (training && rank_dropout > 0) {
    at::Tensor drop = (at::rand({weight.size(0)}) > rank_dropout).to(weight.scalar_type());
    std::vector<int64_t> shape(static_cast<size_t>(weight.dim()), 1);
    shape[0] = -1;
    drop = drop.view(shape).to(weight.device());
    drop.div_(drop.mean());
    weight.mul_(drop);
  }
  return weight;
}

OutputAdapter loha_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled) {
  // The factors are handles (moves and sharding's storage swaps keep them); the weight's shape is
  // the whole one (a weight sharded at rest is a slice).
  return [hada = adapter.hada, scaling = adapter.scaling, shape = adapter.site.weight.sizes().vec(),
          conv = adapter.site.conv, enabled, rank_dropout = config.rank_dropout,
          module_dropout = config.module_dropout](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    if (training && !(at::rand({1}) > module_dropout).item<bool>()) return output.to(input.scalar_type());
    const at::Tensor delta = loha_delta(hada, scaling, shape, training, rank_dropout);
    const at::Tensor x = input.to(delta.scalar_type());
    at::Tensor branch;
    if (!conv) {
      branch = at::linear(x, delta);
    } else {
      const std::vector<int64_t> dilation(conv->stride.size(), 1);  // (a dilated layer is refused)
      branch = delta.dim() == 4 ? at::conv2d(x, delta, {}, conv->stride, conv->padding, dilation, conv->groups)
                                : at::conv1d(x, delta, {}, conv->stride, conv->padding, dilation, conv->groups);
    }
    return (output + branch).to(input.scalar_type());
  };
}

}  // namespace acc
