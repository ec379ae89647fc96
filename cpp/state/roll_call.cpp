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
const std::string kVerdict = kPrefix + "verdict";  // process 0's: "ok", or a status letter and a message
const std::string kVerdictRead = kPrefix + "verdict_read";
const std::string kMistake = kPrefix + "mistake";  // posted by a process that process 0 waits for
// More processes of one rank than any job starts by mistake: a count past it is no store's answer.
constexpr int64_t kMostTakers = 1 << 20;

std::string rank_key(int64_t rank) { return kPrefix + "rank_" + std::to_string(rank); }
std::string answer_key(int64_t rank) { return kPrefix + "answer_" + std::to_string(rank); }

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
  std::string who;  // "host pid N"
};

Answer parse(const std::string& answer) {
  Answer parsed;
  std::istringstream in(answer);
  std::string host, pid;
  in >> parsed.world >> host >> pid;
  parsed.who = host + " pid " + pid;
  return parsed;
}

std::string world_mismatch(const std::string& where, const Answer& first, int64_t rank, int64_t world) {
  std::ostringstream m;
  m << "rendezvous at " << where << ": process 0 (" << first.who << ") was started as one of " << first.world
    << " processes and process " << rank << " as one of " << world
    << ": every process of a job needs the same number of processes (WORLD_SIZE, --num_processes)";
  return m.str();
}

// Polls `done` until it holds or `deadline` passes (a wait could not also watch for other keys, and
// libtorch's client-side wait may overrun its timeout).
template <typename Done>
bool poll_until(std::chrono::steady_clock::time_point deadline, Done done) {
  auto pause = std::chrono::milliseconds(1);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return true;
}

// Process 0's verdict once processes 0..world-1 answered, or one of them posted a mistake, or at the
// deadline: "ok", else "D" or "T" (Distributed, Timeout) and the message. `missing`: how many of the
// others had not answered.
std::string verdict(c10d::Store& store, int64_t world, std::chrono::milliseconds timeout, const std::string& where,
                    int64_t& missing_count) {
  std::vector<std::string> keys;
  for (int64_t r = 0; r < world; ++r) keys.push_back(answer_key(r));
  bool all = false;
  poll_until(std::chrono::steady_clock::now() + timeout,
             [&] { return (all = store.check(keys)) || store.check({kMistake}); });
  // Each answer read once, here alone: a mismatch whose process had not posted it yet is found too.
  const Answer mine = parse(text(store.get(answer_key(0))));
  std::vector<int64_t> missing;
  std::string mismatch;
  for (int64_t r = 1; r < world; ++r) {
    if (!all && !store.check({answer_key(r)})) {
      missing.push_back(r);
      continue;
    }
    const Answer other = parse(text(store.get(answer_key(r))));
    if (other.world != world && mismatch.empty()) mismatch = "D" + world_mismatch(where, mine, r, other.world);
  }
  missing_count = static_cast<int64_t>(missing.size());
  if (store.check({kMistake})) return text(store.get(kMistake));
  if (!mismatch.empty()) return mismatch;
  if (missing.empty()) return "ok";
  std::ostringstream m;
  m << "rendezvous of " << world << " processes at " << where << " timed out after "
    << std::chrono::duration<double>(timeout).count() << " s: process" << (missing.size() > 1 ? "es" : "");
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 8); ++i) m << (i ? ", " : " ") << missing[i];
  if (missing.size() > 8) m << " and " << missing.size() - 8 << " more";
  m << " did not join (did every process start, with the same MASTER_ADDR and MASTER_PORT?)";
  return "T" + m.str();
}

// Fails this process, started for `world` processes where process 0 was for `first.world`. A
// process that process 0 waits for (a rank below its world size) posts the mismatch, so that
// process 0 stops waiting; one started for more processes than the job has fails alone. `answered`:
// whether this process answered the roll call (process 0 then waits for it to read the verdict,
// which it knows already).
[[noreturn]] void fail_as_mismatched(c10d::Store& store, const std::string& where, const Answer& first, int64_t rank,
                                     int64_t world, bool answered) {
  const std::string message = world_mismatch(where, first, rank, world);
  if (rank < first.world) {
    store.set(kMistake, bytes("D" + message));
    if (answered) store.add(kVerdictRead, 1);
  }
  fail(Status::Distributed, message);
}

