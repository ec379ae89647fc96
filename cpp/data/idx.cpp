#include "data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/error.h"

namespace acc {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly n bytes; returns how many were read before the end of the data.
size_t read_bytes(gzFile file, void* dst, size_t n, const std::string& path) {
  size_t done = 0;
  auto* out = static_cast<unsigned char*>(dst);
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(file, out + done, chunk);
    if (got < 0) {
      int code = 0;
      fail(Status::Io, "'", path, "' is corrupt: ", gzerror(file, &code));
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

at::ScalarType idx_type(uint8_t code, const std::string& path) {
  switch (code) {
    case 0x08: return at::kByte;
    case 0x09: return at::kChar;
    case 0x0B: return at::kShort;
    case 0x0C: return at::kInt;
    case 0x0D: return at::kFloat;
    case 0x0E: return at::kDouble;
    default: fail(Status::Io, "'", path, "' is not an IDX file: unknown element type 0x", std::hex, int(code));
  }
}

// The data after the header: `expected` bytes, read in chunks, so that a header declaring far more
// than the file holds (e.g. a gzip claiming 784 GB) is refused at the end of the real data instead
// of being allocated up front.
std::vector<uint8_t> read_data(gzFile file, size_t expected, const std::string& path) {
  constexpr size_t kChunk = size_t{64} << 20;
  std::vector<uint8_t> data;
  data.reserve(std::min(expected, kChunk));
  while (data.size() < expected) {
    const size_t at = data.size(), want = std::min(expected - at, std::max(at, kChunk));
    data.resize(at + want);
    const size_t got = read_bytes(file, data.data() + at, want, path);
    if (got != want)
      fail(Status::Io, "'", path, "' is truncated: the header declares ", expected, " bytes of data, the file has ",
           at + got);
  }
  return data;
}

}  // namespace

at::Tensor read_idx(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(Status::Io, "cannot open IDX file '", path, "': ", std::strerror(errno));
  // A FIFO or a device would block or never end.
  if (!S_ISREG(st.st_mode)) fail(Status::Io, "'", path, "' is not a regular file");
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) fail(Status::Io, "cannot open IDX file '", path, "'");
  std::array<uint8_t, 4> magic{};
  if (read_bytes(file.get(), magic.data(), 4, path) != 4) fail(Status::Io, "'", path, "' is empty or truncated");
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0 || magic[3] > 8)
    fail(Status::Io, "'", path, "' is not an IDX file (bad magic number)");
  const at::ScalarType type = idx_type(magic[2], path);
  std::vector<int64_t> dims(magic[3]);
  uint64_t numel = 1;
  for (auto& d : dims) {
    std::array<uint8_t, 4> be{};
    if (read_bytes(file.get(), be.data(), 4, path) != 4) fail(Status::Io, "'", path, "' is truncated in its header");
    d = (int64_t(be[0]) << 24) | (int64_t(be[1]) << 16) | (int64_t(be[2]) << 8) | int64_t(be[3]);
    numel *= static_cast<uint64_t>(d);
    if (numel > (uint64_t(1) << 40)) fail(Status::Io, "'", path, "' declares an implausible size");
  }
  const size_t expected = numel * c10::elementSize(type);
  const uint64_t header = 4 + 4 * dims.size();
  if (gzdirect(file.get()) && static_cast<uint64_t>(st.st_size) < header + expected)
    fail(Status::Io, "'", path, "' is truncated: the header declares ", expected, " bytes of data, the file has ",
         static_cast<uint64_t>(st.st_size) - header);
  auto data = std::make_shared<std::vector<uint8_t>>(read_data(file.get(), expected, path));
  unsigned char extra;
  if (read_bytes(file.get(), &extra, 1, path) != 0)
    fail(Status::Io, "'", path, "' has data past the ", expected, " bytes its header declares");
  if (expected == 0) return at::empty(dims, at::TensorOptions().dtype(type));
  at::Tensor out = at::from_blob(
      data->data(), dims, [data](void*) {}, at::TensorOptions().dtype(type));
  // IDX stores multi-byte values big-endian.
  if (c10::elementSize(type) > 1) {
    auto* bytes = static_cast<uint8_t*>(out.data_ptr());
    const size_t width = c10::elementSize(type);
    for (size_t i = 0; i < expected; i += width) std::reverse(bytes + i, bytes + i + width);
  }
  return out;
}

}  // namespace acc
