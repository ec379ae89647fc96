#include "launch/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "common/error.h"
#include "common/files.h"
#include "common/options.h"
#include "launch/cpu_threads.h"
#include "launch/inherited_signals.h"
#include "launch/open_file_limit.h"
#include "launch/rank_guardian.h"
#include "launch/rendezvous_store.h"
#include "launch/worker_logs.h"

extern char** environ;

namespace acc {
namespace {

// torchrun's --rdzv_id default: a static rendezvous has a single run.
constexpr const char* kRunId = "none";

std::atomic<int> g_forward_signal{0};

void remember_signal(int sig) { g_forward_signal = sig; }

// Whether some of the job's output could not be written (a full disk, /dev/full): the job goes on,
// each failing destination is named once on stderr, and a job that succeeds exits 1 (its output is
// part of what it was run for).
bool g_output_lost = false;

void tell_output_lost(const std::string& where, int error) {
  g_output_lost = true;
  std::fprintf(stderr, "accelerate-launch: cannot write %s: %s; the job goes on, what it writes there is lost\n",
               where.c_str(), std::strerror(error));
}

// One of a process's output streams: a pipe the launcher reads, relayed line by line to the console
// (with the rank's prefix) and/or byte for byte to its log file.
struct Stream {
  int pipe_fd = -1;       // our end; -1 once it has closed
  std::string pending;    // a partial line for the console

  FILE* console = nullptr;  // stdout or stderr; null when redirected to the file only
  int file_fd = -1;       // stdout.log / stderr.log when redirected or teed
  std::string file_name;  // its path, for the message when a write fails
};

struct Child {
  int local_rank = 0;
  pid_t pid = -1;
  Stream streams[2];  // stdout, stderr
  bool running = false;
  int exit_code = 0;
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Where a local rank's output goes: its log folder (empty: none) and which streams go to files, and
// which of those also to the console.
struct OutputRouting {
  std::string log_dir;
  int to_file = kNoStream, teed = kNoStream;
};

int open_log(const std::string& dir, const char* name) {
  const std::string path = dir + "/" + name;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(Status::Io, "cannot write log file ", path, ": ", std::strerror(errno));
  return fd;
}

bool is_runnable_file(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) && access(path.c_str(), X_OK) == 0;
}

// The program as exec is given it. A bare name is looked up on PATH, as a shell does; one found
// only in the current folder runs from there, as Accelerate's script argument is a path.
std::string runnable_name(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end == start ? "." : dirs.substr(start, end - start);
    if (is_runnable_file(dir + "/" + program)) return program;
    start = end + 1;
  }
  std::error_code error;
  return std::filesystem::is_regular_file(program, error) ? "./" + program : program;
}

Child spawn(const LaunchConfig& config, int local_rank, int port, int restart_count, const OutputRouting& routing) {
  int out_pipe[2], err_pipe[2];
  // Close-on-exec: a rank holding another rank's pipe would keep it from ever seeing its reader go.
  if (pipe2(out_pipe, O_CLOEXEC) != 0) fail(Status::Io, "pipe: ", std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    fail(Status::Io, "pipe: ", std::strerror(errno));
  }
  const pid_t launcher = getpid();
  const auto kill_timeout = static_cast<unsigned>(std::ceil(std::min(config.kill_timeout_seconds, 86400.0)));
  auto env = launch_environment(config, local_rank, port, restart_count);
  if (!routing.log_dir.empty()) env["TORCHELASTIC_ERROR_FILE"] = routing.log_dir + "/error.json";
  // Build the child's environment before fork: only async-signal-safe calls after it.
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    if (!env.count(entry.substr(0, entry.find('=')))) entries.push_back(entry);
  }
  for (const auto& kv : env) entries.push_back(kv.first + "=" + kv.second);
  std::vector<char*> envp, argv;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> command = config.command;
  command[0] = runnable_name(command[0]);
  for (auto& a : command) argv.push_back(a.data());
  argv.push_back(nullptr);

