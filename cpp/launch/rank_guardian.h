// The process between the launcher and each rank's program. The launcher's ranks die with it when it
// is killed outright (SIGKILL leaves it no chance to stop them): the kernel's parent-death signal
// reaches only a direct child, and a program started by a wrapper script (`sh train.sh` running
// `./train` without exec) would run on unsupervised. The guardian is that direct child; it leads the
// rank's process group, and when its launcher is gone it stops the whole group (SIGTERM, then
// SIGKILL after the kill timeout), as torchrun stops its workers' groups.
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace acc {

// Called in the launcher's forked child (async-signal-safe calls only: the launcher has threads),
// after setsid: starts argv[0] with envp in a child of its own and exits as that child does (its
// exit code, or its signal). `launcher` is the launcher's pid; `program_mask` the signal mask the
// program starts with (the launcher's own, before it blocked its stop signals around the fork).
[[noreturn]] void run_rank_under_guardian(pid_t launcher, char* const argv[], char* const envp[],
                                          unsigned kill_timeout_seconds, const sigset_t& program_mask);

}  // namespace acc
