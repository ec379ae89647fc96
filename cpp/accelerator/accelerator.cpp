#include "accelerator/accelerator.h"

#include <torch/cuda.h>
#include <torch/utils.h>

#include <cstdio>

#include "common/device.h"
#include "common/error.h"
#include "precision/autocast.h"

namespace acc {
namespace {

c10::Device pick_device(const AcceleratorConfig& c, int64_t local_index) {
  if (c.cpu || !cuda_available()) return c10::Device(c10::kCPU);
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_index % cuda_device_count()));
}

template <typename T, typename U>
std::shared_ptr<T> find_prepared(const std::map<const void*, std::weak_ptr<U>>& map, const void* key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : std::static_pointer_cast<T>(it->second.lock());
}

}  // namespace

Accelerator::Accelerator(const Options& options)
    : config_(resolve_accelerator_config(options)),
      process_(detect_process_env()),
      device_(pick_device(config_, process_.local_rank)),
      gradient_state_(std::make_shared<GradientState>(config_.gradient_accumulation_steps)) {
  if (process_.distributed())
    fail(Status::Unsupported, "this process is rank ", process_.rank, " of ", process_.world_size,
         " (from the launcher's environment), but this build trains on one process only: data-parallel "
         "training on c10d is not available yet");
  const auto dtype = mixed_precision_dtype(config_.mixed_precision);
  if (dtype == c10::kHalf)
    fail(Status::Unsupported, "mixed_precision \"fp16\" needs dynamic loss scaling (GradScaler), which this build "
                              "does not provide yet; use \"bf16\" or \"no\"");
  if (config_.seed) {
    torch::manual_seed(*config_.seed);
    if (cuda_available()) torch::cuda::manual_seed_all(*config_.seed);
  }
}

bool Accelerator::optimizer_step_was_skipped() const {
  for (const auto& entry : optimizers_)
    if (auto opt = entry.second.lock(); opt && opt->step_was_skipped()) return true;
  return false;
}

std::shared_ptr<Model> Accelerator::wrapped_model(const std::shared_ptr<Model>& model) const {
  if (std::dynamic_pointer_cast<PreparedModel>(model)) return model;
  return find_prepared<Model>(models_, model.get());
}

std::shared_ptr<Model> Accelerator::prepare_model(const std::shared_ptr<Model>& model,
                                                  std::optional<bool> device_placement) {
  require(model != nullptr, "prepare_model needs a model");
  if (auto prepared = wrapped_model(model)) return prepared;
  if (device_placement.value_or(config_.device_placement)) model->to(device_, c10::nullopt);
  auto prepared = std::make_shared<PreparedModel>(model, device_.type(), mixed_precision_dtype(config_.mixed_precision));
  models_[model.get()] = prepared;
  return prepared;
}

std::shared_ptr<Optimizer> Accelerator::prepare_optimizer(const std::shared_ptr<Optimizer>& optimizer,
                                                          std::optional<bool> device_placement) {
  require(optimizer != nullptr, "prepare_optimizer needs an optimizer");
  if (auto accelerated = std::dynamic_pointer_cast<AcceleratedOptimizer>(optimizer)) return accelerated;
  if (auto prepared = find_prepared<AcceleratedOptimizer>(optimizers_, optimizer.get())) return prepared;
  if (device_placement.value_or(config_.device_placement)) move_optimizer_state(optimizer->impl(), device_);
  auto prepared = std::make_shared<AcceleratedOptimizer>(optimizer, gradient_state_);
  optimizers_[optimizer.get()] = prepared;
  return prepared;
}

std::shared_ptr<DataLoader> Accelerator::prepare_dataloader(const std::shared_ptr<DataLoader>& loader,
                                                            std::optional<bool> device_placement) {
  require(loader != nullptr, "prepare_dataloader needs a data loader");
  for (const auto& entry : loaders_)
    if (entry.second.lock() == loader) return loader;  // already a prepared loader
  if (auto prepared = find_prepared<DataLoader>(loaders_, loader.get())) return prepared;
  DataLoaderOptions options = loader->options();
  if (device_placement.value_or(config_.device_placement)) options.device = device_;
  auto prepared = std::make_shared<DataLoader>(loader->dataset(), options);
  prepared->set_epoch(loader->epoch());
  prepared->set_observer(gradient_state_);
  loaders_[loader.get()] = prepared;
  return prepared;
}

std::shared_ptr<Scheduler> Accelerator::prepare_scheduler(const std::shared_ptr<Scheduler>& scheduler) {
  require(scheduler != nullptr, "prepare_scheduler needs a scheduler");
  if (std::dynamic_pointer_cast<AcceleratedScheduler>(scheduler)) return scheduler;
  if (auto prepared = find_prepared<Scheduler>(schedulers_, scheduler.get())) return prepared;
  // Bind to the prepared wrapper of the scheduler's optimizer, to see skipped steps.
  auto optimizer = std::dynamic_pointer_cast<AcceleratedOptimizer>(scheduler->optimizer());
  if (!optimizer) optimizer = find_prepared<AcceleratedOptimizer>(optimizers_, scheduler->optimizer().get());
  auto prepared = std::make_shared<AcceleratedScheduler>(scheduler, optimizer, gradient_state_, num_processes(),
                                                         config_.split_batches, config_.step_scheduler_with_optimizer);
  schedulers_[scheduler.get()] = prepared;
  return prepared;
}

std::shared_ptr<Model> Accelerator::unwrap_model(const std::shared_ptr<Model>& model) const {
  require(model != nullptr, "unwrap_model needs a model");
  if (auto prepared = std::dynamic_pointer_cast<PreparedModel>(model)) return prepared->unwrap();
  return model;
}

void Accelerator::backward(const at::Tensor& loss) {
  require(loss.defined() && loss.numel() == 1, "backward needs a scalar loss, got shape ",
          loss.defined() ? loss.sizes() : c10::IntArrayRef{});
  require(loss.requires_grad(), "the loss does not require grad: it was computed without autograd history");
  const int64_t steps = config_.gradient_accumulation_steps;
  (steps > 1 ? loss / static_cast<double>(steps) : loss).backward();
}

void Accelerator::accumulate_begin() { gradient_state_->begin_micro_step(); }

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
}

}  // namespace acc
