#include "tensor/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/file_descriptor.h"

namespace acc {

at::Tensor read_file_bytes(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer (regular files ignore it).
  const FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) fail(Status::Io, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) fail(Status::Io, "cannot stat '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(Status::Io, "'", path, "' is not a regular file");
  const auto size = static_cast<int64_t>(st.st_size);
  at::Tensor bytes;
  try {
    bytes = at::empty({size}, at::TensorOptions().dtype(at::kByte));
  } catch (const c10::Error&) {
    fail(Status::OutOfMemory, "out of host memory reading '", path, "' (", size, " bytes)");
  }
  auto* data = size ? static_cast<char*>(bytes.data_ptr()) : nullptr;
  int64_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(file.fd, data + done, static_cast<size_t>(size - done), done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(Status::Io, "cannot read '", path, "': ", std::strerror(errno));
    if (got == 0) fail(Status::Io, "'", path, "' was cut short while it was read (", done, " of ", size, " bytes)");
    done += got;
  }
  char more = 0;  // (grown meanwhile: what was read is no whole file either)
  if (::pread(file.fd, &more, 1, size) > 0)
    fail(Status::Io, "'", path, "' grew while it was read (past its ", size, " bytes)");
  return bytes;
}

}  // namespace acc
