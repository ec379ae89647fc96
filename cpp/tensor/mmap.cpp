#include "tensor/mmap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/bus_error_guard.h"
#include "common/error.h"
#include "common/file_descriptor.h"
#include "tensor/host.h"

namespace acc {

namespace {

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

// The copy select_mapped_rows runs under the SIGBUS guard: plain memory only, everything it needs
// laid out before. A row is `runs` contiguous runs of `run_bytes`, found by an odometer over the
// row's outer dimensions (`outer_sizes`, `outer_strides` in bytes; none for a contiguous row).
struct RowCopy {
  const char* source;
  char* target;
  const int64_t* indices;
  size_t count;
  int64_t row_stride;  // bytes
  int64_t run_bytes;
  int64_t runs;
  std::vector<int64_t> outer_sizes, outer_strides, odometer;
};

void copy_rows(void* context) {
  auto& copy = *static_cast<RowCopy*>(context);
  char* target = copy.target;
  const size_t dims = copy.outer_sizes.size();
  for (size_t r = 0; r < copy.count; ++r) {
    const char* row = copy.source + copy.indices[r] * copy.row_stride;
    std::fill(copy.odometer.begin(), copy.odometer.end(), 0);
    for (int64_t run = 0; run < copy.runs; ++run) {
      int64_t offset = 0;
      for (size_t d = 0; d < dims; ++d) offset += copy.odometer[d] * copy.outer_strides[d];
      std::memcpy(target, row + offset, static_cast<size_t>(copy.run_bytes));
      target += copy.run_bytes;
      for (size_t d = dims; d-- > 0;) {
        if (++copy.odometer[d] < copy.outer_sizes[d]) break;
        copy.odometer[d] = 0;
      }
    }
  }
}

// Splits a row (dims 1.. of `tensor`) into its longest contiguous trailing run and the odometer
// over the rest.
void plan_row_runs(const at::Tensor& tensor, RowCopy& copy) {
  const int64_t item = static_cast<int64_t>(tensor.element_size());
  int64_t d = tensor.dim() - 1, run_elements = 1;
  for (; d >= 1; --d) {
    if (tensor.size(d) != 1 && tensor.stride(d) != run_elements) break;
    run_elements *= tensor.size(d);
  }
  copy.run_bytes = run_elements * item;
  copy.runs = 1;
  for (int64_t o = 1; o <= d; ++o) {
    copy.outer_sizes.push_back(tensor.size(o));
    copy.outer_strides.push_back(tensor.stride(o) * item);
    copy.runs *= tensor.size(o);
  }
  copy.odometer.assign(copy.outer_sizes.size(), 0);
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
  if (offset > file_size)  // (numpy.memmap refuses it too)
    fail(Status::Io, "offset ", offset, " is past the end of '", path, "' (", file_size, " bytes)");
  const uint64_t available = file_size - offset;
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
  if (base == MAP_FAILED)
    fail(map_errno == ENOMEM ? Status::OutOfMemory : Status::Io, "cannot map '", path, "': ", std::strerror(map_errno));
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

at::Tensor select_mapped_rows(const at::Tensor& tensor, const std::vector<int64_t>& indices) {
  const MappedFile* mapped = mapped_file_of(tensor);
  require(mapped != nullptr && tensor.dim() >= 1, "select_mapped_rows needs a tensor over a mapped file");
  check_mapped_file(tensor);
  std::vector<int64_t> sizes = tensor.sizes().vec();
  sizes[0] = static_cast<int64_t>(indices.size());
  at::Tensor rows = at::empty(sizes, tensor.options());
  if (rows.numel() == 0) return rows;
  RowCopy copy{static_cast<const char*>(tensor.data_ptr()), static_cast<char*>(rows.data_ptr()), indices.data(),
               indices.size(), tensor.stride(0) * static_cast<int64_t>(tensor.element_size()), 0, 0, {}, {}, {}};
  plan_row_runs(tensor, copy);
  // The file can still be cut between the check above and the copy (by another process at any
  // moment): the guard turns a read past its new end into this error.
  if (!read_guarding_bus_errors(mapped->base, mapped->length, &copy_rows, &copy)) {
    check_mapped_file(tensor);  // names the new size where the file is still there to ask
    fail(Status::Io, "'", mapped->path, "' was cut short while a batch was read from its mapping");
  }
  return rows;
}

}  // namespace acc
