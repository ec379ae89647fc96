#include "state/roll_call.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <thread>
#include <vector>

#include "common/error.h"

namespace acc {
namespace {

const std::string kPrefix = "accelerate/roll_call/";

std::string rank_key(int64_t rank) { return kPrefix + "rank_" + std::to_string(rank); }
std::string answer_key(int64_t rank) { return kPrefix + "answer_" + std::to_string(rank); }
const std::string kMistake = kPrefix + "mistake";

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// "<world> <host> <pid>": what a process was started for, and which process it is.
std::string answer(int64_t world) {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  return std::to_string(world) + " " + host + " " + std::to_string(::getpid());
}

struct Answer {
  int64_t world = 0;
  std::string who;  // "host pid"
};

Answer parse(const std::string& answer) {
  Answer parsed;
  std::istringstream in(answer);
  std::string host, pid;
  in >> parsed.world >> host >> pid;
  parsed.who = host + " pid " + pid;
  return parsed;
}

// A world size unlike another process's. Where ours is the smaller, processes started for the
// larger one wait for processes that will never come: the message is posted for them to fail with.
// (A process started for more processes than the job has fails alone; the others train.)
[[noreturn]] void report_world_mismatch(c10d::Store& store, const std::string& where, int64_t other_rank,
                                        const Answer& other, int64_t rank, int64_t world) {
  std::ostringstream m;
  m << "rendezvous at " << where << ": process " << other_rank << " (" << other.who << ") was started as one of "
    << other.world << " processes and process " << rank << " as one of " << world
    << ": every process of a job needs the same number of processes (WORLD_SIZE, --num_processes)";
  if (world < other.world) {
    try {
      store.set(kMistake, bytes(m.str()));
    } catch (...) {
    }
  }
  fail(Status::Distributed, m.str());
}

// Where processes did not answer by the deadline: a world size unlike ours among those that did,
// else which did not.
[[noreturn]] void report_missing(c10d::Store& store, const std::string& where, int64_t rank, int64_t world,
                                 std::chrono::milliseconds timeout) {
  std::vector<int64_t> missing;
  for (int64_t r = 0; r < world; ++r) {
    if (!store.check({answer_key(r)})) {
      missing.push_back(r);
      continue;
    }
    const Answer other = parse(text(store.get(answer_key(r))));
    if (other.world != world) report_world_mismatch(store, where, r, other, rank, world);
  }
  std::ostringstream m;
  m << "rendezvous of " << world << " processes at " << where << " timed out after "
    << std::chrono::duration<double>(timeout).count() << " s: process";
  if (missing.size() > 1) m << "es";
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 8); ++i) m << (i ? ", " : " ") << missing[i];
  if (missing.size() > 8) m << " and " << missing.size() - 8 << " more";
  m << " did not join (did every process start, with the same MASTER_ADDR and "
    << "MASTER_PORT?)";
  fail(Status::Timeout, m.str());
}

}  // namespace

void roll_call(c10d::Store& store, int64_t rank, int64_t world, std::chrono::milliseconds timeout,
               const std::string& where) {
  // The first process of a rank to answer takes it; a second one learns so from the count and
  // fails alone (the others can train).
  if (store.add(rank_key(rank), 1) != 1)
    fail(Status::Distributed, "rendezvous at ", where, ": two processes were started as process ", rank, " (RANK ",
         rank, "): every process of a job needs a rank of its own");
  store.set(answer_key(rank), bytes(answer(world)));

  std::vector<std::string> keys;
  for (int64_t r = 0; r < world; ++r) keys.push_back(answer_key(r));
  // Polled rather than waited for: a wait cannot also watch for a mistake posted meanwhile, and
  // libtorch's client-side wait may run past its timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store.check(keys)) {
    if (store.check({kMistake})) fail(Status::Distributed, text(store.get(kMistake)));
    if (std::chrono::steady_clock::now() >= deadline) report_missing(store, where, rank, world, timeout);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  const Answer first = parse(text(store.get(answer_key(0))));
  if (first.world != world) report_world_mismatch(store, where, 0, first, rank, world);
}

}  // namespace acc
