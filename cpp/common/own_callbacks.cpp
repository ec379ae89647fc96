#include "common/own_callbacks.h"

#include "common/thread_name.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/thread_state.h"

namespace acc {
namespace {

// The owners whose callbacks this thread runs, innermost last (callbacks may nest across objects).
struct RunningTag;
std::vector<const void*>& running() { return thread_state<std::vector<const void*>, RunningTag>(); }

}  // namespace

OwnCallbacksRunning::OwnCallbacksRunning(const void* owner, const void* also) : owner_(owner), also_(also) {
  running().push_back(owner);
  if (also) running().push_back(also);
}

OwnCallbacksRunning::~OwnCallbacksRunning() {
  for (const void* marked : {also_, owner_}) {
    if (!marked) continue;
    const auto it = std::find(running().rbegin(), running().rend(), marked);
    if (it != running().rend()) running().erase(std::next(it).base());
  }
}

bool inside_own_callbacks(const void* owner) {
  return std::find(running().begin(), running().end(), owner) != running().end();
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
