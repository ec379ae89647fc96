// Model's side of AdaLoRA (model/peft/adalora.h): the regularized loss and the rank allocator's step,
// refused where sharded data parallelism holds slices of what they read or change.
#include "common/error.h"
#include "model/model.h"

namespace acc {

at::Tensor Model::adalora_loss(const at::Tensor& loss) const {
  if (sharded_at_rest())
    fail(Status::Unsupported, "AdaLoRA's regularized loss under zero_stage 3: each process holds slices of the ",
         "adapters at rest, and the regularization reads them whole (not built)");
  return lora_.adalora_loss(loss);
}

void Model::adalora_update_and_allocate(int64_t global_step) {
  if (sharded_at_rest() || zero_kept_gradients_)
    fail(Status::Unsupported, "AdaLoRA's update_and_allocate under sharded data parallelism (zero_stage 1, 2 or 3, ",
         "FSDP): it reads each adapter tensor's whole gradient and prunes lora_E in place, where the sharded ",
         "optimizer steps slices of its own (not built); prepare the model with DDP");
  require_weights("AdaLoRA's update_and_allocate");
  lora_.adalora_update_and_allocate(global_step);
}

}  // namespace acc
