// An independent reader of TensorBoard event files for the tests, written from the TFRecord and
// protobuf wire-format specifications (not with the library's generated classes or CRC code):
// each record is a little-endian uint64 length, the masked CRC-32C of those 8 bytes, the data and
// the masked CRC-32C of the data; the data is an Event message decoded field by field.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace acc_test {

// A CRC-32 of a reflected `polynomial`, bit by bit, as slow and as obvious as possible.
inline uint32_t crc32_bitwise(const std::string& data, uint32_t polynomial) {
  uint32_t c = ~0u;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (polynomial & (0u - (c & 1u)));
  }
  return ~c;
}
inline uint32_t crc32c_bitwise(const std::string& data) { return crc32_bitwise(data, 0x82F63B78u); }  // Castagnoli
inline uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// One field of a protobuf message: number, wire type and payload.
struct WireField {
  uint32_t number = 0;
  int type = 0;           // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t integer = 0;   // varint, fixed64 or fixed32 bits
  std::string bytes;      // length-delimited payload
  double as_double() const { double d; std::memcpy(&d, &integer, 8); return d; }
  float as_float() const { uint32_t u = static_cast<uint32_t>(integer); float f; std::memcpy(&f, &u, 4); return f; }
};

// Decodes every field of a message; a malformed message is a test failure and an empty result.
inline std::vector<WireField> decode_message(const std::string& msg) {
  std::vector<WireField> out;
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= msg.size()) return false;
      const auto b = static_cast<unsigned char>(msg[i++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  auto fixed = [&](int bytes, uint64_t& v) {
    if (i + bytes > msg.size()) return false;
    v = 0;
    for (int k = 0; k < bytes; ++k) v |= uint64_t(static_cast<unsigned char>(msg[i + k])) << (8 * k);
    i += bytes;
    return true;
  };
  while (i < msg.size()) {
    uint64_t key = 0;
    WireField f;
    bool ok = varint(key);
    f.number = static_cast<uint32_t>(key >> 3);
    f.type = static_cast<int>(key & 7);
    if (ok) {
      if (f.type == 0) ok = varint(f.integer);
      else if (f.type == 1) ok = fixed(8, f.integer);
      else if (f.type == 5) ok = fixed(4, f.integer);
      else if (f.type == 2) {
        uint64_t n = 0;
        ok = varint(n) && i + n <= msg.size();
        if (ok) f.bytes = msg.substr(i, n), i += n;
      } else ok = false;
    }
    if (!ok || f.number == 0) {
      ADD_FAILURE() << "malformed protobuf message at byte " << i;
      return {};
    }
    out.push_back(std::move(f));
  }
  return out;
}

struct TbValue {
  std::string tag;
  bool has_simple_value = false;
  float simple_value = 0;
  std::string plugin_name, plugin_content;
  std::vector<std::string> tensor_strings;
  std::vector<double> tensor_numbers;  // float_val or double_val
  int64_t tensor_dtype = 0;
  std::vector<int64_t> tensor_dims;
  // Summary.Value.histo = 5, a HistogramProto: min = 1, max = 2, num = 3, sum = 4, sum_squares = 5
  // (doubles), bucket_limit = 6 and bucket = 7 (packed doubles).
  bool has_histo = false;
  double histo_min = 0, histo_max = 0, histo_num = 0, histo_sum = 0, histo_sum_squares = 0;
  std::vector<double> histo_limits, histo_counts;
  bool has_image = false;  // Summary.Image: height = 1, width = 2, colorspace = 3, encoded_image_string = 4
  int64_t image_height = 0, image_width = 0, image_colorspace = 0;
  std::string image_encoded;
};

struct TbEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  int64_t session_status = -1;  // SessionLog's status (1: START), -1 without one
  bool has_summary = false;
  std::vector<TbValue> values;
};

