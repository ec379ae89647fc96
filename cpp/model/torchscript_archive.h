// Checks a TorchScript archive (a zip file) before libtorch loads it. PyTorch's reader checks
// neither the records' CRC-32s (a flipped bit in a weight or in the code is loaded as it is) nor
// that a weight record holds as many bytes as its tensor's storage declares (a short record is read
// past its end by the first forward).
#pragma once

#include <cstdint>
#include <string>

namespace acc {

// Throws an Io error naming the file (`path`, whose bytes are `data`) and the record when the archive
// is not a well-formed zip (truncated, records outside the file, unknown compression), a record's
// CRC-32 does not match, or a tensor storage declared by one of its pickles is larger than the
// record that holds it. The caller then loads these same bytes (a file read again could have changed).
void verify_torchscript_archive(const uint8_t* data, uint64_t size, const std::string& path);

}  // namespace acc
