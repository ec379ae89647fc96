#include "parallel/sharded_optimizer.h"

#include <nlohmann/json.hpp>

#include <c10/util/accumulate.h>

#include <optional>
#include <unordered_map>

#include "common/error.h"
#include "common/json_input.h"
#include "optim/optimizer_state.h"
#include "optim/schedule_free.h"

namespace acc {
namespace {

using nlohmann::json;

// What a process owns of the model's parameters, as a model: named like the parameters, 1-D.
class PiecesModel final : public Model {
 public:
  PiecesModel(NamedTensors pieces, NamedTensors frozen) : pieces_(std::move(pieces)) {
    pieces_.insert(pieces_.end(), frozen.begin(), frozen.end());
  }
  NamedTensors forward(const std::vector<at::Tensor>&) override {
    fail(Status::InvalidArgument, "the pieces of a sharded model cannot run forward");
  }
  NamedTensors named_parameters() const override { return pieces_; }
  NamedTensors named_buffers() const override { return {}; }
  void set_training(bool) override {}
  bool is_training() const override { return true; }
 protected:
  void write_torchscript(const std::string&) const override {
    fail(Status::InvalidArgument, "the pieces of a sharded model cannot be saved as TorchScript");
  }

 private:
  NamedTensors pieces_;
};

}  // namespace

ShardedOptimizer::ShardedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<ShardedDataParallel> engine)
    : OptimizerWrapper(std::move(inner)), engine_(std::move(engine)) {
  if (!inner_->elementwise())
    fail(Status::Unsupported, "the ", inner_->algorithm(), " optimizer cannot be sharded (zero_stage ",
         engine_->options().stage, "): its update is not elementwise (it needs whole parameters); use another "
         "optimizer or zero_stage 0");
  auto& impl = inner_->impl();
  // State made before prepare (Adagrad's accumulators are made with the optimizer) is cut to slices.
  std::optional<OptimizerSnapshot> existing;
  if (!impl.state().empty()) existing = snapshot_optimizer(*inner_);
  std::unordered_map<const c10::TensorImpl*, size_t> index;
  for (size_t i = 0; i < engine_->params().size(); ++i) index.emplace(engine_->params()[i].unsafeGetTensorImpl(), i);
  std::vector<int64_t> piece_of(engine_->params().size(), -1);
  const auto& pieces = engine_->layout().pieces();
  for (size_t k = 0; k < pieces.size(); ++k) piece_of[pieces[k].param] = static_cast<int64_t>(k);

  std::unordered_map<const c10::TensorImpl*, std::string> names;
  for (const auto& entry : inner_->model()->named_parameters()) names.emplace(entry.second.unsafeGetTensorImpl(), entry.first);
  NamedTensors named_pieces, frozen;
  for (auto& group : impl.param_groups()) {
    std::vector<at::Tensor> mine;
    group_names_.emplace_back();
    for (const auto& p : group.params()) {
      auto name = names.find(p.unsafeGetTensorImpl());
      require(name != names.end(), "sharding: the optimizer holds a parameter that is not its model's");
      group_names_.back().push_back(name->second);
      auto it = index.find(p.unsafeGetTensorImpl());
      if (it == index.end()) {  // frozen: replicated, never stepped
        mine.push_back(p);
        frozen.emplace_back(name->second, p);
        continue;
      }
      if (piece_of[it->second] < 0) continue;  // owned by other processes
      const at::Tensor& piece = engine_->pieces()[static_cast<size_t>(piece_of[it->second])];
      mine.push_back(piece);
      named_pieces.emplace_back(name->second, piece);
    }
    group.params() = std::move(mine);
  }
  pieces_model_ = std::make_shared<PiecesModel>(std::move(named_pieces), std::move(frozen));
  if (existing) {
    impl.state().clear();
    const std::string what = "the optimizer's state at prepare";
    prepare_optimizer_restore(*this, slice(*existing, what), what)();
  }
  // For good: its groups keep the slices, which a step alone would leave ungathered.
  inner_->set_owner_reason("the optimizer was prepared under zero_stage " + std::to_string(engine_->options().stage) +
                           ": its parameter groups hold this process's slices of the parameters, which only the "
                           "optimizer acc_prepare returned steps, zeroes and gathers; use that one");
}

