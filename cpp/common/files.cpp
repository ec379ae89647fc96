#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <vector>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/options.h"
#include "common/system_random.h"

namespace acc {

void refuse_unless_regular(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) fail(Status::Io, "'", path, "' is not a regular file");
}

void make_folders(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(Status::Io, "cannot create ", what, " ", dir, ": ", ec.message());
}

std::optional<std::string> read_whole_file(const std::string& path) {
  refuse_unless_regular(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

namespace {

// A buffered file descriptor that accepts every byte: after the first failed write it keeps that
// write's errno and drops the rest.
class LatchingFileBuffer : public std::streambuf {
 public:
  explicit LatchingFileBuffer(int fd) : fd_(fd), buffer_(1 << 16) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    drain();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override {
    drain();
    return 0;
  }
  // A span at least as large as the buffer (a tensor's bytes) goes to the file directly.
  std::streamsize xsputn(const char* data, std::streamsize count) override {
    if (count < static_cast<std::streamsize>(buffer_.size())) return std::streambuf::xsputn(data, count);
    drain();
    put(data, static_cast<size_t>(count));
    return count;
  }

 private:
  void put(const char* at, size_t count) {
    if (error_ == 0) error_ = write_fully(fd_, at, count);
  }
  void drain() {
    put(pbase(), static_cast<size_t>(pptr() - pbase()));
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }

  int fd_;
  int error_ = 0;
  std::vector<char> buffer_;
};

}  // namespace

std::vector<std::string> path_parts(const std::string& path) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) return parts;
    start = slash + 1;
  }
}

int write_fully(int fd, const char* data, size_t size) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

void write_stream(const std::string& path, const std::function<void(std::ostream& out)>& write) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);  // as fopen, under umask
  if (fd < 0) fail(Status::Io, "cannot write '", path, "': ", std::strerror(errno));
  LatchingFileBuffer buffer(fd);
  int error = 0;
  try {
    std::ostream out(&buffer);
    write(out);
    out.flush();
    error = buffer.error();
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) fail(Status::Io, "cannot write '", path, "': ", std::strerror(error));
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

namespace {

// Where a write to `path` lands: `path`, or the file a symbolic link there leads to (written in
// place, a file behind a link is what changes, not the link). A path that exists and is not a
// regular file (a device, a FIFO, a folder) is refused: renaming over it would replace it.
std::string write_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target = path;
  for (int links = 0; fs::is_symlink(target, ec); ++links) {
    if (links == 40) fail(Status::Io, "cannot write '", path, "': too many levels of symbolic links");
    const fs::path next = fs::read_symlink(target, ec);
    if (ec) fail(Status::Io, "cannot write '", path, "': ", ec.message());
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  refuse_unless_regular(target.string());
  return target.string();
}

}  // namespace

std::string name_with_suffix_fitted(const std::string& name, const std::string& suffix) {
  if (name.size() + suffix.size() <= kFileNameMax) return name + suffix;
  char checksum[16];
  std::snprintf(checksum, sizeof checksum, "~%08x", crc32c(name.data(), name.size()));
  const size_t kept = kFileNameMax - std::min(kFileNameMax, suffix.size() + std::strlen(checksum));
  return name.substr(0, kept) + checksum + suffix;
}

namespace {

constexpr char kTemporaryMark[] = ".tmp";
constexpr size_t kTemporaryDigits = 12;

// ".tmp" and 12 hex digits from the system's random source (not torch's generators, whose streams
// the training follows): no other write's temporary has them, on this machine or another sharing
// the folder.
std::string unique_temporary_suffix() {
  const uint64_t bits = system_random_bits();
  char digits[kTemporaryDigits + 1];
  std::snprintf(digits, sizeof digits, "%012llx", static_cast<unsigned long long>(bits & 0xffffffffffffULL));
  return kTemporaryMark + std::string(digits);
}

}  // namespace

bool is_temporary_of(const std::string& candidate, const std::string& name) {
  const std::string suffix_shape = kTemporaryMark + std::string(kTemporaryDigits, '0');
  const std::string fitted = name_with_suffix_fitted(name, suffix_shape);
  const size_t stem = fitted.size() - kTemporaryDigits;  // the fitted name up to its digits
  return candidate.size() == fitted.size() && candidate.compare(0, stem, fitted, 0, stem) == 0 &&
         std::all_of(candidate.begin() + static_cast<std::ptrdiff_t>(stem), candidate.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(c); });
}

