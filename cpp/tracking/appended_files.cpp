#include "tracking/appended_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "tracking/async_file.h"
#include "tracking/torn_tail.h"

namespace acc::tracking {
namespace fs = std::filesystem;

AppendedFiles::~AppendedFiles() { close_all(); }

void AppendedFiles::close_all() {
  for (auto& entry : files_)
    if (entry.second.fd >= 0) ::close(std::exchange(entry.second.fd, -1));
  open_ = 0;
}

bool AppendedFiles::open(const std::string& name, File& file, std::string& error) {
  if (open_ >= kMaxOpen) close_all();  // thousands of names: reopened as they come
  const fs::path path = path_of(name);
  try {
    make_folders(path.parent_path().string(), "the metric folder");
    // Non-blocking: a FIFO without a reader fails to open instead of waiting for one. Read too: its
    // last byte says whether a stopped run left a torn line.
    const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0) {
      const int failure = errno;
      refuse_unless_regular(path.string());
      fail(Status::Io, label_, ": cannot open ", path.string(), ": ", std::strerror(failure));
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
    file.fd = fd;
    ++open_;
    if (file.header) {
      if (st.st_size == 0) {
        const std::string header = file.header(name);
        file.waiting.insert(0, header);
        waiting_bytes_ += header.size();
      }
      file.header = nullptr;
    }
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
}

void AppendedFiles::append(const std::string& name, const std::string& line, const Header& header) {
  auto [it, made] = files_.try_emplace(name);
  File& file = it->second;
  if (made) file.header = header;
  if (waiting_bytes_ + line.size() > kMaxWaitingBytes) {
    ++dropped_;
    return;
  }
  file.waiting += line;
  waiting_bytes_ += line.size();
  std::string ignored;  // flush() reports what is still refused
  if (file.waiting.size() >= kWriteAt && (file.fd >= 0 || open(name, file, ignored)))
    write_out(name, file, ignored);
}

void AppendedFiles::flush() {
  std::string first_error;
  for (auto& [name, file] : files_) {
    std::string error;
    if (file.waiting.empty() && !file.appends.torn()) continue;
    if ((file.fd >= 0 || open(name, file, error)) && write_out(name, file, error)) continue;
    if (first_error.empty()) first_error = error;
  }
  if (first_error.empty()) return;
  fail(Status::Io, first_error + lost_so_far(dropped_, "line"), " (kept, to be written once the disk takes them)");
}

bool AppendedFiles::write_out(const std::string& name, File& file, std::string& error) {
  if (!file.appends.append(file.fd, path_of(name), file.waiting, error)) {
    error = label_ + ": " + error;
    return false;
  }
  waiting_bytes_ -= file.waiting.size();
  file.waiting.clear();
  return true;
}

}  // namespace acc::tracking
