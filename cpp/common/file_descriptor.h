// A file descriptor closed on every way out of its scope.
#pragma once

#include <unistd.h>

namespace acc {

struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace acc
