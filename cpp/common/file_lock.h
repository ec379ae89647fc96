// An exclusive flock on a lock file, held while the object lives: processes that write the same
// files take turns (trackio's project lock; several processes saving adapters into one folder).
#pragma once

#include <chrono>
#include <string>

namespace acc {

class FileLock {
 public:
  // Opens (creating) `path` and locks it, trying every 0.1 s; Timeout after `patience`, Io where the
  // file cannot be opened or is not a regular file. `what` names it in errors ("trackio: the
  // project's lock file").
  FileLock(const std::string& path, const std::string& what, std::chrono::milliseconds patience);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace acc
