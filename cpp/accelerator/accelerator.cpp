#include "accelerator/accelerator.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_set>
#include <utility>

#include "common/device.h"
#include "common/error.h"
#include "common/random.h"
#include "common/text.h"
#include "data/prepare_data_loader.h"
#include "optim/clip_grad.h"
#include "optim/optimizer_state.h"
#include "parallel/broadcast.h"
#include "parallel/sharded_optimizer.h"
#include "precision/autocast.h"
#include "state/cpu_affinity.h"
#include "state/distributed.h"
#include "tensor/losses.h"

namespace acc {
namespace {

c10::Device pick_device(const AcceleratorConfig& c, int64_t local_index) {
  if (c.cpu || !cuda_available()) return c10::Device(c10::kCPU);
  c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_index % cuda_device_count()));
  set_current_device(device);  // as Accelerate's torch.cuda.set_device: NCCL and new tensors use it
  return device;
}

// Accelerate's default: NCCL for GPUs, Gloo for CPUs.
Backend pick_backend(const AcceleratorConfig& c, const c10::Device& device) {
  if (!c.backend) return device.is_cuda() ? Backend::Nccl : Backend::Gloo;
  return parse_backend(*c.backend);
}

}  // namespace

Accelerator::Accelerator(const Options& options)
    : config_(resolve_accelerator_config(options)),
      process_(detect_process_env()),
      device_(pick_device(config_, process_.local_rank)),
      dist_(process_.distributed()
                ? join_process_group(process_, device_, pick_backend(config_, device_),
                                     std::chrono::seconds(config_.timeout_seconds))
                : nullptr),
      collectives_(dist_),
      gradient_state_(std::make_shared<GradientState>(config_.gradient_accumulation_steps, config_.sync_with_dataloader)) {
  if (config_.backend == "nccl" && !device_.is_cuda())
    fail(Status::Unsupported, "backend \"nccl\" needs a CUDA device; this process runs on ", device_, " (use \"gloo\")");
  check_parallelism_world(config_.sharding, process_.world_size);
  check_settings_agree();
  if (mixed_precision_dtype(config_.mixed_precision) == c10::kHalf) {
    if (!device_.is_cuda())
      fail(Status::Unsupported, "mixed_precision \"fp16\" needs a GPU: libtorch's CPU autocast computes in bf16 only "
                                "(use \"bf16\" on the CPU)");
    if (config_.scaler.enabled) scaler_ = std::make_shared<GradScaler>(config_.scaler, device_);
  }
  if (config_.data_seed && !config_.use_seedable_sampler && is_main_process())
    std::fprintf(stderr, "accelerate: data_seed is ignored without use_seedable_sampler (as in Accelerate)\n");
  // torch.compile changes the speed, not the numbers trained (to rounding): said, not refused.
  if (const char* backend = std::getenv("ACCELERATE_DYNAMO_BACKEND");
      backend && *backend && lowercase(backend) != "no" && is_main_process())
    std::fprintf(stderr,
                 "accelerate: ACCELERATE_DYNAMO_BACKEND=%s is ignored (torch.compile needs Python); the model runs "
                 "as TorchScript or a layer spec\n",
                 backend);
  iteration_ = config_.iteration;
  if (config_.seed) set_seed(*config_.seed);
  apply_cpu_affinity_setting(device_, process_.local_rank);
}

void Accelerator::check_settings_agree() {
  if (!dist_) return;
  const std::string differences = collectives_.differences_from_process_0(
      settings_every_process_shares(config_), "creating the accelerator (the processes' settings compared)",
      std::numeric_limits<size_t>::max());
  if (!differences.empty())
    fail(Status::InvalidArgument, "every process of a job must have the same training settings: ", differences);
}

const char* Accelerator::mixed_precision_name() const {
  for (const auto& choice : mixed_precision_choices())
    if (choice == config_.mixed_precision) return choice.c_str();
  fail(Status::Internal, "mixed_precision '", config_.mixed_precision, "' is not a choice of the option");
}

