// The roll call before a process group forms. Gloo's and NCCL's rendezvous wait for every rank they
// expect: a job whose machines were launched with other sizes (--num_processes, --num_machines), or
// a rank started twice (two machines given the same --machine_rank), would wait out the whole
// timeout (30 minutes by default) and then blame the port. Here each process answers on the store
// with its rank and job size; a process that finds a mismatch posts it, and every process waiting
// fails at once with that message.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>

namespace acc {

// Returns once every rank of `world` has answered alike; fails (InvalidArgument) naming the mismatch
// that any process found, or (Timeout) when ranks are still missing after `timeout`.
void roll_call(c10d::Store& store, int64_t rank, int64_t world, std::chrono::milliseconds timeout);

}  // namespace acc
