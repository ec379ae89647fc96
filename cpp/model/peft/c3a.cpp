#include "model/peft/c3a.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <utility>

#include "common/error.h"

namespace acc {
namespace {

// The layer's block size, which must divide its inputs and outputs (PEFT's ValueError).
int64_t block_size_for(const LinearSite& site, const LoraConfig& config) {
  const int64_t b = config.block_size_of(site.module), in = in_features(site), out = out_features(site);
  if (in % b != 0 || out % b != 0)
    fail(Status::InvalidArgument, "C3A cannot adapt '", site.module, "': its block size ", b, " must divide both its ",
         in, " inputs and its ", out, " outputs (PEFT's ValueError)");
  return b;
}

// PEFT's C3A takes nn.Linear only, whose output it adds to; the block size divides both sides.
void check_site(const LinearSite& site, const LoraConfig& config) {
  require_plain_linear(site, "C3A", "input to add the branch's output from");
  (void)block_size_for(site, config);
}

// `sizes` but its last dimension, then `tail`.
std::vector<int64_t> with_tail(at::IntArrayRef sizes, size_t drop, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> out(sizes.begin(), sizes.end() - static_cast<std::ptrdiff_t>(drop));
  out.insert(out.end(), tail);
  return out;
}

// PEFT's BlockCircularConvolution: x (..., n b) as n blocks of b, each block's circular convolution
// with the kernel's (m x n x b) summed per output block, by FFTs; its backward as PEFT writes it.
struct BlockCircularConvolution : torch::autograd::Function<BlockCircularConvolution> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    const at::Tensor blocks = x.reshape(with_tail(x.sizes(), 1, {w.size(1), w.size(2)}));
    ctx->save_for_backward({blocks, w});
    const at::Tensor y = at::real(at::fft_fft(at::einsum("...nb,mnb->...mb", {at::fft_ifft(blocks), at::fft_fft(w)})));
    return y.reshape(with_tail(y.sizes(), 2, {-1}));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const at::Tensor grad = grad_outputs[0].reshape(with_tail(grad_outputs[0].sizes(), 1, {w.size(0), w.size(2)}));
    const at::Tensor grad_fft = at::fft_fft(grad);
    const at::Tensor x_grad = at::real(at::fft_fft(at::einsum("...mb,mnb->...nb", {grad_fft, at::fft_ifft(w)})));
    const at::Tensor w_grad = at::real(at::fft_fft(at::einsum("...mb,...nb->mnb", {grad_fft, at::fft_ifft(x)})));
    return {x_grad.reshape(with_tail(x_grad.sizes(), 2, {-1})), w_grad};
  }
};

// PEFT's get_circulant_fast: the kernel's block circulant matrix, out x in, in its dtype.
at::Tensor circulant(const at::Tensor& kernel) {
  const int64_t n = kernel.size(1), b = kernel.size(2);
  const at::Tensor eye = at::eye(n * b, kernel.options()).reshape({n * b, n, b});
  const at::Tensor x = at::einsum("...nb,mnb->...mb", {at::fft_ifft(eye), at::fft_fft(kernel)});
  return at::real(at::fft_fft(x)).flatten(1).t();
}

}  // namespace

std::vector<FactorShape> c3a_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t b = block_size_for(site, config);
  return {{kC3aKernel, {out_features(site) / b, in_features(site) / b, b}}};
}

std::vector<LoraAdapter> make_c3a_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config);
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    at::Tensor kernel = at::zeros(c3a_factor_shapes(config, site).front().shape, at::kFloat);
    const double in = static_cast<double>(in_features(site)), out = static_cast<double>(out_features(site));
    // PEFT's reset_c3a_parameters, its arithmetic in Python floats.
    if (config.c3a_init == "gaussian") {
      kernel.normal_();
    } else if (config.c3a_init == "xavier_uniform" || config.c3a_init == "false") {
      const double a = std::sqrt(3.0) * (1.0 * std::sqrt(2.0 / (in + out)));
      kernel.uniform_(-a, a);
    } else if (config.c3a_init == "kaiming_uniform") {
      const double a = 1.0 * std::sqrt(1.0 / in);
      kernel.uniform_(-a, a);
    }
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), kernel.size(2), 1.0};
    adapter.factors = {{kC3aKernel, adapter_parameter(kernel, site)}};
    adapter.method = PeftType::C3a;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor c3a_merged_weight(const at::Tensor& w, const at::Tensor& kernel) {
  const at::Tensor delta = circulant(kernel.to(at::kFloat)).to(w.scalar_type()) / w.size(-1);
  return (w + delta).to(w.scalar_type());
}

OutputAdapter c3a_output_adapter(const LoraAdapter& adapter, const LoraConfig&, std::shared_ptr<const bool> enabled) {
  // A handle: moves and sharding's storage swaps keep it.
  const at::Tensor kernel = adapter.factors[0].second;
  return [kernel, enabled](const at::Tensor& input, const at::Tensor& output, bool) {
    if (!*enabled) return output.to(input.scalar_type());
    const at::Tensor x = input.to(at::kFloat);
    const at::Tensor branch = BlockCircularConvolution::apply(x, kernel.to(at::kFloat)) / x.size(-1);
    return (output + branch.to(output.scalar_type())).to(input.scalar_type());
  };
}

}  // namespace acc
