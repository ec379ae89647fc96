#include "tracking/whole_appends.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/files.h"

namespace acc::tracking {

bool WholeAppends::append(int fd, const std::string& path, const std::string& bytes, std::string& error) {
  if (torn_from_ >= 0) {
    if (::ftruncate(fd, torn_from_) != 0) {
      error = torn_error(path);
      return false;
    }
    torn_from_ = -1;
  }
  if (bytes.empty()) return true;
  const off_t before = ::lseek(fd, 0, SEEK_END);
  const int failure = write_fully(fd, bytes.data(), bytes.size());
  if (failure == 0) return true;
  error = concat("cannot write ", path, ": ", std::strerror(failure));
  // The part written goes again with the rest: the file is cut back to where it ended.
  struct stat after {};
  if (before >= 0 && ::fstat(fd, &after) == 0 && after.st_size > before && ::ftruncate(fd, before) != 0) {
    torn_from_ = before;
    error += "; " + torn_error(path);
  }
  return false;
}

std::string WholeAppends::torn_error(const std::string& path) const {
  return concat(path, " ends in part of a ", unit_, " that cannot be cut back to the whole ", unit_, "s' end (byte ",
                torn_from_, "): ", std::strerror(errno), " (nothing more is appended until it can)");
}

}  // namespace acc::tracking
