#include "parallel/sharded_data_parallel.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "common/error.h"
#include "common/text.h"
#include "optim/clip_grad.h"
#include "parallel/broadcast.h"
#include "parallel/ignored_modules.h"
#include "parallel/replica_check.h"
#include "tensor/storage.h"

namespace acc {
namespace {

constexpr int64_t kGatherChunk = int64_t{1} << 20;  // elements per process and round (4 MiB of fp32)

}  // namespace

// FSDP's auto-wrap settings as Accelerate reads them: SIZE_BASED_WRAP with min_num_params 0 wraps
// nothing (one unit); TRANSFORMER_BASED_WRAP, or no policy, with classes named wraps those.
UnitPolicy unit_policy(const ShardingOptions& options) {
  UnitPolicy policy;
  const std::string named = options.auto_wrap_policy.value_or("");
  if (named == "NO_WRAP" || (named == "SIZE_BASED_WRAP" && options.min_num_params == 0)) {
    policy.kind = UnitPolicy::Kind::Whole;
  } else if (named == "SIZE_BASED_WRAP") {
    policy.kind = UnitPolicy::Kind::Size;
    policy.min_num_params = options.min_num_params;
  } else {
    if (!trimmed(options.transformer_cls_to_wrap).empty()) {
      for (auto& name : split_trimmed(options.transformer_cls_to_wrap, ',')) {
        require(!name.empty(), "transformer_cls_to_wrap '", options.transformer_cls_to_wrap, "' has an empty class name");
        policy.classes.push_back(std::move(name));
      }
    }
    if (!policy.classes.empty()) policy.kind = UnitPolicy::Kind::Classes;
  }
  return policy;
}

ShardedDataParallel::ShardedDataParallel(std::shared_ptr<Model> model, std::shared_ptr<Distributed> dist,
                                         ShardingOptions options, DataParallelOptions data_parallel,
                                         std::optional<at::Device> device)
    : model_(std::move(model)),
      dist_(std::move(dist)),
      options_(std::move(options)),
      data_parallel_(std::move(data_parallel)) {
  require(options_.stage >= 1 && options_.stage <= 3, "zero_stage must be 1, 2 or 3, got ", options_.stage);
  // OFT's coft writes each projected rotation back into its parameter during the forward; stage 3
  // gathers a unit's parameters for the forward and frees them, so the write would reach no shard.
  const LoraConfig& adapters = model_->lora().config();
  if (options_.stage == 3 && !model_->lora().empty() && adapters.peft_type == PeftType::Oft && adapters.coft)
    fail(Status::Unsupported, "OFT with coft under zero_stage 3: its forward writes the projected rotations back ",
         "into their parameters, which stage 3 holds as slices (gathered for the forward and freed); use zero_stage ",
         "1 or 2, or coft false");
  // Stages 1 and 2 keep whole parameters on the device by design: offloading parameters there
  // means offloading what the optimizer steps (as FSDP's CPUOffload with SHARD_GRAD_OP).
  offload_ = options_.offload_optimizer || options_.offload_params;
  shard_group_ = dist_->group();
  shard_world_ = dist_->world_size();
  shard_rank_ = dist_->rank();
  // Hybrid sharding: within each machine (HYBRID_SHARD), or within groups of dp_shard_size
  // consecutive ranks (Accelerate's ParallelismConfig). One group is plain sharding.
  const bool groups_of_size = options_.dp_shard_size > 1 && options_.dp_shard_size < shard_world_;
  if (options_.hybrid || groups_of_size) {
    const auto& groups = groups_of_size ? dist_->shard_groups(options_.dp_shard_size) : dist_->machine_groups();
    if (groups.count > 1) {
      shard_group_ = groups.shard;
      shard_world_ = groups.size;
      shard_rank_ = groups.rank;
      peers_ = groups.peers;
    }
  }
  check_same_model_everywhere(*model_, dist_, "prepare_model");
  // Stage 3 shards the frozen parameters too, and broadcasts every parameter unit by unit as it
  // shards it (flatten), so that no process ever holds its whole model twice, nor (on a GPU) once.
  // The ignored modules' (frozen) parameters stay whole, as below stage 3.
  const NamedTensors parameters = model_->named_parameters();
  std::vector<std::string> parameter_names;
  for (const auto& entry : parameters) parameter_names.push_back(entry.first);
  const std::set<std::string> ignored = ignored_parameter_names(parameter_names, options_.ignored_modules);
  std::vector<at::Tensor> replicated;
  for (const auto& entry : parameters) {
    const bool trainable = entry.second.requires_grad(), whole = options_.stage < 3 || ignored.count(entry.first);
    if (trainable && ignored.count(entry.first))
      fail(Status::Unsupported, "ignored_modules '", options_.ignored_modules, "': '", entry.first, "' requires grad; ",
           "FSDP leaves an ignored module's gradients unreduced, for an optimizer of the program's own, and a sharded ",
           "run's optimizer steps only shards: freeze it (acc_model_set_requires_grad) or leave its module out of the ",
           "pattern");
    if (whole) replicated.push_back(entry.second);
    if (trainable || !whole) (trainable ? trainable_ : frozen_).add(entry.first, entry.second);
  }
  // With weights only on the main process, the others receive the whole parameters into memory of their own.
  if (options_.stage == 3 && model_->weights_pending()) fill_placeholders(replicated);
  std::vector<at::Tensor> buffers;
  for (const auto& entry : model_->named_buffers()) buffers.push_back(entry.second);
  replicated.insert(replicated.end(), buffers.begin(), buffers.end());
  // PEFT's originals of the modules to save too (parameters of its model); stage 3 drops them after.
  std::vector<at::Tensor> whole_state = replicated;
  for (const auto& entry : model_->kept_original_modules()) whole_state.push_back(entry.second);
  broadcast_in_place(*dist_, whole_state, "prepare_model (initial parameters)");
  if (options_.stage > 1)  // stage 1's Reducer (DataParallel) syncs them
    buffer_sync_ = std::make_unique<BufferSync>(dist_, std::move(buffers), data_parallel_.broadcast_buffers);

  if (options_.stage == 3) model_->set_unit_policy(unit_policy(options_));
  // Units: one for stage 1 (each process owns a contiguous 1/N of all parameters), DDP's buckets for
  // stage 2 (the same reductions as DDP, so the same sums), the model's units for stage 3.
  std::vector<std::vector<size_t>> units;
  if (options_.stage == 1) {
    units.emplace_back();
    for (size_t i = 0; i < trainable_.params.size(); ++i) units.back().push_back(i);
  } else if (options_.stage == 2) {
    units = ddp_buckets(trainable_.params, data_parallel_.bucket_cap_mb * 1024 * 1024).first;
    std::reverse(units.begin(), units.end());  // the model's order; reductions go last unit first
  }
  // Stage 3: the model's units, by parameter name (set by the wrap policy above).
  const auto model_units = options_.stage == 3 ? model_->parameter_units() : std::vector<std::vector<std::string>>{};
  if (options_.stage == 3) {
    units = flat_units_of_model(trainable_, model_units);
    if (!frozen_.params.empty())
      frozen_.layout = std::make_unique<FlatLayout>(frozen_.params, flat_units_of_model(frozen_, model_units),
                                                    shard_world_, shard_rank_);
  }
  trainable_.layout = std::make_unique<FlatLayout>(trainable_.params, units, shard_world_, shard_rank_);

  // A model built with placeholder weights (Model::make_weights_pending) gets every value from the
  // main process's broadcast: nothing of its own to copy.
  const bool from_main_process = options_.stage == 3 && model_->weights_pending();
  accumulators_.resize(trainable_.params.size());
  flatten(trainable_, device, from_main_process);
  if (frozen_.layout) flatten(frozen_, device, from_main_process);
  for (const auto& piece : trainable_.layout->pieces()) {
    const FlatUnit& unit = trainable_.layout->units()[piece.unit];
    const int64_t in_slice = piece.shard_pos - unit.shard_offset;
    if (options_.stage == 3) pieces_.push_back(trainable_.shards[piece.unit].narrow(0, in_slice, piece.length));
    else if (offload_) pieces_.push_back(host_master_[piece.unit].narrow(0, in_slice, piece.length));
    else pieces_.push_back(trainable_.full[piece.unit].narrow(0, unit.offsets[piece.slot] + piece.begin, piece.length));
  }

  if (options_.stage == 1) reducer_ = std::make_unique<DataParallel>(model_, dist_, data_parallel_);
  if (!host_master_.empty()) remember_parameter_versions();  // after the Reducer's broadcast
  // The model's zero_grad (torch's idiom) clears the pieces too, and a move or cast is refused; set
  // last, once nothing can throw.
  auto take_over_the_model = [this] {
    model_->set_gradient_keeper([this] { zero_grad(); });
    model_->set_flat_parameters("it is prepared with zero_stage " + std::to_string(options_.stage) +
                                ", whose flat buffers hold its parameters and are what the optimizer steps (cast or "
                                "move it before acc_prepare)");
  };
  if (options_.stage == 1) {
    take_over_the_model();
    return;
  }
  // Reductions start from the gradient accumulators' hooks, as DDP's Reducer does; the accumulators
  // are kept alive so that the hooks stay.
  for (size_t i = 0; i < trainable_.params.size(); ++i) {
    if (!accumulators_[i]) accumulators_[i] = torch::autograd::impl::grad_accumulator(trainable_.params[i]);
    hook_keys_.push_back(accumulators_[i]->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_gradient_ready(i);
          return outputs;
        })));
  }
  if (options_.stage == 3) {
    model_->set_sharded_at_rest(
        "the model is sharded at rest (zero_stage 3): no process holds its whole parameters, so a TorchScript "
        "file would hold empty tensors; write the full weights with acc_save_model (every process calls it) and "
        "load them into an unprepared model to export it");
    install_unit_hooks(model_units);
  }
  take_over_the_model();
}

