// Tensors backed by memory-mapped files, so a data set need not fit in memory.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace acc {

// A CPU tensor over the bytes of `path` from `offset` on, of the given shape and dtype. The
// mapping is private copy-on-write: writing to the tensor never changes the file. If `dims` has a
// -1 as its first size, it is inferred from the file size. The file must hold at least the bytes
// the shape needs.
at::Tensor mmap_tensor(const std::string& path, uint64_t offset, at::ScalarType dtype, std::vector<int64_t> dims);

// Whether `tensor` (or the tensor it views) is over a file mapped by mmap_tensor.
bool is_mapped_file(const at::Tensor& tensor);
// Fails (Io, naming the file) where `tensor` is over a mapped file that has since been cut short:
// reading the pages past its new end would kill the process (SIGBUS). Other tensors pass.
void check_mapped_file(const at::Tensor& tensor);
// Rows `indices` (along dim 0) of `tensor`, a CPU tensor over a mapped file, as index_select gives
// them. Where the file has been cut short, before or during the read, fails (Io, naming the file)
// instead of letting the process die of SIGBUS. Indices must be in range.
at::Tensor select_mapped_rows(const at::Tensor& tensor, const std::vector<int64_t>& indices);

}  // namespace acc
