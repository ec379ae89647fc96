#include "common/bus_error_guard.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace acc {

namespace {

// One guarded read in progress. The handler finds its thread's entry by thread id: no
// thread_local, whose first use from a library may allocate (not allowed in a signal handler).
struct GuardedRead {
  std::atomic<pid_t> thread{0};  // 0: free
  const char* begin = nullptr;
  const char* end = nullptr;
  sigjmp_buf* resume = nullptr;
};

constexpr int kMaxGuardedReads = 64;
GuardedRead guarded_reads[kMaxGuardedReads];
struct sigaction previous_action {};

pid_t current_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Gives the fault to whoever handled SIGBUS before us; with nobody, the default action ends the
// process as it would have without us.
void pass_on(int sig, siginfo_t* info, void* ucontext) {
  if ((previous_action.sa_flags & SA_SIGINFO) != 0) {
    previous_action.sa_sigaction(sig, info, ucontext);
    return;
  }
  if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  // A fault re-raises itself when the instruction runs again; a SIGBUS sent by kill() would not.
  if (info->si_code <= 0) ::raise(SIGBUS);
}

void on_bus_error(int sig, siginfo_t* info, void* ucontext) {
  const pid_t self = current_thread_id();
  const auto* address = static_cast<const char*>(info->si_addr);
  for (GuardedRead& read : guarded_reads) {
    if (read.thread.load(std::memory_order_relaxed) != self) continue;
    if (info->si_code > 0 && address >= read.begin && address < read.end) siglongjmp(*read.resume, 1);
    break;
  }
  pass_on(sig, info, ucontext);
}

void install_handler() {
  struct sigaction action {};
  action.sa_sigaction = &on_bus_error;
  // SA_ONSTACK: a runtime hosting us (Go) may run threads on small stacks with an alternate one.
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &previous_action);
}

GuardedRead& claim_entry(pid_t self) {
  for (;;) {
    for (GuardedRead& read : guarded_reads) {
      pid_t free = 0;
      if (read.thread.compare_exchange_strong(free, self, std::memory_order_acquire)) return read;
    }
    std::this_thread::yield();  // more than kMaxGuardedReads threads reading at once: wait for one
  }
}

}  // namespace

bool read_guarding_bus_errors(const void* begin, size_t length, void (*read)(void* context), void* context) {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  GuardedRead& entry = claim_entry(current_thread_id());
  sigjmp_buf resume;
  entry.begin = static_cast<const char*>(begin);
  entry.end = entry.begin + length;
  entry.resume = &resume;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // Savemask 1: the jump out of the handler unblocks SIGBUS again.
  if (sigsetjmp(resume, 1) != 0) {
    entry.thread.store(0, std::memory_order_release);
    return false;
  }
  read(context);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  entry.thread.store(0, std::memory_order_release);
  return true;
}

}  // namespace acc