const char* Accelerator::distributed_type() const {
  if (!dist_) return "NO";
  if (config_.sharding.stage > 0) return config_.sharding_kind == "FSDP" ? "FSDP" : "DEEPSPEED";
  return device_.is_cuda() ? "MULTI_GPU" : "MULTI_CPU";
}

bool Accelerator::optimizer_step_was_skipped() const {
  for (const auto& opt : live_optimizers())
    if (opt->step_was_skipped()) return true;
  return false;
}

std::shared_ptr<Model> Accelerator::wrapped_model(const std::shared_ptr<Model>& model) const {
  if (std::dynamic_pointer_cast<PreparedModel>(model)) return model;
  return models_.find(model);
}

std::shared_ptr<Model> Accelerator::prepare_model(const std::shared_ptr<Model>& model,
                                                  std::optional<bool> device_placement) {
  require(model != nullptr, "prepare_model needs a model");
  const std::lock_guard<std::recursive_mutex> lock(prepare_mutex_);
  if (auto prepared = wrapped_model(model)) return prepared;
  require_not_sharded_elsewhere(*unwrap_model(model), "prepare_model");
  for (const auto& optimizer : live_optimizers())
    require(!(config_.sharding.stage > 0 && dist_ && optimizer->model() == model), "prepare the model before (or with) ",
            "its optimizer when sharding (zero_stage ", config_.sharding.stage, "): the optimizer is split by the model's shards");
  const bool place = device_placement.value_or(config_.device_placement);
  const bool parallel_training = dist_ && !model->trainable_parameters().empty();
  // Stage 3 moves only its shards to the device (see ShardedDataParallel): the model goes after.
  const bool shards_first = parallel_training && config_.sharding.stage == 3;
  if (config_.sharding.activation_checkpointing) model->checkpoint_activations(unit_policy(config_.sharding));
  const bool weights_pending = model->weights_pending();
  if (weights_pending) {
    require(dist_ != nullptr && (parallel_training || main_process_loads_weights()),
            "the model has no weights on this process (cpu_ram_efficient_loading / zero3_init_flag built it so), but ",
            dist_ ? "the job no longer asks for main-process loading (FSDP_CPU_RAM_EFFICIENT_LOADING / "
                    "ACCELERATE_DEEPSPEED_ZERO3_INIT), so the other processes would not send them"
                  : "this accelerator runs no process group to receive them from the main process");
    model->materialize_weights(place ? c10::optional<at::Device>(device_) : c10::nullopt, !shards_first);
  }
  if (place && !shards_first) model->to(device_, c10::nullopt);
  std::shared_ptr<ParallelEngine> parallel;
  if (parallel_training) {
    if (config_.sharding.stage > 0)
      parallel = std::make_shared<ShardedDataParallel>(model, dist_, config_.sharding, config_.ddp,
                                                       place ? std::optional<at::Device>(device_) : std::nullopt);
    else
      parallel = std::make_shared<DataParallel>(model, dist_, config_.ddp);
  }
  if (weights_pending) model->weights_arrived();  // stage 3 filled its shards
  if (place && shards_first) model->to(device_, c10::nullopt);  // buffers, and ignored_modules' parameters
  // Engines take every process's weights from the main process. A model with nothing to train has
  // none: where the job asks for main-process loading, every process (the main one too, which
  // never awaits weights) joins a broadcast of them here.
  if (dist_ && !parallel && main_process_loads_weights()) {
    std::vector<at::Tensor> state;
    for (const auto& entry : model->state_dict()) state.push_back(entry.second);
    broadcast_in_place(*dist_, state, "prepare_model (the main process's weights)");
  }
  // PyTorch's DDP (Accelerate gives it device_ids on a GPU) and FSDP move a forward's inputs to the GPU.
  const auto inputs_to = parallel && device_.is_cuda() ? std::optional<at::Device>(device_) : std::nullopt;
  auto prepared = std::make_shared<PreparedModel>(model, device_.type(), mixed_precision_dtype(config_.mixed_precision),
                                                  std::move(parallel), inputs_to);
  for (const auto& optimizer : live_optimizers())
    if (optimizer->model() == model) {
      if (optimizer->fused_backward()) prepared->leave_gradients_to_optimizer();
      optimizer->hold_prepared_model(prepared);
    }
  models_.add(model, prepared);
  return prepared;
}

