#include "tracking/appended_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "tracking/torn_tail.h"

namespace acc::tracking {
namespace fs = std::filesystem;

AppendedFiles::~AppendedFiles() {
  for (const auto& entry : files_) ::close(entry.second.fd);
}

AppendedFiles::File& AppendedFiles::file_of(const std::string& name, const Header& header) {
  if (auto found = files_.find(name); found != files_.end()) return found->second;
  if (files_.size() >= kMaxOpen) {  // thousands of names: reopened as they come
    flush();
    for (const auto& entry : files_) ::close(entry.second.fd);
    files_.clear();
  }
  const fs::path path = path_of(name);
  make_folders(path.parent_path().string(), "the metric folder");
  // Non-blocking: a FIFO without a reader fails to open instead of waiting for one. Read too: its
  // last byte says whether a stopped run left a torn line.
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd < 0) {
    const int error = errno;
    refuse_unless_regular(path.string());
    fail(Status::Io, label_, ": cannot open ", path.string(), ": ", std::strerror(error));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(Status::Io, label_, ": '", path.string(), "' is not a regular file");
  }
  char last = '\n';
  if (st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') {
    try {
      drop_torn_tail(path.string(), /*quoted_fields=*/false, line_starts_);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::fstat(fd, &st);
  }
  File& file = files_[name] = File{fd, {}};
  if (st.st_size == 0 && header) file.waiting = header(name);
  return file;
}

void AppendedFiles::append(const std::string& name, const std::string& line, const Header& header) {
  File& file = file_of(name, header);
  file.waiting += line;
  if (file.waiting.size() >= kWriteAt) write_out(name, file);
}

void AppendedFiles::flush() {
  for (auto& [name, file] : files_) write_out(name, file);
}

void AppendedFiles::write_out(const std::string& name, File& file) {
  if (file.waiting.empty()) return;
  const ssize_t written = ::write(file.fd, file.waiting.data(), file.waiting.size());
  if (written == static_cast<ssize_t>(file.waiting.size())) {
    file.waiting.clear();
    return;
  }
  const int error = errno;
  struct stat after {};
  if (written > 0 && ::fstat(file.fd, &after) == 0) static_cast<void>(::ftruncate(file.fd, after.st_size - written));
  file.waiting.clear();
  fail(Status::Io, label_, ": cannot write ", path_of(name), ": ",
       written < 0 ? std::strerror(error) : "the disk took part of the lines");
}

}  // namespace acc::tracking
