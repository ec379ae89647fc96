// PEFT's merge_utils (peft/utils/merge_utils.py): several adapters' tensors of one shape ("task
// tensors") merged into one with weights, optionally sparsified first: by magnitude (the largest
// `density` fraction of each kept) or at random (DARE: each value kept with probability `density`,
// rescaled by 1/density, drawn by torch.bernoulli from the global generator), and optionally with
// TIES's sign election (only values agreeing with the majority sign are averaged).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace acc {

// How task tensors are merged: the part of PEFT's combination_type before "_svd", and its settings.
struct TaskMerge {
  // "linear" (task_arithmetic: the weighted sum), "ties", "dare_linear", "dare_ties", "magnitude_prune".
  std::string method = "linear";
  double density = 1.0;                        // the fraction kept; >= 1 keeps everything (PEFT's)
  std::string majority_sign_method = "total";  // TIES's sign of the sum ("total") or of the count ("frequency")
};

// Whether `method` is one of TaskMerge's methods, and whether it prunes (needs a density).
bool is_task_merge_method(const std::string& method);
bool task_merge_prunes(const std::string& method);
// Whether it prunes at random (DARE's), dividing the kept values by the density.
bool task_merge_prunes_at_random(const std::string& method);

// The merge of `tensors` (one shape) with `weights` (one each; made a float32 tensor, as PEFT's
// torch.tensor of Python floats), as PEFT's function of that name computes it, op for op.
at::Tensor merge_task_tensors(const std::vector<at::Tensor>& tensors, const std::vector<double>& weights,
                              const TaskMerge& merge);

}  // namespace acc
