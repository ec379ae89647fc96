#include "checkpoint/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "checkpoint/safetensors_header.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json_input.h"
#include "common/utf8.h"
#include "tensor/file_bytes.h"
#include "tensor/host.h"

namespace acc {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxHeader = 100'000'000;  // the reference implementation's MAX_HEADER_SIZE

const std::vector<std::pair<std::string, at::ScalarType>>& dtypes() {
  static const std::vector<std::pair<std::string, at::ScalarType>> table = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},        {"BF16", at::kBFloat16},
      {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort},       {"I8", at::kChar},
      {"U8", at::kByte},    {"BOOL", at::kBool}, {"C64", at::kComplexFloat}};
  return table;
}

// The reference implementation's other dtypes: files holding them are valid, but not read here.
bool other_reference_dtype(const std::string& name) {
  static const std::unordered_set<std::string> names = {"F4",      "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3",
                                                        "F8_E8M0", "U16",     "U32",     "U64"};
  return names.count(name) > 0;
}

std::string dtype_name(at::ScalarType type) {
  for (const auto& d : dtypes())
    if (d.second == type) return d.first;
  fail(Status::Unsupported, "safetensors has no dtype for ", type);
}

// The position of a dtype in the reference implementation's Dtype enumeration, which grows with the
// element size: its writer lays tensors out by this rank, largest first, then by name.
int dtype_rank(at::ScalarType type) {
  static const at::ScalarType order[] = {at::kBool,         at::kByte,     at::kChar, at::kShort,
                                         at::kHalf,         at::kBFloat16, at::kInt,  at::kFloat,
                                         at::kComplexFloat, at::kDouble,   at::kLong};
  for (int i = 0; i < static_cast<int>(std::size(order)); ++i)
    if (order[i] == type) return i;
  fail(Status::Unsupported, "safetensors has no dtype for ", type);
}

at::ScalarType dtype_of(const std::string& name, const std::string& path, const std::string& tensor) {
  for (const auto& d : dtypes())
    if (d.first == name) return d.second;
  if (other_reference_dtype(name))
    fail(Status::Unsupported, "'", path, "': tensor '", tensor, "' has dtype '", name,
         "', which safetensors defines but this library cannot read (libtorch 1.13 has no such element type)");
  fail(Status::Io, "'", path, "': tensor '", tensor, "' has an unknown dtype '", name, "'");
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  // Laid out as the reference writer lays them out (safetensors' prepare()): larger dtypes first,
  // then by name, so that with the data starting 8-byte aligned every tensor starts at a multiple of
  // its element size (readers that map the file view tensors in place); the header lists
  // __metadata__ first, then the tensors in that order, each as dtype, shape, data_offsets.
  for (const auto& [key, value] : metadata)
    require(is_utf8(key) && is_utf8(value), "cannot write '", path, "': metadata '", key, "' is not valid UTF-8");
  std::vector<std::pair<std::string, at::Tensor>> data;
  std::unordered_set<std::string> names;  // the header is a JSON object: one entry per name
  for (const auto& [name, tensor] : tensors) {
    require(!name.empty(), "tensor ", data.size(), " has no name (safetensors needs one)");
    require(name != "__metadata__", "tensor name '__metadata__' is reserved");
    require(is_utf8(name), "cannot write '", path, "': tensor ", data.size(), "'s name is not valid UTF-8");
    require(names.insert(name).second, "tensor name '", name, "' is repeated");
    data.emplace_back(name, tensor.detach().to(at::kCPU).contiguous());
  }
  std::sort(data.begin(), data.end(), [](const auto& a, const auto& b) {
    const int ra = dtype_rank(a.second.scalar_type()), rb = dtype_rank(b.second.scalar_type());
    return ra != rb ? ra > rb : a.first < b.first;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : data) {
    const uint64_t bytes = t.nbytes();
    nlohmann::ordered_json entry;
    entry["dtype"] = dtype_name(t.scalar_type());
    entry["shape"] = t.sizes().vec();
    entry["data_offsets"] = {offset, offset + bytes};
    header[name] = std::move(entry);
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  write_through_temporary(path, [&](const std::string& temporary) {
    write_stream(temporary, [&](std::ostream& out) {
      uint64_t length = text.size();
      unsigned char le[8];
      for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(length >> (8 * i));
      out.write(reinterpret_cast<const char*>(le), 8);
      out.write(text.data(), static_cast<std::streamsize>(text.size()));
      for (const auto& [name, t] : data)
        out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    });
  });
}

namespace {

// The header's length from the file's first 8 bytes, checked against the limit and the file's size.
uint64_t header_length(const uint8_t* first8, uint64_t file_size, const std::string& path) {
  if (file_size < 8) fail(Status::Io, "'", path, "' is too short to be a safetensors file");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | first8[i];
  if (header_size > kMaxHeader) fail(Status::Io, "'", path, "': header of ", header_size, " bytes is too large");
  if (8 + header_size > file_size)
    fail(Status::Io, "'", path, "': header of ", header_size, " bytes runs past the end of the file");
  return header_size;
}

}  // namespace

Metadata load_safetensors_metadata(const std::string& path) {
  refuse_unless_regular(path);  // (a FIFO would block the open)
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail(Status::Io, "cannot open '", path, "': ", std::strerror(errno));
  const auto file_size = static_cast<uint64_t>(in.tellg());
  uint8_t first8[8] = {0};
  in.seekg(0);
  in.read(reinterpret_cast<char*>(first8), file_size < 8 ? static_cast<std::streamsize>(file_size) : 8);
  const uint64_t header_size = header_length(first8, file_size, path);
  std::string text(header_size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_size)))
    fail(Status::Io, "cannot read the header of '", path, "'");
  return read_safetensors_header(text, path).metadata;
}