std::shared_ptr<Optimizer> Accelerator::prepare_optimizer(const std::shared_ptr<Optimizer>& optimizer,
                                                          std::optional<bool> device_placement) {
  require(optimizer != nullptr, "prepare_optimizer needs an optimizer");
  const std::lock_guard<std::recursive_mutex> lock(prepare_mutex_);
  if (auto accelerated = std::dynamic_pointer_cast<AcceleratedOptimizer>(optimizer)) return accelerated;
  if (auto prepared = optimizers_.find(optimizer)) return prepared;
  // Every process steps its replica (or shard) alike: another algorithm, hyper-parameter or grouping
  // on one process would make the replicas drift apart without an error.
  const std::string differences = collectives_.differences_from_process_0(
      describe_optimizer(*optimizer), "prepare_optimizer (the optimizers compared)", 1);
  if (!differences.empty())
    fail(Status::InvalidArgument, "prepare_optimizer: every process must prepare the same optimizer, and the first ",
         "setting that differs: ", differences);
  if (optimizer->fused_backward()) {
    check_lomo_preparable(*optimizer);
    if (auto model = std::dynamic_pointer_cast<PreparedModel>(wrapped_model(optimizer->model())))
      model->leave_gradients_to_optimizer();
  }
  if (device_placement.value_or(config_.device_placement)) move_optimizer_state(*optimizer, device_);
  std::shared_ptr<Optimizer> inner = optimizer;
  if (auto model = std::dynamic_pointer_cast<PreparedModel>(wrapped_model(optimizer->model())))
    if (auto engine = model->sharded()) inner = std::make_shared<ShardedOptimizer>(optimizer, engine);
  auto prepared = std::make_shared<AcceleratedOptimizer>(inner, gradient_state_, scaler_);
  if (auto model = wrapped_model(optimizer->model())) prepared->hold_prepared_model(model);
  if (config_.gradient_clipping > 0) {
    // As DeepSpeed's engine: the global norm of the model's gradients, over every shard.
    const double max_norm = config_.gradient_clipping;
    std::shared_ptr<ShardedDataParallel> engine = sharding_engine(optimizer->model());
    prepared->set_gradient_clipping([engine, model = optimizer->model(), max_norm] {
      if (engine && engine->options().stage >= 2) {
        engine->clip_grad_norm(max_norm, 2.0);
      } else if (const auto grads = model->gradients(); !grads.empty()) {
        acc::clip_grad_norm(grads, max_norm, 2.0);
      }
    });
  }
  optimizers_.add(optimizer, prepared);
  return prepared;
}

std::shared_ptr<DataLoader> Accelerator::prepare_dataloader(const std::shared_ptr<DataLoader>& loader,
                                                            std::optional<bool> device_placement) {
  require(loader != nullptr, "prepare_dataloader needs a data loader");
  const std::lock_guard<std::recursive_mutex> lock(prepare_mutex_);
  if (loaders_.holds(loader.get())) return loader;  // already a prepared loader
  if (auto prepared = loaders_.find(loader)) return prepared;
  PrepareDataLoaderOptions options;
  options.num_processes = process_.world_size;
  options.process_index = process_.rank;
  options.split_batches = config_.split_batches;
  options.even_batches = config_.even_batches;
  options.dispatch_batches = config_.dispatch_batches;
  if (device_placement.value_or(config_.device_placement)) options.device = device_;
  else options.device = loader->options().device;
  options.non_blocking = config_.non_blocking;
  options.data_seed = config_.data_seed;
  options.use_seedable_sampler = config_.use_seedable_sampler;
  auto prepared = prepare_data_loader(*loader, options, dist_, collectives_);
  prepared->set_observer(gradient_state_);
  loaders_.add(loader, prepared);
  return prepared;
}

