// Before a job's process group forms, every process answers a roll call on the rendezvous store
// with its rank and the number of processes it was started for. A job started by hand with two
// processes given one RANK, or with WORLD_SIZE unlike another process's, then fails on every
// process that sees it, saying so; otherwise Gloo fails with its address sizes ("136 vs 68") or a
// second process of one rank waits for ever.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace acc {

// Announces (rank, world); process 0 waits until processes 0..world-1 have answered (or `timeout`
// passes), compares their world sizes with its own and posts its verdict, which the others wait
// for. `where` names the rendezvous in messages. Fails with Distributed for a rank answered twice
// (that process alone) or world sizes that differ, with Timeout naming the processes that did not
// answer.
void roll_call(c10d::Store& store, int64_t rank, int64_t world, std::chrono::milliseconds timeout,
               const std::string& where);

}  // namespace acc
