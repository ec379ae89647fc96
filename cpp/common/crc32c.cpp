#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define ACC_CRC32C_SSE42 1
#endif

namespace acc {
namespace {

// Slicing-by-8 tables: eight bytes per step, a few times faster than a byte at a time.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[0][i] = c;
  }
  for (size_t s = 1; s < 8; ++s)
    for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  return t;
}

const Tables& tables() {
  static const Tables t = make_tables();
  return t;
}

// `c` is the running register (inverted CRC); both paths return it updated.
uint32_t update_with_tables(uint32_t c, const unsigned char* p, size_t size) {
  const auto& t = tables();
  for (; size >= 8; size -= 8, p += 8) {
    // Little-endian byte order, written out so that it holds on any host.
    const uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^ t[3][p[4]] ^
        t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
  }
  for (; size > 0; --size, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xff];
  return c;
}

#ifdef ACC_CRC32C_SSE42
__attribute__((target("sse4.2"))) uint32_t update_with_sse42(uint32_t c, const unsigned char* p, size_t size) {
  uint64_t c64 = c;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  c = static_cast<uint32_t>(c64);
  for (; size > 0; --size, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}

bool has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

uint32_t update(uint32_t c, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
#ifdef ACC_CRC32C_SSE42
  if (has_sse42()) return update_with_sse42(c, p, size);
#endif
  return update_with_tables(c, p, size);
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) { return ~update(~crc, data, size); }

}  // namespace acc
