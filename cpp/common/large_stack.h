// Runs work whose recursion depth the input sets (a parser of a file) on a thread with a stack of
// its own size, so that how deep it may go does not depend on the caller's thread: a JVM or .NET
// thread may have 1 MiB or less, where the main thread has 8.
#pragma once

#include <cstddef>
#include <functional>

namespace acc {

// Runs `work` on a new thread with a stack of `stack_bytes` (reserved address space, taken up only
// as it is used), waits for it, and rethrows what it threw.
void run_on_large_stack(const std::function<void()>& work, size_t stack_bytes = size_t{256} << 20);

}  // namespace acc