  Child child;
  child.local_rank = local_rank;
  const int pipes[2][2] = {{out_pipe[0], out_pipe[1]}, {err_pipe[0], err_pipe[1]}};
  const int bits[2] = {kStdout, kStderr};
  const char* names[2] = {"stdout.log", "stderr.log"};
  auto close_everything = [&] {
    for (const auto& p : pipes) close(p[0]), close(p[1]);
    for (auto& stream : child.streams)
      if (stream.file_fd >= 0) close(stream.file_fd);
  };
  for (int s = 0; s < 2; ++s) {
    Stream& stream = child.streams[s];
    stream.pipe_fd = pipes[s][0];
    if (routing.to_file & bits[s]) {
      try {
        stream.file_fd = open_log(routing.log_dir, names[s]);
        stream.file_name = routing.log_dir + "/" + names[s];
      } catch (...) {
        close_everything();
        throw;
      }
    }
    if (!(routing.to_file & bits[s]) || (routing.teed & bits[s])) stream.console = s == 0 ? stdout : stderr;
  }

  // The stop signals wait while the child is made: one forwarded before the child has its own
  // handling would run the launcher's handler there and be lost. The parent takes them right after.
  sigset_t stops, original;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&stops, sig);
  pthread_sigmask(SIG_BLOCK, &stops, &original);
  const pid_t pid = fork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &original, nullptr);
  if (pid < 0) {
    const int error = errno;
    close_everything();
    fail(Status::Io, "fork: ", std::strerror(error));
  }
  if (pid == 0) {
    // Its own session (as torchrun starts them): the whole tree can be signalled, the terminal's
    // Ctrl-C reaches the launcher alone (which forwards it), and a rank reading the terminal is not
    // stopped by SIGTTIN as a background process group would be.
    setsid();
    // A launcher killed outright (SIGKILL: no chance to stop its ranks) takes them with it: this
    // child, the rank's guardian, gets a signal when it dies and stops the rank's whole group.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) _exit(128 + SIGTERM);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    // Only stdin, stdout and stderr pass on, as torchrun's processes get them (Popen's close_fds):
    // an inherited descriptor (the launcher's own output, held by a background process) would keep
    // whoever reads it waiting.
    if (close_range(3, ~0U, 0) != 0)
      for (int fd = 3, n = static_cast<int>(std::min<long>(sysconf(_SC_OPEN_MAX), 1 << 16)); fd < n; ++fd) close(fd);
    restore_open_file_limit();
    run_rank_under_guardian(launcher, argv.data(), envp.data(), kill_timeout, original);
  }
  for (const auto& p : pipes) {
    close(p[1]);
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
  }
  child.pid = pid;
  child.running = true;
  return child;
}

// The end of the first line or progress update in `text` from `start` (just past its '\n', its
// "\r\n" or its '\r'), or npos.
size_t next_segment_end(const std::string& text, size_t start) {
  const size_t at = text.find_first_of("\r\n", start);
  if (at == std::string::npos) return at;
  return text[at] == '\r' && at + 1 < text.size() && text[at + 1] == '\n' ? at + 2 : at + 1;
}

// What a console last showed: a progress update ended by '\r' (by `stream`) leaves its line open;
// the head of a line too long to hold (`partial`) leaves it to be continued without a prefix.
struct ConsoleLine {
  const void* stream = nullptr;
  bool open = false;
  bool partial = false;
};

// The most of an unfinished line a stream holds back: a longer one goes out in pieces, so that a
// rank writing without end of line costs the launcher no more than this.
constexpr size_t kLongestHeldLine = 64 * 1024;

ConsoleLine& console_line(FILE* console) {
  static ConsoleLine out, err;
  return console == stdout ? out : err;
}

