// SHA-256 (FIPS 180-4), for the content ids other tools derive from a file's bytes (W&B names its
// media files by their digest).
#pragma once

#include <string>

namespace acc {

// The digest of `bytes` as 64 lowercase hex digits (Python's hashlib.sha256(bytes).hexdigest()).
std::string sha256_hex(const std::string& bytes);

}  // namespace acc
