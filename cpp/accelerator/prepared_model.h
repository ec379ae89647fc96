// A model prepared by the Accelerator: forward under autocast for the configured precision, with
// floating outputs returned in fp32 (Accelerate's convert_outputs_to_fp32). Everything else is
// the wrapped model's.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <utility>

#include "common/error.h"
#include "model/model.h"
#include "model/peft/mixed_batch.h"
#include "parallel/parallel_engine.h"
#include "parallel/sharded_data_parallel.h"

namespace acc {

class PreparedModel final : public Model {
 public:
  // parallel: DDP or sharded data parallelism; null on one process. inputs_to: where forward moves its
  // inputs first (PyTorch's DDP with device_ids and FSDP move them to the model's GPU); none: as given.
  PreparedModel(std::shared_ptr<Model> inner, c10::DeviceType device, std::optional<c10::ScalarType> autocast_dtype,
                std::shared_ptr<ParallelEngine> parallel = nullptr, std::optional<at::Device> inputs_to = std::nullopt);

  NamedTensors forward(const std::vector<at::Tensor>& inputs) override;
  NamedTensors named_parameters() const override { return inner_->named_parameters(); }
  NamedTensors named_parameters_with_ties() const override { return inner_->named_parameters_with_ties(); }
  NamedTensors named_buffers() const override { return inner_->named_buffers(); }
  std::vector<std::string> module_order() const override { return inner_->module_order(); }
  void set_training(bool training) override { inner_->set_training(training); }
  bool is_training() const override { return inner_->is_training(); }
  void save_torchscript(const std::string& path) const override { inner_->save_torchscript(path); }
  void set_graph_optimization(bool enabled) override { inner_->set_graph_optimization(enabled); }
  const LoraAdapters& lora() const override { return inner_->lora(); }
  bool sharded_at_rest() const override { return inner_->sharded_at_rest(); }
  const std::string& flat_parameters() const override { return inner_->flat_parameters(); }
  void zero_grad() override { inner_->zero_grad(); }
  // The inner model's own pass: each process averages over its own batches, without DDP's buffer
  // broadcasts (update_bn on Accelerate's unprepared AveragedModel).
  bool recompute_batch_norm(const InputSource& next) override { return inner_->recompute_batch_norm(next); }
  // DDP's Reducer, the sharding engine and the optimizers were built over the parameters of the time.
  size_t add_lora(const LoraConfig&) override {
    fail(Status::InvalidArgument, "add LoRA adapters before preparing the model (and before creating its optimizer)");
  }
  // New adapters change what DDP, the sharding engine and the optimizers were built over; the values of
  // those the model has are loaded in place, as load_state_dict loads them (a checkpoint pre-hook's
  // way to restore adapters it saved).
  void load_lora(const std::string& dir) override {
    if (inner_->lora().empty())
      fail(Status::InvalidArgument, "load LoRA adapters into the model before preparing it (a prepared model ",
           "takes the values of adapters it has; acc_load_state restores them too)");
    require(!inner_->sharded_at_rest(), "load_lora: the model is prepared under zero_stage 3, which holds only ",
            "slices of its adapters; acc_load_state restores them");
    inner_->load_lora(dir);
  }
  // Under zero_stage 3 a collective, as Python's save_pretrained(state_dict=get_state_dict(model)):
  // every process gathers the full parameters, the main process writes.
  void save_lora(const std::string& dir) const override;
  void merge_lora() override {
    fail(Status::InvalidArgument,
         "merge LoRA adapters in the unwrapped model (acc_unwrap_model) once training is done; acc_save_model "
         "writes merged weights without it");
  }
  void merge_lora_adapters(const std::vector<std::string>&) override { merge_lora(); }
  void set_lora_enabled(bool enabled) override { inner_->set_lora_enabled(enabled); }
  // AdaLoRA's steps act on the adapters' own tensors alike on every process (DDP keeps replicas equal).
  at::Tensor adalora_loss(const at::Tensor& loss) const override { return inner_->adalora_loss(loss); }
  void adalora_update_and_allocate(int64_t global_step) override { inner_->adalora_update_and_allocate(global_step); }
  // Switching adapters changes the tensors DDP, the sharding engine and the optimizers were built over.
  size_t add_named_lora(const std::string&, const LoraConfig&) override { refuse_adapter_change(); }
  void load_named_lora(const std::string&, const std::string&) override { refuse_adapter_change(); }
  void set_adapter(const std::string&) override { refuse_adapter_change(); }
  void delete_adapter(const std::string&) override { refuse_adapter_change(); }
  void unload_lora() override { refuse_adapter_change(); }
  size_t add_weighted_adapter(const std::vector<std::string>&, const std::vector<double>&, const std::string&,
                              const WeightedCombination&) override {
    refuse_adapter_change();
  }
  // New values in the adapters' own tensors, as load_lora's (every process alike keeps replicas equal).
  size_t replace_lora_weights_loftq(const NamedTensors& weights, const std::string& source, const std::string& adapter,
                                    const std::function<bool(const std::string&)>& keep) override {
    return inner_->replace_lora_weights_loftq(weights, source, adapter, keep);
  }
  std::vector<std::string> adapter_names() const override { return inner_->adapter_names(); }
  const std::string& active_adapter() const override { return inner_->active_adapter(); }
  const std::map<std::string, LoraAdapters>& inactive_adapters() const override { return inner_->inactive_adapters(); }
  std::unique_ptr<MixedBatch> mixed_batch(const std::vector<std::string>& names) const override {
    return inner_->mixed_batch(names);
  }
  // Quantising, and PEFT's prepare_model_for_kbit_training (which freezes every parameter and casts
  // some), change what DDP, the sharding engine and the optimizers were built over.
  bool has_quantized_layers() const override { return inner_->has_quantized_layers(); }
  size_t quantize(const QuantizationConfig&) override {
    fail(Status::InvalidArgument, "quantise the model before preparing it (and before creating its optimizer)");
  }
  size_t prepare_for_kbit_training() override {
    fail(Status::InvalidArgument,
         "prepare_for_kbit_training comes before adding adapters, creating the optimizer and preparing the model");
  }
  size_t set_requires_grad(const std::string&, bool) override {
    fail(Status::InvalidArgument,
         "freeze or unfreeze parameters before preparing the model (and before creating its optimizer)");
  }

