// A process group of this one process (rank 0 of 1 on a free local port): the real engines and
// collectives, each of one process, for tests that reach into the C++ core.
#pragma once

#include <chrono>
#include <memory>

#include "../free_port.h"
#include "state/distributed.h"
#include "state/process_env.h"

namespace acc_test {

// Throws what the process group's constructor throws.
inline std::shared_ptr<acc::Distributed> group_of_one(const c10::Device& device, acc::Backend backend,
                                                      std::chrono::seconds timeout = std::chrono::seconds(120)) {
  acc::ProcessEnv env;
  env.rank = 0;
  env.world_size = 1;
  env.local_rank = 0;
  env.local_world_size = 1;
  env.master_addr = "127.0.0.1";
  env.master_port = free_port();
  return std::make_shared<acc::Distributed>(env, device, backend, timeout);
}

}  // namespace acc_test
