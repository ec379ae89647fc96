// What this build of the library is made of: versions, CUDA/NCCL, BLAS.
#pragma once

#include <string>

namespace acc {

// The BLAS library that libtorch computes with in this process, e.g. "OpenBLAS 0.3.21 (...)" or
// the resolved path of libblas.so.3 for other implementations; "unknown" if none is loaded.
std::string blas_in_use();

// A JSON object: library, abi, libtorch, cuda, cuda_version, nccl, blas, cxx11_abi, compiler.
std::string build_info_json();

}  // namespace acc
