#include "tracking/wandb_log.h"

#include <algorithm>

#include "common/crc32.h"
#include "common/little_endian.h"

namespace acc::tracking::wandb {
namespace {

constexpr uint64_t kBlockSize = 32 * 1024;
constexpr uint64_t kChunkHeaderSize = 7;
enum ChunkType : unsigned char { kFull = 1, kFirst = 2, kMiddle = 3, kLast = 4 };

}  // namespace

std::string log_header() {
  std::string header = ":W&B";
  put_le(header, 0xBEE1, 2);
  header.push_back('\0');  // the format's version
  return header;
}

std::string framed_record(const std::string& payload, uint64_t offset) {
  std::string out;
  size_t done = 0;
  bool first = true;
  while (true) {
    uint64_t left = kBlockSize - offset % kBlockSize;
    if (left < kChunkHeaderSize) {  // no room for a chunk header: the block ends in zeros
      out.append(left, '\0');
      offset += left;
      left = kBlockSize;
    }
    const size_t size = static_cast<size_t>(std::min<uint64_t>(payload.size() - done, left - kChunkHeaderSize));
    const bool last = done + size == payload.size();
    const unsigned char type = first ? (last ? kFull : kFirst) : (last ? kLast : kMiddle);
    uint32_t crc = crc32_update(crc32_start(), &type, 1);
    crc = crc32_update(crc, payload.data() + done, size);
    put_le(out, crc, 4);
    put_le(out, size, 2);
    out.push_back(static_cast<char>(type));
    out.append(payload, done, size);
    done += size;
    offset += kChunkHeaderSize + size;
    first = false;
    if (last) return out;
  }
}

}  // namespace acc::tracking::wandb
