// The Accelerator: Accelerate's entry point. It knows the process and device, prepares models,
// optimizers, data loaders and schedulers, and decides when gradients are synchronised.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "accelerator/accelerated_optimizer.h"
#include "accelerator/accelerated_scheduler.h"
#include "accelerator/config.h"
#include "accelerator/gradient_state.h"
#include "accelerator/prepared_model.h"
#include "accelerator/prepared_set.h"
#include "checkpoint/checkpoint_hooks.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/pretrained_layout.h"
#include "checkpoint/safetensors.h"
#include "data/dataloader.h"
#include "ops/collectives.h"
#include "optim/lomo.h"
#include "profiling/profile_config.h"
#include "state/process_env.h"
#include "tracking/tracker_set.h"

namespace acc {

class ProfilerSession;

class Accelerator {
 public:
  explicit Accelerator(const Options& options);

  const AcceleratorConfig& config() const { return config_; }
  const c10::Device& device() const { return device_; }
  // Accelerate's DistributedType names: "NO", "MULTI_CPU" or "MULTI_GPU".
  const char* distributed_type() const;  // a static string
  int64_t process_index() const { return process_.rank; }
  int64_t num_processes() const { return process_.world_size; }
  int64_t local_process_index() const { return process_.local_rank; }
  bool is_main_process() const { return process_index() == 0; }
  bool is_local_main_process() const { return local_process_index() == 0; }
  bool is_last_process() const { return process_index() == num_processes() - 1; }
  const std::string& mixed_precision() const { return config_.mixed_precision; }
  // The same as a static string (the option schema's own), for the C API.
  const char* mixed_precision_name() const;
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
  // Throws unless prepare_scheduler can take `scheduler` once `optimizer` (may be null) is prepared.
  void check_scheduler_preparable(const std::shared_ptr<Scheduler>& scheduler,
                                  const std::shared_ptr<Optimizer>& optimizer) const;
  // The model without the Accelerator's wrapper.
  std::shared_ptr<Model> unwrap_model(const std::shared_ptr<Model>& model) const;

