#include "common/own_callbacks.h"

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace acc {
namespace {

// The owners whose callbacks this thread runs, innermost last (callbacks may nest across objects).
thread_local std::vector<const void*> t_running;

}  // namespace

OwnCallbacksRunning::OwnCallbacksRunning(const void* owner) : owner_(owner) { t_running.push_back(owner); }

OwnCallbacksRunning::~OwnCallbacksRunning() {
  const auto it = std::find(t_running.rbegin(), t_running.rend(), owner_);
  if (it != t_running.rend()) t_running.erase(std::next(it).base());
}

void refuse_inside_own_callbacks(const void* owner, const char* object, const char* call) {
  if (std::find(t_running.begin(), t_running.end(), owner) == t_running.end()) return;
  fail(Status::InvalidArgument, call, " was called from inside a callback that this ", object,
       " is running: it would change what the running call relies on (call it after the callback returns)");
}

}  // namespace acc