SafetensorsContents load_safetensors(const std::string& path) {
  // The whole file in memory, kept alive by every tensor made from it.
  const at::Tensor file = read_file_bytes(path);
  const auto file_size = static_cast<uint64_t>(file.numel());
  const uint8_t empty[8] = {0};
  const auto* bytes = file_size ? file.data_ptr<uint8_t>() : empty;
  const uint64_t header_size = header_length(bytes, file_size, path);
  SafetensorsHeader header =
      read_safetensors_header(std::string_view(reinterpret_cast<const char*>(bytes) + 8, header_size), path);
  const uint64_t data_size = file_size - 8 - header_size;
  char* data = reinterpret_cast<char*>(file.data_ptr<uint8_t>()) + 8 + header_size;

  SafetensorsContents contents;
  contents.metadata = std::move(header.metadata);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const SafetensorsEntry& entry : header.entries) {
    const std::string& name = entry.name;
    const at::ScalarType type = dtype_of(entry.dtype, path, name);
    const std::vector<int64_t>& shape = entry.shape;
    const uint64_t begin = entry.begin, end = entry.end;
    if (begin > end || end > data_size)
      fail(Status::Io, "'", path, "': tensor '", name, "' has data_offsets [", begin, ", ", end,
           "] outside the data (", data_size, " bytes)");
    int64_t nbytes = 0;
    try {
      nbytes = checked_nbytes(shape, type);  // a count that wraps would pass for a small one
    } catch (const Error&) {
      fail(Status::Io, "'", path, "': tensor '", name, "' has a bad shape ", c10::IntArrayRef(shape),
           " (its size does not fit in 64 bits)");
    }
    if (static_cast<uint64_t>(nbytes) != end - begin)
      fail(Status::Io, "'", path, "': tensor '", name, "' of shape ", c10::IntArrayRef(shape), " and dtype ",
           entry.dtype, " needs ", nbytes, " bytes but has ", end - begin);
    ranges.emplace_back(begin, end);
    contents.tensors.emplace_back(
        name, at::from_blob(data + begin, shape, [file](void*) {}, at::TensorOptions().dtype(type)));
  }
  // The file's order of tensors (the JSON object is sorted by name; offsets give the order; an empty
  // tensor before a tensor at its offset, header order between equals).
  std::vector<size_t> order(ranges.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  // The tensors must tile the data: no overlap, no hole.
  uint64_t expected = 0;
  for (size_t k : order) {
    const auto [begin, end] = ranges[k];
    if (begin != expected)
      fail(Status::Io, "'", path, "': tensor data ", begin < expected ? "overlaps" : "leaves a hole", " at byte ", begin);
    expected = end;
  }
  if (expected != data_size) fail(Status::Io, "'", path, "': ", data_size - expected, " bytes after the last tensor");
  NamedTensors in_file_order;
  in_file_order.reserve(order.size());
  for (size_t k : order) in_file_order.push_back(std::move(contents.tensors[k]));
  contents.tensors = std::move(in_file_order);
  return contents;
}

NamedTensors load_safetensors_copied(const std::string& path) {
  NamedTensors tensors = load_safetensors(path).tensors;
  for (auto& entry : tensors) entry.second = entry.second.clone();
  return tensors;
}

}  // namespace acc
