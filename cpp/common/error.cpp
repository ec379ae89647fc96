#include "common/error.h"

#include <c10/util/Backtrace.h>

namespace acc {

Error::Error(Status status, const std::string& message)
    : std::runtime_error(message), status_(status), backtrace_(c10::get_backtrace(/*frames_to_skip=*/1)) {}

}  // namespace acc