// Relays the complete lines (and progress updates ended by '\r', which a progress bar rewrites in
// place) to the console with the rank's prefix.
void emit_lines(Stream& s, const LaunchConfig& config, int global_rank, bool flush_partial) {
  const bool prefix = config.prefix_output && config.num_processes > 1;
  ConsoleLine& line = console_line(s.console);
  bool reader_gone = false;
  // Written by size, never as C strings: a NUL byte in a rank's output passes through. A failed
  // write is told apart by its errno, read at once: only EPIPE (SIGPIPE is ignored) means the
  // reader is gone; another failure (EINTR) loses that piece only.
  const auto checked = [&] {
    if (!std::ferror(s.console)) return;
    reader_gone = reader_gone || errno == EPIPE;
    // Another failure than an interruption (a full disk): told once per console.
    static bool told_out = false, told_err = false;
    bool& told = s.console == stdout ? told_out : told_err;
    if (errno != EPIPE && errno != EINTR && errno != 0 && !told) {
      told = true;
      tell_output_lost(s.console == stdout ? "the standard output" : "the standard error", errno);
    }
    std::clearerr(s.console);
  };
  const auto end_line = [&] {  // a bare '\n': it ends a line already begun, so takes no prefix
    errno = 0;
    std::fputc('\n', s.console);
    checked();
    line.open = line.partial = false;
  };
  const auto put = [&](const char* data, size_t size, bool partial) {
    // Another stream's long line in pieces is ended first; this stream's own goes on unprefixed.
    if (line.partial && line.stream != &s) end_line();
    const bool continues = line.partial && line.stream == &s;
    errno = 0;
    if (prefix && !continues) std::fprintf(s.console, "[rank%d]: ", global_rank);
    std::fwrite(data, 1, size, s.console);
    checked();
    line = {&s, data[size - 1] == '\r', partial};
  };
  size_t start = 0;
  // A '\n' that ends this stream's progress line ("\r\n" split between two reads).
  if (line.open && line.stream == &s && !s.pending.empty() && s.pending[0] == '\n') {
    end_line();
    start = 1;
  }
  for (size_t end; (end = next_segment_end(s.pending, start)) != std::string::npos; start = end)
    put(s.pending.data() + start, end - start, false);
  s.pending.erase(0, start);
  if (!flush_partial && s.pending.size() >= kLongestHeldLine) {
    put(s.pending.data(), s.pending.size(), true);
    s.pending.clear();
  }
  if (flush_partial) {
    // The stream ended inside a line or on a progress update: with prefixes, that line is ended (the
    // next rank's line starts on its own); without, the bytes stay as the program wrote them.
    const bool unfinished = !s.pending.empty() || (line.stream == &s && (line.open || line.partial));
    if (!s.pending.empty()) put(s.pending.data(), s.pending.size(), false);
    if (unfinished && prefix) end_line();
    if (unfinished) line.open = line.partial = false;
    s.pending.clear();
  }
  errno = 0;
  std::fflush(s.console);
  checked();
  if (reader_gone) {
    // The job goes on without that console.
    static bool told = false;  // once, whichever rank's stream finds out first
    if (!told && s.console == stdout)
      std::fprintf(stderr, "accelerate-launch: the standard output's reader is gone; the job goes on without it\n");
    told = told || s.console == stdout;
    s.console = nullptr;
    s.pending.clear();
  }
}

// A log file's write: a failure (a full disk) loses log lines, never the job. Told once per file,
// which is written no more.
void write_log(Stream& s, const char* data, size_t size) {
  const int error = write_fully(s.file_fd, data, size);
  if (error == 0) return;
  tell_output_lost("'" + s.file_name + "'", error);
  close(s.file_fd);
  s.file_fd = -1;
}

// Relays what is available; returns false at end of stream.
bool drain(Stream& s, const LaunchConfig& config, int global_rank) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(s.pipe_fd, buffer, sizeof buffer);
    if (n > 0) {
      if (s.file_fd >= 0) write_log(s, buffer, static_cast<size_t>(n));
      if (s.console) s.pending.append(buffer, static_cast<size_t>(n));
      continue;
    }
    const int read_errno = errno;  // before the console writes, which may fail and set their own
    if (s.console) emit_lines(s, config, global_rank, n == 0);
    if (n == 0) return false;
    return read_errno == EAGAIN || read_errno == EINTR;
  }
}

void close_stream(Stream& s) {
  close(s.pipe_fd);
  s.pipe_fd = -1;
  if (s.file_fd >= 0) close(s.file_fd);
  s.file_fd = -1;
}

// Each rank's process group (its guardian's pid), the groups of ranks that already exited too: what a
// failed rank started in the background is still there (its group id stays taken while it lives).
void signal_all(std::vector<Child>& children, int sig) {
  for (auto& c : children)
    if (kill(-c.pid, sig) != 0 && c.running) kill(c.pid, sig);  // (a child not yet in its own session)
}

