#include "state/port_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <thread>

namespace acc {
namespace {

using Clock = std::chrono::steady_clock;

// A (non-blocking) socket connected to `address`, waiting at most `wait` for the connect to
// complete; -1 where it does not.
int connect_within(const addrinfo& address, std::chrono::milliseconds wait) {
  const int fd = ::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, address.ai_protocol);
  if (fd < 0) return -1;
  bool ok = ::connect(fd, address.ai_addr, address.ai_addrlen) == 0;
  if (!ok && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) == 1) {
      int error = 0;
      socklen_t length = sizeof error;
      ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
  }
  if (ok) return fd;
  ::close(fd);
  return -1;
}

using Addresses = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

// The TCP addresses of host:port; `error` is getaddrinfo's (0: found).
Addresses resolve(const std::string& host, uint16_t port, int& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  error = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  return Addresses(error == 0 ? found : nullptr, &::freeaddrinfo);
}

}  // namespace

bool speaks_first(const std::string& host, uint16_t port, std::chrono::milliseconds wait) {
  int error = 0;
  const Addresses addresses = resolve(host, port, error);
  for (const addrinfo* a = addresses.get(); a; a = a->ai_next) {
    const int fd = connect_within(*a, std::chrono::milliseconds(1000));
    if (fd < 0) continue;
    pollfd p{fd, POLLIN, 0};
    char byte = 0;
    // Bytes waiting (not the end of a connection closed at once, which the store client reports itself).
    const bool spoke = ::poll(&p, 1, static_cast<int>(wait.count())) == 1 && ::recv(fd, &byte, 1, MSG_PEEK) == 1;
    ::close(fd);
    return spoke;
  }
  return false;
}

bool wait_until_accepting(const std::string& host, uint16_t port, Clock::time_point deadline, std::string& why) {
  constexpr auto kStep = std::chrono::milliseconds(50);
  constexpr auto kLookupStep = std::chrono::milliseconds(1000);
  while (true) {
    int lookup = 0;
    const Addresses addresses = resolve(host, port, lookup);
    if (lookup == 0) {
      why = "nothing accepted a connection there";
      for (const addrinfo* a = addresses.get(); a; a = a->ai_next) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        const int fd =
            connect_within(*a, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(1000)));
        if (fd >= 0) {
          ::close(fd);
          return true;
        }
      }
    } else {
      why = "the host name '" + host + "' does not resolve (" + ::gai_strerror(lookup) + ")";
    }
    const auto step = lookup == 0 ? kStep : kLookupStep;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(step, deadline - now));
  }
}

}  // namespace acc