// Fails this process, whose rank another process took. Processes started for different numbers of
// processes (one machine's --num_processes) are given ranks that collide: that cause is named, and
// process 0 stops waiting for this one; else two processes were given one rank.
[[noreturn]] void fail_as_taken(c10d::Store& store, int64_t rank, int64_t world, std::chrono::milliseconds timeout,
                                const std::string& where) {
  const auto soon = std::chrono::steady_clock::now() + std::min(timeout, std::chrono::milliseconds(5000));
  if (poll_until(soon, [&] { return store.check({answer_key(0)}); })) {
    const Answer first = parse(text(store.get(answer_key(0))));
    if (first.world != world) fail_as_mismatched(store, where, first, rank, world, /*answered=*/false);
    // Or the process that took this rank was started for another number (it tells process 0).
    if (rank != 0 && poll_until(soon, [&] { return store.check({answer_key(rank)}); })) {
      const Answer holder = parse(text(store.get(answer_key(rank))));
      if (holder.world != world) fail(Status::Distributed, world_mismatch(where, first, rank, holder.world));
    }
  }
  fail(Status::Distributed, "rendezvous at ", where, ": two processes were started as process ", rank, " (RANK ", rank,
       "; or an earlier group of this job is still held by process 0): every process needs a rank of its own");
}

[[noreturn]] void fail_with_verdict(const std::string& verdict) {
  fail(verdict[0] == 'T' ? Status::Timeout : Status::Distributed, verdict.substr(1));
}

}  // namespace

void roll_call(c10d::Store& store, int64_t rank, int64_t world, std::chrono::milliseconds timeout,
               const std::string& where) {
  // The first process of a rank to answer takes it; a second one learns so from the count and
  // fails alone (the others can train).
  const int64_t takers = store.add(rank_key(rank), 1);
  // A count no store gives: what answered at that address is something else (a web server).
  if (takers < 1 || takers > kMostTakers)
    fail(Status::Distributed, "rendezvous at ", where, ": what answers there is no rendezvous store (it counted ",
         takers, " processes of rank ", rank, "): is MASTER_ADDR:MASTER_PORT (--main_process_ip, ",
         "--main_process_port) another program's address?");
  if (takers != 1) fail_as_taken(store, rank, world, timeout, where);
  store.set(answer_key(rank), bytes(answer(world)));

  if (rank == 0) {
    // Process 0 alone reads every answer (the others wait for one key: the store's load stays linear).
    int64_t missing = 0;
    const std::string v = verdict(store, world, timeout, where, missing);
    store.set(kVerdict, bytes(v));
    if (v == "ok") return;
    // Process 0 may host the store: it stays until the others read the verdict (or a while), so
    // that they fail with it rather than with a lost connection: after a timeout those that
    // answered, after a mistake every process, as one of the job may be starting still.
    const int64_t readers = v[0] == 'T' ? world - 1 - missing : world - 1;
    poll_until(std::chrono::steady_clock::now() + std::min(timeout, std::chrono::milliseconds(5000)),
               [&] { return store.add(kVerdictRead, 0) >= readers; });
    fail_with_verdict(v);
  }
  // Every other process compares its world size with process 0's as soon as that has answered.
  const auto deadline = std::chrono::steady_clock::now() + 2 * timeout;  // process 0 may start later
  if (!poll_until(deadline, [&] { return store.check({answer_key(0)}); }))
    fail(Status::Timeout, "rendezvous of ", world, " processes at ", where, ": process 0 did not answer the roll ",
         "call within ", std::chrono::duration<double>(2 * timeout).count(), " s");
  const Answer first = parse(text(store.get(answer_key(0))));
  if (first.world != world) fail_as_mismatched(store, where, first, rank, world, /*answered=*/true);
  if (!poll_until(deadline, [&] { return store.check({kVerdict}); }))
    fail(Status::Timeout, "rendezvous of ", world, " processes at ", where, ": process 0 gave no verdict on the ",
         "roll call within ", std::chrono::duration<double>(2 * timeout).count(), " s");
  const std::string v = text(store.get(kVerdict));
  store.add(kVerdictRead, 1);
  if (v != "ok") fail_with_verdict(v);
}

}  // namespace acc
