// What libtorch's errors mean to a caller: the status the C API reports for them.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include "common/exception_status.h"

namespace {

acc::Status status_of(const std::string& message) {
  try {
    TORCH_CHECK(false, message);
  } catch (...) {
    return acc::describe_current_exception().status;
  }
  return acc::Status::Ok;
}

}  // namespace

// Every way libtorch says that memory ran out is out of memory, so that find_executable_batch_size
// retries with a smaller batch: the CUDA caching allocator's message, and cudaErrorMemoryAllocation
// reported as a CUDA error (cuBLAS's or cuDNN's workspace), which Accelerate's
// should_reduce_batch_size also takes as out of memory.
TEST(ExceptionStatus, EveryOutOfMemoryMessageIsOutOfMemory) {
  EXPECT_EQ(status_of("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"),
            acc::Status::OutOfMemory);
  EXPECT_EQ(status_of("CUDA out of memory. Tried to allocate 20.00 GiB"), acc::Status::OutOfMemory);
  EXPECT_EQ(status_of("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported"),
            acc::Status::OutOfMemory);
  EXPECT_NE(status_of("CUDA error: an illegal memory access was encountered"), acc::Status::OutOfMemory);
}
