// The settings of PyTorch's PowerSGD DDP communication hooks (parallel/power_sgd.h): PowerSGDState's
// keyword arguments, which Accelerate passes as DistributedDataParallelKwargs(comm_state_option=...).
#pragma once

#include <cstdint>
#include <string>

namespace acc {

// PowerSGDState's settings (Accelerate's comm_state_option), PyTorch's defaults.
struct PowerSgdSettings {
  int64_t matrix_approximation_rank = 1;
  int64_t start_iter = 1000;  // start_powerSGD_iter: plain averaging until then
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;  // P and Q carried over from the previous step
  double orthogonalization_epsilon = 0;
  uint32_t random_seed = 0;
  bool batch_tensors_with_same_shape = false;
};

// The settings a JSON object of PowerSGDState's keyword arguments gives, e.g.
// {"matrix_approximation_rank": 2, "start_powerSGD_iter": 10}; an unknown key or a value PyTorch
// would refuse (or choke on) is InvalidArgument naming it.
PowerSgdSettings parse_power_sgd_settings(const std::string& json_text);

}  // namespace acc