std::vector<std::vector<size_t>> ShardedDataParallel::flat_units_of_model(const FlatSet& set,
                                                                          const ModelUnits& model_units) const {
  std::vector<std::vector<size_t>> units;
  std::vector<bool> placed(set.params.size(), false);
  for (const auto& names : model_units) {
    units.emplace_back();
    for (const auto& name : names) {
      auto it = set.index.find(name);
      if (it == set.index.end() || placed[it->second]) continue;  // in the other set, or already placed
      placed[it->second] = true;
      units.back().push_back(it->second);
    }
    if (units.back().empty()) units.pop_back();
  }
  for (size_t i = 0; i < set.params.size(); ++i)
    require(placed[i], "sharding: parameter '", set.names[i], "' is in none of the model's units");
  return units;
}

void ShardedDataParallel::flatten(FlatSet& set, std::optional<at::Device> device, bool from_main_process) {
  at::NoGradGuard no_grad;
  const bool trainable = &set == &trainable_, stage3 = options_.stage == 3;
  const size_t count = set.layout->units().size();
  set.gathered.assign(count, !stage3);
  for (size_t u = 0; u < count; ++u) {
    const FlatUnit& unit = set.layout->units()[u];
    const at::Tensor& first = set.params[unit.params.front()];
    // Stage 3 flattens the unit where the model will train (`device`), straight from where it was
    // built: the device receives this process's shard and one unit at a time, never the model.
    const auto options = first.options().device(stage3 ? device.value_or(first.device()) : first.device());
    at::Tensor full = at::zeros({unit.padded()}, options);
    for (size_t k = 0; k < unit.params.size() && !from_main_process; ++k) {
      const at::Tensor& p = set.params[unit.params[k]];
      full.narrow(0, unit.offsets[k], p.numel()).copy_(p.reshape({-1}));
    }
    if (stage3)
      broadcast_in_place(*dist_, {full}, concat("prepare_model (initial parameters of ", set.what, " ", u, " of ",
                                                count, ")"));
    const at::Tensor mine = full.narrow(0, unit.my_begin(shard_rank_), unit.slice);
    const at::Tensor host = offload_ ? at::empty({unit.slice}, host_options(unit.dtype)).copy_(mine) : at::Tensor();
    if (stage3) set.shards.push_back(offload_ ? host : mine.clone());
    else if (offload_) host_master_.push_back(host);
    if (offload_ && trainable) host_grads_.push_back(at::zeros({unit.slice}, host_options(unit.dtype)));
    for (size_t k = 0; k < unit.params.size(); ++k) {
      at::Tensor& p = set.params[unit.params[k]];
      p.set_data(full.narrow(0, unit.offsets[k], p.numel()).view(p.sizes()));
      if (!stage3) continue;
      // Stage 3 starts released: the parameters are emptied (their storage freed). Their gradient
      // accumulators are made first, while they have their shapes and the device: autograd checks
      // every gradient against what the accumulator recorded.
      if (trainable) accumulators_[unit.params[k]] = torch::autograd::impl::grad_accumulator(p);
      p.set_data(at::empty({0}, options));
    }
    if (stage3) free_storage(full);
    set.full.push_back(full);
    if (trainable && options_.stage >= 2) shard_grads_.push_back(at::zeros({unit.slice}, options));
  }
}