std::shared_ptr<Scheduler> Accelerator::prepare_scheduler(const std::shared_ptr<Scheduler>& scheduler) {
  require(scheduler != nullptr, "prepare_scheduler needs a scheduler");
  const std::lock_guard<std::recursive_mutex> lock(prepare_mutex_);
  if (std::dynamic_pointer_cast<AcceleratedScheduler>(scheduler)) return scheduler;
  if (auto prepared = schedulers_.find(scheduler)) return prepared;
  // Bind to the prepared wrapper of the scheduler's optimizer, to see skipped steps.
  check_scheduler_preparable(scheduler, nullptr);
  auto optimizer = std::dynamic_pointer_cast<AcceleratedOptimizer>(scheduler->optimizer());
  if (!optimizer) optimizer = optimizers_.find(scheduler->optimizer());
  auto prepared = std::make_shared<AcceleratedScheduler>(scheduler, optimizer, gradient_state_, num_processes(),
                                                         config_.split_batches, config_.step_scheduler_with_optimizer);
  schedulers_.add(scheduler, prepared);
  return prepared;
}

void Accelerator::check_scheduler_preparable(const std::shared_ptr<Scheduler>& scheduler,
                                             const std::shared_ptr<Optimizer>& optimizer) const {
  if (std::dynamic_pointer_cast<AcceleratedScheduler>(scheduler) || schedulers_.find(scheduler)) return;
  const auto& own = scheduler->optimizer();
  const bool ready = std::dynamic_pointer_cast<AcceleratedOptimizer>(own) || optimizers_.find(own) ||
                     (optimizer && own == optimizer);
  require(ready, "prepare_scheduler: this accelerator has not prepared the scheduler's optimizer: prepare it first, ",
          "with this accelerator (acc_prepare_optimizer, or acc_prepare with both); one accelerator prepares what it ",
          "trains");
}

std::shared_ptr<Model> Accelerator::unwrap_model(const std::shared_ptr<Model>& model) const {
  require(model != nullptr, "unwrap_model needs a model");
  if (auto prepared = std::dynamic_pointer_cast<PreparedModel>(model)) return prepared->unwrap();
  return model;
}

void Accelerator::backward(const at::Tensor& loss, bool retain_graph, bool create_graph) {
  require_backward_loss(loss);
  if (lomo_prepared())
    fail(Status::InvalidArgument,
         "a LOMO optimizer is prepared: it updates the parameters inside backward at the rate ",
         "it is given (acc_backward_lr, or acc_lomo_backward); a plain backward would leave gradients that no step ",
         "applies");
  if ((retain_graph || create_graph) && config_.sharding.stage > 0 && dist_)
    fail(Status::Unsupported, "backward with ", retain_graph ? "retain_graph" : "create_graph",
         " under sharded data parallelism (zero_stage ", config_.sharding.stage, "): each backward reduces the ",
         "gradients into their shards and releases gathered parameters, so a second pass through the graph ",
         "has neither (DeepSpeed's engine has no such argument either)");
  at::Tensor scaled = over_accumulation_steps(loss);
  if (scaler_) scaled = scaler_->scale(scaled);
  run_backward([&] { scaled.backward({}, retain_graph || create_graph, create_graph); }, "DDP's gradient allreduce");
}

at::Tensor Accelerator::over_accumulation_steps(const at::Tensor& loss) const {
  const int64_t steps = config_.gradient_accumulation_steps;
  return steps > 1 ? loss / static_cast<double>(steps) : loss;
}

