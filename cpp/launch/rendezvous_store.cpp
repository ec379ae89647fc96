#include "launch/rendezvous_store.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>

#include "common/compat.h"
#include "common/error.h"

namespace acc {

RendezvousStore host_rendezvous_store(int port, int64_t processes) {
  RendezvousStore hosted;
  try {
    // The timeout bounds only the launcher's own requests; the processes wait with theirs.
    hosted.store = compat::make_tcp_store("127.0.0.1", static_cast<uint16_t>(port), /*is_server=*/true,
                                          static_cast<size_t>(processes), std::chrono::seconds(60));
  } catch (const std::exception& e) {
    fail(Status::Io, "cannot host the rendezvous store on port ", port, ": ", e.what());
  }
  hosted.port = c10::static_intrusive_pointer_cast<c10d::TCPStore>(hosted.store)->getPort();
  return hosted;
}

}  // namespace acc
