// Reading memory-mapped bytes that a file no longer holds (it was cut short while mapped) raises
// SIGBUS, which kills the process. This runs such a read so that the fault becomes a `false`.
#pragma once

#include <cstddef>

namespace acc {

// Runs `read(context)` on this thread. Where it touches an address in [begin, begin + length) that
// raises SIGBUS, the read stops there and this returns false; otherwise it returns true. `read`
// must only read and write plain memory: no allocation, no locks, no exceptions, nothing that
// needs undoing when it is cut off mid-way. A SIGBUS elsewhere (another thread, another address)
// goes to the handler that was there before, or kills the process as it would have.
bool read_guarding_bus_errors(const void* begin, size_t length, void (*read)(void* context), void* context);

}  // namespace acc