  [[noreturn]] static void refuse_adapter_change() {
    fail(Status::InvalidArgument, "add, load, switch, delete or unload named adapters before preparing the model ",
         "(and before creating its optimizer), or in the unwrapped model (acc_unwrap_model) once training is done");
  }

  const std::shared_ptr<Model>& unwrap() const { return inner_; }
  // Whether the next backward averages gradients across processes (off inside an accumulation
  // window; no_sync scopes turn it off on top of that).
  void set_gradient_sync(bool sync) { gradient_sync_ = sync; }
  void no_sync_begin() { ++no_sync_depth_; }
  void no_sync_end() {
    require(no_sync_depth_ > 0, "no_sync_end without a no_sync_begin for this model");
    --no_sync_depth_;
  }
  bool syncs_gradients() const { return gradient_sync_ && no_sync_depth_ == 0 && !gradients_left_to_optimizer_; }
  // A LOMO optimizer averages each gradient itself inside backward (see Accelerator::lomo_backward):
  // DDP's Reducer stays out of every backward, as under no_sync.
  void leave_gradients_to_optimizer() { gradients_left_to_optimizer_ = true; }
  // After a forward under no_sync: the coming backward averages gradients after all.
  void trigger_sync_in_backward() {
    if (parallel_) parallel_->sync_next_backward();
    sync_triggered_ = true;
  }
  // For a LOMO optimizer, which averages each gradient itself: whether the coming backward averages
  // (not inside a no_sync scope, unless trigger_sync_in_backward came before it; `consume` ends the
  // trigger, at the backward that applies gradients, not at the pass that only measures them).
  // Accumulation windows do not count: each LOMO micro-step updates, so each one averages.
  bool optimizer_averages_next_backward(bool consume) {
    const bool triggered = consume ? std::exchange(sync_triggered_, false) : sync_triggered_;
    return no_sync_depth_ == 0 || triggered;
  }
  bool leaves_gradients_to_optimizer() const { return gradients_left_to_optimizer_; }
  // join_uneven_inputs (see DataParallel); nothing to do on one process.
  void join_begin() {
    if (parallel_) parallel_->join_begin();
  }
  void join_end() {
    if (parallel_) parallel_->join_end();
  }
  // The sharding engine, when the model is sharded (zero_stage 1-3 on several processes).
  std::shared_ptr<ShardedDataParallel> sharded() const { return std::dynamic_pointer_cast<ShardedDataParallel>(parallel_); }
  // DDP's Reducer (also zero_stage 1's), when gradients are averaged by one; null otherwise.
  DataParallel* data_parallel() const {
    if (auto ddp = dynamic_cast<DataParallel*>(parallel_.get())) return ddp;
    const auto engine = sharded();
    return engine ? engine->data_parallel() : nullptr;
  }

 protected:
  void write_torchscript(const std::string& path) const override { inner_->save_torchscript(path); }

 private:
  std::shared_ptr<Model> inner_;
  c10::DeviceType device_;
  std::optional<c10::ScalarType> autocast_dtype_;
  std::shared_ptr<ParallelEngine> parallel_;
  std::optional<at::Device> inputs_to_;
  bool gradient_sync_ = true;
  int64_t no_sync_depth_ = 0;
  bool gradients_left_to_optimizer_ = false;
  bool sync_triggered_ = false;               // see optimizer_averages_next_backward
  std::shared_ptr<void> trainable_set_hold_;  // see Model::hold_trainable_set
  uint64_t merges_at_prepare_;                // see Model::merges
};

}  // namespace acc