// Asks every rank's group to stop with `sig`, then continues whatever is stopped (SIGSTOP, a ^Z'd
// debugger, a guardian) so that it acts on it now rather than waiting to be killed at --kill_timeout.
void ask_all_to_stop(std::vector<Child>& children, int sig) {
  signal_all(children, sig);
  signal_all(children, SIGCONT);
}

// Whether any rank's process group still has a member.
bool any_group_alive(const std::vector<Child>& children) {
  return std::any_of(children.begin(), children.end(), [](const Child& c) { return kill(-c.pid, 0) == 0; });
}

// Per local rank, the streams --redirects and --tee send to files, and of those the ones --tee shows
// too (a tee is a redirect that is also shown).
struct StreamChoice {
  std::vector<int> to_file, teed;
  bool any_file() const {
    return std::any_of(to_file.begin(), to_file.end(), [](int bits) { return bits != kNoStream; });
  }
};

StreamChoice stream_choice(const LaunchConfig& config) {
  const int local = config.num_processes / config.num_machines;
  StreamChoice choice{parse_stream_spec(config.redirects, local, "--redirects"),
                      parse_stream_spec(config.tee, local, "--tee")};
  for (int r = 0; r < local; ++r) choice.to_file[r] |= choice.teed[r];
  return choice;
}

// The routing of each local rank for one attempt: log folders made, when logs are asked for.
std::vector<OutputRouting> route_outputs(const StreamChoice& choice, const std::string& run_log_dir, int restart_count) {
  const int local = static_cast<int>(choice.to_file.size());
  std::vector<OutputRouting> routes(local);
  if (run_log_dir.empty()) return routes;
  const auto dirs = make_attempt_log_dirs(run_log_dir, restart_count, local);
  for (int r = 0; r < local; ++r) routes[r] = {dirs[r], choice.to_file[r], choice.teed[r]};
  return routes;
}

void reap_all(std::vector<Child>& children) {
  signal_all(children, SIGKILL);
  for (auto& c : children) {
    if (c.running) waitpid(c.pid, nullptr, 0);
    for (auto& s : c.streams) close_stream(s);
  }
}

// How long output is still relayed after the last rank has exited: what a process it started in
// the background writes later is not waited for (it may hold the pipe for ever).
constexpr std::chrono::milliseconds kOutputGrace{500};

