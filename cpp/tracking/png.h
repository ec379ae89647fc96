// A PNG writer for 8-bit pixels (what TensorBoard's image summaries carry): each row filtered as
// libpng and Pillow choose (the least sum of signed filtered bytes), deflated by zlib, each chunk
// with its CRC.
#pragma once

#include <cstdint>
#include <string>

namespace acc::tracking {

// `pixels`: height rows of width * channels bytes, channels 3 (RGB) or 4 (RGBA). height and width
// are 1 .. 2^31 - 1 (PNG's limit).
std::string encode_png(const uint8_t* pixels, int64_t height, int64_t width, int channels);

}  // namespace acc::tracking
