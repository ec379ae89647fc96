#include "tensor/mmap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.h"
#include "tensor/host.h"

namespace acc {

namespace {

// Closes the file on every way out (the mapping keeps the file alive on its own).
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// A mapping and the file under it, the context of the tensor's storage. The descriptor stays open
// to tell whether that file (not whatever its path names later) has been cut short.
struct MappedFile {
  void* base;
  size_t length;
  int fd;
  std::string path;
  uint64_t needed_size;  // the file size the tensor's bytes reach to
};

void release_mapping(void* context) {
  auto* mapped = static_cast<MappedFile*>(context);
  ::munmap(mapped->base, mapped->length);
  ::close(mapped->fd);
  delete mapped;
}

const MappedFile* mapped_file_of(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return nullptr;
  const c10::DataPtr& data = tensor.storage().data_ptr();
  return data.get_deleter() == &release_mapping ? static_cast<const MappedFile*>(data.get_context()) : nullptr;
}

}  // namespace

at::Tensor mmap_tensor(const std::string& path, uint64_t offset, at::ScalarType dtype, std::vector<int64_t> dims) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer (regular files ignore it).
  const FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  const int fd = file.fd;
  if (fd < 0) fail(Status::Io, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(Status::Io, "cannot stat '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(Status::Io, "'", path, "' is not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  const uint64_t available = file_size > offset ? file_size - offset : 0;
  if (!dims.empty() && dims[0] == -1) {
    const int64_t row_bytes = checked_nbytes(c10::ArrayRef<int64_t>(dims).slice(1), dtype);
    require(row_bytes > 0, "cannot infer the first size of a shape with a zero size");
    dims[0] = static_cast<int64_t>(available / static_cast<uint64_t>(row_bytes));
  }
  const uint64_t needed = static_cast<uint64_t>(checked_nbytes(dims, dtype));
  if (needed > available)
    fail(Status::Io, "'", path, "' holds ", available, " bytes after offset ", offset, " but the shape needs ", needed);
  if (needed == 0) return at::empty(dims, at::TensorOptions().dtype(dtype));
  // mmap needs a page-aligned offset: map from the page start and point past the slack.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset - offset % page, slack = offset - start, length = needed + slack;
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(start));
  const int map_errno = errno;
  if (base == MAP_FAILED) fail(Status::Io, "cannot map '", path, "': ", std::strerror(map_errno));
  const int kept_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (kept_fd < 0) {
    const int dup_errno = errno;
    ::munmap(base, length);
    fail(Status::Io, "cannot keep '", path, "' open: ", std::strerror(dup_errno));
  }
  auto* mapped = new MappedFile{base, length, kept_fd, path, offset + needed};
  return at::for_blob(static_cast<char*>(base) + slack, dims)
      .context(mapped, &release_mapping)
      .options(at::TensorOptions().dtype(dtype))
      .make_tensor();
}

bool is_mapped_file(const at::Tensor& tensor) { return mapped_file_of(tensor) != nullptr; }

void check_mapped_file(const at::Tensor& tensor) {
  const MappedFile* mapped = mapped_file_of(tensor);
  if (!mapped) return;
  struct stat st {};
  if (::fstat(mapped->fd, &st) != 0) fail(Status::Io, "cannot stat '", mapped->path, "': ", std::strerror(errno));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < mapped->needed_size)
    fail(Status::Io, "'", mapped->path, "' was cut to ", size, " bytes while mapped, but its tensor reaches to byte ",
         mapped->needed_size, ": a mapped file must keep its size while in use");
}

}  // namespace acc
