// The library's version, shared by the C API and the C++ code.
#pragma once

namespace acc {

inline constexpr int kVersionMajor = 0;
inline constexpr int kVersionMinor = 1;
inline constexpr int kVersionPatch = 0;
inline constexpr const char* kVersionString = "0.1.0";
inline constexpr int kAbiVersion = 1;

}  // namespace acc
