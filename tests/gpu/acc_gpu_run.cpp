// acc_gpu_run PROGRAM ARGS...: runs PROGRAM (exec, same environment) when a CUDA GPU is usable;
// otherwise says why and exits 77, which the CTest entries of the GPU suite take as "skipped"
// (SKIP_RETURN_CODE 77). An NVIDIA GPU that the library cannot use is a failure (exit 1), never a
// skip: see gpu_check.h.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gpu_check.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: acc_gpu_run PROGRAM [ARGS...]\n");
    return 2;
  }
  const acc_gpu::CudaCheck check = acc_gpu::check_cuda();
  if (check.state == acc_gpu::Cuda::Absent) {
    std::printf("SKIPPED: %s\n", check.why.c_str());
    return 77;
  }
  if (check.state == acc_gpu::Cuda::Broken) {
    std::fprintf(stderr, "FAILED: %s\n", check.why.c_str());
    return 1;
  }
  std::printf("acc_gpu_run: %s\n", check.why.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(argv[1], argv + 1);
  std::fprintf(stderr, "acc_gpu_run: cannot run %s: %s\n", argv[1], std::strerror(errno));
  return 127;
}