void ShardedDataParallel::install_unit_hooks(const ModelUnits& model_units) {
  // The model's units map onto the flat units (a unit of mixed dtypes became several).
  auto flat_units = [&](const FlatSet& set) {
    std::vector<std::vector<size_t>> of(model_units.size());
    for (size_t m = 0; m < model_units.size() && set.layout; ++m) {
      for (const auto& name : model_units[m]) {
        auto it = set.index.find(name);
        if (it == set.index.end()) continue;
        const size_t u = set.layout->unit_of(it->second);
        if (std::find(of[m].begin(), of[m].end(), u) == of[m].end()) of[m].push_back(u);
      }
    }
    return of;
  };
  trainable_of_unit_ = flat_units(trainable_);
  frozen_of_unit_ = flat_units(frozen_);
  UnitHooks hooks{[this](size_t m) {
                    gather_model_unit(m, "forward");
                    if (frozen_release_) frozen_release_->call_begins(m);
                  },
                  [this](size_t m, const at::Tensor& output) {
                    if (m >= trainable_of_unit_.size()) return output;
                    // The last unit's backward comes first: it stays gathered for it (as FSDP's root does).
                    if (m + 1 < trainable_of_unit_.size() || !output.requires_grad()) release_model_unit(m);
                    if (frozen_release_) frozen_release_->call_output(m, output.requires_grad());
                    // Before the unit's backward its parameters are gathered again (the last unit's
                    // too: another forward, one without gradients, may have released it meanwhile).
                    if (output.requires_grad())
                      output.register_hook([this, m](const at::Tensor&) { gather_model_unit(m, "backward"); });
                    return output;
                  },
                  {}};
  if (frozen_.layout) {
    frozen_release_ = std::make_shared<FrozenReleaseTracker>(frozen_of_unit_, trainable_of_unit_, frozen_.units(),
                                                             [this](size_t f) { release(frozen_, f); });
    hooks.inputs = [this](const std::vector<size_t>& units, const std::vector<at::Tensor>& inputs) {
      frozen_release_->call_inputs(units, inputs);
    };
  }
  model_has_unit_hooks_ = model_->set_unit_hooks(std::move(hooks));
}

