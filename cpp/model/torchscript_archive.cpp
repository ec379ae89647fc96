#include "model/torchscript_archive.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>

#include "common/crc32.h"
#include "common/error.h"
#include "model/pickle_storages.h"
#include "tensor/file_bytes.h"

namespace acc {
namespace {

// Little-endian fields of a zip structure, bounds-checked against the file.
class Bytes {
 public:
  Bytes(const uint8_t* data, uint64_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

  uint64_t size() const { return size_; }
  const uint8_t* at(uint64_t offset, uint64_t length, const char* what) const {
    if (offset > size_ || length > size_ - offset) fail(Status::Io, "'", path_, "' is truncated or corrupt (", what,
                                                          " lies outside the file)");
    return data_ + offset;
  }
  uint64_t le(uint64_t offset, int width, const char* what) const {
    const uint8_t* p = at(offset, width, what);
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = v << 8 | p[i];
    return v;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  const std::string& path_;
};

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50;

struct Directory {
  uint64_t entries = 0, offset = 0;
};

Directory find_directory(const Bytes& f, const std::string& path) {
  // The end record is the last 22 bytes plus a comment of at most 64 KiB.
  const uint64_t lowest = f.size() > 22 + 65535 ? f.size() - 22 - 65535 : 0;
  for (uint64_t at = f.size() >= 22 ? f.size() - 22 : 0; f.size() >= 22; --at) {
    if (f.le(at, 4, "the end record") == kEndOfDirectory) {
      Directory d{f.le(at + 10, 2, "the end record"), f.le(at + 16, 4, "the end record")};
      const bool zip64 = d.entries == 0xFFFF || d.offset == 0xFFFFFFFF;
      if (zip64 && at >= 20 && f.le(at - 20, 4, "the zip64 locator") == kZip64Locator) {
        const uint64_t end64 = f.le(at - 20 + 8, 8, "the zip64 locator");
        if (f.le(end64, 4, "the zip64 end record") != kZip64End)
          fail(Status::Io, "'", path, "' is not a readable zip archive (bad zip64 end record)");
        d.entries = f.le(end64 + 32, 8, "the zip64 end record");
        d.offset = f.le(end64 + 48, 8, "the zip64 end record");
      }
      return d;
    }
    if (at == lowest) break;
  }
  fail(Status::Io, "'", path, "' is not a zip archive (no end of central directory): not a TorchScript file, or truncated");
}

// How deeply a record of TorchScript code nests: libtorch's parser recurses once per bracket, unary
// operator and indented block, so code nested thousands deep overflows the stack of the thread that
// loads it (SIGSEGV). Fed the record's bytes piece by piece; brackets inside strings count too (an
// over-estimate that code written by torch.jit.save never comes near).
class CodeNesting {
 public:
  void feed(const uint8_t* bytes, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
      const char c = static_cast<char>(bytes[i]);
      if (c == '(' || c == '[' || c == '{') deepest_ = std::max(deepest_, ++brackets_);
      if ((c == ')' || c == ']' || c == '}') && brackets_ > 0) --brackets_;
      if (c == '-' || c == '+' || c == '~')
        deepest_ = std::max(deepest_, ++unary_run_);
      else if (c != ' ' && c != '(' && c != '\t')
        unary_run_ = 0;
      if (c == '\n') {
        line_start_ = true;
        indent_ = 0;
      } else if (line_start_ && (c == ' ' || c == '\t')) {
        deepest_ = std::max(deepest_, ++indent_);
      } else {
        line_start_ = false;
      }
    }
  }
  uint64_t deepest() const { return deepest_; }

 private:
  uint64_t brackets_ = 0, unary_run_ = 0, indent_ = 0, deepest_ = 0;
  bool line_start_ = true;
};

// Deeper than anything torch.jit.save writes by far, and well within the stack the load runs on.
constexpr uint64_t kMaxCodeNesting = 2000;

bool is_code_record(const std::string& name) { return name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0; }

// The CRC-32 of a record's uncompressed bytes: stored as they are, or deflated. `sink` (may be
// null) sees the uncompressed bytes as they go by.
uint32_t record_crc(const uint8_t* data, uint64_t compressed, uint64_t uncompressed, int method,
                    const std::string& path, const std::string& name, CodeNesting* sink) {
  uLong crc = crc32_start();
  if (method == 0) {
    if (compressed != uncompressed) fail(Status::Io, "'", path, "': record '", name, "' has inconsistent sizes");
    if (sink) sink->feed(data, compressed);
    return crc32_update(static_cast<uint32_t>(crc), data, compressed);
  }
  if (method != 8) fail(Status::Io, "'", path, "': record '", name, "' uses zip compression method ", method,
                        " (PyTorch writes stored records; deflate is read too)");
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail(Status::OutOfMemory, "cannot start zlib to check '", path, "'");
  std::vector<uint8_t> out(1 << 16);
  uint64_t produced = 0, consumed = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.avail_in == 0 && consumed < compressed) {
      const auto chunk = static_cast<uInt>(std::min<uint64_t>(compressed - consumed, 1u << 30));
      z.next_in = const_cast<Bytef*>(data + consumed);
      z.avail_in = chunk;
      consumed += chunk;
    }
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    status = inflate(&z, Z_NO_FLUSH);
    const uint64_t got = out.size() - z.avail_out;
    crc = crc32(crc, out.data(), static_cast<uInt>(got));
    if (sink) sink->feed(out.data(), got);
    produced += got;
    if (status != Z_OK && status != Z_STREAM_END) break;
    if (status == Z_OK && got == 0 && z.avail_in == 0 && consumed >= compressed) break;
  }
  inflateEnd(&z);
  if (status != Z_STREAM_END || produced != uncompressed)
    fail(Status::Io, "'", path, "': record '", name, "' is not valid deflate data");
  return static_cast<uint32_t>(crc);
}

struct Record {
  std::string name;
  int method = 0;
  uint64_t compressed = 0, uncompressed = 0;
  const uint8_t* data = nullptr;
};

}  // namespace

