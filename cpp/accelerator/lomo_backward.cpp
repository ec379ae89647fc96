// Accelerate's lomo_backward and backward(loss, learning_rate=...): the fused backward of a
// prepared LOMO optimizer (optim/lomo.h).
//
// Under DDP, Python Accelerate leaves LOMO to DDP's Reducer, which averages the gradients only after
// LOMO has applied each process's own: the replicas drift apart. Here each gradient is averaged as
// DDP averages it (divided by the number of processes, then summed) before its update, one
// parameter at a time inside backward, and the Reducer stays out (PreparedModel's
// leave_gradients_to_optimizer): every replica takes the same update. Inside no_sync scopes (and
// LocalSGD) each process applies its own gradients, as no_sync asks.
#include <cmath>
#include <unordered_map>

#include "accelerator/accelerator.h"
#include "common/error.h"
#include "common/text.h"
#include "state/distributed.h"
#include "tensor/losses.h"

namespace acc {

std::shared_ptr<AcceleratedOptimizer> Accelerator::prepared_lomo(const char* call) const {
  std::shared_ptr<AcceleratedOptimizer> found;
  for (const auto& optimizer : live_optimizers()) {
    if (!optimizer->fused_backward()) continue;
    require(found == nullptr, call, ": two LOMO optimizers are prepared; Accelerate's lomo_backward runs backward ",
            "through the loss once for each, and the second finds the graph freed");
    found = optimizer;
  }
  require(found != nullptr, call, ": no LOMO optimizer (lomo or adalomo) is prepared (acc_prepare_optimizer); ",
          "Accelerate refuses the same (\"Backward pass not properly called on LOMO optimizers\")");
  return found;
}

bool Accelerator::lomo_prepared() const {
  // Asked at every backward: a walk over the prepared optimizers, without collecting them.
  bool found = false;
  optimizers_.each([&found](AcceleratedOptimizer& optimizer) { found = found || optimizer.fused_backward(); });
  return found;
}

void Accelerator::check_lomo_preparable(const Optimizer& optimizer) const {
  const std::string& algorithm = optimizer.algorithm();
  if (config_.sharding.stage > 0 && dist_)
    fail(Status::Unsupported, "the ", algorithm, " optimizer under sharded data parallelism (zero_stage ",
         config_.sharding.stage, "): LOMO's updates inside backward are built for whole parameters only");
  if (scaler_)
    fail(Status::Unsupported, "the ", algorithm, " optimizer under fp16 mixed precision: Accelerate's loss scaler ",
         "never reaches LOMO's backward, and lomo_optim's own is not built (bf16 works)");
  if (dist_ && config_.ddp.comm_hook != "no")
    fail(Status::Unsupported, "the ", algorithm, " optimizer with DDP's comm_hook ", config_.ddp.comm_hook,
         ": LOMO averages each gradient itself, uncompressed");
}

GradientAverager Accelerator::lomo_gradient_averager(Optimizer& optimizer, bool applies) const {
  const auto model = std::dynamic_pointer_cast<PreparedModel>(wrapped_model(optimizer.model()));
  if (!dist_ || !model || !model->data_parallel()) return {};
  // Inside no_sync (and LocalSGD, which is built on it) each process applies its own gradients.
  if (!model->optimizer_averages_next_backward(applies)) return {};
  // Names for the collectives' errors, in the order of the optimizer's group.
  std::unordered_map<const c10::TensorImpl*, std::string> name_of;
  for (const auto& [name, tensor] : optimizer.model()->named_parameters())
    name_of.emplace(tensor.unsafeGetTensorImpl(), name);
  std::vector<std::string> names;
  for (auto& group : optimizer.impl().param_groups())
    for (const auto& param : group.params()) {
      const auto it = name_of.find(param.unsafeGetTensorImpl());
      names.push_back(it != name_of.end() ? it->second : "?");
    }
  return [dist = dist_, names = std::move(names)](at::Tensor& grad, size_t index) {
    // DDP's arithmetic: the gradient times 1 / processes, then the sum over them.
    grad = grad.mul(1.0 / static_cast<double>(dist->world_size()));
    std::vector<at::Tensor> tensors{grad};
    wait_collective(dist->group()->allreduce(tensors),
                    concat("LOMO's allreduce of the gradient of '", names.at(index), "'"));
  };
}

void Accelerator::lomo_backward(const at::Tensor& loss, double learning_rate) {
  require_backward_loss(loss);
  require(std::isfinite(learning_rate) && learning_rate >= 0,
          "lomo_backward needs a learning rate, a finite number >= 0, got ", learning_rate);
  const auto optimizer = prepared_lomo("lomo_backward");
  auto& lomo = *optimizer->fused_backward();
  const GradientAverager average = lomo_gradient_averager(*optimizer, /*applies=*/true);
  run_backward([&] { lomo.fused_backward(loss, learning_rate, average); }, "LOMO's gradient allreduces");
}

void Accelerator::backward_with_learning_rate(const at::Tensor& loss, double learning_rate) {
  require_backward_loss(loss);
  require(lomo_prepared(), "backward with a learning rate is LOMO's (Accelerate hands it to lomo_backward), and no ",
          "LOMO optimizer (lomo or adalomo) is prepared");
  lomo_backward(over_accumulation_steps(loss), learning_rate);
}

double Accelerator::lomo_grad_norm(const at::Tensor& loss) {
  require_backward_loss(loss);
  const auto optimizer = prepared_lomo("lomo_grad_norm");
  auto& lomo = *optimizer->fused_backward();
  const GradientAverager average = lomo_gradient_averager(*optimizer, /*applies=*/false);
  double norm = 0;
  run_backward([&] { norm = lomo.grad_norm(loss, average); }, "LOMO's gradient allreduces");
  return norm;
}

}  // namespace acc