ShardedDataParallel::~ShardedDataParallel() {
  for (size_t i = 0; i < hook_keys_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  if (model_has_unit_hooks_) model_->set_unit_hooks(UnitHooks{});
  model_->set_sharded_at_rest("");
  model_->set_flat_parameters("");
  model_->set_gradient_keeper({});
}

void ShardedDataParallel::before_forward(bool sync) {
  if (reducer_) return reducer_->before_forward(sync);
  const bool training = at::GradMode::is_enabled() && model_->is_training();
  if (training) {
    sync_ = sync;
    if (frozen_release_) frozen_release_->forward_begins();
  }
  buffer_sync_->before_forward();  // stage 3's evaluation forwards come here too
  if (options_.stage == 3 && !model_has_unit_hooks_)
    gather_all("forward");
}

void ShardedDataParallel::before_local_forward() {
  if (reducer_) return reducer_->before_local_forward();
  buffer_sync_->before_forward();
}

void ShardedDataParallel::forward_done(bool recorded_synced_gradients) {
  if (reducer_) return reducer_->forward_done(recorded_synced_gradients);
  buffer_sync_->forward_done(recorded_synced_gradients);
}

void ShardedDataParallel::after_forward(NamedTensors& outputs, bool sync) {
  if (reducer_) return reducer_->after_forward(outputs, sync);
  if (options_.stage != 3) return;
  // A backward, if one follows, needs the units still gathered (the last one, those whose output
  // could not be hooked, or the model run as one piece) until it has reduced them; should another
  // forward without gradients release them first, the outputs' hooks gather them again.
  bool backward_follows = false;
  for (const auto& entry : outputs) {
    if (!entry.second.requires_grad()) continue;
    backward_follows = true;
    if (!model_has_unit_hooks_)
      entry.second.register_hook([this](const at::Tensor&) { gather_all("backward"); });
  }
  if (frozen_release_) frozen_release_->forward_ended(backward_follows);
  if (!backward_follows) release_all();
}

void ShardedDataParallel::sync_next_backward() {
  if (reducer_) return reducer_->sync_next_backward();
  sync_ = true;
}

void ShardedDataParallel::join_begin() {
  fail(Status::Unsupported, "join_uneven_inputs is not supported with sharded data parallelism (zero_stage ",
       options_.stage, "): give every process the same number of batches (even_batches)");
}

void ShardedDataParallel::join_end() { join_begin(); }

at::TensorOptions ShardedDataParallel::host_options(at::ScalarType dtype) const {
  return at::TensorOptions().dtype(dtype).device(at::kCPU).pinned_memory(dist_->process_device().is_cuda());
}

// In-place writes through a parameter (load_state_dict's copy_) bump its version counter; ours into
// the flat vectors (the write-back, the all-gathers) do not: set_data left each parameter its own.
bool ShardedDataParallel::parameters_written_since_host_copy() const {
  for (size_t i = 0; i < trainable_.params.size(); ++i)
    if (trainable_.params[i]._version() != param_versions_[i]) return true;
  return false;
}

void ShardedDataParallel::remember_parameter_versions() {
  param_versions_.clear();
  for (const auto& p : trainable_.params) param_versions_.push_back(p._version());
}

at::Tensor ShardedDataParallel::my_slice(size_t unit, const at::Tensor& full) const {
  const FlatUnit& u = trainable_.layout->units()[unit];
  return full.narrow(0, u.my_begin(shard_rank_), u.slice);
}

void ShardedDataParallel::allgather_into(const at::Tensor& full, const at::Tensor& mine, const std::string& name) {
  const int64_t slice = mine.numel();
  if (dist_->backend() == Backend::Nccl && slice <= kGatherChunk) {
    at::Tensor out = full, in = mine.contiguous();
    return wait_collective(shard_group_->_allgather_base(out, in), name);
  }
  // In rounds of at most kGatherChunk elements per process: the backend stages each round in a
  // flat buffer of its own, which would otherwise be a second copy of the whole unit.
  for (int64_t begin = 0; begin < slice; begin += kGatherChunk) {
    const int64_t length = std::min(kGatherChunk, slice - begin);
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int64_t r = 0; r < shard_world_; ++r) outputs[0].push_back(full.narrow(0, r * slice + begin, length));
    std::vector<at::Tensor> inputs{mine.narrow(0, begin, length).clone()};  // `mine` may lie inside `full`
    wait_collective(shard_group_->allgather(outputs, inputs), name);
  }
}

