#include "tensor/reshape.h"

#include "common/error.h"

namespace acc {

at::Tensor checked_reshape(const at::Tensor& x, at::IntArrayRef shape) {
  int64_t known = 1, inferred = 0;
  for (int64_t d : shape) {
    require(d >= -1, "reshape: dim ", d, " is negative (only one -1 may stand for an inferred dim)");
    if (d == -1) ++inferred;
    else known *= d;
  }
  require(inferred <= 1, "reshape: only one dim may be -1");
  require(inferred ? (known > 0 && x.numel() % known == 0) : known == x.numel(), "reshape: shape ", shape,
          " does not fit a tensor of shape ", x.sizes(), " (", x.numel(), " elements)");
  return x.reshape(shape);
}

}  // namespace acc
