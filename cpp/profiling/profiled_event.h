// One event torch's profiler collected, independent of the libtorch version's event type: an
// operator, a user scope or a device kernel (a span), or a memory allocation or free (an instant).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace acc {

struct ProfiledEvent {
  std::string name;
  uint64_t start_ns = 0, duration_ns = 0;  // start: the profiler's clock (since the epoch)
  uint64_t thread = 0;
  bool on_device = false;  // a kernel or copy on the accelerator, not a CPU-side operator
  int device_index = -1;
  bool is_memory = false;  // an allocation (bytes > 0) or a free (bytes < 0)
  int64_t bytes = 0;
  std::vector<std::vector<int64_t>> shapes;  // with record_shapes
  uint64_t flops = 0;                        // with with_flops, for the operators torch estimates
  int64_t sequence_nr = -1;                  // links a forward operator and its backward
  std::vector<std::string> stack;            // with with_stack: TorchScript source locations
  std::vector<std::string> module_hierarchy;  // with with_modules: the TorchScript modules it runs in
};

}  // namespace acc