void Accelerator::run_backward(const std::function<void()>& pass, const std::string& collectives) {
  const int64_t call = ++backward_calls_;
  try {
    pass();
  } catch (const Error& e) {
    // Sharding's collectives in backward name themselves; the message gains which backward it was.
    const bool collective = e.status() == Status::Timeout || e.status() == Status::Aborted ||
                            e.status() == Status::Distributed;
    if (dist_ && collective) throw Error(e.status(), concat("backward #", call, ": ", e.what()));
    throw;
  } catch (...) {
    // DDP's gradient allreduce runs inside backward: a peer lost there is named like any collective.
    if (dist_) rethrow_peer_failure_or_original(concat("backward #", call, " (", collectives, ")"));
    throw;
  }
}

std::shared_ptr<PreparedModel> Accelerator::prepared(const std::shared_ptr<Model>& model) const {
  auto wrapper = std::dynamic_pointer_cast<PreparedModel>(wrapped_model(model));
  require(wrapper != nullptr, "the model was not prepared by this accelerator");
  return wrapper;
}

std::shared_ptr<ShardedDataParallel> Accelerator::sharding_engine(const std::shared_ptr<Model>& model) const {
  auto wrapper = std::dynamic_pointer_cast<PreparedModel>(wrapped_model(model));
  return wrapper ? wrapper->sharded() : nullptr;
}

void Accelerator::require_not_sharded_elsewhere(const Model& model, const char* action) const {
  if (model.sharded_at_rest())
    fail(Status::InvalidArgument, action, ": the model is sharded at rest (zero_stage 3) by a prepared model this ",
         "accelerator does not hold (another accelerator's, or one acc_free_memory released), so its own tensors ",
         "are empty; use the prepared model's handle, with the accelerator that prepared it");
}

double Accelerator::clip_grad_norm(const std::shared_ptr<Model>& model, double max_norm, double norm_type) {
  require(model != nullptr, "clip_grad_norm needs a model");
  // As torch: max_norm inf reads the norm without clipping, 0 zeroes the gradients; any norm type,
  // 0 (nonzero count) and negative ones (-inf: the smallest magnitude) included. A negative max_norm
  // (which would flip the gradients) is refused.
  require(max_norm >= 0, "max_norm must be a number >= 0 (inf: no clipping), got ", max_norm);
  require(!std::isnan(norm_type), "norm_type must be a number, got ", norm_type);
  if (auto engine = sharding_engine(model); engine && engine->options().stage >= 2) {
    unscale_gradients(nullptr);  // the optimizers' slices hold this process's gradients
    return engine->clip_grad_norm(max_norm, norm_type);
  }
  const std::vector<at::Tensor> grads = model->gradients();
  if (grads.empty()) return 0.0;
  unscale_model_gradients(grads);  // clip true gradients, not scaled ones
  return acc::clip_grad_norm(grads, max_norm, norm_type);
}

void Accelerator::clip_grad_value(const std::shared_ptr<Model>& model, double clip_value) {
  require(model != nullptr, "clip_grad_value needs a model");
  // +inf clips nothing, as in torch's clip_grad_value_.
  require(clip_value >= 0, "clip_value must be a number >= 0, got ", clip_value);
  if (auto engine = sharding_engine(model); engine && engine->options().stage >= 2) {
    unscale_gradients(nullptr);
    acc::clip_grad_value(engine->piece_gradients(), clip_value);  // elementwise: slices clip as the whole would
    return;
  }
  const std::vector<at::Tensor> grads = model->gradients();
  unscale_model_gradients(grads);
  acc::clip_grad_value(grads, clip_value);
}

