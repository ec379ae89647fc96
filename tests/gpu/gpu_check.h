// Whether the GPU tests can run here. One decision for every GPU test, the GoogleTest cases
// (ACC_REQUIRE_CUDA in gpu_support.h) and the programs run through acc_gpu_run alike, taken from
// what the library itself reports: acc_build_info()'s "cuda" (torch::cuda::is_available()).
//
//   Usable  the library sees a CUDA device: the test runs.
//   Absent  no NVIDIA GPU on this machine, or CUDA_VISIBLE_DEVICES hides them on purpose: the test
//           is skipped (CTest shows it as skipped) with the reason.
//   Broken  an NVIDIA GPU is there and not hidden, yet the library sees no CUDA (a build without
//           CUDA, a driver the libtorch cannot use): the test FAILS, so that a GPU machine never
//           reports skipped GPU tests as if all were well. ACC_GPU_TESTS_REQUIRE_GPU=1 makes a
//           missing GPU a failure too.
#pragma once

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "accelerate.h"

namespace acc_gpu {

enum class Cuda { Usable, Absent, Broken };

struct CudaCheck {
  Cuda state;
  std::string why;  // for the skip or failure message; what was found when usable
};

// The NVIDIA driver exposes a GPU to this machine (or container): /dev/nvidia0, or an entry in
// /proc/driver/nvidia/gpus.
inline std::string nvidia_gpu_evidence() {
  struct stat st {};
  if (::stat("/dev/nvidia0", &st) == 0) return "/dev/nvidia0";
  std::string found;
  if (DIR* dir = ::opendir("/proc/driver/nvidia/gpus")) {
    while (const dirent* entry = ::readdir(dir))
      if (entry->d_name[0] != '.') found = std::string("/proc/driver/nvidia/gpus/") + entry->d_name;
    ::closedir(dir);
  }
  return found;
}

// CUDA_VISIBLE_DEVICES="" (or "-1") hides every GPU on purpose, as scripts/gpu/test.sh does for the
// CPU suite.
inline bool gpus_hidden() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v && (v[0] == '\0' || v[0] == '-');
}

inline CudaCheck check_cuda() {
  const nlohmann::json info = nlohmann::json::parse(acc_build_info(), nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded() || !info.is_object())
    return {Cuda::Broken, std::string("acc_build_info() is not a JSON object: ") + acc_build_info()};
  const bool cuda = info.value("cuda", false), built = info.value("cuda_built", false);
  const std::string libtorch = info.value("libtorch", std::string("?"));
  if (cuda)
    return {Cuda::Usable, "CUDA: " + std::to_string(info.value("cuda_devices", 0)) + " device(s), libtorch " + libtorch};
  std::string reason = !built ? "this build has no CUDA (libtorch " + libtorch + ", ACC_WITH_CUDA off)"
                              : "libtorch " + libtorch + " finds no CUDA device";
  if (gpus_hidden()) return {Cuda::Absent, "no CUDA GPU: CUDA_VISIBLE_DEVICES hides them (" + reason + ")"};
  const std::string evidence = nvidia_gpu_evidence();
  if (!evidence.empty())
    return {Cuda::Broken, "an NVIDIA GPU is present (" + evidence + ") but the library sees no usable CUDA: " + reason +
                              ". The GPU tests must run here: build against a CUDA libtorch (scripts/gpu/build.sh) "
                              "or fix the driver"};
  const char* require = std::getenv("ACC_GPU_TESTS_REQUIRE_GPU");
  if (require && std::string(require) == "1")
    return {Cuda::Broken, "ACC_GPU_TESTS_REQUIRE_GPU=1 but there is no CUDA GPU: " + reason};
  return {Cuda::Absent, "no CUDA GPU: " + reason};
}

}  // namespace acc_gpu
