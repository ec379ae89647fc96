#include "model/peft/weighted_adapter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"
#include "common/text.h"

namespace acc {

namespace {

const std::string kSvd = "_svd";

bool ends_with_svd(const std::string& type) { return type.size() > kSvd.size() && ends_with(type, kSvd); }
// "ties_svd" -> "ties": the task merge an svd combination applies before factoring.
std::string without_svd(const std::string& type) { return type.substr(0, type.size() - kSvd.size()); }

// PEFT's combination types: cat, svd, the task merges, and each pruning one with "_svd".
bool is_combination_type(const std::string& type) {
  if (type == "cat" || type == "svd") return true;
  if (ends_with_svd(type)) return task_merge_prunes(without_svd(type));
  return is_task_merge_method(type);
}

}  // namespace

const OptionTable<WeightedCombination>& weighted_adapter_option_table() {
  using W = WeightedCombination;
  static const OptionTable<W> table(OptionsKind::WeightedAdapter, [](OptionTable<W>& t) {
    t.bind("svd_rank", "the rank of an svd combination (default 0: the largest of the adapters')", &W::svd_rank)
        .at_least(0);
    t.bind("svd_clamp", "svd combinations: U's and Vh's values clamped to this quantile of them (default: none)",
           &W::svd_clamp)
        .at_least(0)
        .at_most(1);
    t.bind("svd_full_matrices", "svd combinations: torch.linalg.svd's full_matrices", &W::svd_full_matrices);
    t.bind("svd_driver", "svd combinations on CUDA: cuSOLVER's gesvd, gesvdj or gesvda (default: torch's choice)",
           &W::svd_driver)
        .one_of({"gesvd", "gesvdj", "gesvda"});
    t.bind("density",
           "the fraction of values kept by ties, dare_*, magnitude_prune and their _svd forms (required by them; "
           ">= 1 keeps all)",
           &W::density)
        .at_least(0);
    t.bind("majority_sign_method", "ties and dare_ties: the sign elected by the values' sum (total) or count",
           &W::majority_sign_method)
        .one_of({"total", "frequency"});
  });
  return table;
}

WeightedCombination WeightedCombination::from(const std::string& combination_type, const Options& options,
                                              size_t adapters) {
  require(options.kind() == OptionsKind::WeightedAdapter, "add_weighted_adapter's options must be of kind ",
          "weighted_adapter, got ", options_kind_name(options.kind()));
  require(is_combination_type(combination_type), "add_weighted_adapter combination_type '", combination_type,
          "' is none of PEFT's (svd, linear, cat, ties, ties_svd, dare_linear, dare_linear_svd, dare_ties, ",
          "dare_ties_svd, magnitude_prune, magnitude_prune_svd)");
  WeightedCombination how = weighted_adapter_option_table().read(options);
  how.combination_type = adapters == 1 ? "linear" : combination_type;
  require(!task_merge_prunes(how.task_merge().method) || how.density.has_value(), "add_weighted_adapter '",
          how.combination_type, "' needs a density (the fraction of values kept)");
  // DARE divides the kept values by the density (in the tensors' float32): none would be kept, and
  // zero divided by zero is NaN in every value (PEFT's adapter of NaNs).
  require(!task_merge_prunes_at_random(how.task_merge().method) || static_cast<float>(*how.density) > 0,
          "add_weighted_adapter '", how.combination_type, "' needs a density above 0 (got ", *how.density,
          "): DARE divides the values it keeps by it");
  return how;
}

bool WeightedCombination::factors() const { return combination_type == "svd" || ends_with_svd(combination_type); }

TaskMerge WeightedCombination::task_merge() const {
  TaskMerge merge;
  if (combination_type == "cat" || combination_type == "svd") return merge;
  merge.method = factors() ? without_svd(combination_type) : combination_type;
  merge.density = density.value_or(1.0);
  merge.majority_sign_method = majority_sign_method;
  return merge;
}

void check_combinable(const LoraAdapter& adapter, const WeightedCombination& how, int64_t rank) {
  const LinearSite& site = adapter.site;
  if (adapts_parameter(site))
    fail(Status::InvalidArgument, "add_weighted_adapter does not combine adapters of parameters (target_parameters, ",
         "'", site.module, "'), as PEFT's");
  if (site.conv && site.conv->groups != 1)
    fail(Status::Unsupported, "add_weighted_adapter on the convolution '", site.module, "' with groups ",
         site.conv->groups, ": its adapter has no weight of the layer's shape");
  if (how.factors() && site.conv && adapter.a.dim() != 4)
    fail(Status::Unsupported, "add_weighted_adapter '", how.combination_type, "' on the ", adapter.a.dim() - 2,
         "-D convolution '", site.module, "': PEFT factors 2-D convolutions' deltas only");
  if (how.factors()) {  // the delta as a matrix: out x in (a convolution's flattened, an embedding's transposed)
    const at::Tensor& w = site.weight;
    const int64_t rows = w.size(0), columns = w.numel() / std::max<int64_t>(rows, 1);
    require(rank <= std::min(rows, columns), "add_weighted_adapter '", how.combination_type, "' to rank ", rank,
            " on '", site.module, "', whose delta is ", rows, " x ", columns);
  }
  require(!how.factors() || how.svd_driver.empty() || adapter.a.is_cuda(), "svd_driver '", how.svd_driver,
          "' is cuSOLVER's: torch.linalg.svd takes a driver for CUDA tensors only, and '", site.module,
          "''s adapter is on ", adapter.a.device().str());
}

int64_t combined_rank(const WeightedCombination& how, const std::vector<int64_t>& ranks) {
  require(!ranks.empty(), "add_weighted_adapter needs at least one adapter");
  if (how.combination_type == "cat") return std::accumulate(ranks.begin(), ranks.end(), int64_t{0});
  if (how.factors()) return how.svd_rank > 0 ? how.svd_rank : *std::max_element(ranks.begin(), ranks.end());
  require(std::all_of(ranks.begin(), ranks.end(), [&](int64_t r) { return r == ranks.front(); }),
          "add_weighted_adapter '", how.combination_type,
          "' needs adapters of one rank (as PEFT's); use 'cat' or an svd combination");
  return ranks.front();
}

namespace {

// PEFT's cat: each A times weight times scaling (two products, in that order) stacked on the ranks,
// each B beside the others, written over the first rows and columns of the zeroed drawn tensors.
std::pair<at::Tensor, at::Tensor> concatenated(const LoraAdapter& target, const std::vector<WeightedSource>& sources) {
  std::vector<at::Tensor> as, bs;
  for (const auto& source : sources) {
    as.push_back(source.adapter->a * source.weight * source.adapter->scaling);
    bs.push_back(source.adapter->b);
  }
  const at::Tensor cat_a = at::cat(as, 0), cat_b = at::cat(bs, 1);
  at::Tensor a = target.a * 0.0, b = target.b * 0.0;
  a.narrow(0, 0, cat_a.size(0)).copy_(cat_a);
  b.narrow(1, 0, cat_b.size(1)).copy_(cat_b);
  return {a, b};
}

// PEFT's _generalized_task_arithmetic_weighted_adapter: the As merged (weighted by the signed square
// root of weight x scaling), then the Bs (by its magnitude), each in the As' dtype.
std::pair<at::Tensor, at::Tensor> merged_factors(const std::vector<WeightedSource>& sources, const TaskMerge& merge) {
  std::vector<at::Tensor> as, bs;
  std::vector<double> wa, wb;
  for (const auto& source : sources) {
    const double scaled = source.weight * source.adapter->scaling;
    const double root = std::sqrt(std::abs(scaled));
    wa.push_back(scaled >= 0 ? root : -root);
    wb.push_back(root);
    as.push_back(source.adapter->a);
    bs.push_back(source.adapter->b);
  }
  const at::Tensor a = merge_task_tensors(as, wa, merge);  // A's masks are drawn before B's, as PEFT's
  const at::Tensor b = merge_task_tensors(bs, wb, merge);
  return {a.to(as.front().scalar_type()), b.to(as.front().scalar_type())};
}

// PEFT's _svd_generalized_task_arithmetic_weighted_adapter: the deltas (each already scaled) merged
// with weight x scaling, laid out as the layer's weight matrix, factored to the target's rank.
std::pair<at::Tensor, at::Tensor> factored(const LoraAdapter& target, const std::vector<WeightedSource>& sources,
                                           const WeightedCombination& how) {
  std::vector<at::Tensor> deltas;
  std::vector<double> weights;
  for (const auto& source : sources) {
    deltas.push_back(weight_delta(*source.adapter));
    weights.push_back(source.weight * source.adapter->scaling);
  }
  at::Tensor delta = merge_task_tensors(deltas, weights, how.task_merge());
  const LinearSite& site = target.site;
  if (site.conv) delta = target.a.size(2) == 1 && target.a.size(3) == 1 ? delta.squeeze() : delta.flatten(1);
  if (site.fan_in_fan_out || site.embedding) delta = delta.t();
  const int64_t rank = target.a.size(0);   // at most the delta's (check_combinable)
  c10::optional<c10::string_view> driver;  // c10::optional is std::optional from libtorch 2.x on
  if (!how.svd_driver.empty()) driver = how.svd_driver;
  const auto [u, s, vh] = at::linalg_svd(delta, how.svd_full_matrices, driver);
  at::Tensor b = at::matmul(u.narrow(1, 0, rank), at::diag(s.narrow(0, 0, rank)));
  at::Tensor a = vh.narrow(0, 0, rank);
  if (how.svd_clamp) {  // PEFT's clamp: both to +- the quantile of their values together
    const at::Tensor high = at::quantile(at::cat({b.flatten(), a.flatten()}), *how.svd_clamp);
    const at::Tensor low = -high;
    b = b.clamp(low, high);
    a = a.clamp(low, high);
  }
  if (site.conv) {
    b = b.reshape(target.b.sizes());
    a = a.reshape(target.a.sizes());
  }
  return {a, b};
}

}  // namespace

void combine_into(const LoraAdapter& target, const std::vector<WeightedSource>& sources,
                  const WeightedCombination& how) {
  require(!sources.empty(), "add_weighted_adapter: no adapter among those combined adapts '", target.site.module, "'");
  const bool stacks_factors = how.combination_type != "cat" && !how.factors();
  for (const auto& source : sources) {
    // The merges stack the layers' As and Bs: each must be of the combined rank (a rank_pattern can
    // give one layer another).
    require(!stacks_factors || source.adapter->a.size(0) == target.a.size(0), "add_weighted_adapter '",
            how.combination_type, "' on '", target.site.module, "': an adapter of rank ", source.adapter->a.size(0),
            " beside the combined rank ", target.a.size(0));
  }
  at::NoGradGuard no_grad;
  const auto [a, b] = how.combination_type == "cat" ? concatenated(target, sources)
                      : how.factors()               ? factored(target, sources, how)
                                                    : merged_factors(sources, how.task_merge());
  require(a.sizes() == target.a.sizes() && b.sizes() == target.b.sizes(), "add_weighted_adapter: the combined ",
          "adapter of '", target.site.module, "' does not fit it");
  target.a.copy_(a);
  target.b.copy_(b);
}

}  // namespace acc