// Stage 3 frees and restores a unit's storage itself, not only the parameters' views of it:
// autograd keeps views of the parameters it saved in forward (a linear layer's transposed weight),
// which would otherwise hold every unit's full parameters until the backward; the gather before a
// unit's backward refills that same storage.
void ShardedDataParallel::gather(FlatSet& set, size_t unit, const char* phase) {
  if (set.gathered[unit]) return;
  at::NoGradGuard no_grad;
  const FlatUnit& u = set.layout->units()[unit];
  at::Tensor& full = set.full[unit];
  restore_storage(full);
  const at::Tensor& shard = set.shards[unit];  // offloaded: staged to the device first
  allgather_into(full, shard.device() == full.device() ? shard : shard.to(full.device(), /*non_blocking=*/true),
                 concat(phase, " (zero_stage 3: gathering ", set.what, " ", unit, " of ", set.units(), ")"));
  for (size_t k = 0; k < u.params.size(); ++k) {
    const auto& shape = set.shapes[u.params[k]];
    set.params[u.params[k]].set_data(full.narrow(0, u.offsets[k], c10::multiply_integers(shape)).view(shape));
  }
  set.gathered[unit] = true;
}

void ShardedDataParallel::release(FlatSet& set, size_t unit) {
  if (!set.gathered[unit]) return;
  const FlatUnit& u = set.layout->units()[unit];
  for (size_t k : u.params) {
    at::Tensor& p = set.params[k];
    // An empty tensor: a stray read of a released parameter is a shape error, never a wild pointer.
    p.set_data(at::empty({0}, p.options()));
  }
  free_storage(set.full[unit]);
  set.gathered[unit] = false;
}

