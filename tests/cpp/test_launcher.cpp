// accelerate-launch: environment of the processes, exit codes, teardown, signals, restarts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "launch/launcher.h"

namespace {

acc::LaunchConfig shell(int processes, const std::string& script) {
  acc::LaunchConfig c;
  c.num_processes = processes;
  c.kill_timeout_seconds = 2;
  c.command = {"sh", "-c", script};
  return c;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string temp_file(const std::string& name) { return "/tmp/acc_launcher_" + std::to_string(getpid()) + "_" + name; }

}  // namespace

TEST(Launcher, SetsTorchrunAndAccelerateVariables) {
  acc::LaunchConfig c = shell(3, "");
  c.mixed_precision = "bf16";
  c.gradient_accumulation_steps = 4;
  c.cpu = true;
  c.num_cpu_threads_per_process = 2;
  c.gpu_ids = "0,1";
  auto env = acc::launch_environment(c, 2, 12345, 0);
  EXPECT_EQ(env["RANK"], "2");
  EXPECT_EQ(env["WORLD_SIZE"], "3");
  EXPECT_EQ(env["LOCAL_RANK"], "2");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "12345");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
  EXPECT_EQ(env["ACCELERATE_MIXED_PRECISION"], "bf16");
  EXPECT_EQ(env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"], "4");
  EXPECT_EQ(env["ACCELERATE_USE_CPU"], "true");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "2");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1");
  // A second machine's ranks follow the first machine's.
  acc::LaunchConfig multi = shell(4, "");
  multi.num_machines = 2;
  multi.machine_rank = 1;
  multi.main_process_port = 29501;
  EXPECT_EQ(acc::launch_environment(multi, 1, 29501, 0)["RANK"], "3");
}

// Machine 0's launcher hosts the rendezvous store, as torchrun's agent does: it listens on the port
// the processes are given (a free one when none is asked for) before any of them starts, so no port
// is picked, released and taken by another program before process 0 could bind it.
TEST(Launcher, HostsTheRendezvousStoreBeforeAnyProcessStarts) {
  acc::LaunchConfig c = shell(2, "");
  c.command = {"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/$MASTER_PORT && [ \"$TORCHELASTIC_USE_AGENT_STORE\" = True ]"};
  EXPECT_EQ(acc::run_launch(c), 0);
}

TEST(Launcher, EveryProcessRunsWithItsRank) {
  const std::string out = temp_file("ranks");
  ASSERT_EQ(acc::run_launch(shell(3, "echo $RANK/$WORLD_SIZE >> " + out)), 0);
  std::ifstream in(out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"0/3", "1/3", "2/3"}));
  std::remove(out.c_str());
}

TEST(Launcher, AFailingProcessStopsTheOthersAndGivesItsCode) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(acc::run_launch(shell(3, "if [ $RANK = 1 ]; then exit 7; fi; sleep 60")), 7);
  EXPECT_LT(seconds_since(start), 10.0);
  // A process that ignores SIGTERM is killed after the kill timeout.
  EXPECT_EQ(acc::run_launch(shell(2, "trap '' TERM; if [ $RANK = 0 ]; then exit 3; fi; sleep 60")), 3);
  EXPECT_LT(seconds_since(start), 20.0);
  int status = 0;
  EXPECT_EQ(waitpid(-1, &status, WNOHANG), -1);  // nothing left to reap: no zombies
}

TEST(Launcher, ASignalIsForwardedAndEndsTheJob) {
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    kill(getpid(), SIGTERM);
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(acc::run_launch(shell(2, "sleep 60")), 128 + SIGTERM);
  EXPECT_LT(seconds_since(start), 10.0);
  sender.join();
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
}

TEST(Launcher, RestartsTheGroupAfterAFailure) {
  const std::string marker = temp_file("restart");
  std::remove(marker.c_str());
  // The first attempt fails; the second (TORCHELASTIC_RESTART_COUNT=1) succeeds.
  acc::LaunchConfig c = shell(2, "echo $TORCHELASTIC_RESTART_COUNT >> " + marker +
                                     "; [ $TORCHELASTIC_RESTART_COUNT -ge 1 ] || exit 5");
  c.max_restarts = 2;
  EXPECT_EQ(acc::run_launch(c), 0);
  c.max_restarts = 0;
  c.command = {"sh", "-c", "exit 5"};
  EXPECT_EQ(acc::run_launch(c), 5);
  std::remove(marker.c_str());
}

TEST(Launcher, UsageErrorsSayWhatToFix) {
  auto message = [](acc::LaunchConfig c) {
    try {
      acc::validate_launch_config(c);
    } catch (const acc::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  acc::LaunchConfig c = shell(3, "true");
  c.num_machines = 2;
  EXPECT_NE(message(c).find("multiple of --num_machines"), std::string::npos);
  c = shell(2, "true");
  c.command.clear();
  EXPECT_NE(message(c).find("no program to launch"), std::string::npos);
  c = shell(2, "true");
  c.machine_rank = 3;
  EXPECT_NE(message(c).find("--machine_rank"), std::string::npos);
  c = shell(4, "true");
  c.num_machines = 2;
  EXPECT_NE(message(c).find("needs --main_process_port"), std::string::npos);
  // The program: exit code 2 for usage errors, 127 for a program that does not exist.
  const char* launcher = std::getenv("ACC_LAUNCHER");
  if (!launcher) GTEST_SKIP() << "ACC_LAUNCHER is not set";
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(launcher) + " --num_processes 0 true 2>/dev/null").c_str())), 2);
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(launcher) + " --bogus_flag true 2>/dev/null").c_str())), 2);
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(launcher) + " /nonexistent/program 2>/dev/null").c_str())), 127);
}
