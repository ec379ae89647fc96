// The launcher's open-file limit. It holds a few descriptors for each process (console pipes, log
// files) and hosts the rendezvous store, which takes a connection from each; libtorch's store ends
// the launcher when accepting one fails for want of descriptors (EMFILE). So the launcher raises its
// soft limit to the hard one, as far as it may, refuses a job it still could not serve, and gives
// each process the limit it was started with.
#pragma once

#include <cstdint>

namespace acc {

// Raises the soft RLIMIT_NOFILE to the hard limit; fails (InvalidArgument, naming the limit and
// what the job needs) where serving `processes` (their pipes here, their connections to the store
// this launcher hosts) would need more descriptors than that.
void raise_open_file_limit(int64_t processes);
// In a child after fork, before exec: the soft limit back to what the launcher was started with
// (a program using select() breaks on descriptors past 1024). Only a system call: async-signal-safe.
void restore_open_file_limit();

}  // namespace acc