OptimizerSnapshot ShardedOptimizer::slice(const OptimizerSnapshot& full, const std::string& source) const {
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> mine;  // name -> (begin, length)
  std::unordered_map<std::string, c10::IntArrayRef> shape;
  for (const auto& piece : engine_->layout().pieces())
    mine[engine_->names()[piece.param]] = {piece.begin, piece.length};
  for (size_t i = 0; i < engine_->names().size(); ++i) shape[engine_->names()[i]] = engine_->shapes()[i];
  std::unordered_map<std::string, bool> grouped;  // every name of the optimizer's groups, on any process
  for (const auto& names : group_names_)
    for (const auto& name : names) grouped[name] = true;
  std::unordered_map<std::string, bool> own;  // the names this process's groups hold
  for (const auto& entry : pieces_model_->named_parameters()) own[entry.first] = true;

  OptimizerSnapshot out;
  out.metadata = full.metadata;
  auto groups_text = full.metadata.find("param_groups");
  require(groups_text != full.metadata.end(), source, ": not an optimizer state (no 'param_groups' in its metadata)");
  json groups = parse_json_input(groups_text->second, source + ": its param_groups metadata");
  require(groups.is_array() && groups.size() == group_names_.size(), source, ": holds ",
          groups.is_array() ? groups.size() : 0, " parameter groups, but the optimizer has ",
          group_names_.size());
  try {
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto saved = groups[g].at("params").get<std::vector<std::string>>();
      require(saved == group_names_[g], source, ": parameter group ", g,
              " holds other parameters than the optimizer's");
      json kept = json::array();
      for (const auto& name : saved)
        if (own.count(name)) kept.push_back(name);
      groups[g]["params"] = kept;
    }
  } catch (const json::exception& e) {
    fail(Status::InvalidArgument, source, ": malformed param_groups metadata: ", e.what());
  }
  out.metadata["param_groups"] = groups.dump();
  for (const auto& entry : full.tensors) {
    const auto [param, field] = split_state_key(entry.first, source);
    require(grouped.count(param), source, ": holds state for parameters the optimizer does not have ('", entry.first,
            "')");
    // Checked on every process, also for the parameters other processes own: all refuse alike.
    const auto expected = shape.find(param);
    if (expected != shape.end() && entry.second.dim() != 0)
      require(entry.second.sizes() == expected->second, source, ": '", entry.first, "' has shape ",
              entry.second.sizes(), " but ", expected->second, " was expected");
    if (!own.count(param)) continue;
    auto piece = mine.find(param);
    if (piece == mine.end() || entry.second.dim() == 0) {  // a frozen parameter's, or a scalar
      out.tensors.push_back(entry);
      continue;
    }
    out.tensors.emplace_back(entry.first,
                             entry.second.reshape({-1}).narrow(0, piece->second.first, piece->second.second));
  }
  return out;
}

void ShardedOptimizer::add_param_group(const std::vector<std::string>&, const Options&) {
  fail(Status::InvalidArgument, "set parameter groups before preparing the optimizer: under sharding (zero_stage ",
       engine_->options().stage, ") each process's groups hold only its shard");
}

void ShardedOptimizer::step() {
  engine_->before_step();
  engine_->attach_piece_gradients();
  inner_->step();
  engine_->after_step();
}

void ShardedOptimizer::set_train_mode(bool train) {
  // Only a schedule-free optimizer changing mode moves anything; its mode is every process's alike.
  const auto* modes = dynamic_cast<const ScheduleFreeModes*>(&inner_->impl());
  if (!modes || modes->train_mode() == train) return;
  engine_->before_step();
  inner_->set_train_mode(train);
  engine_->after_step();
}

bool ShardedOptimizer::on_any_process(bool found) {
  auto& dist = *engine_->distributed();
  std::vector<at::Tensor> flag{at::full({1}, found ? 1.0f : 0.0f, at::TensorOptions().device(dist.device()))};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  wait_collective(dist.group()->allreduce(flag, options), "optimizer step (inf/nan check over shards)");
  return flag[0].item<float>() != 0.0f;
}

void ShardedOptimizer::zero_grad() {
  inner_->zero_grad();
  engine_->zero_grad();
}

}  // namespace acc