void Accelerator::join_uneven_inputs_begin(const std::shared_ptr<Model>& model, std::optional<bool> even_batches) {
  auto wrapper = prepared(model);
  if (wrapper->leaves_gradients_to_optimizer() && num_processes() > 1)
    fail(Status::Unsupported, "join_uneven_inputs with a LOMO optimizer: its allreduces inside backward, one per ",
         "parameter, have no join hook to stand in for a process whose data has ended");
  std::function<void()> restore;
  if (even_batches && num_processes() > 1) restore = override_even_batches(live_loaders(), *even_batches);
  try {
    wrapper->join_begin();
  } catch (...) {
    if (restore) restore();
    throw;
  }
  if (restore) even_batches_restore_.push_back(std::move(restore));
}

void Accelerator::join_uneven_inputs_end(const std::shared_ptr<Model>& model) {
  prepared(model)->join_end();
  for (auto& restore : std::exchange(even_batches_restore_, {})) restore();
}

void Accelerator::accumulate_begin() {
  gradient_state_->begin_micro_step();
  // Off the window's end, gradients accumulate locally: no allreduce in this backward (unless
  // sync_each_batch trades that speed for the memory of the local accumulation).
  const bool allreduce = gradient_state_->sync_gradients() || config_.sync_each_batch;
  models_.each([allreduce](PreparedModel& model) { model.set_gradient_sync(allreduce); });
  ++accumulate_depth_;
}

void Accelerator::accumulate_end() {
  require(accumulate_depth_ > 0, "accumulate_end without an accumulate_begin");
  if (--accumulate_depth_ == 0) models_.each([](PreparedModel& model) { model.set_gradient_sync(true); });
}

void Accelerator::no_sync_begin(const std::shared_ptr<Model>& model) { prepared(model)->no_sync_begin(); }

void Accelerator::no_sync_end(const std::shared_ptr<Model>& model) { prepared(model)->no_sync_end(); }

void Accelerator::trigger_sync_in_backward(const std::shared_ptr<Model>& model) {
  prepared(model)->trigger_sync_in_backward();
}

at::Tensor Accelerator::gather_for_metrics(const at::Tensor& tensor, const std::string& name) {
  at::Tensor gathered = collectives_.gather(tensor, name);
  // On the last batch of an epoch, the tail past the dataset's end repeats samples from its start.
  const int64_t remainder = gradient_state_->remainder();
  if (gradient_state_->end_of_dataloader() && remainder > 0 && gathered.dim() > 0 && remainder < gathered.size(0))
    return gathered.narrow(0, 0, remainder);
  return gathered;
}

// Accelerate's main_process_first: the others wait at its start for the main process, which waits
// at its end for them; one barrier, named by the section (errors name the call a process made, and
// a process meeting it with another collective is told).
void Accelerator::main_process_first_begin(bool local) {
  const bool first = local ? is_local_main_process() : is_main_process();
  if (!first) collectives_.barrier(local ? "local_main_process_first" : "main_process_first");
  ++main_first_depth_[local];
}

void Accelerator::main_process_first_end(bool local) {
  const char* scope = local ? "local_main_process_first" : "main_process_first";
  require(main_first_depth_[local] > 0, scope, "_end without a ", scope, "_begin");
  --main_first_depth_[local];
  const bool first = local ? is_local_main_process() : is_main_process();
  if (first) collectives_.barrier(scope);
}

void Accelerator::save_model(const std::shared_ptr<Model>& model, const std::string& dir,
                             const std::string& max_shard_size) {
  const int64_t limit = parse_size(max_shard_size);
  // LoRA adapters are merged into the weights they adapt: the files are the base model's layout.
  const LoraAdapters& adapters = model->lora();
  adapters.require_mergeable("save_model");  // on every process, before the collective gather
  if (auto engine = sharding_engine(model)) {
    // Every process takes part in gathering the shards; the main process writes. Announced first: a
    // process elsewhere (save_model called on the main process alone) is an error naming both calls,
    // where the gathers would meet another collective's and abort the process from Gloo's thread.
    collectives_.barrier("save_model (gathering the sharded weights)");
    const NamedTensors state = engine->full_state_dict("save_model");
    if (is_main_process()) save_sharded(dir, as_given_out(adapters.merged(state), *engine), limit);
    return;
  }
  require_not_sharded_elsewhere(*unwrap_model(model), "save_model");
  if (is_main_process()) save_sharded(dir, adapters.merged(unwrap_model(model)->state_dict()), limit);
}

