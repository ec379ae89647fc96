#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/error.h"

namespace acc {

FileLock::FileLock(const std::string& path, const std::string& what, std::chrono::milliseconds patience) {
  // O_NONBLOCK: opening a FIFO put there would wait for a reader for ever.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd_ < 0) fail(Status::Io, what, " ", path, " cannot be opened: ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    fail(Status::Io, what, " ", path, " is not a regular file");
  }
  const auto step = std::chrono::milliseconds(100);
  for (auto waited = std::chrono::milliseconds(0);; waited += step) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    if (waited >= patience || (errno != EWOULDBLOCK && errno != EINTR)) {
      const int error = errno;
      ::close(fd_);
      fail(Status::Timeout, what, " ", path, " could not be locked within ", patience.count() / 1000.0, " seconds (",
           error == EWOULDBLOCK ? "another process holds it" : std::strerror(error), ")");
    }
    std::this_thread::sleep_for(step);
  }
}

FileLock::~FileLock() {
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

}  // namespace acc
