#include "common/files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace acc {

void refuse_unless_regular(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) fail(Status::Io, "'", path, "' is not a regular file");
}

std::optional<std::string> read_whole_file(const std::string& path) {
  refuse_unless_regular(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
  }
  if (!out) fail(Status::Io, "cannot write '", path, "': ", errno != 0 ? std::strerror(errno) : "the write failed");
}

void write_through_temporary(const std::string& path, const std::function<void(const std::string& temporary)>& write) {
  const std::string temporary = path + ".tmp";
  std::error_code ec;
  try {
    write(temporary);
    std::filesystem::rename(temporary, path, ec);
    if (ec) fail(Status::Io, "cannot write '", path, "': ", ec.message());
  } catch (...) {
    std::filesystem::remove(temporary, ec);
    throw;
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_through_temporary(path, [&](const std::string& temporary) { write_file(temporary, bytes); });
}

}  // namespace acc