// Runs one attempt of the group; returns the job's exit code. `signalled`: the launcher was asked
// to stop (SIGINT, SIGTERM), which ends the job without a restart.
int run_group(const LaunchConfig& config, int port, int restart_count, const StreamChoice& choice,
              const std::string& run_log_dir, bool& signalled) {
  const int local = config.num_processes / config.num_machines;
  const auto routes = route_outputs(choice, run_log_dir, restart_count);
  std::vector<Child> children;
  try {
    for (int i = 0; i < local; ++i) children.push_back(spawn(config, i, port, restart_count, routes[i]));
  } catch (...) {
    reap_all(children);  // none left running without the others
    throw;
  }

  int result = 0;
  bool tearing_down = false;
  auto teardown_started = std::chrono::steady_clock::now();
  bool killed = false;
  size_t open_streams = children.size() * 2;
  const auto global_rank = [&](const Child& c) { return config.machine_rank * local + c.local_rank; };
  std::optional<std::chrono::steady_clock::time_point> all_exited;
  const auto running = [&] {
    return std::any_of(children.begin(), children.end(), [](const Child& c) { return c.running; });
  };
  // A teardown lasts until every group is empty, or until kill_timeout kills what is left.
  while (open_streams > 0 || running() || (tearing_down && !killed && any_group_alive(children))) {
    std::vector<pollfd> fds;
    std::vector<Stream*> owners;
    std::vector<int> ranks;
    for (auto& c : children)
      for (auto& s : c.streams)
        if (s.pipe_fd >= 0) {
          fds.push_back({s.pipe_fd, POLLIN, 0});
          owners.push_back(&s);
          ranks.push_back(global_rank(c));
        }
    const int interval_ms = std::max(1, static_cast<int>(config.monitor_interval_seconds * 1000));
    // poll, also without streams: unlike a sleep, it returns when a signal comes.
    poll(fds.empty() ? nullptr : fds.data(), fds.size(), interval_ms);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!drain(*owners[k], config, ranks[k])) {
        close_stream(*owners[k]);
        --open_streams;
      }
    }
    for (auto& c : children) {
      if (!c.running) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      c.exit_code = exit_code_of(status);
      if (c.exit_code != 0 && !tearing_down) {
        result = c.exit_code;
        if (local > 1)
          std::fprintf(stderr, "accelerate-launch: rank %d exited with code %d; stopping the other processes\n",
                       global_rank(c), c.exit_code);
        tearing_down = true;
        teardown_started = std::chrono::steady_clock::now();
        ask_all_to_stop(children, SIGTERM);
      }
    }
    if (int sig = g_forward_signal.exchange(0)) {
      if (signalled && !killed) {
        // A second signal: whoever sent it will not wait for the processes to save and finish.
        std::fprintf(stderr, "accelerate-launch: got %s again: killing the processes now\n", strsignal(sig));
        for (auto& c : children) kill(-c.pid, SIGKILL);
        killed = true;
      } else if (!signalled) {
        std::fprintf(stderr,
                     "accelerate-launch: got %s: passed on to the processes; they are killed if still running "
                     "after %g s (--kill_timeout), or at once on a second signal\n",
                     strsignal(sig), config.kill_timeout_seconds);
      }
      ask_all_to_stop(children, sig);
      signalled = true;  // also during a failure's teardown: no restart after it
      if (!tearing_down) {
        tearing_down = true;
        teardown_started = std::chrono::steady_clock::now();
        result = 128 + sig;
      }
    }
    if (tearing_down && !killed &&
        std::chrono::steady_clock::now() - teardown_started >
            std::chrono::duration<double>(config.kill_timeout_seconds)) {
      // Every group of the attempt, its guardian gone or not: what a rank started may outlive it.
      for (auto& c : children) kill(-c.pid, SIGKILL);
      killed = true;
    }
    // Every rank is gone: what they wrote is relayed, then a background process that inherited an
    // output stream no longer holds the job open.
    if (!running() && open_streams > 0) {
      if (!all_exited) all_exited = std::chrono::steady_clock::now();
      if (signalled || std::chrono::steady_clock::now() - *all_exited > kOutputGrace) {
        for (auto& c : children)
          for (auto& s : c.streams)
            if (s.pipe_fd >= 0) {
              drain(s, config, global_rank(c));
              if (s.console) emit_lines(s, config, global_rank(c), true);
              close_stream(s);
            }
        open_streams = 0;
      }
    }
  }
  return result;
}

}  // namespace

void validate_launch_config(const LaunchConfig& c) {
  require(!c.command.empty(), "no program to launch: accelerate-launch [options] PROGRAM [ARGS...]");
  require(c.num_processes >= 1, "--num_processes must be at least 1, got ", c.num_processes);
  require(c.num_machines >= 1, "--num_machines must be at least 1, got ", c.num_machines);
  require(c.num_processes % c.num_machines == 0, "--num_processes (", c.num_processes,
          ") must be a multiple of --num_machines (", c.num_machines, ")");
  require(c.machine_rank >= 0 && c.machine_rank < c.num_machines, "--machine_rank must be in [0, ",
          c.num_machines, "), got ", c.machine_rank);
  require(!c.main_process_port || (*c.main_process_port > 0 && *c.main_process_port < 65536),
          "--main_process_port must be a TCP port (1-65535)");
  require(c.num_machines == 1 || c.main_process_port, "a job over several machines needs --main_process_port");
  // As Accelerate's launcher asserts: without it the other machines would wait for themselves.
  require(c.num_machines == 1 || (c.main_process_ip && !c.main_process_ip->empty()),
          "a job over several machines needs --main_process_ip (machine 0's address)");
  require(!c.mixed_precision || is_mixed_precision(*c.mixed_precision), "--mixed_precision must be no, fp16 or bf16");
  require(!c.gradient_accumulation_steps || *c.gradient_accumulation_steps >= 1,
          "--gradient_accumulation_steps must be at least 1");
  require(!c.num_cpu_threads_per_process || *c.num_cpu_threads_per_process >= 1,
          "--num_cpu_threads_per_process must be at least 1");
  require(c.max_restarts >= 0, "--max_restarts must not be negative");
  require(std::isfinite(c.kill_timeout_seconds) && c.kill_timeout_seconds >= 0,
          "--kill_timeout must be a number of seconds >= 0");
  require(c.monitor_interval_seconds > 0, "--monitor_interval must be more than 0 seconds");
  const int local = c.num_processes / c.num_machines;
  parse_stream_spec(c.redirects, local, "--redirects");
  parse_stream_spec(c.tee, local, "--tee");
  require(!c.role.empty(), "--role must not be empty");
}

