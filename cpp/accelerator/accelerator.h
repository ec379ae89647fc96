// The Accelerator: Accelerate's entry point. It knows the process and device, prepares models,
// optimizers, data loaders and schedulers, and decides when gradients are synchronised.
#pragma once

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "accelerator/accelerated_optimizer.h"
#include "accelerator/accelerated_scheduler.h"
#include "accelerator/config.h"
#include "accelerator/gradient_state.h"
#include "accelerator/prepared_model.h"
#include "data/dataloader.h"
#include "ops/collectives.h"
#include "state/process_env.h"

namespace acc {

class Accelerator {
 public:
  explicit Accelerator(const Options& options);

  const AcceleratorConfig& config() const { return config_; }
  const c10::Device& device() const { return device_; }
  // Accelerate's DistributedType names: "NO", "MULTI_CPU" or "MULTI_GPU".
  std::string distributed_type() const;
  int64_t process_index() const { return process_.rank; }
  int64_t num_processes() const { return process_.world_size; }
  int64_t local_process_index() const { return process_.local_rank; }
  bool is_main_process() const { return process_index() == 0; }
  bool is_local_main_process() const { return local_process_index() == 0; }
  bool is_last_process() const { return process_index() == num_processes() - 1; }
  const std::string& mixed_precision() const { return config_.mixed_precision; }
  bool sync_gradients() const { return gradient_state_->sync_gradients(); }
  int64_t step() const { return gradient_state_->step(); }
  // Whether the last step of any prepared optimizer was skipped (fp16 overflow).
  bool optimizer_step_was_skipped() const;

  // device_placement: none uses the accelerator's setting. Preparing a prepared object, or an
  // object a second time, returns the same prepared object.
  std::shared_ptr<Model> prepare_model(const std::shared_ptr<Model>& model, std::optional<bool> device_placement);
  std::shared_ptr<Optimizer> prepare_optimizer(const std::shared_ptr<Optimizer>& optimizer,
                                               std::optional<bool> device_placement);
  std::shared_ptr<DataLoader> prepare_dataloader(const std::shared_ptr<DataLoader>& loader,
                                                 std::optional<bool> device_placement);
  // The scheduler's optimizer should be prepared first (as Accelerate prepares schedulers last).
  std::shared_ptr<Scheduler> prepare_scheduler(const std::shared_ptr<Scheduler>& scheduler);
  // The model without the Accelerator's wrapper.
  std::shared_ptr<Model> unwrap_model(const std::shared_ptr<Model>& model) const;

  // loss / gradient_accumulation_steps, then backward.
  void backward(const at::Tensor& loss);
  // Start of a micro-step in gradient accumulation (C's stand-in for `with accumulate(model)`).
  void accumulate_begin();
  void accumulate_end() {}
  // Scales the gradients of a model's parameters so that their total norm is at most max_norm;
  // returns the norm before clipping (Accelerate's clip_grad_norm_).
  double clip_grad_norm(const std::shared_ptr<Model>& model, double max_norm, double norm_type);
  // Clamps every gradient element to [-clip_value, clip_value] (clip_grad_value_).
  void clip_grad_value(const std::shared_ptr<Model>& model, double clip_value);
  // Accelerate's save_model: the unwrapped model as Hugging Face's safetensors layout in `dir`, shards of
  // at most max_shard_size ("10GB", "500MB", bytes); written by the main process only.
  void save_model(const std::shared_ptr<Model>& model, const std::string& dir, const std::string& max_shard_size);
  // Prints on the main process only.
  void print(const std::string& text) const;
  // A barrier across processes; returns at once on one process.
  void wait_for_everyone() { collectives_.barrier("wait_for_everyone"); }
  Collectives& collectives() { return collectives_; }
  const std::shared_ptr<Distributed>& distributed() const { return dist_; }  // null on one process
  // Listens to prepared loaders; a loader made by hand can be attached with set_observer.
  const std::shared_ptr<GradientState>& gradient_state() const { return gradient_state_; }
  // Gradients of a prepared model accumulate locally until no_sync_end (Accelerate's no_sync).
  void no_sync_begin(const std::shared_ptr<Model>& model);
  void no_sync_end(const std::shared_ptr<Model>& model);
  void trigger_sync_in_backward(const std::shared_ptr<Model>& model);
  // gather, without the samples that even_batches repeated at the end of the epoch (call it on every
  // batch inside the loop, as in Accelerate).
  at::Tensor gather_for_metrics(const at::Tensor& tensor, const std::string& name);
  // Accelerate's main_process_first / local_main_process_first, as begin/end pairs.
  void main_process_first_begin(bool local);
  void main_process_first_end(bool local);
  // Forgets every prepared object (they stay usable by whoever still holds them).
  void free_memory();

 private:
  std::shared_ptr<Model> wrapped_model(const std::shared_ptr<Model>& model) const;
  std::shared_ptr<PreparedModel> prepared(const std::shared_ptr<Model>& model) const;

  AcceleratorConfig config_;
  ProcessEnv process_;
  c10::Device device_;
  std::shared_ptr<Distributed> dist_;  // null on one process
  Collectives collectives_;
  std::shared_ptr<GradientState> gradient_state_;
  std::shared_ptr<GradScaler> scaler_;  // fp16 only
  // Raw object -> its prepared wrapper, so that preparing twice gives the same wrapper.
  std::map<const void*, std::weak_ptr<Model>> models_;
  std::map<const void*, std::weak_ptr<AcceleratedOptimizer>> optimizers_;
  std::map<const void*, std::weak_ptr<DataLoader>> loaders_;
  std::map<const void*, std::weak_ptr<Scheduler>> schedulers_;
};

}  // namespace acc