namespace {

void verify_archive(const uint8_t* data, uint64_t size, const std::string& path) {
  const Bytes f(data, size, path);
  const Directory directory = find_directory(f, path);
  if (directory.entries == 0) fail(Status::Io, "'", path, "' is an empty zip archive, not a TorchScript file");
  std::map<std::string, Record> records;
  uint64_t at = directory.offset;
  for (uint64_t i = 0; i < directory.entries; ++i) {
    if (f.le(at, 4, "the central directory") != kDirectoryEntry)
      fail(Status::Io, "'", path, "' is corrupt (central directory entry ", i, " is damaged)");
    Record r;
    r.method = static_cast<int>(f.le(at + 10, 2, "a directory entry"));
    const auto expected_crc = static_cast<uint32_t>(f.le(at + 16, 4, "a directory entry"));
    r.compressed = f.le(at + 20, 4, "a directory entry");
    r.uncompressed = f.le(at + 24, 4, "a directory entry");
    const uint64_t name_length = f.le(at + 28, 2, "a directory entry"), extra_length = f.le(at + 30, 2, "a directory entry"),
                   comment_length = f.le(at + 32, 2, "a directory entry");
    uint64_t local = f.le(at + 42, 4, "a directory entry");
    r.name.assign(reinterpret_cast<const char*>(f.at(at + 46, name_length, "a record name")), name_length);
    // Zip64: the fields that overflowed 32 bits follow, in this order, in extra field 0x0001.
    for (uint64_t e = at + 46 + name_length, end = e + extra_length; e + 4 <= end;) {
      const uint64_t id = f.le(e, 2, "an extra field"), length = f.le(e + 2, 2, "an extra field");
      if (id == 1) {
        uint64_t field = e + 4;
        if (r.uncompressed == 0xFFFFFFFF) r.uncompressed = f.le(field, 8, "a zip64 field"), field += 8;
        if (r.compressed == 0xFFFFFFFF) r.compressed = f.le(field, 8, "a zip64 field"), field += 8;
        if (local == 0xFFFFFFFF) local = f.le(field, 8, "a zip64 field");
      }
      e += 4 + length;
    }
    if (f.le(local, 4, "a record") != kLocalHeader)
      fail(Status::Io, "'", path, "' is corrupt (the header of record '", r.name, "' is damaged)");
    const uint64_t data_start = local + 30 + f.le(local + 26, 2, "a record header") + f.le(local + 28, 2, "a record header");
    r.data = f.at(data_start, r.compressed, "a record's data");
    CodeNesting nesting;
    CodeNesting* code = is_code_record(r.name) ? &nesting : nullptr;
    if (record_crc(r.data, r.compressed, r.uncompressed, r.method, path, r.name, code) != expected_crc)
      fail(Status::Io, "'", path, "': record '", r.name, "' fails its CRC-32 check (the file is damaged)");
    if (code && nesting.deepest() > kMaxCodeNesting)
      fail(Status::Io, "'", path, "': record '", r.name, "' holds code nested ", nesting.deepest(),
           " deep (brackets, unary operators or indentation; at most ", kMaxCodeNesting,
           "): libtorch's parser would overflow its stack");
    at += 46 + name_length + extra_length + comment_length;
    records[r.name] = r;
  }
  // A pickle "<dir>/data.pkl" (or constants.pkl) keeps its tensors' storages in "<dir>/data/<key>".
  for (const auto& [name, pickle] : records) {
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".pkl") != 0 || pickle.method != 0) continue;
    const std::string folder = name.substr(0, name.size() - 4) + "/";
    const auto storages = pickle_storages(std::string_view(reinterpret_cast<const char*>(pickle.data), pickle.uncompressed));
    if (!storages) continue;  // a pickle this scan does not follow: libtorch's own checks apply
    for (const auto& storage : *storages) {
      auto it = records.find(folder + storage.key);
      if (it == records.end())
        fail(Status::Io, "'", path, "': ", name, " refers to tensor data '", folder + storage.key, "', which is missing");
      if (storage.nbytes && *storage.nbytes > it->second.uncompressed)
        fail(Status::Io, "'", path, "': record '", it->first, "' holds ", it->second.uncompressed,
             " bytes, but its tensor storage needs ", *storage.nbytes, " (the file is damaged)");
    }
  }
}

}  // namespace

VerifiedArchive::VerifiedArchive(const std::string& path)
    : bytes_(read_file_bytes(path)),
      stream_(bytes_.numel() ? static_cast<const char*>(bytes_.data_ptr()) : nullptr,
              static_cast<size_t>(bytes_.numel())) {
  verify_archive(bytes_.numel() ? bytes_.data_ptr<uint8_t>() : nullptr, static_cast<uint64_t>(bytes_.numel()), path);
}

}  // namespace acc
