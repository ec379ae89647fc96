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

// Whether what accepts at host:port sends bytes before it is asked anything, within `wait` of the
// connection (an SSH server's greeting): a rendezvous store never does. libtorch 1.13's store client
// reads such bytes on a thread of its own as a length, and the exception that follows ends the
// process; so such an address is refused before a store client connects to it.
bool speaks_first(const std::string& host, uint16_t port, std::chrono::milliseconds wait);

}  // namespace acc
