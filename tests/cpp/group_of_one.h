// A process group of this one process (rank 0 of 1 on a free local port): the real engines and
// collectives, each of one process, for tests that reach into the C++ core.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "state/distributed.h"
#include "state/process_env.h"

namespace acc_test {

// A TCP port nothing listens on right now (the kernel's choice); 0 if none could be had.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

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
