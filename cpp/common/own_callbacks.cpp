#include "common/own_callbacks.h"

#include "common/thread_name.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "common/error.h"

namespace acc {
namespace {

// The owners whose callbacks this thread runs, innermost last (callbacks may nest across objects).
thread_local std::vector<const void*> t_running;

}  // namespace

OwnCallbacksRunning::OwnCallbacksRunning(const void* owner, const void* also) : owner_(owner), also_(also) {
  t_running.push_back(owner);
  if (also) t_running.push_back(also);
}

OwnCallbacksRunning::~OwnCallbacksRunning() {
  for (const void* marked : {also_, owner_}) {
    if (!marked) continue;
    const auto it = std::find(t_running.rbegin(), t_running.rend(), marked);
    if (it != t_running.rend()) t_running.erase(std::next(it).base());
  }
}

bool inside_own_callbacks(const void* owner) {
  return std::find(t_running.begin(), t_running.end(), owner) != t_running.end();
}

void destroy_outside_own_callbacks(const void* owner, std::function<void()> destroy) {
  if (!inside_own_callbacks(owner)) return destroy();
  std::thread([destroy = std::move(destroy)] {
    name_this_thread("acc-release");
    destroy();
  }).detach();
}

void refuse_inside_own_callbacks(const void* owner, const char* object, const char* call) {
  if (!inside_own_callbacks(owner)) return;
  fail(Status::InvalidArgument, call, " was called from inside a callback that this ", object,
       " is running: it would change what the running call relies on (call it after the callback returns)");
}

}  // namespace acc
