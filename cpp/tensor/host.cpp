#include "tensor/host.h"

#include <cstring>
#include <limits>

#include "common/error.h"

namespace acc {
namespace {

void require_size(size_t nbytes, int64_t numel, at::ScalarType dtype) {
  const auto item = static_cast<uint64_t>(c10::elementSize(dtype));
  // A product that wraps would let a small buffer pass for a huge shape.
  if (static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / item)
    fail(Status::InvalidArgument, "the shape's ", numel, " elements of ", c10::toString(dtype),
         " overflow a byte count");
  const auto expected = static_cast<uint64_t>(numel) * item;
  require(expected == nbytes, "nbytes is ", nbytes, " but the shape holds ", numel, " elements of ",
          c10::toString(dtype), " (", item, " bytes each), i.e. ", expected, " bytes");
}

}  // namespace

int64_t checked_numel(c10::ArrayRef<int64_t> dims) {
  int64_t numel = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    require(dims[i] >= 0, "dims[", i, "] is ", dims[i], "; sizes must not be negative");
    if (dims[i] != 0 && numel > std::numeric_limits<int64_t>::max() / dims[i])
      fail(Status::InvalidArgument, "the shape's element count overflows int64");
    numel *= dims[i];
  }
  return numel;
}

int64_t checked_nbytes(c10::ArrayRef<int64_t> dims, at::ScalarType dtype) {
  const int64_t numel = checked_numel(dims);
  const auto item = static_cast<int64_t>(c10::elementSize(dtype));
  if (numel > std::numeric_limits<int64_t>::max() / item)
    fail(Status::InvalidArgument, "the shape's size in bytes overflows int64");
  return numel * item;
}

at::Tensor tensor_from_host_copy(const void* data, size_t nbytes, c10::ArrayRef<int64_t> dims,
                                 at::ScalarType dtype) {
  const int64_t numel = checked_numel(dims);
  require_size(nbytes, numel, dtype);
  require(data != nullptr || nbytes == 0, "data is NULL but nbytes is ", nbytes);
  at::Tensor out = at::empty(dims, at::TensorOptions().dtype(dtype));
  if (nbytes) std::memcpy(out.data_ptr(), data, nbytes);
  return out;
}

at::Tensor tensor_from_host_borrow(void* data, size_t nbytes, c10::ArrayRef<int64_t> dims, at::ScalarType dtype,
                                   std::function<void()> release) {
  const int64_t numel = checked_numel(dims);
  require_size(nbytes, numel, dtype);
  require(data != nullptr || nbytes == 0, "data is NULL but nbytes is ", nbytes);
  return at::from_blob(
      data, dims, [release = std::move(release)](void*) { if (release) release(); },
      at::TensorOptions().dtype(dtype));
}

void tensor_to_host(const at::Tensor& tensor, void* dst, size_t nbytes) {
  require_size(nbytes, tensor.numel(), tensor.scalar_type());
  require(dst != nullptr || nbytes == 0, "dst is NULL but nbytes is ", nbytes);
  if (nbytes == 0) return;
  at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  std::memcpy(dst, cpu.data_ptr(), nbytes);
}

}  // namespace acc
