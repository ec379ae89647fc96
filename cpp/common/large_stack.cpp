#include "common/large_stack.h"

#include <pthread.h>

#include <cstring>
#include <exception>

#include "common/error.h"

namespace acc {

namespace {

struct StackJob {
  const std::function<void()>* work;
  std::exception_ptr error;
};

void* run_job(void* argument) {
  auto* job = static_cast<StackJob*>(argument);
  try {
    (*job->work)();
  } catch (...) {
    job->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

void run_on_large_stack(const std::function<void()>& work, size_t stack_bytes) {
  pthread_attr_t attributes;
  if (pthread_attr_init(&attributes) != 0) fail(Status::Internal, "cannot set up a thread");
  StackJob job{&work, nullptr};
  pthread_t thread;
  int status = pthread_attr_setstacksize(&attributes, stack_bytes);
  if (status == 0) status = pthread_create(&thread, &attributes, &run_job, &job);
  pthread_attr_destroy(&attributes);
  if (status != 0) fail(Status::OutOfMemory, "cannot start a thread with a ", stack_bytes >> 20, " MiB stack: ", std::strerror(status));
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace acc
