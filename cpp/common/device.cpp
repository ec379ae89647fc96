#include "common/device.h"

#include <ATen/Functions.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#ifdef ACC_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif


#include "common/error.h"

namespace acc {

bool cuda_available() { return torch::cuda::is_available(); }

int cuda_device_count() { return cuda_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

void set_current_device(const c10::Device& device) {
#ifdef ACC_WITH_CUDA
  if (device.is_cuda() && device.has_index()) c10::cuda::set_device(device.index());
#else
  (void)device;
#endif
}

void initialize_cuda() {
  if (cuda_available()) (void)at::empty({0}, at::TensorOptions().device(at::kCUDA));
}

void release_device_cache() {
#ifdef ACC_WITH_CUDA
  if (cuda_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

c10::Device parse_device(const std::string& name) {
  c10::optional<c10::Device> device;
  try {
    device = c10::Device(name);
  } catch (const c10::Error&) {
    fail(Status::InvalidArgument, "unknown device '", name, "' (expected \"cpu\", \"cuda\" or \"cuda:N\")");
  }
  if (device->is_cpu()) return *device;
  if (!device->is_cuda()) fail(Status::Unsupported, "device '", name, "' is not supported (cpu and cuda are)");
  if (!cuda_available()) fail(Status::Unsupported, "device '", name, "': CUDA is not available in this build or on this machine");
  if (device->has_index() && device->index() >= cuda_device_count())
    fail(Status::InvalidArgument, "device '", name, "': this machine has ", cuda_device_count(), " CUDA device(s)");
  return *device;
}

std::string device_name(const c10::Device& device) { return device.str(); }

}  // namespace acc
