#include "model/peft/task_merging.h"

#include <algorithm>

#include "common/error.h"

namespace acc {

namespace {

const std::vector<std::string>& pruning_methods() {
  static const std::vector<std::string> methods{"ties", "dare_linear", "dare_ties", "magnitude_prune"};
  return methods;
}

bool elects_sign(const std::string& method) { return method == "ties" || method == "dare_ties"; }
// merge_utils.magnitude_based_pruning: the int(density x numel) largest magnitudes kept (torch.topk's
// choice among equal ones), the rest zeroed.
at::Tensor prune_by_magnitude(const at::Tensor& tensor, double density) {
  at::Tensor mask = at::zeros_like(tensor).reshape(-1);
  const auto k = static_cast<int64_t>(density * static_cast<double>(tensor.numel()));  // Python's int(): truncated
  const at::Tensor kept = std::get<1>(at::topk(tensor.abs().reshape(-1), k, /*dim=*/-1, /*largest=*/true));
  mask.index_put_({kept}, 1);
  return tensor * mask.reshape(tensor.sizes());
}

// merge_utils.random_pruning with rescale: a torch.bernoulli mask of probability `density`, the kept
// values divided by it.
at::Tensor prune_at_random(const at::Tensor& tensor, double density) {
  const at::Tensor mask = at::bernoulli(at::full_like(tensor, density));
  return tensor * mask / density;
}

// merge_utils.prune: density >= 1 keeps the tensor as it is.
at::Tensor prune(const at::Tensor& tensor, const TaskMerge& merge) {
  if (merge.density >= 1) return tensor;
  return task_merge_prunes_at_random(merge.method) ? prune_at_random(tensor, merge.density)
                                                   : prune_by_magnitude(tensor, merge.density);
}

// merge_utils.calculate_majority_sign_mask: where each stacked value's sign is the majority's (the
// sign of the sum, or of the signs' sum; zero counts as positive).
at::Tensor majority_sign_mask(const at::Tensor& stacked, const std::string& method) {
  const at::Tensor sign = stacked.sign();
  const at::Tensor magnitude = method == "total" ? stacked.sum(0) : sign.sum(0);
  const at::Tensor majority = at::where(magnitude >= 0, at::ones_like(magnitude), -at::ones_like(magnitude));
  return sign == majority;
}

// merge_utils.disjoint_merge: the mean over the values agreeing with the majority sign.
at::Tensor disjoint_merge(const at::Tensor& weighted, const at::Tensor& mask) {
  const at::Tensor mixed = (weighted * mask).sum(0);
  return mixed / at::clamp(mask.sum(0), 1.0);
}

}  // namespace

bool is_task_merge_method(const std::string& method) { return method == "linear" || task_merge_prunes(method); }

bool task_merge_prunes(const std::string& method) {
  const auto& methods = pruning_methods();
  return std::find(methods.begin(), methods.end(), method) != methods.end();
}

bool task_merge_prunes_at_random(const std::string& method) { return method.rfind("dare_", 0) == 0; }

at::Tensor merge_task_tensors(const std::vector<at::Tensor>& tensors, const std::vector<double>& weights,
                              const TaskMerge& merge) {
  require(is_task_merge_method(merge.method), "unknown task-tensor merge '", merge.method, "'");
  require(!tensors.empty() && tensors.size() == weights.size(), "merging ", tensors.size(), " tensors with ",
          weights.size(), " weights");
  std::vector<at::Tensor> pruned;
  for (const auto& tensor : tensors) pruned.push_back(merge.method == "linear" ? tensor : prune(tensor, merge));
  const at::Tensor stacked = at::stack(pruned, 0);
  std::vector<int64_t> shape(static_cast<size_t>(stacked.dim()), 1);
  shape[0] = -1;
  const at::Tensor w = at::tensor(std::vector<float>(weights.begin(), weights.end())).to(stacked.device());
  const at::Tensor weighted = stacked * w.view(shape);
  if (!elects_sign(merge.method)) return weighted.sum(0);
  return disjoint_merge(weighted, majority_sign_mask(stacked, merge.majority_sign_method));
}

}  // namespace acc
