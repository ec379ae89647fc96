#include "parallel/buffer_sync.h"

#include "parallel/broadcast.h"

namespace acc {

BufferSync::BufferSync(std::shared_ptr<Distributed> dist, std::vector<at::Tensor> buffers, bool enabled)
    : dist_(std::move(dist)), buffers_(std::move(buffers)), enabled_(enabled && !buffers_.empty()) {}

void BufferSync::before_forward() {
  if (due_ && enabled_) broadcast_in_place(*dist_, buffers_, "forward (buffers)");
}

}  // namespace acc
