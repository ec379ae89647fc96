#include "model/weighted_adapter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

namespace acc {

namespace {

// PEFT's task_arithmetic: the tensors stacked, times their weights (a float32 tensor of them), summed.
at::Tensor task_arithmetic(const std::vector<at::Tensor>& tensors, const std::vector<double>& weights) {
  const at::Tensor stacked = at::stack(tensors, 0);
  std::vector<int64_t> shape(static_cast<size_t>(stacked.dim()), 1);
  shape[0] = -1;
  const at::Tensor w = at::tensor(std::vector<float>(weights.begin(), weights.end())).to(stacked.device());
  return (stacked * w.view(shape)).sum(0);
}

}  // namespace

void check_combinable(const LoraAdapter& adapter, const std::string& combination) {
  const LinearSite& site = adapter.site;
  if (adapts_parameter(site))
    fail(Status::InvalidArgument, "add_weighted_adapter does not combine adapters of parameters (target_parameters, ",
         "'", site.module, "'), as PEFT's");
  if (site.conv && site.conv->groups != 1)
    fail(Status::Unsupported, "add_weighted_adapter on the convolution '", site.module, "' with groups ",
         site.conv->groups, ": its adapter has no weight of the layer's shape");
  if (combination == "svd" && site.conv && adapter.a.dim() != 4)
    fail(Status::Unsupported, "add_weighted_adapter 'svd' on the ", adapter.a.dim() - 2, "-D convolution '",
         site.module, "': PEFT factors 2-D convolutions' deltas only");
}

int64_t combined_rank(const std::string& combination, const std::vector<int64_t>& ranks, int64_t svd_rank) {
  require(!ranks.empty(), "add_weighted_adapter needs at least one adapter");
  if (combination == "linear") {
    require(std::all_of(ranks.begin(), ranks.end(), [&](int64_t r) { return r == ranks.front(); }),
            "add_weighted_adapter 'linear' needs adapters of one rank (as PEFT's); use 'cat' or 'svd'");
    return ranks.front();
  }
  if (combination == "cat") return std::accumulate(ranks.begin(), ranks.end(), int64_t{0});
  if (combination == "svd") return svd_rank > 0 ? svd_rank : *std::max_element(ranks.begin(), ranks.end());
  for (const char* other : {"ties", "ties_svd", "dare_ties", "dare_linear", "dare_ties_svd", "dare_linear_svd",
                            "magnitude_prune", "magnitude_prune_svd"})
    if (combination == other)
      fail(Status::Unsupported, "add_weighted_adapter combination_type '", combination,
           "' is not built (linear, cat and svd are)");
  fail(Status::InvalidArgument, "add_weighted_adapter combination_type '", combination,
       "' is none of PEFT's (linear, cat, svd, ...)");
}

void combine_into(const LoraAdapter& target, const std::vector<WeightedSource>& sources,
                  const std::string& combination) {
  require(!sources.empty(), "add_weighted_adapter: no adapter among those combined adapts '", target.site.module, "'");
  for (const auto& source : sources) {
    // PEFT stacks the layers' As and Bs: linear needs each of the combined rank (a rank_pattern can
    // give one layer another).
    require(combination != "linear" || source.adapter->a.size(0) == target.a.size(0), "add_weighted_adapter ",
            "'linear' on '", target.site.module, "': an adapter of rank ", source.adapter->a.size(0),
            " beside the combined rank ", target.a.size(0));
  }
  at::NoGradGuard no_grad;
  at::Tensor a, b;
  if (combination == "cat") {
    std::vector<at::Tensor> as, bs;
    for (const auto& source : sources) {  // PEFT's A * weight * scaling: two products, in that order
      as.push_back(source.adapter->a * source.weight * source.adapter->scaling);
      bs.push_back(source.adapter->b);
    }
    const at::Tensor cat_a = at::cat(as, 0), cat_b = at::cat(bs, 1);
    // PEFT zeroes the drawn tensors (times 0.0) and writes the stacks over their first rows.
    a = target.a * 0.0;
    b = target.b * 0.0;
    a.narrow(0, 0, cat_a.size(0)).copy_(cat_a);
    b.narrow(1, 0, cat_b.size(1)).copy_(cat_b);
  } else if (combination == "linear") {
    std::vector<at::Tensor> as, bs;
    std::vector<double> wa, wb;
    for (const auto& source : sources) {
      const double scaled = source.weight * source.adapter->scaling;
      const double root = std::sqrt(std::abs(scaled));
      wa.push_back(scaled >= 0 ? root : -root);  // the sign on A alone
      wb.push_back(root);
      as.push_back(source.adapter->a);
      bs.push_back(source.adapter->b);
    }
    a = task_arithmetic(as, wa).to(as.front().scalar_type());
    b = task_arithmetic(bs, wb).to(as.front().scalar_type());
  } else {  // svd: the weighted deltas (each already scaled, weighted by weight x scaling again, as PEFT)
    std::vector<at::Tensor> deltas;
    std::vector<double> weights;
    for (const auto& source : sources) {
      deltas.push_back(weight_delta(*source.adapter));
      weights.push_back(source.weight * source.adapter->scaling);
    }
    at::Tensor delta = task_arithmetic(deltas, weights);
    const LinearSite& site = target.site;
    if (site.conv) delta = target.a.size(2) == 1 && target.a.size(3) == 1 ? delta.squeeze() : delta.flatten(1);
    if (site.fan_in_fan_out || site.embedding) delta = delta.t();
    const int64_t rank = target.a.size(0);
    require(rank <= std::min(delta.size(0), delta.size(1)), "add_weighted_adapter 'svd' to rank ", rank, " on '",
            site.module, "', whose delta is ", delta.size(0), " x ", delta.size(1));
    const auto [u, s, vh] = at::linalg_svd(delta, /*full_matrices=*/true);
    b = at::matmul(u.narrow(1, 0, rank), at::diag(s.narrow(0, 0, rank)));
    a = vh.narrow(0, 0, rank);
    if (site.conv) {
      b = b.reshape(target.b.sizes());
      a = a.reshape(target.a.sizes());
    }
  }
  require(a.sizes() == target.a.sizes() && b.sizes() == target.b.sizes(), "add_weighted_adapter: the combined ",
          "adapter of '", target.site.module, "' does not fit it");
  target.a.copy_(a);
  target.b.copy_(b);
}

}  // namespace acc
