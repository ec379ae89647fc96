// Appends to a file of records with write(2) (O_APPEND), each append whole or not at all: where a
// write fails part way (a full disk) the file is cut back to where it ended, and where that cut fails
// too (a file made immutable mid-run), nothing more is appended until a later cut succeeds: a record
// written after the fragment would be torn for good. For one writer of the file.
#pragma once

#include <sys/types.h>

#include <string>

namespace acc::tracking {

class WholeAppends {
 public:
  // `unit`: what the file's records are called in errors ("line", "record").
  explicit WholeAppends(const char* unit) : unit_(unit) {}
  // Appends `bytes` to `fd` (the file `path`), first cutting a fragment an earlier failure left.
  // False with `error` set ("cannot write <path>: <why>", and where the file is left torn, that too).
  bool append(int fd, const std::string& path, const std::string& bytes, std::string& error);
  // Whether a fragment waits to be cut (append has something to do even without bytes).
  bool torn() const { return torn_from_ >= 0; }

 private:
  std::string torn_error(const std::string& path) const;
  const char* unit_;
  off_t torn_from_ = -1;  // where the file must be cut before anything more is appended
};

}  // namespace acc::tracking
