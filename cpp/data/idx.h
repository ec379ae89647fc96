// The IDX format of (Fashion-)MNIST, plain or gzip-compressed, read with zlib.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace acc {

// Reads an IDX file (magic 0 0 type ndims, big-endian int32 dims, then the data) into a CPU
// tensor of the file's type and shape. Missing, truncated, oversized or corrupt files are Io
// errors that say what is wrong.
at::Tensor read_idx(const std::string& path);

}  // namespace acc
