#include "parallel/sharded_optimizer.h"

#include <unordered_map>

#include "common/error.h"

namespace acc {
namespace {

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
  void save_torchscript(const std::string&) const override {
    fail(Status::InvalidArgument, "the pieces of a sharded model cannot be saved as TorchScript");
  }

 private:
  NamedTensors pieces_;
};

}  // namespace

ShardedOptimizer::ShardedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<ShardedDataParallel> engine)
    : inner_(std::move(inner)), engine_(std::move(engine)) {
  auto& impl = inner_->impl();
  require(impl.state().empty(), "prepare the optimizer before its first step when sharding (zero_stage ",
          engine_->options().stage, "): its state is split across processes at prepare");
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
}

void ShardedOptimizer::add_param_group(const std::vector<std::string>&, const Options&) {
  fail(Status::InvalidArgument, "set parameter groups before preparing the optimizer: under sharding (zero_stage ",
       engine_->options().stage, ") each process's groups hold only its shard");
}

void ShardedOptimizer::step() {
  engine_->attach_piece_gradients();
  inner_->step();
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
