#include "optim/update_bn.h"

#include <ATen/core/grad_mode.h>

#include <optional>

#include "common/error.h"

namespace acc {

void update_bn(Model& model, DataLoader& loader) {
  require(!loader.in_epoch(), "update_bn runs a whole epoch of the loader: end the one in progress first ",
          "(acc_dataloader_end_epoch)");
  if (model.sharded_at_rest())
    fail(Status::Unsupported, "update_bn: the model's parameters are sharded at rest (zero_stage 3); copy the ",
         "averaged weights into a model that is not (acc_averaged_model_copy_to) and update that one");
  model.require_weights("update_bn");
  const c10::Device device = model.device();
  at::NoGradGuard no_grad;  // the statistics are the same with autograd on (as PyTorch runs it)
  model.recompute_batch_norm([&]() -> std::optional<at::Tensor> {
    auto batch = loader.next();
    if (!batch) return std::nullopt;
    require(!batch->empty(), "update_bn: the loader gave a batch without fields");
    return batch->front().to(device);
  });
}

}  // namespace acc
