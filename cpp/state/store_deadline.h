// Deadlines for the rendezvous store's client. libtorch's TCPStore client reads the server's answers
// with blocking recv() and no deadline (1.13's add, get after a wait, compare-set; 2.x's constructor
// pings the same way): an address that accepts connections but never answers — a stopped process 0
// or launcher (the kernel still accepts for it), another service waiting for its own protocol's
// request — held the process for ever, whatever its timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>

namespace acc {

// Runs `connect` (which makes a TCPStore whose client connects to `port`) with a deadline of
// `timeout`: past it, the sockets it opened to that port are shut down, so that a read blocked on
// them fails (Timeout, naming the store's address `where`). The store it returns has `timeout` as
// its client sockets' receive and send timeouts, so that each later request fails the same way
// rather than waits for ever (libtorch's own waits for keys poll within their timeouts first).
c10::intrusive_ptr<c10d::Store> connect_with_deadline(const std::function<c10::intrusive_ptr<c10d::Store>()>& connect,
                                                      uint16_t port, std::chrono::milliseconds timeout,
                                                      const std::string& where);

}  // namespace acc
