#include "common/build_info.h"

#include <dlfcn.h>
#include <link.h>
#include <torch/version.h>

#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "common/device.h"
#include "common/version.h"

namespace acc {
namespace {

// Every loaded shared object whose file name mentions "blas" (libopenblas*, libblas.so.3, ...).
std::string first_loaded_blas_path() {
  std::string found;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        std::string path = info->dlpi_name ? info->dlpi_name : "";
        auto slash = path.rfind('/');
        std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
        if (file.find("blas") == std::string::npos) return 0;
        char resolved[PATH_MAX];
        *static_cast<std::string*>(data) = realpath(path.c_str(), resolved) ? resolved : path;
        return 1;
      },
      &found);
  return found;
}

}  // namespace

std::string blas_in_use() {
  // OpenBLAS answers for itself, whichever alternative name it was loaded under.
  using ConfigFn = char* (*)();
  if (auto config = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config")))
    return std::string(config()) + " (" + first_loaded_blas_path() + ")";
  std::string path = first_loaded_blas_path();
  if (path.empty()) return "unknown";
  if (path.find("blis") != std::string::npos) return "BLIS (" + path + ")";
  if (path.find("mkl") != std::string::npos) return "MKL (" + path + ")";
  if (path.find("atlas") != std::string::npos) return "ATLAS (" + path + ")";
  return "reference BLAS (" + path + ")";
}

std::string build_info_json() {
  nlohmann::json info;
  info["library"] = kVersionString;
  info["abi"] = kAbiVersion;
  info["libtorch"] = TORCH_VERSION;
#ifdef ACC_WITH_CUDA
  info["cuda_built"] = true;
#else
  info["cuda_built"] = false;
#endif
  info["cuda"] = cuda_available();
  info["cuda_devices"] = cuda_device_count();
#ifdef ACC_WITH_NCCL
  info["nccl"] = true;
#else
  info["nccl"] = false;
#endif
  info["gloo"] = true;
  info["blas"] = blas_in_use();
  info["cxx11_abi"] = _GLIBCXX_USE_CXX11_ABI == 1;
#if defined(__clang__)
  info["compiler"] = "clang " __clang_version__;
#else
  info["compiler"] = "gcc " __VERSION__;
#endif
  return info.dump();
}

}  // namespace acc