inline TbValue decode_value(const std::string& bytes) {
  TbValue v;
  for (const auto& f : decode_message(bytes)) {
    if (f.number == 1 && f.type == 2) v.tag = f.bytes;
    if (f.number == 2 && f.type == 5) v.has_simple_value = true, v.simple_value = f.as_float();
    if (f.number == 9 && f.type == 2)  // SummaryMetadata
      for (const auto& m : decode_message(f.bytes))
        if (m.number == 1 && m.type == 2)  // PluginData
          for (const auto& p : decode_message(m.bytes)) {
            if (p.number == 1) v.plugin_name = p.bytes;
            if (p.number == 2) v.plugin_content = p.bytes;
          }
    if (f.number == 8 && f.type == 2)  // TensorProto: dtype = 1, tensor_shape = 2, string_val = 8
      for (const auto& t : decode_message(f.bytes)) {
        if (t.number == 1 && t.type == 0) v.tensor_dtype = static_cast<int64_t>(t.integer);
        if (t.number == 2 && t.type == 2)  // TensorShapeProto: dim = 2, each Dim's size = 1
          for (const auto& d : decode_message(t.bytes))
            if (d.number == 2 && d.type == 2)
              for (const auto& s : decode_message(d.bytes))
                if (s.number == 1 && s.type == 0) v.tensor_dims.push_back(static_cast<int64_t>(s.integer));
        if (t.number == 8 && t.type == 2) v.tensor_strings.push_back(t.bytes);
        if ((t.number == 5 || t.number == 6) && t.type == 2) {  // packed float_val / double_val
          const size_t width = t.number == 5 ? 4 : 8;
          EXPECT_EQ(t.bytes.size() % width, 0u) << "packed numbers";
          for (size_t k = 0; k + width <= t.bytes.size(); k += width) {
            if (width == 4) {
              float f;
              std::memcpy(&f, t.bytes.data() + k, 4);
              v.tensor_numbers.push_back(f);
            } else {
              double d;
              std::memcpy(&d, t.bytes.data() + k, 8);
              v.tensor_numbers.push_back(d);
            }
          }
        }
      }
    if (f.number == 5 && f.type == 2) {
      v.has_histo = true;
      auto packed = [](const std::string& bytes) {
        EXPECT_EQ(bytes.size() % 8, 0u) << "packed doubles";
        std::vector<double> out(bytes.size() / 8);
        std::memcpy(out.data(), bytes.data(), out.size() * 8);  // little-endian, as the wire format
        return out;
      };
      for (const auto& h : decode_message(f.bytes)) {
        if (h.type == 1 && h.number >= 1 && h.number <= 5)
          (h.number == 1   ? v.histo_min
           : h.number == 2 ? v.histo_max
           : h.number == 3 ? v.histo_num
           : h.number == 4 ? v.histo_sum
                           : v.histo_sum_squares) = h.as_double();
        if (h.number == 6 && h.type == 2) v.histo_limits = packed(h.bytes);
        if (h.number == 7 && h.type == 2) v.histo_counts = packed(h.bytes);
      }
    }
    if (f.number == 4 && f.type == 2) {
      v.has_image = true;
      for (const auto& i : decode_message(f.bytes)) {
        if (i.number == 1 && i.type == 0) v.image_height = static_cast<int64_t>(i.integer);
        if (i.number == 2 && i.type == 0) v.image_width = static_cast<int64_t>(i.integer);
        if (i.number == 3 && i.type == 0) v.image_colorspace = static_cast<int64_t>(i.integer);
        if (i.number == 4 && i.type == 2) v.image_encoded = i.bytes;
      }
    }
  }
  return v;
}

// Every event of the file, with each record's framing and CRCs checked.
inline std::vector<TbEvent> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<TbEvent> events;
  size_t i = 0;
  auto le = [&](size_t at, int bytes) {
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= uint64_t(static_cast<unsigned char>(data[at + k])) << (8 * k);
    return v;
  };
  while (i < data.size()) {
    if (i + 12 > data.size()) {
      ADD_FAILURE() << "truncated record header at byte " << i;
      break;
    }
    const uint64_t length = le(i, 8);
    EXPECT_EQ(le(i + 8, 4), masked(crc32c_bitwise(data.substr(i, 8)))) << "length CRC of the record at byte " << i;
    if (i + 12 + length + 4 > data.size()) {
      ADD_FAILURE() << "truncated record at byte " << i;
      break;
    }
    const std::string payload = data.substr(i + 12, length);
    EXPECT_EQ(le(i + 12 + length, 4), masked(crc32c_bitwise(payload))) << "data CRC of the record at byte " << i;
    i += 12 + length + 4;
    TbEvent e;
    for (const auto& f : decode_message(payload)) {
      if (f.number == 1 && f.type == 1) e.wall_time = f.as_double();
      if (f.number == 2 && f.type == 0) e.step = static_cast<int64_t>(f.integer);
      if (f.number == 3 && f.type == 2) e.file_version = f.bytes;
      if (f.number == 7 && f.type == 2) {  // SessionLog (event.proto's 7): status = 1 (an enum; absent for 0)
        e.session_status = 0;
        for (const auto& l : decode_message(f.bytes))
          if (l.number == 1 && l.type == 0) e.session_status = static_cast<int64_t>(l.integer);
      }
      if (f.number == 5 && f.type == 2) {
        e.has_summary = true;
        for (const auto& v : decode_message(f.bytes))
          if (v.number == 1 && v.type == 2) e.values.push_back(decode_value(v.bytes));
      }
    }
    events.push_back(std::move(e));
  }
  return events;
}

// The hyper-parameters of an HParams session_start_info payload: name -> number, string or bool
// (as text: "0.001", "adamw", "true").
inline std::map<std::string, std::string> decode_session_start(const std::string& content) {
  std::map<std::string, std::string> out;
  for (const auto& f : decode_message(content))
    if (f.number == 3 && f.type == 2)  // session_start_info
      for (const auto& s : decode_message(f.bytes))
        if (s.number == 1 && s.type == 2) {  // map entry
          std::string key, value;
          for (const auto& kv : decode_message(s.bytes)) {
            if (kv.number == 1) key = kv.bytes;
            if (kv.number == 2)
              for (const auto& v : decode_message(kv.bytes)) {
                if (v.number == 2 && v.type == 1) value = std::to_string(v.as_double());
                if (v.number == 3 && v.type == 2) value = v.bytes;
                if (v.number == 4 && v.type == 0) value = v.integer ? "true" : "false";
              }
          }
          out[key] = value;
        }
  return out;
}

// The status of an HParams session_end_info payload (1: success), -1 if absent.
inline int decode_session_end_status(const std::string& content) {
  for (const auto& f : decode_message(content))
    if (f.number == 4 && f.type == 2) {
      for (const auto& s : decode_message(f.bytes))
        if (s.number == 1 && s.type == 0) return static_cast<int>(s.integer);
      return 0;  // proto3 leaves a zero status out
    }
  return -1;
}

}  // namespace acc_test
