// Waits for a rendezvous server to accept TCP connections. libtorch 2.x's TCPStore client retries
// with exponential back-off whose sleeps ignore its deadline: a peer that never starts cost up to
// 2.5 times the timeout. Probing first, in short steps, keeps that wait within the timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace acc {

// True once a TCP connection to host:port succeeds (it is closed at once); false at the deadline,
// with `why` saying what the last attempt met (the host name not resolving, or nothing accepting).
// A name that does not resolve is looked up again each second (a cluster's DNS may learn it late).
bool wait_until_accepting(const std::string& host, uint16_t port, std::chrono::steady_clock::time_point deadline,
                          std::string& why);

}  // namespace acc
