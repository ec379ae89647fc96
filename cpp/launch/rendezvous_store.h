// The job's rendezvous store, hosted by the launcher of machine 0 as torchrun's agent hosts it: bound
// before any process starts, so no port is picked, released and then taken by another program before
// process 0 binds it; it lives across the group's restarts, whose keys the processes separate by
// attempt (ProcessEnv::agent_store_prefix).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>

namespace acc {

struct RendezvousStore {
  c10::intrusive_ptr<c10d::Store> store;
  int port = 0;  // the one bound
};

// Port 0 binds a free one. A port that cannot be bound is an error naming it.
RendezvousStore host_rendezvous_store(int port, int64_t processes);

}  // namespace acc