void ShardedDataParallel::gather_model_unit(size_t m, const char* phase) {
  if (m >= trainable_of_unit_.size()) return;
  for (size_t u : trainable_of_unit_[m]) gather(trainable_, u, phase);
  for (size_t f : frozen_of_unit_[m]) gather(frozen_, f, phase);
}

void ShardedDataParallel::release_model_unit(size_t m) {
  if (m >= trainable_of_unit_.size()) return;
  for (size_t u : trainable_of_unit_[m]) release(trainable_, u);
  for (size_t f : frozen_of_unit_[m]) release(frozen_, f);
}

void ShardedDataParallel::gather_all(const char* phase) {
  for (size_t u = 0; u < trainable_.units(); ++u) gather(trainable_, u, phase);
  for (size_t f = 0; f < frozen_.units(); ++f) gather(frozen_, f, phase);
}

void ShardedDataParallel::with_full_parameters(const char* call, const std::function<void()>& use) {
  if (options_.stage < 3) return use();
  gather_all(call);
  try {
    use();
  } catch (...) {
    release_all();
    throw;
  }
  release_all();
}

void ShardedDataParallel::release_all() {
  for (size_t u = 0; u < trainable_.units(); ++u) release(trainable_, u);
  for (size_t f = 0; f < frozen_.units(); ++f) release(frozen_, f);
}

at::Tensor& ShardedDataParallel::shard_of(size_t u) {
  return u < trainable_.shards.size() ? trainable_.shards[u] : frozen_.shards.at(u - trainable_.shards.size());
}

