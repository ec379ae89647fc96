// accelerate-launch: environment of the processes, exit codes, teardown, signals, restarts.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "launch/cpu_threads.h"
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
  EXPECT_EQ(env["ROLE_NAME"], "default");  // torchrun's, with --role's default
  EXPECT_EQ(env["ROLE_RANK"], "2");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "3");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "none");
  EXPECT_EQ(env.count("TORCHELASTIC_ERROR_FILE"), 0u);  // only with a log folder
  EXPECT_EQ(env.count("ACCELERATE_CPU_AFFINITY"), 0u);
  c.cpu_affinity = true;  // --enable_cpu_affinity, or the config file's enable_cpu_affinity
  EXPECT_EQ(acc::launch_environment(c, 0, 12345, 0)["ACCELERATE_CPU_AFFINITY"], "1");
  // A second machine's ranks follow the first machine's.
  acc::LaunchConfig multi = shell(4, "");
  multi.num_machines = 2;
  multi.machine_rank = 1;
  multi.main_process_port = 29501;
  EXPECT_EQ(acc::launch_environment(multi, 1, 29501, 0)["RANK"], "3");
}

// OMP_NUM_THREADS is always set, as Accelerate's launcher does: an inherited value is kept; a CPU job
// (--cpu, or a machine without a GPU) shares the physical cores among the machine's processes,
// any other job gets 1.
TEST(Launcher, SetsOmpNumThreadsAsAcceleratesLauncher) {
  const char* inherited = std::getenv("OMP_NUM_THREADS");
  const std::optional<std::string> saved = inherited ? std::optional<std::string>(inherited) : std::nullopt;
  unsetenv("OMP_NUM_THREADS");
  acc::LaunchConfig c = shell(1, "");
  c.cpu = true;
  EXPECT_EQ(acc::launch_environment(c, 0, 1, 0)["OMP_NUM_THREADS"], std::to_string(acc::physical_cores()));
  c.num_processes = 4 * acc::physical_cores();
  EXPECT_EQ(acc::launch_environment(c, 0, 1, 0)["OMP_NUM_THREADS"], "1");
  c = shell(1, "");
  EXPECT_EQ(acc::launch_environment(c, 0, 1, 0)["OMP_NUM_THREADS"],
            acc::machine_has_nvidia_gpu() ? "1" : std::to_string(acc::physical_cores()));
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(acc::launch_environment(c, 0, 1, 0).count("OMP_NUM_THREADS"), 0u) << "the inherited value is kept";
  // 0 or a negative count is no count (libgomp refuses them): the default, as Accelerate recomputes it.
  c.cpu = true;
  for (const char* unusable : {"0", "-1", "many"}) {
    setenv("OMP_NUM_THREADS", unusable, 1);
    EXPECT_EQ(acc::launch_environment(c, 0, 1, 0)["OMP_NUM_THREADS"], std::to_string(acc::physical_cores()))
        << unusable;
  }
  // An MPI launcher's local size is the machine's processes, as Accelerate reads it.
  unsetenv("OMP_NUM_THREADS");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_EQ(acc::launch_environment(c, 0, 1, 0)["OMP_NUM_THREADS"],
            std::to_string(std::max(1, acc::physical_cores() / 2)));
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (saved)
    setenv("OMP_NUM_THREADS", saved->c_str(), 1);
  else
    unsetenv("OMP_NUM_THREADS");
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

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// torchrun's --redirects / --tee / --log_dir: <log_dir>/none_XXXXXX/attempt_<n>/<local_rank>/ holds the
// streams asked for, unprefixed; a redirected stream is not shown, a teed one is shown too.
TEST(Launcher, RedirectsAndTeeWriteEachProcesssLogFiles) {
  namespace fs = std::filesystem;
  const fs::path root = temp_file("logs");
  fs::remove_all(root);
  // The first attempt fails (rank 0, once rank 1's stderr is in its file); the second succeeds.
  acc::LaunchConfig c = shell(2, "echo out$RANK; echo err$RANK >&2; [ -n \"$TORCHELASTIC_ERROR_FILE\" ] || exit 9; "
                                 "[ $TORCHELASTIC_RESTART_COUNT -ge 1 ] || [ $RANK = 1 ] && exit 0; "
                                 "for i in $(seq 500); do [ -s \"${TORCHELASTIC_ERROR_FILE%/0/error.json}/1/stderr.log\" ] && "
                                 "break; sleep 0.01; done; exit 4");
  c.log_dir = root.string();
  c.redirects = "0:1";  // rank 0's stdout: file only
  c.tee = "1:3";        // rank 1's stdout and stderr: file and console
  c.max_restarts = 1;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int code = acc::run_launch(c);
  const std::string console_out = testing::internal::GetCapturedStdout();
  const std::string console_err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(code, 0) << console_err;
  std::vector<fs::path> runs(fs::directory_iterator(root), fs::directory_iterator{});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].filename().string().rfind("none_", 0), 0u) << runs[0];
  EXPECT_NE(console_err.find(runs[0].string()), std::string::npos) << "the launcher says where the logs are";
  for (const char* attempt : {"attempt_0", "attempt_1"}) {
    const fs::path dir = runs[0] / attempt;
    EXPECT_EQ(read_text(dir / "0" / "stdout.log"), "out0\n");
    EXPECT_FALSE(fs::exists(dir / "0" / "stderr.log"));
    EXPECT_EQ(read_text(dir / "1" / "stdout.log"), "out1\n");
    EXPECT_EQ(read_text(dir / "1" / "stderr.log"), "err1\n");
  }
  EXPECT_EQ(console_out.find("out0"), std::string::npos);
  EXPECT_NE(console_out.find("[rank1]: out1\n"), std::string::npos);
  EXPECT_NE(console_err.find("[rank0]: err0\n"), std::string::npos);  // stderr stays stderr
  EXPECT_NE(console_err.find("[rank1]: err1\n"), std::string::npos);
  EXPECT_EQ(console_out.find("err"), std::string::npos);
  fs::remove_all(root);
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
  c = shell(2, "true");
  c.tee = "4";
  EXPECT_NE(message(c).find("--tee 4: each value must be 0 (none), 1 (stdout), 2 (stderr) or 3 (both)"),
            std::string::npos);
  c.tee = "0:1,x:2";
  EXPECT_NE(message(c).find("expected local_rank:value pairs"), std::string::npos);
  c.tee = "0";
  c.redirects = "2:3";
  EXPECT_NE(message(c).find("--redirects 2:3: local rank 2 does not exist"), std::string::npos);
  // A --log_dir that is a file is refused before any process starts.
  c = shell(2, "true");
  const std::string file = temp_file("log_dir_file");
  std::ofstream(file) << "keep";
  c.log_dir = file;
  try {
    acc::run_launch(c);
    ADD_FAILURE() << "a file as --log_dir was accepted";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a file, not a folder"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(file), "keep");
  std::remove(file.c_str());
  // The program: exit code 2 for usage errors, 127 for a program that does not exist.
  const char* launcher = std::getenv("ACC_LAUNCHER");
  if (!launcher) GTEST_SKIP() << "ACC_LAUNCHER is not set";
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(launcher) + " --num_processes 0 true 2>/dev/null").c_str())), 2);
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(launcher) + " --bogus_flag true 2>/dev/null").c_str())), 2);
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(launcher) + " /nonexistent/program 2>/dev/null").c_str())), 127);
}