std::map<std::string, std::string> launch_environment(const LaunchConfig& c, int local_rank, int port,
                                                      int restart_count) {
  const int local = c.num_processes / c.num_machines;
  std::map<std::string, std::string> env = {
      {"RANK", std::to_string(c.machine_rank * local + local_rank)},
      {"WORLD_SIZE", std::to_string(c.num_processes)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local)},
      {"GROUP_RANK", std::to_string(c.machine_rank)},
      // On one machine Accelerate ignores main_process_ip (a multi-machine config reused): localhost.
      {"MASTER_ADDR", c.num_machines > 1 ? c.main_process_ip.value_or("") : std::string("127.0.0.1")},
      {"MASTER_PORT", std::to_string(port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},  // machine 0's launcher hosts the store
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(c.max_restarts)},
      {"TORCHELASTIC_RUN_ID", kRunId},
      {"GROUP_WORLD_SIZE", std::to_string(c.num_machines)},
      // One role: its ranks and size are the job's.
      {"ROLE_NAME", c.role},
      {"ROLE_RANK", std::to_string(c.machine_rank * local + local_rank)},
      {"ROLE_WORLD_SIZE", std::to_string(c.num_processes)},
  };
  env.insert(c.sharding_env.begin(), c.sharding_env.end());
  // Said also when false: the library then takes the kind of job from here, not from the config
  // file it is pointed at (whose FSDP or DeepSpeed section a --multi_gpu or --cpu flag overrode).
  for (const char* kind : {"ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED"}) env.emplace(kind, "false");
  // Always set, as Accelerate's launcher sets it ("no" when neither a flag nor the file says): a
  // value inherited from the launcher's own environment does not reach the processes.
  env["ACCELERATE_MIXED_PRECISION"] = c.mixed_precision.value_or("no");
  if (c.gradient_accumulation_steps)
    env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = std::to_string(*c.gradient_accumulation_steps);
  env["ACCELERATE_USE_CPU"] = c.cpu ? "true" : "false";  // likewise always, as its simple launcher sets it
  if (c.cpu) {  // Intel OpenMP's thread placement, as Accelerate's launcher sets it for CPU jobs
    env["KMP_AFFINITY"] = "granularity=fine,compact,1,0";
    env["KMP_BLOCKTIME"] = "1";
  }
  // Always set, as Accelerate's launcher does: an inherited OMP_NUM_THREADS of at least 1 is kept
  // (0, a negative or an unreadable one is replaced by the default, as Accelerate recomputes it).
  if (c.num_cpu_threads_per_process)
    env["OMP_NUM_THREADS"] = std::to_string(*c.num_cpu_threads_per_process);
  else if (!inherited_thread_count_usable())
    env["OMP_NUM_THREADS"] = std::to_string(default_threads_per_process(c.cpu || !machine_has_nvidia_gpu(), local));
  if (c.gpu_ids) env["CUDA_VISIBLE_DEVICES"] = *c.gpu_ids;
  if (c.debug) env["ACCELERATE_DEBUG_MODE"] = "true";
  // The processes write into pipes; on a terminal their stdout would be line-buffered, so the
  // library makes it so (capi/src/launched_output.cpp).
  if (isatty(STDOUT_FILENO)) env["ACCELERATE_STDOUT_LINE_BUFFERED"] = "1";
  if (c.cpu_affinity) env["ACCELERATE_CPU_AFFINITY"] = "1";
  if (c.config_file) {
    // Absolute: the program may change its working folder before the library reads the file.
    std::error_code error;
    const std::filesystem::path absolute = std::filesystem::absolute(*c.config_file, error);
    env["ACCELERATE_CONFIG_FILE"] = error ? *c.config_file : absolute.string();
    env["ACCELERATE_CONFIG_REPORTED"] = "1";  // the launcher printed its warnings already
  } else {
    // The job has no config file (none was found, or --cpu passed over the default one): its
    // processes read none either, as Accelerate's get only what its launcher hands them.
    env["ACCELERATE_NO_CONFIG_FILE"] = "1";
  }
  return env;
}

