#include "state/store_deadline.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.h"

namespace acc {
namespace {

// This process's sockets connected to a peer's `port`: the store clients' ends (a server's accepted
// socket has the client's ephemeral port as its peer's).
std::set<int> sockets_to_port(uint16_t port) {
  std::set<int> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) continue;  // not a connected socket
    uint16_t peer_port = 0;
    if (peer.ss_family == AF_INET)
      peer_port = ntohs(reinterpret_cast<const sockaddr_in*>(&peer)->sin_port);
    else if (peer.ss_family == AF_INET6)
      peer_port = ntohs(reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_port);
    if (peer_port == port) found.insert(fd);
  }
  return found;
}

std::set<int> opened_since(const std::set<int>& before, uint16_t port) {
  std::set<int> opened = sockets_to_port(port);
  for (int fd : before) opened.erase(fd);
  return opened;
}

void set_io_timeouts(int fd, std::chrono::milliseconds timeout) {
  timeval value{};
  value.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  value.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  // Best effort: a socket that refuses them only keeps libtorch's own behaviour.
  static_cast<void>(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, sizeof value));
  static_cast<void>(::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, sizeof value));
}

// Shuts the sockets down (so that a read blocked on them returns) unless finish() comes first.
class ConnectWatchdog {
 public:
  ConnectWatchdog(std::set<int> before, uint16_t port, std::chrono::milliseconds timeout)
      : thread_([this, before = std::move(before), port, timeout] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (finished_changed_.wait_for(lock, timeout, [this] { return finished_; })) return;
          expired_ = true;
          for (int fd : opened_since(before, port)) ::shutdown(fd, SHUT_RDWR);
        }) {}
  ConnectWatchdog(const ConnectWatchdog&) = delete;
  ConnectWatchdog& operator=(const ConnectWatchdog&) = delete;
  ~ConnectWatchdog() { finish(); }

  // Whether the deadline passed first.
  bool finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    finished_changed_.notify_all();
    if (thread_.joinable()) thread_.join();
    return expired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable finished_changed_;
  bool finished_ = false;
  std::atomic<bool> expired_{false};
  std::thread thread_;  // last: started once the members it uses exist
};

[[noreturn]] void fail_unanswered(const std::string& where, std::chrono::milliseconds timeout) {
  fail(Status::Timeout, "the rendezvous store at ", where, " accepted the connection but answered nothing within ",
       std::chrono::duration<double>(timeout).count(),
       " s (is the process that hosts it stopped, or is that port another service's?)");
}

}  // namespace

c10::intrusive_ptr<c10d::Store> connect_with_deadline(const std::function<c10::intrusive_ptr<c10d::Store>()>& connect,
                                                      uint16_t port, std::chrono::milliseconds timeout,
                                                      const std::string& where) {
  const std::set<int> before = sockets_to_port(port);
  c10::intrusive_ptr<c10d::Store> store;
  {
    ConnectWatchdog watchdog(before, port, timeout);
    try {
      store = connect();
    } catch (...) {
      if (watchdog.finish()) fail_unanswered(where, timeout);
      throw;
    }
    // Shut down just as it returned: the store cannot answer any more.
    if (watchdog.finish()) fail_unanswered(where, timeout);
  }
  for (int fd : opened_since(before, port)) set_io_timeouts(fd, timeout);
  return store;
}

}  // namespace acc
