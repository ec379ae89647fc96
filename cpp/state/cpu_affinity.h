// Accelerate's enable_cpu_affinity (ACCELERATE_CPU_AFFINITY): a process training on a GPU is pinned
// to the CPU cores local to that GPU (its NUMA node), as Accelerate's set_numa_affinity does with
// NVML. Here the cores come from the kernel's own record of the GPU's PCI device
// (/sys/bus/pci/devices/<bus id>/local_cpulist). On the CPU there is no GPU to be near: nothing
// changes, as in Accelerate.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace acc {

// The kernel's CPU list format ("0-3,8,10-11"); InvalidArgument naming `what` when malformed.
std::vector<int> parse_cpu_list(const std::string& text, const std::string& what);

// Where the kernel describes a PCI device: /sys/bus/pci/devices/DDDD:BB:DD.0.
std::string pci_device_path(int domain, int bus, int device);

// Pins this process to the cores local to `device` when it is a GPU. Returns the cores set (empty:
// nothing changed, for a CPU device). A GPU whose cores the kernel does not report is a warning on
// stderr, not an error (the job runs unpinned).
std::vector<int> pin_to_device_cores(const c10::Device& device);

// pin_to_device_cores when ACCELERATE_CPU_AFFINITY (set by the launcher's --enable_cpu_affinity)
// asks for it; with ACCELERATE_DEBUG_MODE, says how many cores process `local_rank` got.
void apply_cpu_affinity_setting(const c10::Device& device, int64_t local_rank);

}  // namespace acc