bool port_in_use(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail(Status::Io, "socket: ", std::strerror(errno));
  // As the rendezvous store binds it: any address, SO_REUSEADDR (a port in TIME_WAIT is usable).
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool taken = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno == EADDRINUSE;
  close(fd);
  return taken;
}

int run_launch(const LaunchConfig& config) {
  validate_launch_config(config);
  // A port taken on machine 0: on one machine, a free one instead (Accelerate's launcher goes
  // standalone, with a warning); the other machines' processes would connect to the taken one.
  std::optional<int> store_port = config.machine_rank == 0 ? config.main_process_port : std::nullopt;
  if (store_port && port_in_use(*store_port)) {
    require(config.num_machines <= 1, "--main_process_port ", *store_port,
            " is already in use on this machine, where the other machines' processes would connect: free it or "
            "choose another port");
    std::fprintf(stderr,
                 "accelerate-launch: --main_process_port %d is already in use on this machine; a free port is used "
                 "for this run\n",
                 *store_port);
    store_port.reset();
  }
  // Machine 0's launcher serves every process's store connection; the others, their own processes.
  raise_open_file_limit(config.machine_rank == 0 ? config.num_processes : config.num_processes / config.num_machines);
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a console write blocked on a reader that does not read gives way to the signal.
  // As torchrun: these stop the ranks (forwarded to their groups), whatever ends the session; but
  // a SIGHUP ignored when the launcher started (nohup) stays ignored, for the launcher and its ranks,
  // also where a library's initializer has set it back to the default since.
  const bool sighup_ignored = sighup_was_ignored();
  if (sighup_ignored) signal(SIGHUP, SIG_IGN);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
    if (sig != SIGHUP || !sighup_ignored) sigaction(sig, &action, nullptr);
  // A console that closes (a pager quit, `| head`) must not kill the launcher and orphan the ranks:
  // the job goes on, and what it would have written there is dropped (emit_lines).
  signal(SIGPIPE, SIG_IGN);
  // A SIGCHLD ignored by whoever started us would have the kernel reap the ranks itself, and
  // waiting for them would fail forever: the launcher needs their exit statuses.
  signal(SIGCHLD, SIG_DFL);
  // Machine 0's launcher hosts the store (on a free port when none is given); the others' processes
  // connect to it at main_process_ip:main_process_port.
  std::optional<RendezvousStore> store;
  if (config.machine_rank == 0) store = host_rendezvous_store(store_port.value_or(0), config.num_processes);
  const int port = store ? store->port : *config.main_process_port;
  // torchrun makes a log folder for the run when files are asked for (its --log_dir or a temporary one).
  const StreamChoice choice = stream_choice(config);
  std::string run_log_dir;
  if (config.log_dir || choice.any_file()) {
    run_log_dir = make_run_log_dir(config.log_dir, kRunId);
    std::fprintf(stderr, "accelerate-launch: the processes' logs are in %s\n", run_log_dir.c_str());
  }
  int code = 0;
  bool signalled = false;
  for (int attempt = 0; attempt <= config.max_restarts; ++attempt) {
    code = run_group(config, port, attempt, choice, run_log_dir, signalled);
    if (code == 0 || signalled) break;
    if (attempt < config.max_restarts)
      std::fprintf(stderr, "accelerate-launch: restarting the group (%d of %d)\n", attempt + 1, config.max_restarts);
  }
  if (code == 0 && g_output_lost) {
    std::fprintf(stderr, "accelerate-launch: the job succeeded, but some of its output could not be written (above)\n");
    return 1;
  }
  return code;
}

}  // namespace acc
