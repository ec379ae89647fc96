#include "tracking/png.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

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

// PNG's five row filters: each byte less a prediction from the byte `bpp` to its left (a), the one
// above (b) and the one above that left one (c), zero outside the image.
enum Filter : uint8_t { kNone, kSub, kUp, kAverage, kPaeth, kFilters };

// Selects without branches (a random row would mispredict half of them).
int paeth(int a, int b, int c) {
  const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);  // |p - a|, |p - b|, |p - c|
  const int b_or_c = pb <= pc ? b : c;
  return ((pa <= pb) & (pa <= pc)) ? a : b_or_c;
}

// Writes `row` filtered by F into out: the first `bpp` bytes have no left neighbour (0).
template <Filter F>
void filter_bytes(const uint8_t* row, const uint8_t* above, size_t bytes, size_t bpp, uint8_t* out) {
  const size_t head = std::min(bpp, bytes);
  auto predict = [&](int a, int b, int c) -> int {
    if (F == kSub) return a;
    if (F == kUp) return b;
    if (F == kAverage) return (a + b) / 2;
    if (F == kPaeth) return paeth(a, b, c);
    return 0;
  };
  for (size_t i = 0; i < head; ++i) out[i] = static_cast<uint8_t>(row[i] - predict(0, above[i], 0));
  for (size_t i = head; i < bytes; ++i)
    out[i] = static_cast<uint8_t>(row[i] - predict(row[i - bpp], above[i], above[i - bpp]));
}

using FilterBytes = void (*)(const uint8_t* row, const uint8_t* above, size_t bytes, size_t bpp, uint8_t* out);
constexpr FilterBytes kFilterBytes[kFilters] = {filter_bytes<kNone>, filter_bytes<kSub>, filter_bytes<kUp>,
                                                filter_bytes<kAverage>, filter_bytes<kPaeth>};

// Writes `row` filtered by f into out; the sum of the filtered bytes read as signed.
uint64_t filter_row(Filter f, const uint8_t* row, const uint8_t* above, size_t bytes, size_t bpp, uint8_t* out) {
  kFilterBytes[f](row, above, bytes, bpp, out);
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes; ++i) sum += static_cast<uint64_t>(std::abs(static_cast<int8_t>(out[i])));
  return sum;
}

// The image's rows, each filtered and after its filter byte, as one zlib stream.
std::string deflated_rows(const uint8_t* pixels, int64_t height, size_t row_bytes, size_t bpp) {
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
  // Each row as libpng and Pillow filter it: by the filter whose output has the least sum of bytes read
  // as signed (each candidate a line: its filter byte, then the filtered row).
  const std::vector<uint8_t> zeros(row_bytes, 0);
  std::vector<std::vector<uint8_t>> candidates(kFilters, std::vector<uint8_t>(1 + row_bytes));
  for (int64_t r = 0; r < height; ++r) {
    const uint8_t* row = pixels + static_cast<size_t>(r) * row_bytes;
    const uint8_t* above = r == 0 ? zeros.data() : row - row_bytes;
    size_t best = 0;
    uint64_t least = UINT64_MAX;
    for (size_t f = 0; f < kFilters; ++f) {
      candidates[f][0] = static_cast<uint8_t>(f);
      const uint64_t sum = filter_row(static_cast<Filter>(f), row, above, row_bytes, bpp, candidates[f].data() + 1);
      if (sum < least) least = sum, best = f;
    }
    const std::vector<uint8_t>& line = candidates[best];
    for (size_t done = 0; done < line.size();) {  // zlib takes at most 4 GiB a call
      const size_t chunk = std::min<size_t>(line.size() - done, size_t{1} << 30);
      pump(line.data() + done, chunk, Z_NO_FLUSH);
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
  const std::string data =
      deflated_rows(pixels, height, static_cast<size_t>(width) * channels, static_cast<size_t>(channels));
  for (size_t at = 0; at == 0 || at < data.size(); at += kIdatBytes)  // a chunk holds < 2 GiB
    append_chunk(out, "IDAT", data.substr(at, kIdatBytes));
  append_chunk(out, "IEND", "");
  return out;
}

}  // namespace acc::tracking