bool ShardedDataParallel::attach_piece_gradients() {
  const auto& pieces = trainable_.layout->pieces();
  // Attached once per step: the GradScaler divides each gradient tensor once, known by identity.
  if (!pieces_.empty() && pieces_.front().grad().defined()) return true;
  at::NoGradGuard no_grad;
  if (options_.stage == 1) {
    for (size_t i = 0; i < pieces.size(); ++i) {
      const at::Tensor& grad = trainable_.params[pieces[i].param].grad();
      if (!grad.defined()) return false;
      at::Tensor mine = grad.reshape({-1}).narrow(0, pieces[i].begin, pieces[i].length);
      if (offload_) {
        const FlatUnit& unit = trainable_.layout->units()[pieces[i].unit];
        mine = host_grads_[pieces[i].unit].narrow(0, pieces[i].shard_pos - unit.shard_offset, pieces[i].length).copy_(mine);
      }
      pieces_[i].mutable_grad() = mine;
    }
    return true;
  }
  if (!grads_live_) return false;
  if (offload_)
    for (size_t u = 0; u < shard_grads_.size(); ++u) host_grads_[u].copy_(shard_grads_[u]);
  const std::vector<at::Tensor>& slices = offload_ ? host_grads_ : shard_grads_;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const FlatUnit& unit = trainable_.layout->units()[pieces[i].unit];
    pieces_[i].mutable_grad() =
        slices[pieces[i].unit].narrow(0, pieces[i].shard_pos - unit.shard_offset, pieces[i].length);
  }
  return true;
}

std::vector<at::Tensor> ShardedDataParallel::piece_gradients() {
  std::vector<at::Tensor> grads;
  if (attach_piece_gradients())
    for (const auto& piece : pieces_) grads.push_back(piece.grad());
  return grads;
}

void ShardedDataParallel::before_step() {
  if (host_master_.empty() || !parameters_written_since_host_copy()) return;
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < trainable_.full.size(); ++u) host_master_[u].copy_(my_slice(u, trainable_.full[u]));
  remember_parameter_versions();
}

void ShardedDataParallel::after_step() {
  if (options_.stage == 3) return;  // the next forward gathers the stepped shards
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < trainable_.full.size(); ++u) {
    // From pinned memory the copy overlaps; the collective is ordered after it on the stream.
    if (offload_) my_slice(u, trainable_.full[u]).copy_(host_master_[u], /*non_blocking=*/true);
    allgather_into(trainable_.full[u], my_slice(u, trainable_.full[u]), "optimizer step (gathering the updated parameter shards)");
  }
}

void ShardedDataParallel::zero_grad() {
  for (auto& p : trainable_.params) p.mutable_grad().reset();
  for (auto& piece : pieces_) piece.mutable_grad().reset();
  grads_live_ = false;
}

double ShardedDataParallel::clip_grad_norm(double max_norm, double norm_type) {
  // torch's norm 0 counts the parameters whose gradient is not all zero: pieces are not parameters.
  if (norm_type == 0)
    fail(Status::Unsupported, "clip_grad_norm: norm_type 0 (torch's count of nonzero gradients per parameter) ",
         "is not supported with sharded gradients (stage 2 or 3): the pieces are not the parameters");
  const std::vector<at::Tensor> grads = piece_gradients();
  // Norms of this process's pieces, combined over processes: the p-th powers add up (the maximum
  // for the infinity norm, the minimum for -inf). The split into pieces changes the rounding of the
  // sum, nothing else.
  const bool infinite = std::isinf(norm_type);
  return acc::clip_grad_norm(grads, max_norm, norm_type, [&](const at::Tensor& local) {
    std::vector<at::Tensor> list{(infinite ? local : local.pow(norm_type)).reshape({1}).to(dist_->device())};
    c10d::AllreduceOptions options;
    options.reduceOp = !infinite ? c10d::ReduceOp::SUM : norm_type > 0 ? c10d::ReduceOp::MAX : c10d::ReduceOp::MIN;
    wait_collective(shard_group_->allreduce(list, options), "clip_grad_norm (total norm)");
    at::Tensor total = list[0].to(local.device()).reshape({});
    return infinite ? total : total.pow(1.0 / norm_type);
  });
}

}  // namespace acc
