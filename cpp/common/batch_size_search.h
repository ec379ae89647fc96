// Accelerate's find_executable_batch_size: the largest batch size, from a starting one down, whose
// training run does not run out of memory.
#pragma once

#include <cstdint>
#include <functional>

namespace acc {

// Runs `attempt` with starting_batch_size and, each time it reports running out of memory (returns
// false), gives cached GPU memory back and runs it again with 90% of the batch size, rounded down,
// as Accelerate does. Returns the batch size of the run that finished; an OutOfMemory error when
// none down to 1 did. Errors `attempt` throws end the search.
int64_t find_executable_batch_size(int64_t starting_batch_size, const std::function<bool(int64_t)>& attempt);

}  // namespace acc