// A rank that leaves a background process behind (which inherited its output) does not hold the
// job open: once the ranks are gone, their output is relayed and the launcher returns.
TEST(Launcher, ABackgroundProcessDoesNotHoldTheJobOpen) {
  const std::string pids = temp_file("background_pids");
  std::remove(pids.c_str());
  const auto start = std::chrono::steady_clock::now();
  testing::internal::CaptureStdout();
  const int code = acc::run_launch(shell(2, "(sleep 30 & echo $! >> " + pids + "); echo done $RANK"));
  const std::string out = testing::internal::GetCapturedStdout();
  std::ifstream in(pids);
  for (pid_t pid; in >> pid;) kill(pid, SIGKILL);  // the test's own leftovers
  std::remove(pids.c_str());
  EXPECT_EQ(code, 0);
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_NE(out.find("[rank0]: done 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank1]: done 1\n"), std::string::npos) << out;
}

// Each rank has a session of its own, as torchrun starts them: a rank reading the terminal is not
// stopped as a background process group would be, and Ctrl-C reaches the launcher alone. Its process
// group leads that session (the rank's guardian, rank_guardian.h, is the leader), apart from ours.
TEST(Launcher, EachRankHasItsOwnSession) {
  const std::string ours = std::to_string(getsid(0));
  EXPECT_EQ(acc::run_launch(shell(2,
                                  "s=$(cut -d' ' -f6 /proc/$$/stat); [ \"$(cut -d' ' -f5 /proc/$$/stat)\" = $s ] && "
                                  "[ $s != " +
                                      ours + " ]")),
            0);
}

// Ctrl-C while the group is being stopped after a failure ends the job: no restart follows.
TEST(Launcher, ASignalDuringTeardownPreventsTheRestart) {
  const std::string marker = temp_file("teardown_signal");
  std::remove(marker.c_str());
  // Rank 1 ignores SIGTERM and says so; rank 0 then fails.
  acc::LaunchConfig c = shell(2, "if [ $RANK = 1 ]; then trap '' TERM; echo x >> " + marker + "; exec sleep 60; fi; " +
                                     "while [ ! -s " + marker + " ]; do sleep 0.05; done; exit 3");
  c.max_restarts = 2;
  c.kill_timeout_seconds = 3;
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // rank 0 failed; rank 1 ignores SIGTERM
    kill(getpid(), SIGINT);
  });
  testing::internal::CaptureStderr();
  const int code = acc::run_launch(c);
  const std::string err = testing::internal::GetCapturedStderr();
  sender.join();
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  EXPECT_EQ(code, 3);  // the failure that started the teardown
  EXPECT_EQ(err.find("restarting"), std::string::npos) << err;
  std::ifstream in(marker);
  int attempts = 0;
  for (std::string line; std::getline(in, line);) ++attempts;
  EXPECT_EQ(attempts, 1);  // the first attempt only
  std::remove(marker.c_str());
}

// A line longer than the launcher holds back (64 KiB) goes out in pieces as it comes: its head
// shows before another rank's line, which ends it, and its rest follows under the prefix again,
// nothing lost. The launcher keeps no more than that of a rank writing without end of line.
TEST(Launcher, ALongLineGoesOutInPiecesAsItComes) {
  testing::internal::CaptureStdout();
  const int code =
      acc::run_launch(shell(2,
                            "if [ $RANK = 0 ]; then head -c 100000 /dev/zero | tr '\\0' a; sleep 2; echo end; "
                            "else sleep 1; echo b; fi"));
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  std::istringstream lines(out);
  std::string rank0, first_line;
  bool b_seen = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "[rank1]: b") b_seen = true;
    if (line.rfind("[rank0]: ", 0) != 0) continue;
    if (!b_seen && first_line.empty()) first_line = line;
    rank0 += line.substr(9);
  }
  EXPECT_TRUE(b_seen) << out.substr(0, 80);
  EXPECT_GE(first_line.size(), 9 + 64 * 1024u) << "rank 0's long line was held back until its end";
  EXPECT_EQ(rank0, std::string(100000, 'a') + "end");
}
