#include "launch/inherited_signals.h"

#include <signal.h>

namespace acc {
namespace {

int g_sighup_ignored = -1;  // -1: not recorded (constant-initialized, valid before any initializer)

bool ignored_now() {
  struct sigaction current {};
  return sigaction(SIGHUP, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

}  // namespace

void record_inherited_sighup() { g_sighup_ignored = ignored_now() ? 1 : 0; }

bool sighup_was_ignored() { return g_sighup_ignored < 0 ? ignored_now() : g_sighup_ignored == 1; }

}  // namespace acc
