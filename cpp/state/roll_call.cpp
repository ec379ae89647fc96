#include "state/roll_call.h"

#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace acc {
namespace {

const std::string kSize = "accelerate/roll_call/world_size";
const std::string kCount = "accelerate/roll_call/count";
const std::string kProblem = "accelerate/roll_call/problem";

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

// Posts the mismatch for every process to see, then fails with it here.
[[noreturn]] void post(c10d::Store& store, const std::string& problem) {
  store.set(kProblem, bytes(problem));
  fail(Status::InvalidArgument, problem);
}

void fail_if_posted(c10d::Store& store) {
  if (!store.check({kProblem})) return;
  const auto text = store.get(kProblem);
  fail(Status::InvalidArgument, std::string(text.begin(), text.end()));
}

}  // namespace

void roll_call(c10d::Store& store, int64_t rank, int64_t world, std::chrono::milliseconds timeout) {
  const std::string launch_hint =
      "; every machine's launcher must be given the same --num_processes and --num_machines";
  if (rank == 0) store.set(kSize, bytes(std::to_string(world)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (rank != 0) {
    // Process 0 may start later than this one: wait for its answer, watching for a posted problem.
    while (!store.check({kSize})) {
      fail_if_posted(store);
      if (std::chrono::steady_clock::now() > deadline) return;  // the group's own rendezvous says what is missing
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto size = store.get(kSize);
    const std::string theirs(size.begin(), size.end());
    if (theirs != std::to_string(world))
      post(store, "process " + std::to_string(rank) + " was started for a job of " + std::to_string(world) +
                      " processes, but process 0's job has " + theirs + launch_hint);
  }
  if (rank >= world)
    post(store, "process rank " + std::to_string(rank) + " is outside a job of " + std::to_string(world) + launch_hint);
  if (store.add("accelerate/roll_call/rank_" + std::to_string(rank), 1) > 1)
    post(store, "process rank " + std::to_string(rank) +
                    " was started twice: two machines were given the same --machine_rank (each needs its own, 0 to "
                    "--num_machines - 1)");
  store.add(kCount, 1);
  while (store.add(kCount, 0) < world) {
    fail_if_posted(store);
    if (std::chrono::steady_clock::now() > deadline) return;  // the group's own rendezvous says what is missing
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fail_if_posted(store);
}

}  // namespace acc
