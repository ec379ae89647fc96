#include "common/batch_size_search.h"

#include "common/device.h"
#include "common/error.h"

namespace acc {

int64_t find_executable_batch_size(int64_t starting_batch_size, const std::function<bool(int64_t)>& attempt) {
  require(starting_batch_size >= 1, "the starting batch size must be at least 1, got ", starting_batch_size);
  require(static_cast<bool>(attempt), "find_executable_batch_size needs a function to run");
  release_device_cache();
  int64_t tried = 0;
  for (int64_t batch_size = starting_batch_size; batch_size > 0;
       batch_size = static_cast<int64_t>(static_cast<double>(batch_size) * 0.9)) {
    if (attempt(batch_size)) return batch_size;
    ++tried;
    release_device_cache();
  }
  fail(Status::OutOfMemory, "no executable batch size found: ", tried, " batch sizes from ", starting_batch_size,
       " down to 1 ran out of memory");
}

}  // namespace acc
