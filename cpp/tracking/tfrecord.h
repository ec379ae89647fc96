// TFRecord framing, the container of TensorBoard's event files: each record is
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
#pragma once

#include <string>

namespace acc::tracking {

// Appends one framed record holding `data` to `out`.
void append_tfrecord(std::string& out, const std::string& data);

}  // namespace acc::tracking
