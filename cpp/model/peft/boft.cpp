#include "model/peft/boft.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"

namespace acc {
namespace {

// The layers PEFT's BOFT takes, a linear one called as a module (its input is rotated).
void check_site(const LinearSite& site) {
  require_linear_or_plain_conv2d(site, "BOFT", "boft.Conv2d");
  if (!site.set_output_adapter || (!site.conv && !site.set_input_adapter))
    refuse_uncalled_layer(site, "BOFT", "input to rotate");
}

// PEFT's block_butterfly_perm(n, blocks, half, factors - 1): within each group of n / blocks, the
// half-block chunks in even positions first, then the odd ones.
at::Tensor butterfly_permutation(int64_t n, int64_t blocks, int64_t half, int64_t later_factors) {
  at::Tensor indices = at::arange(n, at::kLong);
  if (later_factors == 0) return indices;
  require(blocks * half * 2 <= n, "BOFT: invalid number of blocks (", blocks, " of ", half * 2, " in ", n, ")");
  const int64_t group = n / blocks;
  const double step = static_cast<double>(group) / static_cast<double>(half);
  std::vector<int64_t> order;
  for (int start : {0, 1})
    for (double pos = start; pos < step; pos += 2)
      for (int64_t k = 0; k < half; ++k) order.push_back(static_cast<int64_t>(pos * static_cast<double>(half)) + k);
  require(static_cast<int64_t>(order.size()) == group, "BOFT: the butterfly of ", n, " does not split evenly");
  const at::Tensor sorted = at::tensor(order, at::kLong);
  std::vector<at::Tensor> groups;
  for (int64_t i = 0; i < n; i += group) groups.push_back(indices.slice(0, i, i + group).index_select(0, sorted));
  return at::cat(groups);
}

// Each factor's permutation for a butterfly of `n` (PEFT's boft_P, as index lists).
std::vector<at::Tensor> permutations(int64_t n, const BoftLayout& layout) {
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < layout.factors; ++i)
    out.push_back(butterfly_permutation(n, layout.blocks / (int64_t{1} << i), layout.block / 2, layout.factors - 1));
  return out;
}

// PEFT's cayley_batch: (I + S)^-1 solved from the right, S the skew-symmetric half of each block.
at::Tensor cayley(const at::Tensor& data) {
  const int64_t b = data.size(0), r = data.size(1), c = data.size(2);
  const at::Tensor skew = (data - data.transpose(1, 2)) * 0.5;
  const at::Tensor identity = at::eye(r, data.options().dtype(at::kFloat)).unsqueeze(0).expand({b, r, c});
  return at::linalg_solve(identity + skew, identity - skew, /*left=*/false).to(data.scalar_type());
}

// PEFT's MultiplicativeDropoutLayer in training: the blocks of one factor (torch.randint) picked by
// torch.randperm, int(p x blocks) of them, become the identity.
at::Tensor multiplicative_dropout(const at::Tensor& x, double p) {
  const int64_t n = x.size(0), d = x.size(1), h = x.size(2);
  const int64_t chosen = at::randint(0, n, {1}, at::kLong).item<int64_t>();
  const int64_t replaced = static_cast<int64_t>(p * static_cast<double>(d));
  const at::Tensor ones_first = at::cat(
      {at::ones({replaced}, x.options().dtype(at::kFloat)), at::zeros({d - replaced}, x.options().dtype(at::kFloat))});
  const at::Tensor mask = ones_first.index_select(0, at::randperm(d, at::kLong).to(x.device())).view({1, d, 1, 1});
  const at::Tensor full = at::zeros({n, d, 1, 1}, x.options().dtype(at::kFloat));
  full.select(0, chosen).copy_(mask.select(0, 0));
  const at::Tensor identity = at::eye(h, x.options().dtype(at::kFloat)).repeat({n, d, 1, 1});
  return at::rsub(full, 1) * x + full * identity;
}

// The rotation M (n x n, in `dtype`): each factor's blocks rotated, laid on its diagonal (as PEFT's
// FastBlockDiag), permuted (P B P^T: the permutation's rows and columns taken) and multiplied, the
// last factor on the left.
at::Tensor butterfly(const at::Tensor& boft_r, double dropout, bool training, at::ScalarType dtype) {
  const int64_t n = boft_r.size(0), d = boft_r.size(1), h = boft_r.size(2);
  at::Tensor rotations = cayley(boft_r.view({n * d, h, h})).view({n, d, h, h});
  if (training && dropout > 0) rotations = multiplicative_dropout(rotations, dropout);
  const std::vector<at::Tensor> perms = permutations(d * h, {n, d, h});
  at::Tensor product;
  for (int64_t i = 0; i < n; ++i) {
    const at::Tensor diagonal = at::block_diag(rotations.select(0, i).unbind(0)).to(dtype);
    // One factor's permutation is the identity (PEFT's arange): nothing to take.
    const at::Tensor p = perms[static_cast<size_t>(i)].to(diagonal.device());
    const at::Tensor permuted = n == 1 ? diagonal : diagonal.index_select(0, p).index_select(1, p);
    product = product.defined() ? at::matmul(permuted, product) : permuted;
  }
  return product;
}

}  // namespace