NamedTensors Accelerator::as_given_out(NamedTensors state, const ShardedDataParallel& engine) const {
  const auto& sharding = engine.options();
  const std::optional<at::ScalarType> dtype = mixed_precision_dtype(config_.mixed_precision);
  if (sharding.stage != 3 || !sharding.save_16bit_model || !dtype) return state;
  // DeepSpeed's engine holds the module itself in 16 bits: buffers too; integer ones stay.
  for (auto& entry : state)
    if (entry.second.is_floating_point()) entry.second = entry.second.to(*dtype);
  return state;
}

void Accelerator::unscale_gradients(const std::shared_ptr<Optimizer>& optimizer) {
  if (!scaler_) return;
  if (!optimizer) {
    for (const auto& opt : live_optimizers()) opt->unscale_gradients();
    return;
  }
  // Overflow is recorded by the prepared optimizer, whose step reads it.
  auto prepared = std::dynamic_pointer_cast<AcceleratedOptimizer>(optimizer);
  if (!prepared) prepared = optimizers_.find(optimizer);
  if (prepared) return prepared->unscale_gradients();
  optimizer->attach_gradients();
  scaler_->unscale(optimizer->gradients());  // no prepared step to skip: the scale alone hears of it
}

void Accelerator::unscale_model_gradients(const std::vector<at::Tensor>& grads) {
  if (!scaler_) return;
  // Each gradient with the optimizer that steps with it (so an overflow skips that optimizer's
  // step); the model's gradients no prepared optimizer holds change the scale only.
  std::unordered_set<const c10::TensorImpl*> mine;
  for (const auto& g : grads) mine.insert(g.unsafeGetTensorImpl());
  for (const auto& opt : live_optimizers()) {
    std::vector<at::Tensor> shared;
    for (const auto& g : opt->gradients())
      if (mine.count(g.unsafeGetTensorImpl())) shared.push_back(g);
    opt->unscale_gradients(shared);
  }
  scaler_->unscale(grads);
}

namespace {

// The autocast scopes opened on this thread, innermost last (across accelerators, as torch's state is
// per thread).
struct AutocastScopes {
  std::vector<std::unique_ptr<AutocastGuard>> open;
  // Scopes still open when the thread ends are freed unclosed: closing one restores torch's
  // thread-local autocast state, which may already be destroyed by then (and dies with the thread).
  ~AutocastScopes() {
    for (auto& scope : open) scope->dismiss();
  }
};

std::vector<std::unique_ptr<AutocastGuard>>& autocast_scopes() {
  thread_local AutocastScopes scopes;
  return scopes.open;
}

}  // namespace

void Accelerator::autocast_begin(bool enabled) {
  const auto dtype = enabled ? mixed_precision_dtype(config_.mixed_precision) : std::nullopt;
  autocast_scopes().push_back(std::make_unique<AutocastGuard>(device_.type(), dtype));
}

void Accelerator::autocast_end() {
  auto& scopes = autocast_scopes();
  require(!scopes.empty(), "autocast_end without an autocast_begin on this thread");
  scopes.pop_back();
}

void Accelerator::print(const std::string& text) const {
  if (!is_main_process()) return;
  std::fputs(text.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void Accelerator::free_memory() {
  models_.clear();
  optimizers_.clear();
  loaders_.clear();
  schedulers_.clear();
  gradient_state_->set_step(0);  // as Accelerate's: the next training starts a fresh accumulation window
  release_device_cache();
}

}  // namespace acc
