#include "tracking/png.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "common/crc32.h"
#include "common/error.h"

namespace acc::tracking {
namespace {

constexpr int64_t kMaxSide = std::numeric_limits<int32_t>::max();
constexpr size_t kIdatBytes = size_t{1} << 20;
constexpr uint8_t kColorRgb = 2, kColorRgba = 6;

void append_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}

void append_chunk(std::string& out, const char type[4], const std::string& data) {
  append_u32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out.append(type, 4);
  out += data;
  append_u32(out, crc32_update(crc32_start(), out.data() + start, out.size() - start));
}

// The image's rows, each after its filter byte (0: none), as one zlib stream.
std::string deflated_rows(const uint8_t* pixels, int64_t height, size_t row_bytes) {
  z_stream z{};
  if (deflateInit(&z, Z_DEFAULT_COMPRESSION) != Z_OK) fail(Status::OutOfMemory, "PNG: zlib could not start");
  std::string out;
  char buffer[1 << 16];
  auto pump = [&](const uint8_t* data, size_t size, int flush) {
    z.next_in = const_cast<Bytef*>(data);
    z.avail_in = static_cast<uInt>(size);
    do {
      z.next_out = reinterpret_cast<Bytef*>(buffer);
      z.avail_out = sizeof buffer;
      const int rc = deflate(&z, flush);
      if (rc == Z_STREAM_ERROR) {
        deflateEnd(&z);
        fail(Status::Internal, "PNG: zlib failed to compress");
      }
      out.append(buffer, sizeof buffer - z.avail_out);
    } while (z.avail_out == 0 || (flush == Z_FINISH && z.avail_in > 0));
  };
  const uint8_t no_filter = 0;
  for (int64_t row = 0; row < height; ++row) {
    pump(&no_filter, 1, Z_NO_FLUSH);
    const uint8_t* data = pixels + static_cast<size_t>(row) * row_bytes;
    for (size_t done = 0; done < row_bytes;) {  // zlib takes at most 4 GiB a call
      const size_t chunk = std::min<size_t>(row_bytes - done, size_t{1} << 30);
      pump(data + done, chunk, Z_NO_FLUSH);
      done += chunk;
    }
  }
  pump(nullptr, 0, Z_FINISH);
  deflateEnd(&z);
  return out;
}

}  // namespace

std::string encode_png(const uint8_t* pixels, int64_t height, int64_t width, int channels) {
  require(channels == 3 || channels == 4, "PNG: ", channels, " channels (3 or 4 are written)");
  require(height >= 1 && height <= kMaxSide && width >= 1 && width <= kMaxSide, "PNG: an image of ", height, "x",
          width, " pixels (each side 1 to 2^31 - 1)");
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string header;
  append_u32(header, static_cast<uint32_t>(width));
  append_u32(header, static_cast<uint32_t>(height));
  header += static_cast<char>(8);  // bits per channel
  header += static_cast<char>(channels == 3 ? kColorRgb : kColorRgba);
  header += std::string(3, '\0');  // deflate, adaptive filtering, no interlace
  append_chunk(out, "IHDR", header);
  const std::string data = deflated_rows(pixels, height, static_cast<size_t>(width) * channels);
  for (size_t at = 0; at == 0 || at < data.size(); at += kIdatBytes)  // a chunk holds < 2 GiB
    append_chunk(out, "IDAT", data.substr(at, kIdatBytes));
  append_chunk(out, "IEND", "");
  return out;
}

}  // namespace acc::tracking