  // loss / gradient_accumulation_steps, then backward: torch's loss.backward(retain_graph=,
  // create_graph=) (Accelerate's backward(loss, **kwargs)); create_graph keeps the graph too, as
  // torch's retain_graph=None does. Either is Unsupported with sharded data parallelism.
  void backward(const at::Tensor& loss, bool retain_graph = false, bool create_graph = false);
  // ---- LOMO (lomo_backward.cpp): lomo_optim's optimizers update inside backward ----
  // Accelerate's lomo_backward(loss, learning_rate): the fused backward of the prepared lomo or
  // adalomo optimizer at that rate. Under DDP each gradient is averaged over the processes (as DDP
  // averages it) before its update; the model's forwards then leave DDP's Reducer out.
  void lomo_backward(const at::Tensor& loss, double learning_rate);
  // Accelerate's backward(loss, learning_rate=...): loss / gradient_accumulation_steps, then
  // lomo_backward (a LOMO optimizer must be prepared).
  void backward_with_learning_rate(const at::Tensor& loss, double learning_rate);
  // The prepared LOMO optimizer's grad_norm pass for its clip_grad_norm (see FusedBackwardOptimizer):
  // returns the total norm of the gradients, averaged over the processes under DDP.
  double lomo_grad_norm(const at::Tensor& loss);
  // Start of a micro-step in gradient accumulation (C's stand-in for `with accumulate(model)`).
  void accumulate_begin();
  // Closes the micro-step: gradients sync again outside accumulation (as the no_sync context
  // `accumulate` enters is left).
  void accumulate_end();
  // Scales the gradients of a model's parameters so that their total norm is at most max_norm;
  // returns the norm before clipping (Accelerate's clip_grad_norm_).
  double clip_grad_norm(const std::shared_ptr<Model>& model, double max_norm, double norm_type);
  // Clamps every gradient element to [-clip_value, clip_value] (clip_grad_value_).
  void clip_grad_value(const std::shared_ptr<Model>& model, double clip_value);
  // fp16: divides the gradients of the optimizer's parameters (null: every prepared optimizer's) by the
  // loss scale, once per step. Nothing to do without fp16.
  void unscale_gradients(const std::shared_ptr<Optimizer>& optimizer);
  // Accelerate's autocast(): the calling thread computes under the mixed precision (or, with enabled
  // false, without autocast) until the matching autocast_end on the same thread. Scopes nest.
  void autocast_begin(bool enabled);
  void autocast_end();
  // Accelerate's save_model: the unwrapped model as Hugging Face's safetensors layout in `dir`, shards of
  // at most max_shard_size ("10GB", "500MB", bytes); written by the main process only.
  void save_model(const std::shared_ptr<Model>& model, const std::string& dir,
                  const std::string& max_shard_size = kDefaultMaxShardSize);
  // ---- Checkpoints (checkpointing.cpp) ----
  // save_state: every prepared model, optimizer, scheduler and data loader, the GradScaler, each
  // process's RNG states, the step counter and registered objects, into `dir` (empty: the automatic
  // project_dir/checkpoints/checkpoint_<iteration>). Written under a temporary name and renamed into
  // place when complete; rotation (total_limit) runs after that. Returns the folder. A collective.
  std::string save_state(const std::string& dir);
  // load_state: all of it back from `dir` (empty: the newest automatic checkpoint). Everything is read
  // and checked on every process before anything changes. Returns the folder. A collective.
  std::string load_state(const std::string& dir);
  // Custom state saved as bytes (custom_checkpoint_<i>.bin, in registration order).
  using StateSaver = std::function<std::string()>;
  using StateLoader = std::function<void(const std::string& bytes)>;
  void register_for_checkpointing(StateSaver save, StateLoader load);
  // A registered object that makes its own checkpoint part, given its index among registered objects.
  using CustomPartMaker = std::function<std::unique_ptr<CheckpointPart>(size_t index)>;
  void register_for_checkpointing(CustomPartMaker make_part);
  // Called with the models and the checkpoint folder before save_state writes / load_state reads;
  // throwing aborts.
  using CheckpointHook = acc::CheckpointHook;
  // Returns the hook's id for remove_state_pre_hook (Accelerate's RemovableHandle).
  uint64_t register_state_pre_hook(CheckpointHooks::Kind kind, CheckpointHook hook) {
    return state_hooks_.add(kind, std::move(hook));
  }
  void remove_state_pre_hook(uint64_t id) { state_hooks_.remove(id); }
  // The number the next automatic checkpoint gets (ProjectConfiguration.iteration).
  int64_t iteration() const { return iteration_; }
  // Accelerate's save(): tensors as safetensors, written once per machine (by the main process, or each
  // node's local main process with save_on_each_node).
  void save(const NamedTensors& tensors, const std::string& path);
  // A prepared model's parameters and buffers (on the CPU); without unwrap, names carry DDP's
  // "module." prefix on several processes, as Accelerate's get_state_dict(unwrap=False).
  NamedTensors get_state_dict(const std::shared_ptr<Model>& model, bool unwrap) const;

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
  // ---- Accelerate's LocalSGD (local_sgd.cpp), as a begin/step/end scope per prepared model ----
  // begin enters no_sync: each process steps on its own gradients; every local_sgd_steps-th step
  // and the end average the parameters over the processes. Disabled (counting only) on one process
  // or with enabled false; not with sharding (zero_stage > 0), as in Accelerate.
  void local_sgd_begin(const std::shared_ptr<Model>& model, int64_t local_sgd_steps, bool enabled);
  void local_sgd_step(const std::shared_ptr<Model>& model);
  void local_sgd_end(const std::shared_ptr<Model>& model);
  // ---- Accelerate's profile() (profiling.cpp): torch's profiler as a begin/step/end scope ----
  // begin starts it on the calling thread (step and end must come from that thread); step is
  // prof.step() for the schedule; end stops it and, with output_trace_dir, writes the Chrome trace
  // output_trace_dir/profile_<process index>.json and waits for everyone. Returns that path (empty:
  // none written). One profile at a time.
  void profile_begin(const ProfileConfig& config);
  void profile_step();
  std::string profile_end();
  // ProfileKwargs' on_trace_ready, for every later profile (null: none): called with the step at
  // which a recorded cycle ended, during the profile_step or profile_end that ends it. A failure
  // fails that call; profile_end still ends the profile and writes and waits as it would.
  void set_profile_trace_ready(std::function<void(int64_t step)> trace_ready);
  // The last recorded cycle's table of torch's key_averages().table(), and its Chrome trace
  // written to `path` by this process alone: after profile_end, or in trace_ready.
  std::string profile_summary() const;
  void profile_export_chrome_trace(const std::string& path) const;
  // Accelerate's join_uneven_inputs for a prepared model, as a begin/end pair (see DataParallel).
  // even_batches, if set, overrides the setting of the prepared map-style loaders until the end.
  void join_uneven_inputs_begin(const std::shared_ptr<Model>& model, std::optional<bool> even_batches);
  void join_uneven_inputs_end(const std::shared_ptr<Model>& model);
  // gather, without the samples that even_batches repeated at the end of the epoch (call it on every
  // batch inside the loop, as in Accelerate).
  at::Tensor gather_for_metrics(const at::Tensor& tensor, const std::string& name);
  // Accelerate's main_process_first / local_main_process_first, as begin/end pairs.
  void main_process_first_begin(bool local);
  void main_process_first_end(bool local);
  // Forgets every prepared object (they stay usable by whoever still holds them), resets the step
  // counter and releases cached GPU memory, as Accelerate's.
  void free_memory();
  // Experiment tracking (Accelerate's init_trackers / log / end_training): log_with's trackers and
  // those added to trackers(); only the main process writes.
  void init_trackers(const std::string& project_name, const std::string& config_json,
                     const std::string& init_kwargs_json = "") {
    trackers_.init(project_name, config_json, init_kwargs_json);
  }
  void log(std::vector<std::string> names, std::vector<double> values, std::optional<int64_t> step,
           const std::string& log_kwargs_json = "") {
    trackers_.log(std::move(names), std::move(values), step, log_kwargs_json);
  }
  void end_training() { trackers_.end(); }
  tracking::TrackerSet& trackers() { return trackers_; }
  const tracking::TrackerSet& trackers() const { return trackers_; }

