// Small files read and written whole (checkpoint parts, config files, layer specs, hparams).
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace acc {

// The file's bytes; nullopt when it cannot be opened (the caller says what the file was for). An Io
// error when `path` is there but not a regular file (a FIFO would block the reader forever).
std::optional<std::string> read_whole_file(const std::string& path);
// Fails with an Io error when `path` exists and is not a regular file (a FIFO, a device, a folder).
void refuse_unless_regular(const std::string& path);
// Creates `dir` and the folders above it that are missing; an Io error naming it as `what` ("the run
// folder") otherwise.
void make_folders(const std::string& dir, const std::string& what);
// Writes all `size` bytes at `data` to the descriptor `fd` (write(2) again after an interruption or
// a short write): 0, or the errno of the failure (EIO for a write that wrote nothing).
int write_fully(int fd, const char* data, size_t size);
// Writes `bytes` to `path`; an Io error naming the file when that fails (a full disk included).
void write_file(const std::string& path, const std::string& bytes);
// The parts of a '/'-separated path, empty ones (a leading, trailing or doubled '/') included.
std::vector<std::string> path_parts(const std::string& path);
// The longest file name (one path component) Linux's file systems take, in bytes.
constexpr size_t kFileNameMax = 255;
// `name`, cut where it and `suffix` would not fit in one file name (kFileNameMax): what is cut is replaced
// by the checksum of the whole name, which keeps it apart from other names cut the same way.
std::string name_with_suffix_fitted(const std::string& name, const std::string& suffix);
// Writes `path` through a temporary beside it, `path`.tmp and 12 random hex digits (named by
// name_with_suffix_fitted): `write` fills the temporary, which is then renamed into place, so a
// reader never sees half a file. Each write has a temporary of its own, so processes or threads
// writing one file (every rank saving the same model) never take each other's: the last rename
// wins, whole. On any failure the temporary is removed and `path` is as it was; a process killed
// while writing leaves its temporary.
void write_through_temporary(const std::string& path, const std::function<void(const std::string& temporary)>& write);
// Whether the file name `candidate` is a temporary write_through_temporary names for the file
// name `name` (a stopped save's leftover, which a folder's next save may remove).
bool is_temporary_of(const std::string& candidate, const std::string& name);
// write_file through a temporary.
void write_file_atomically(const std::string& path, const std::string& bytes);
// A folder made for what is written into it: where `make` created it, removed again if the write
// fails (an exception leaves the scope) while it is still empty, so a failed save leaves no new
// empty folder behind.
class FolderMadeForWrite {
 public:
  FolderMadeForWrite() = default;
  FolderMadeForWrite(const FolderMadeForWrite&) = delete;
  FolderMadeForWrite& operator=(const FolderMadeForWrite&) = delete;
  ~FolderMadeForWrite();
  // Creates `folder` and what is missing above it (only `folder` is removed again); an Io error naming
  // it as `what` ("the model folder") otherwise.
  void make(const std::string& folder, const std::string& what);

 private:
  std::string folder_;
};

// Raises `e` again with `written` (a temporary file or a staging folder) named as `final` in its
// message, where what was being written would have been: the caller's path, not a hidden name.
[[noreturn]] void fail_naming_final(const Error& e, const std::string& written, const std::string& final);

// Makes what was written to `path` durable (fsync): a file, or a folder with every file and folder
// below it. A file system that reports running out of room only when it writes back (a thin or
// network disk) reports it here; an Io error naming `named` (the path the caller gave) then.
void sync_to_disk(const std::string& path, const std::string& named);
// Makes the entries of the folder holding `path` durable (a rename into it, fsync of the folder).
void sync_folder_of(const std::string& path, const std::string& named);
// Writes `path` by `write(out)`, through a stream whose writes never fail while `write` runs: the
// first error (a full disk) is kept and raised as an Io error naming `path` once `write` returns. (A
// writer that throws from its destructor when a write fails, as libtorch's archive writer does
// while an exception unwinds it, would otherwise end the process.)
void write_stream(const std::string& path, const std::function<void(std::ostream& out)>& write);

}  // namespace acc
