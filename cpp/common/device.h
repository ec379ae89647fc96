// Device names as users write them ("cpu", "cuda", "cuda:1").
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace acc {

// Parses a device name. Unknown names are InvalidArgument; a CUDA device on a machine or build
// without CUDA is Unsupported; a CUDA index past the device count is InvalidArgument.
c10::Device parse_device(const std::string& name);

std::string device_name(const c10::Device& device);

bool cuda_available();
int cuda_device_count();

// Makes `device` the calling thread's current GPU (torch.cuda.set_device); nothing for the CPU.
void set_current_device(const c10::Device& device);

// Starts libtorch's CUDA state in this process, as its first CUDA tensor does (libtorch 2.x sets
// the caching allocator up only then, and refuses its statistics before), so that they can be read
// before anything was allocated; nothing without a GPU.
void initialize_cuda();

// Gives the GPU memory torch's caching allocator holds unused back to the driver
// (torch.cuda.empty_cache, what Accelerate's free_memory ends with); nothing on CPU.
void release_device_cache();

}  // namespace acc
