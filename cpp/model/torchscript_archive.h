// Checks a TorchScript archive (a zip file) before libtorch loads it. PyTorch's reader checks
// neither the records' CRC-32s (a flipped bit in a weight or in the code is loaded as it is) nor
// that a weight record holds as many bytes as its tensor's storage declares (a short record is read
// past its end by the first forward).
#pragma once

#include <ATen/ATen.h>

#include <istream>
#include <string>

#include "common/memory_stream.h"

namespace acc {

// The archive at `path` (TorchScript's, or torch.save's: the same zip), read once and checked:
// an Io error naming the file and the record where it is not a well-formed zip (truncated, records
// outside the file, unknown compression), a record's CRC-32 does not match, or a tensor storage
// declared by one of its pickles is larger than the record that holds it. libtorch's readers take
// stream(), so they read the very bytes that were checked (the file may change meanwhile).
class VerifiedArchive {
 public:
  explicit VerifiedArchive(const std::string& path);
  VerifiedArchive(const VerifiedArchive&) = delete;
  VerifiedArchive& operator=(const VerifiedArchive&) = delete;
  std::istream& stream() { return stream_; }

 private:
  at::Tensor bytes_;
  MemoryStream stream_;  // over bytes_
};

}  // namespace acc
