// Files that grow a line at a time, one per name under a folder (a '/' in a name makes folders):
// MLflow's metric files, DVCLive's metric tables. For one thread (a tracker's writer). Lines are
// kept per file until flush() (the writer calls it every second and at the run's end) or until
// 64 KiB wait, then written with one write each (O_APPEND); each file is opened once, with the
// folders its name makes, and kept open (up to kMaxOpen at a time). What the disk refuses (a full
// disk, a file that cannot be made yet) stays waiting and is written by a later flush: a run goes on
// once the disk has room, each line whole and once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <sys/types.h>
#include <unordered_map>

#include "tracking/whole_appends.h"

namespace acc::tracking {

class AppendedFiles {
 public:
  // The file of `name` is <folder>/<name><suffix>. `label` (the tracker) starts the errors. A file a
  // stopped run left ending inside a line is cut back to its last whole line when opened (a line
  // appended to a torn one would make both unreadable: MLflow refuses the file); `line_starts` are
  // the characters its lines begin with (drop_torn_tail's record_starts).
  AppendedFiles(std::string folder, std::string suffix, std::string label, std::string line_starts)
      : folder_(std::move(folder)),
        suffix_(std::move(suffix)),
        label_(std::move(label)),
        line_starts_(std::move(line_starts)) {}
  ~AppendedFiles();  // closes the files; what flush() did not write is dropped
  AppendedFiles(const AppendedFiles&) = delete;
  AppendedFiles& operator=(const AppendedFiles&) = delete;
  // `header(name)`, where given, goes first into a file that is empty when it is opened (a table's
  // columns, as its first row has them).
  using Header = std::function<std::string(const std::string& name)>;
  // Queues `line` for the file of `name`; never fails for the disk (flush says what it refused).
  void append(const std::string& name, const std::string& line, const Header& header = nullptr);
  // Writes what waits. Io naming the file where one cannot be opened (or is not a regular file: a
  // FIFO would block for ever) or written, its lines kept for the next flush; a line cut short by a
  // full disk is taken back first (readers such as MLflow refuse a file with a torn line), and
  // nothing is appended after one that cannot be taken back. Past kMaxWaitingBytes waiting, new
  // lines are dropped, and the error counts them.
  void flush();
  std::string path_of(const std::string& name) const { return folder_ + "/" + name + suffix_; }

 private:
  static constexpr size_t kMaxOpen = 256;
  static constexpr size_t kWriteAt = size_t{64} << 10;
  struct File {
    int fd = -1;                   // -1: not open (yet, or again after kMaxOpen)
    Header header;                 // for the file's first line, where it is still to be opened
    std::string waiting;           // whole lines not written yet
    WholeAppends appends{"line"};  // a refused cut-back kept until it succeeds
  };
  // Opens the file (its header queued first where it is empty); false with `error` set where it cannot.
  bool open(const std::string& name, File& file, std::string& error);
  // Writes the file's waiting lines; false with `error` set where the disk took them not (or in part).
  bool write_out(const std::string& name, File& file, std::string& error);
  void close_all();
  std::string folder_, suffix_, label_, line_starts_;
  std::unordered_map<std::string, File> files_;
  size_t open_ = 0, waiting_bytes_ = 0;
  uint64_t dropped_ = 0;  // lines dropped since the last error was reported
};

}  // namespace acc::tracking
