// Collectives::agree on two real processes (forked, Gloo on a local port): a step whose own
// collective timed out on a stalled peer fails with that collective's error at once, instead of
// waiting a second timeout to share the outcome and reporting that wait instead (found by a hunt: a
// peer stalled inside save_state's unit gathers was reported after twice the timeout, as
// "save_state (writing) (the call)").
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "../free_port.h"
#include "common/error.h"
#include "ops/collectives.h"
#include "state/distributed.h"
#include "state/process_env.h"

namespace {

// Runs `body(collectives)` as rank `rank` of 2 in a forked child; the child's exit code is body's.
pid_t spawn_rank(int rank, int port, int (*body)(acc::Collectives&, int)) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 70;
  try {
    acc::ProcessEnv env;
    env.rank = env.local_rank = rank;
    env.world_size = env.local_world_size = 2;
    env.master_port = port;
    acc::Collectives collectives(std::make_shared<acc::Distributed>(env, c10::Device(c10::kCPU), acc::Backend::Gloo,
                                                                    std::chrono::seconds(2)));
    code = body(collectives, rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
  }
  std::fflush(stdout);
  ::_exit(code);  // the group is broken: no teardown to wait for
}

int stalled_peer(acc::Collectives& collectives, int rank) {
  try {
    collectives.agree("writing", [&] {
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::seconds(7));  // stalls past rank 0's timeouts
        ::_exit(0);
      }
      (void)collectives.gather_object("x", "the unit gather");
    });
  } catch (const acc::Error& e) {
    const std::string message = e.what();
    std::printf("rank 0: %s\n", message.c_str());
    if (e.status() != acc::Status::Timeout) return 2;
    if (message.find("collective 'the unit gather") == std::string::npos) return 3;
    return 0;
  }
  return 1;
}

}  // namespace

TEST(Agree, AStepWhoseCollectiveTimedOutFailsWithItsOwnErrorAtOnce) {
  const int port = acc_test::free_port();
  ASSERT_NE(port, 0);
  const auto started = std::chrono::steady_clock::now();
  const pid_t rank0 = spawn_rank(0, port, stalled_peer);
  const pid_t rank1 = spawn_rank(1, port, stalled_peer);
  int status0 = 0, status1 = 0;
  ASSERT_EQ(::waitpid(rank0, &status0, 0), rank0);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ::kill(rank1, SIGKILL);
  ASSERT_EQ(::waitpid(rank1, &status1, 0), rank1);
  ASSERT_TRUE(WIFEXITED(status0)) << "rank 0 ended by a signal";
  EXPECT_EQ(WEXITSTATUS(status0), 0) << "1: no error; 2: not a timeout; 3: the inner collective not named";
  std::printf("rank 0 failed after %.1f s (timeout 2 s)\n", waited);
}