BoftLayout boft_layout(const LoraConfig& config, const LinearSite& site) {
  const int64_t n = unrolled_in_features(site), later = config.boft_n_butterfly_factor - 1;
  const std::string what = site.conv ? "the convolution's kernel dimension (" + std::to_string(n) + ")"
                                     : "in_features (" + std::to_string(n) + ")";
  BoftLayout layout{config.boft_n_butterfly_factor, config.boft_block_num, config.boft_block_size};
  auto refuse = [&](const std::string& why) {
    fail(Status::InvalidArgument, "BOFT cannot adapt '", site.module, "': ", why, " (PEFT's ValueError)");
  };
  if (later != 0 && n == 0) refuse("it has no inputs, which give a butterfly no blocks (PEFT divides by zero)");
  if (layout.block == 0) {
    if (n % layout.blocks != 0) refuse(what + " must be divisible by boft_block_num (" + concat(layout.blocks) + ")");
    if (later != 0 && (later > static_cast<int64_t>(std::log2(static_cast<double>(layout.blocks))) ||
                       layout.blocks % (int64_t{1} << later) != 0))
      refuse("boft_block_num (" + concat(layout.blocks) + ") must be a multiple of 2 to the power of " +
             "boft_n_butterfly_factor - 1 (" + concat(later) + ")");
    layout.block = n / layout.blocks;
  } else {
    if (n % layout.block != 0) refuse(what + " must be divisible by boft_block_size (" + concat(layout.block) + ")");
    if (later != 0 &&
        (later >= 62 || n < layout.block * (int64_t{1} << later) || n % (layout.block * (int64_t{1} << later)) != 0))
      refuse(what + " does not split into boft_block_size (" + concat(layout.block) + ") blocks over " +
             concat(config.boft_n_butterfly_factor) + " butterfly factors");
    layout.blocks = n / layout.block;
  }
  if (later != 0 && (layout.blocks % 2 != 0 || layout.block % 2 != 0))
    refuse("with butterfly factors the blocks (" + concat(layout.blocks) + ") and their size (" + concat(layout.block) +
           ") must be even");
  return layout;
}

std::vector<FactorShape> boft_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const BoftLayout l = boft_layout(config, site);
  const int64_t out = out_features(site);
  return {{kBoftR, {l.factors, l.blocks, l.block, l.block}},
          {kBoftS, site.conv ? std::vector<int64_t>{1, out} : std::vector<int64_t>{out, 1}}};
}

std::vector<LoraAdapter> make_boft_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  std::vector<std::vector<FactorShape>> shapes;
  for (const LinearSite& site : chosen) {
    check_site(site);
    shapes.push_back(boft_factor_shapes(config, site));
    (void)permutations(unrolled_in_features(site), boft_layout(config, site));  // PEFT's checks of the butterfly
  }
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (size_t k = 0; k < chosen.size(); ++k) {
    const LinearSite& site = chosen[k];
    at::Tensor r = at::zeros(shapes[k][0].shape, at::kFloat), s = at::ones(shapes[k][1].shape, at::kFloat);
    if (!config.boft_init_weights) r.normal_(0.0, 0.1), s.normal_(1.0, 0.1);
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), shapes[k][0].shape[1], 1.0};
    adapter.factors = {{kBoftR, adapter_parameter(r, site)}, {kBoftS, adapter_parameter(s, site)}};
    adapter.method = PeftType::Boft;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor boft_merged_weight(const at::Tensor& w, const LoraAdapter& adapter, const at::Tensor& boft_r,
                              const at::Tensor& boft_s) {
  const at::Tensor m = butterfly(boft_r, 0.0, false, boft_r.scalar_type());
  if (!adapter.site.conv) return (at::mm(m, w.t().to(m.scalar_type())).t() * boft_s).to(w.scalar_type());
  const at::Tensor flat = w.reshape({w.size(0), -1}).t();
  return (at::mm(m, flat.to(m.scalar_type())).t() * boft_s.t()).reshape(w.sizes()).contiguous().to(w.scalar_type());
}

InputAdapter boft_input_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled) {
  if (adapter.site.conv) return nullptr;  // its weight is rotated (boft_output_adapter)
  // Handles: moves and sharding's storage swaps keep them.
  return [r = adapter.factors[0].second, dropout, enabled](const at::Tensor& input, bool training) {
    if (!*enabled) return input;
    return at::matmul(input, butterfly(r, dropout, training, input.scalar_type()));
  };
}

OutputAdapter boft_output_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled) {
  const at::Tensor r = adapter.factors[0].second, s = adapter.factors[1].second;
  const at::Tensor weight = adapter.site.weight, bias = adapter.site.bias;
  if (!adapter.site.conv)
    return [s, bias, enabled](const at::Tensor& input, const at::Tensor& output, bool) {
      if (!*enabled) return output.to(input.scalar_type());  // (PEFT's forward casts either way)
      const at::Tensor scale = s * at::ones({s.size(0), 1}, output.options());
      at::Tensor result = bias.defined() ? output - bias : output;
      result = result * scale.squeeze(-1);
      if (bias.defined()) result = result + bias;
      return result.to(input.scalar_type());
    };
  const int64_t stride = adapter.site.conv->stride.front(), padding = adapter.site.conv->padding.front();
  return [r, s, weight, bias, stride, padding, dropout, enabled](const at::Tensor& input, const at::Tensor& output,
                                                                 bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    const at::Tensor m = butterfly(r, dropout, training, input.scalar_type());
    const at::Tensor scale = s.t() * at::ones({s.size(1), 1}, input.options());
    const at::Tensor x = input.to(weight.scalar_type());
    const at::Tensor rotated = at::mm(m, weight.view({weight.size(0), -1}).t()).t();
    const at::Tensor scaled = (rotated * scale).view(weight.sizes());
    const at::Tensor b = bias.defined() ? bias.to(scaled.scalar_type()) : bias;
    return at::conv2d(x.to(scaled.scalar_type()), scaled, b, {stride, stride}, {padding, padding})
        .to(input.scalar_type());
  };
}

}  // namespace acc
