// How a collective's lost peer is worded (state/distributed.cpp raises it), and how to recognise it
// in an error that came back as text only: a TorchScript interpreter rethrows what failed inside the
// model (stage 3's parameter gathers run there) as a plain runtime_error.
#pragma once

#include <optional>
#include <string>

#include "common/error.h"

namespace acc {

// Follow "collective '<name>" in the message.
inline constexpr const char* kCollectiveTimedOut = "' timed out (a process stopped or is stalled): ";
inline constexpr const char* kCollectivePeerGone = "' failed because a peer process went away: ";

// Timeout or Aborted where `message` holds such an error's text.
inline std::optional<Status> peer_failure_reported_in(const std::string& message) {
  if (message.find("collective '") == std::string::npos) return std::nullopt;
  if (message.find(kCollectiveTimedOut) != std::string::npos) return Status::Timeout;
  if (message.find(kCollectivePeerGone) != std::string::npos) return Status::Aborted;
  return std::nullopt;
}

}  // namespace acc
