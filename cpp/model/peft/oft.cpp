#include "model/peft/oft.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/fro_norm.h"

namespace acc {
namespace {

// PEFT's OFT takes nn.Linear and nn.Conv2d; here the linear layers.
void check_site(const LinearSite& site, const LoraConfig& config) {
  if (site.attention || site.fan_in_fan_out || adapts_parameter(site))
    fail(Status::InvalidArgument, "OFT cannot adapt '", site.module,
         "': PEFT's OFT takes torch.nn.Linear, torch.nn.Conv2d and torch.nn.Embedding only");
  if (site.embedding)
    fail(Status::Unsupported, "OFT on the embedding '", site.module, "' is not built (linear layers are)");
  if (site.conv)
    fail(Status::Unsupported, "OFT on the convolution '", site.module, "' is not built (linear layers are)");
  if (site.quantized) fail(Status::Unsupported, "OFT on the quantised layer '", site.module, "' is not built");
  if (!site.set_input_adapter) refuse_uncalled_layer(site, "OFT", "input to rotate");
  const auto [r, block] = oft_layout(config, site.weight.size(1));
  require(block >= 1 && r >= 1, "OFT cannot split the ", site.weight.size(1), " inputs of '", site.module, "'");
}

// Where a block's upper triangle lies (PEFT's rows and cols buffers), made once per layer: `upper`
// the triangle's indices, `positions` each of the block's entries as 0 (a zero) or k (the (k - 1)th
// value of the triangle).
struct BlockLayout {
  int64_t block = 0;
  at::Tensor upper, positions;
};

BlockLayout block_layout(int64_t block) {
  BlockLayout layout{block, at::triu_indices(block, block, 1), at::zeros({block * block}, at::kLong)};
  layout.positions.index_put_({layout.upper[0] * block + layout.upper[1]},
                              at::arange(1, layout.upper.size(1) + 1, at::kLong));
  return layout;
}

// Each block's skew-symmetric Q from its upper triangle (PEFT's _pytorch_skew_symmetric). PEFT
// writes the values into zeros in place; here they are gathered (the same values and gradients):
// autograd's in-place index_put_ of a leaf's values is differentiated twice by a backward that
// recomputes the layer (activation checkpointing).
at::Tensor skew(const at::Tensor& vec, const BlockLayout& layout) {
  const at::Tensor padded = at::cat({at::zeros({vec.size(0), 1}, vec.options()), vec}, 1);
  const at::Tensor matrix =
      padded.index_select(1, layout.positions.to(vec.device())).reshape({vec.size(0), layout.block, layout.block});
  return matrix - matrix.transpose(-2, -1);
}

// PEFT's _project_batch (coft): each Q moved into the ball of eps / sqrt(blocks) around zero.
at::Tensor projected(const at::Tensor& weight, const BlockLayout& layout, double eps_setting) {
  const at::Tensor q = skew(weight, layout);
  // Python's eps / tensor: the tensor's reciprocal times eps.
  const at::Tensor eps = at::sqrt(at::scalar_tensor(q.size(0), at::kLong)).reciprocal() * eps_setting;
  const at::Tensor zero = at::zeros({q.size(1), q.size(1)}, q.options()).unsqueeze(0).expand_as(q);
  const at::Tensor diff = q - zero;
  const at::Tensor norm = fro_norm(q - zero, {1, 2}, /*keepdim=*/true);  // torch.norm's "fro"
  const at::Tensor out = at::where((norm <= eps).to(at::kBool), q, zero + eps * (diff / norm));
  return out.index({at::indexing::Slice(), layout.upper[0], layout.upper[1]});
}

// The rotations (blocks x block x block) from `weight` (coft first projects it into its eps-ball,
// in place, as PEFT's forward does): PEFT's _cayley_batch.
at::Tensor rotations_of(const at::Tensor& weight, const BlockLayout& layout, const OftRotation& how) {
  if (how.coft) {
    at::NoGradGuard no_grad;
    weight.copy_(projected(weight, layout, how.eps));
  }
  const int64_t b = weight.size(0), block = layout.block;
  const at::Tensor q = skew(weight, layout);
  at::Tensor r;
  if (how.cayley_neumann) {
    // (libtorch 1.13's eye has no bfloat16: made in float32, the same 0s and 1s.)
    r = at::eye(block, weight.options().dtype(at::kFloat)).to(weight.scalar_type()).repeat({b, 1, 1});
    const int64_t terms = how.terms;
    if (terms > 1) {
      r.add_(q, 2.0);
      if (terms > 2) {
        at::Tensor power = at::bmm(q, q);
        r.add_(power, 2.0);
        for (int64_t k = 3; k < terms - 1; ++k) {
          power = at::bmm(power, q);
          r.add_(power, 2.0);
        }
        power = at::bmm(power, q);
        r.add_(power);
      }
    }
  } else {
    const at::Tensor eye = at::eye(block).unsqueeze(0).expand({b, block, block}).to(q.device());
    r = at::linalg_solve(eye + q, eye - q, /*left=*/false);
  }
  return r.to(weight.scalar_type());
}

}  // namespace

OftRotation OftRotation::of(const LoraConfig& config) {
  return {config.coft, config.eps, config.use_cayley_neumann, config.num_cayley_neumann_terms, config.block_share};
}

int64_t oft_adjust(int64_t in_features, int64_t params) {
  if (params >= in_features) return in_features;
  int64_t higher = params;
  while (higher <= in_features && in_features % higher != 0) ++higher;
  int64_t lower = params;
  while (lower > 1 && in_features % lower != 0) --lower;
  return params - lower <= higher - params ? lower : higher;
}

std::pair<int64_t, int64_t> oft_layout(const LoraConfig& config, int64_t in_features) {
  if (in_features < 1) return {0, 0};
  if (config.oft_r == 0) {
    int64_t block = config.oft_block_size;
    if (in_features % block != 0 || block > in_features) block = oft_adjust(in_features, block);
    return {in_features / block, block};
  }
  int64_t r = config.oft_r;
  if (in_features % r != 0 || r > in_features) r = oft_adjust(in_features, r);
  return {r, in_features / r};
}

std::vector<FactorShape> oft_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const auto [r, block] = oft_layout(config, site.weight.size(1));
  return {{kOftSuffix, {config.block_share ? 1 : r, block * (block - 1) / 2}}};
}