 private:
  // Every process must share the training settings (settings_every_process_shares): a collective
  // at creation, InvalidArgument naming the differences on every process.
  void check_settings_agree();
  std::shared_ptr<Model> wrapped_model(const std::shared_ptr<Model>& model) const;
  std::shared_ptr<PreparedModel> prepared(const std::shared_ptr<Model>& model) const;
  // The live prepared models as the pre-hooks get them (a sharded one cannot be taken out).
  CheckpointModels checkpoint_models() const;
  // save_state's parts (checkpoint/checkpoint_part.h) for the live prepared objects, in file order
  // (weight files for the models the hooks left), and the manifest that describes them; loading
  // checks a saved manifest against this one.
  CheckpointParts checkpoint_parts(const CheckpointModels& models) const;
  // The weight files of the models the hooks left (model.safetensors, model_1.safetensors ...).
  CheckpointParts weights_parts(const CheckpointModels& models) const;
  // Python Accelerate's files (python_state_files.cpp): with python_state_files, save_state writes
  // them beside the library's, checked first so that a save that cannot write them changes nothing;
  // load_state reads them from a folder Python Accelerate wrote (one without the library's manifest),
  // after check_python_checkpoint compared the folder with the live objects.
  // Unsupported (naming it after `context`) where an optimizer or scheduler has no Python layout.
  void check_python_state_files(const std::string& context) const;
  CheckpointParts python_state_parts() const;
  void check_python_checkpoint(const std::string& dir, const CheckpointModels& models_left,
                               bool& other_process_count) const;
  // The weight files of such a folder: model[_i].safetensors, or pytorch_model[_i].bin where Python
  // saved without safetensors.
  CheckpointParts python_weights_parts(const CheckpointModels& models, const std::string& dir) const;
  nlohmann::json checkpoint_manifest() const;
  // A checkpoint saved with fp16's GradScaler loaded without one (mixed_precision no or bf16): its
  // scaler state is not read, as Accelerate's load_accelerator_state skips scaler.pt then; said on
  // the main process.
  void warn_scaler_not_read(const std::string& checkpoint) const;
  // fp16 with scaler_enabled false (GradScalerKwargs(enabled=False)): autocast without a GradScaler.
  bool fp16_without_scaler() const { return config_.mixed_precision == "fp16" && !scaler_; }
  // The sharding engine of a prepared model (null when it is not sharded).
  std::shared_ptr<ShardedDataParallel> sharding_engine(const std::shared_ptr<Model>& model) const;
  // Fails (InvalidArgument) where `model` is sharded at rest by a prepared model this accelerator
  // does not hold (another accelerator's, or one free_memory released): its own tensors are empty,
  // so `action` would read, write or train nothing.
  void require_not_sharded_elsewhere(const Model& model, const char* action) const;
  // A sharded model's full weights as save_model and get_state_dict give them: under zero_stage 3
  // with zero3_save_16bit_model, the floating tensors in mixed_precision's bf16/fp16.
  NamedTensors as_given_out(NamedTensors state, const ShardedDataParallel& engine) const;
  // other_process_count: set when the checkpoint, saved by another number of processes, can load
  // here all the same (consolidated, not sharded: see load_state).
  // models_left: the models whose weights are to be loaded (those the load pre-hooks left).
  std::function<void()> check_checkpoint_manifest(const nlohmann::json& manifest, const std::string& path,
                                                  const CheckpointModels& models_left, bool& other_process_count);
  bool writes_shared_files() const { return config_.save_on_each_node ? is_local_main_process() : is_main_process(); }
  // Prepared objects still alive, in prepare order (the order of their checkpoint files).
  std::vector<std::shared_ptr<PreparedModel>> live_models() const { return models_.live(); }
  std::vector<std::shared_ptr<AcceleratedOptimizer>> live_optimizers() const { return optimizers_.live(); }
  std::vector<std::shared_ptr<Scheduler>> live_schedulers() const { return schedulers_.live(); }
  std::vector<std::shared_ptr<DataLoader>> live_loaders() const { return loaders_.live(); }
  // fp16: divides a model's gradients by the loss scale, each under the optimizer that steps with it.
  void unscale_model_gradients(const std::vector<at::Tensor>& grads);
  // loss / gradient_accumulation_steps, as Accelerate's backward divides it.
  at::Tensor over_accumulation_steps(const at::Tensor& loss) const;
  // Runs `pass`, a backward, naming it (and `collectives`, the ones it runs) in the errors of a lost peer.
  void run_backward(const std::function<void()>& pass, const std::string& collectives);
  // LOMO (lomo_backward.cpp): the prepared LOMO optimizer, InvalidArgument naming `call` unless there
  // is exactly one; whether there is one; what LOMO asks of prepare_optimizer; how it averages.
  std::shared_ptr<AcceleratedOptimizer> prepared_lomo(const char* call) const;
  bool lomo_prepared() const;
  void check_lomo_preparable(const Optimizer& optimizer) const;
  // `applies`: for the backward that applies the gradients (not grad_norm's, which only measures).
  GradientAverager lomo_gradient_averager(Optimizer& optimizer, bool applies) const;

