// Integers appended to a byte string least significant byte first, as file formats lay them out
// (TFRecord, W&B's log, zip).
#pragma once

#include <cstdint>
#include <string>

namespace acc {

inline void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace acc
