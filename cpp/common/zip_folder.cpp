#include "common/zip_folder.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <vector>

#include "common/crc32.h"
#include "common/error.h"
#include "common/files.h"
#include "common/little_endian.h"

namespace acc {
namespace {

namespace fs = std::filesystem;

struct Entry {
  std::string name;
  uint32_t crc = 0;
  uint64_t size = 0, offset = 0;
};

constexpr uint16_t kVersion = 20;            // 2.0: stored files
constexpr uint16_t kUtf8Names = 1u << 11;    // general purpose flag bit 11
constexpr uint16_t kDosDate = (1 << 5) | 1;  // 1980-01-01, zip's earliest date: no time is recorded

// The fields a local header and a central directory entry share, from "version needed" on.
std::string common_fields(const Entry& e) {
  std::string out;
  put_le(out, kVersion, 2);
  put_le(out, kUtf8Names, 2);
  put_le(out, 0, 2);  // stored
  put_le(out, 0, 2);  // time
  put_le(out, kDosDate, 2);
  put_le(out, e.crc, 4);
  put_le(out, e.size, 4);  // compressed
  put_le(out, e.size, 4);
  put_le(out, e.name.size(), 2);
  put_le(out, 0, 2);  // no extra field
  return out;
}

}  // namespace

void zip_folder(const std::string& folder, const std::string& zip_path) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path());
  if (ec) fail(Status::Io, "cannot list ", folder, ": ", ec.message());
  std::sort(files.begin(), files.end());
  require(files.size() < 0xffff, "zip: ", folder, " holds ", files.size(), " files (a zip without ZIP64 takes 65534)");
  constexpr uint64_t kLimit = std::numeric_limits<uint32_t>::max();
  write_through_temporary(zip_path, [&](const std::string& temporary) {
    write_stream(temporary, [&](std::ostream& out) {
      std::vector<Entry> entries;
      uint64_t offset = 0;
      for (const auto& file : files) {
        const std::optional<std::string> bytes = read_whole_file(file.string());
        if (!bytes) fail(Status::Io, "zip: cannot read ", file.string());
        Entry e{fs::relative(file, folder).generic_string(), 0, bytes->size(), offset};
        require(e.size < kLimit && offset + e.size + 30 + e.name.size() < kLimit, "zip: ", folder,
                " is too large for a zip without ZIP64 (4 GiB)");
        e.crc = crc32_update(crc32_start(), bytes->data(), bytes->size());
        std::string header;
        put_le(header, 0x04034b50, 4);
        header += common_fields(e) + e.name;
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
        offset += header.size() + bytes->size();
        entries.push_back(std::move(e));
      }
      std::string directory;
      for (const auto& e : entries) {
        put_le(directory, 0x02014b50, 4);
        put_le(directory, (3 << 8) | kVersion, 2);  // made by: Unix
        directory += common_fields(e);
        put_le(directory, 0, 2);               // comment
        put_le(directory, 0, 2);               // disk
        put_le(directory, 0, 2);               // internal attributes
        put_le(directory, 0100644u << 16, 4);  // external: a regular file, rw-r--r--
        put_le(directory, e.offset, 4);
        directory += e.name;
      }
      const uint64_t directory_size = directory.size();
      require(offset + directory_size < kLimit, "zip: ", folder, " is too large for a zip without ZIP64 (4 GiB)");
      put_le(directory, 0x06054b50, 4);
      put_le(directory, 0, 2);
      put_le(directory, 0, 2);
      put_le(directory, entries.size(), 2);
      put_le(directory, entries.size(), 2);
      put_le(directory, directory_size, 4);
      put_le(directory, offset, 4);
      put_le(directory, 0, 2);  // no comment
      out.write(directory.data(), static_cast<std::streamsize>(directory.size()));
    });
  });
}

}  // namespace acc
