// A safetensors file's JSON header read as it is parsed (a SAX pass): what it keeps is the entries
// themselves, so a header of the largest size the format allows (100 MB) costs memory in proportion
// to its tensors and metadata, never a JSON tree several times its size.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace acc {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as written ("F32", ...); empty where the entry has none
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
  bool has_dtype = false, has_shape = false, has_offsets = false;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in the header's order
  std::map<std::string, std::string> metadata;
};

// The entries of `text` (the header of `path`, for errors): an object of tensor entries (dtype, shape
// and data_offsets; other keys ignored, as the reference reader's) and __metadata__ (an object of
// strings, or null). Io errors name the file and what is wrong: invalid JSON, a tensor named twice,
// a shape of more than kMaxSafetensorsDims dimensions, a value of the wrong kind.
SafetensorsHeader read_safetensors_header(std::string_view text, const std::string& path);

constexpr size_t kMaxSafetensorsDims = 1024;

}  // namespace acc