namespace {

// Whether saves are flushed to disk: unless the environment says ACC_SYNC_SAVES=0 (a scratch
// disk, where a save's speed matters more than its surviving a power loss).
bool saves_synced() {
  static const bool synced = [] {
    const char* value = std::getenv("ACC_SYNC_SAVES");
    return !value || parse_bool(value).value_or(true);
  }();
  return synced;
}

// fsync of one file or folder; EINVAL (a file system that keeps nothing to sync) and EROFS (nothing
// written there) are no failure.
void sync_one(const std::string& path, const std::string& named, bool folder) {
  if (!saves_synced()) return;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (folder ? O_DIRECTORY : 0));
  if (fd < 0)
    fail(Status::Io, "cannot write '", named, "': ", std::strerror(errno), " (opening it to flush it to disk)");
  int error = 0;
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    if (errno != EINVAL && errno != EROFS) error = errno;
    break;
  }
  ::close(fd);
  if (error != 0) fail(Status::Io, "cannot write '", named, "': ", std::strerror(error), " (flushing it to disk)");
}

}  // namespace

FolderMadeForWrite::~FolderMadeForWrite() {
  if (folder_.empty() || std::uncaught_exceptions() == 0) return;
  std::error_code ignored;
  std::filesystem::remove(folder_, ignored);  // only an empty folder goes
}

void FolderMadeForWrite::make(const std::string& folder, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(folder, ec))) return;
  if (std::filesystem::create_directories(folder, ec)) folder_ = folder;
  if (ec) fail(Status::Io, "cannot create ", what, " '", folder, "': ", ec.message());
}

void fail_naming_final(const Error& e, const std::string& written, const std::string& final) {
  std::string message = e.what();
  for (size_t at = 0; !written.empty() && (at = message.find(written, at)) != std::string::npos; at += final.size())
    message.replace(at, written.size(), final);
  fail(e.status(), message);
}

void sync_to_disk(const std::string& path, const std::string& named) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(path, ec))) return sync_one(path, named, false);
  for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const auto status = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_regular_file(status) || fs::is_directory(status))
      sync_one(it->path().string(), named, fs::is_directory(status));
  }
  if (ec) fail(Status::Io, "cannot write '", named, "': ", ec.message(), " (listing it to flush it to disk)");
  sync_one(path, named, true);
}

void sync_folder_of(const std::string& path, const std::string& named) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  sync_one(folder.empty() ? "." : folder.string(), named, true);
}

void write_through_temporary(const std::string& path, const std::function<void(const std::string& temporary)>& write) {
  const std::filesystem::path target = write_target(path);
  // The folder is checked first, so that its failure names the caller's path, not the temporary's.
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  struct stat folder_stat {};
  if (::stat(folder.c_str(), &folder_stat) == 0 && !S_ISDIR(folder_stat.st_mode))  // (access would say EACCES)
    fail(Status::Io, "cannot write '", path, "': '", folder.string(), "' is a file, not a folder");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    fail(Status::Io, "cannot write '", path, "': ", std::strerror(errno),
         errno == ENOENT || errno == ENOTDIR ? " (its folder does not exist)" : "");
  const std::string temporary =
      (target.parent_path() / name_with_suffix_fitted(target.filename().string(), unique_temporary_suffix())).string();
  std::error_code ec;
  try {
    write(temporary);
    // On disk before it replaces anything: a crash or a write-back failure never leaves a file that
    // was never written in the place of the one that was there.
    sync_to_disk(temporary, path);
    // The file replaced keeps its permissions (a group-writable model stays so).
    struct stat replaced {};
    if (::stat(target.c_str(), &replaced) == 0) ::chmod(temporary.c_str(), replaced.st_mode & 07777);
    std::filesystem::rename(temporary, target, ec);
    if (ec) fail(Status::Io, "cannot write '", path, "': ", ec.message());
    sync_folder_of(target.string(), path);
  } catch (const Error& e) {
    std::filesystem::remove(temporary, ec);
    fail_naming_final(e, temporary, path);
  } catch (...) {
    std::filesystem::remove(temporary, ec);
    throw;
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_through_temporary(path, [&](const std::string& temporary) { write_file(temporary, bytes); });
}

}  // namespace acc
