#include "launch/rank_guardian.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace acc {
namespace {

void set_default(int sig) {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(sig, &action, nullptr);
}

[[noreturn]] void exec_program(char* const argv[], char* const envp[], const sigset_t& mask) {
  // The launcher ignores SIGPIPE, and ignored signals and the mask survive exec: defaults for the
  // program. Its stop signals' handlers go before the mask does, or one already pending would run
  // the launcher's handler here and be lost; one the launcher left ignored (SIGHUP under nohup)
  // stays ignored.
  set_default(SIGPIPE);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) set_default(sig);
  }
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  execvpe(argv[0], argv, envp);
  const int error = errno;
  dprintf(STDERR_FILENO, "accelerate-launch: cannot run '%s': %s%s\n", argv[0], strerror(error),
          error == EACCES ? " (make it executable, or name its interpreter first: python3 x.py, bash x.sh)" : "");
  _exit(error == ENOENT ? 127 : 126);  // the shell's codes: not found, found but not runnable
}

// Ends as the program ended, so the launcher reads the program's own status.
[[noreturn]] void exit_as(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  prctl(PR_SET_DUMPABLE, 0);  // the program's core file, if any, is not replaced by this process's
  set_default(sig);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  kill(getpid(), sig);
  _exit(128 + sig);
}

// Whether a process other than this one is still in this process group (read from /proc: a
// group's members need not be this process's children).
bool group_has_others() {
  const pid_t self = getpid(), group = getpgrp();
  DIR* proc = opendir("/proc");
  if (!proc) return true;  // cannot tell: keep waiting for the timeout
  bool found = false;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    char path[64], stat[512];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    const ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (n <= 0) continue;
    stat[n] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so from the last ')'.
    const char* after = std::strrchr(stat, ')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (after && std::sscanf(after + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 && pgrp == group && state != 'Z') {
      found = true;
      break;
    }
  }
  closedir(proc);
  return found;
}

double now_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

void run_rank_under_guardian(pid_t launcher, char* const argv[], char* const envp[], unsigned kill_timeout_seconds,
                             const sigset_t& program_mask) {
  // The signals are waited for, not handled: one that arrives between two looks is still seen.
  // While the launcher lives, a signal came from it (it signals the whole group, the program too) and
  // needs nothing here; once it is gone (the parent-death signal), the group is stopped.
  sigset_t watched;
  sigemptyset(&watched);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&watched, sig);
  sigprocmask(SIG_BLOCK, &watched, nullptr);
  // _Fork: no atfork handlers (libraries' own, in a child of a threaded process) run here.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  const pid_t program = _Fork();
#else
  const pid_t program = fork();
#endif
  if (program < 0) {
    dprintf(STDERR_FILENO, "accelerate-launch: fork: %s\n", strerror(errno));
    _exit(126);
  }
  if (program == 0) exec_program(argv, envp, program_mask);
  double kill_at = -1;
  bool program_done = false;
  int program_status = 0;
  for (;;) {
    if (!program_done) {
      const pid_t done = waitpid(program, &program_status, WNOHANG);
      program_done = done == program;
      if (done < 0 && errno != EINTR) _exit(127);
    }
    // While the launcher lives, it stops the group itself: end as the program ends.
    if (program_done && kill_at < 0 && getppid() == launcher) exit_as(program_status);
    if (kill_at < 0 && getppid() != launcher) {
      kill(0, SIGTERM);  // the group: the program and whatever it started
      kill(0, SIGCONT);  // a stopped member acts on it now, not at the SIGKILL
      kill_at = now_seconds() + (kill_timeout_seconds > 0 ? kill_timeout_seconds : 1);
    }
    // Once the launcher is gone, what the program started may outlive it (a wrapper script's child
    // slow to stop, or ignoring SIGTERM): the group gets SIGKILL at the timeout whatever happened,
    // and this guardian goes as soon as nothing of the group is left.
    if (kill_at >= 0 && program_done && !group_has_others()) _exit(0);
    if (kill_at >= 0 && now_seconds() >= kill_at) kill(0, SIGKILL);
    const timespec wait{0, 250 * 1000 * 1000};
    sigtimedwait(&watched, nullptr, &wait);
  }
}

}  // namespace acc