  AcceleratorConfig config_;
  ProcessEnv process_;
  c10::Device device_;
  std::shared_ptr<Distributed> dist_;  // null on one process
  mutable Collectives collectives_;    // const calls that gather (get_state_dict) announce themselves too
  std::shared_ptr<GradientState> gradient_state_;
  // Loaders whose even_batches a join overrides, with the value to restore at its end.
  std::vector<std::function<void()>> even_batches_restore_;  // join_uneven_inputs' override
  std::shared_ptr<GradScaler> scaler_;  // fp16 only
  tracking::TrackerSet trackers_{config_.log_with, config_.logging_dir, process_.rank == 0};
  // Threads of one accelerator may prepare at once: each prepare looks up and adds as one step.
  std::recursive_mutex prepare_mutex_;
  PreparedSet<PreparedModel> models_;
  PreparedSet<AcceleratedOptimizer> optimizers_;
  PreparedSet<DataLoader> loaders_;
  PreparedSet<Scheduler> schedulers_;
  std::vector<CustomPartMaker> custom_states_;
  CheckpointHooks state_hooks_;
  struct LocalSgdScope {
    std::weak_ptr<PreparedModel> model;  // a freed model's scope is forgotten (its address may be reused)
    int64_t local_sgd_steps;
    bool enabled;
    int64_t steps = 0;
  };
  std::map<const Model*, LocalSgdScope> local_sgd_;  // open scopes, by prepared model
  LocalSgdScope& local_sgd_scope(const std::shared_ptr<Model>& model, const char* call);
  void average_parameters(const std::shared_ptr<Model>& model);
  void require_profile_to_read() const;
  std::shared_ptr<ProfilerSession> profiler_;  // the open profile, or the last one ended
  std::function<void(int64_t)> profile_trace_ready_;
  std::atomic<int64_t> backward_calls_{0};  // names the step in errors of backward's collectives
  // Open begin/end scopes, so that an end without its begin is an error.
  int64_t accumulate_depth_ = 0;
  int64_t main_first_depth_[2] = {0, 0};  // [local]
  int64_t iteration_ = 0;
};

}  // namespace acc
