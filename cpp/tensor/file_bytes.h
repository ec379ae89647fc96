// A file read whole into memory: what is checked is what is used. A file mapped instead is read
// again at each use, and one cut short or rewritten meanwhile (`cp` over it, another job's save)
// would give a SIGBUS or bytes that were never checked.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace acc {

// The bytes of the regular file `path`, as a 1-D uint8 CPU tensor. Io naming the file where it
// cannot be opened, is not a regular file, or changes size while it is read; OutOfMemory where
// its size cannot be had.
at::Tensor read_file_bytes(const std::string& path);

}  // namespace acc
