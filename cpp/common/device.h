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

// Seeds torch's CPU generator and every GPU's (acc_set_seed, the accelerator's seed option).
void set_seed(uint64_t seed);

// torch.get_rng_state() / torch.set_rng_state(): the global CPU generator's state as a uint8
// tensor. A state of another dtype, shape or size is InvalidArgument and changes nothing.
at::Tensor global_random_state();
void set_global_random_state(const at::Tensor& state);

// Gives the GPU memory torch's caching allocator holds unused back to the driver
// (torch.cuda.empty_cache, what Accelerate's free_memory ends with); nothing on CPU.
void release_device_cache();

}  // namespace acc