std::vector<LoraAdapter> make_oft_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config);
  std::vector<LoraAdapter> made;
  at::NoGradGuard no_grad;
  for (const LinearSite& site : chosen) {
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), oft_layout(config, site.weight.size(1)).first, 1.0};
    adapter.method = PeftType::Oft;
    at::Tensor weight = at::empty(oft_factor_shapes(config, site)[0].shape, at::kFloat);
    if (config.oft_init_weights)
      weight.zero_();
    else
      weight.normal_(0.0, 0.1);
    adapter.factors = {{kOftSuffix, adapter_parameter(weight, site)}};
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor oft_merged_weight(const at::Tensor& w, const LoraAdapter& adapter, const at::Tensor& weight,
                             const OftRotation& how) {
  const int64_t r = adapter.r, block = w.size(1) / r;
  // PEFT's get_delta_weight works in float32 for half precision on the CPU.
  const bool widen =
      weight.device().is_cpu() && (weight.scalar_type() == at::kHalf || weight.scalar_type() == at::kBFloat16);
  const at::Tensor rotations = rotations_of(widen ? weight.to(at::kFloat) : weight, block_layout(block), how);
  std::vector<at::Tensor> blocks;
  for (int64_t k = 0; k < r; ++k) blocks.push_back(rotations[how.block_share ? 0 : k]);
  at::Tensor oft = at::block_diag(blocks);
  if (widen) oft = oft.to(weight.scalar_type());
  return at::mm(oft, w.t().to(oft.scalar_type())).t().contiguous().to(w.scalar_type());
}

InputAdapter oft_input_adapter(const LoraAdapter& adapter, const OftRotation& how,
                               std::shared_ptr<const bool> enabled) {
  // The blocks' layout made once, from the layer's inputs (again at a call only where those differ: a
  // weight sharded at rest when the adapter was wired).
  const at::Tensor& w = adapter.site.weight;
  const BlockLayout made = w.dim() == 2 && w.size(1) > 0 ? block_layout(w.size(1) / adapter.r) : BlockLayout{};
  return [weight = adapter.factors[0].second, r = adapter.r, how, enabled, made](const at::Tensor& input, bool) {
    if (!*enabled) return input;
    const int64_t block = input.size(-1) / r;
    at::Tensor rotations = rotations_of(weight, block == made.block ? made : block_layout(block), how);
    if (how.block_share) rotations = rotations.repeat({r, 1, 1});
    std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - 1);
    shape.insert(shape.end(), {r, block});
    const at::Tensor x = input.to(weight.scalar_type()).reshape(shape);
    return at::einsum("...rk,rkc->...rc", {x, rotations}).reshape(input.sizes()).to(input.scalar_type());
  };
}

}  // namespace acc
