// Tensors to and from memory the caller owns: checked sizes, copy or zero-copy borrow.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace acc {

// Validates dims (none negative) and returns numel, failing on overflow.
int64_t checked_numel(c10::ArrayRef<int64_t> dims);
// The bytes of a tensor of that shape and dtype; InvalidArgument unless the count fits int64.
int64_t checked_nbytes(c10::ArrayRef<int64_t> dims, at::ScalarType dtype);

// A CPU tensor holding a copy of the bytes; nbytes must equal numel * element size.
at::Tensor tensor_from_host_copy(const void* data, size_t nbytes, c10::ArrayRef<int64_t> dims,
                                 at::ScalarType dtype);

// A CPU tensor over the caller's memory; `release` runs when the last user of the storage is gone.
at::Tensor tensor_from_host_borrow(void* data, size_t nbytes, c10::ArrayRef<int64_t> dims, at::ScalarType dtype,
                                   std::function<void()> release);

// Copies the elements in row-major order into dst (any device); nbytes must match exactly.
void tensor_to_host(const at::Tensor& tensor, void* dst, size_t nbytes);

}  // namespace acc
