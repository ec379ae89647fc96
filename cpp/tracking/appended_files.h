// Files that grow a line at a time, one per name under a folder (a '/' in a name makes folders):
// MLflow's metric files, DVCLive's metric tables. For one thread (a tracker's writer). Lines are
// kept per file until flush() (the writer calls it every second and at the run's end) or until
// 64 KiB wait, then written with one write each (O_APPEND); each file is opened once, with the
// folders its name makes, and kept open (up to kMaxOpen at a time).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>

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
  // Io naming the file where it cannot be opened (or is not a regular file: a FIFO would block for
  // ever) or written; lines cut short by a full disk are taken back first (readers such as MLflow
  // refuse a file with a torn line).
  // `header(name)`, where given, goes first into a file that is empty when it is opened (a table's
  // columns, as its first row has them).
  using Header = std::function<std::string(const std::string& name)>;
  void append(const std::string& name, const std::string& line, const Header& header = nullptr);
  void flush();
  std::string path_of(const std::string& name) const { return folder_ + "/" + name + suffix_; }

 private:
  static constexpr size_t kMaxOpen = 256;
  static constexpr size_t kWriteAt = size_t{64} << 10;
  struct File {
    int fd = -1;
    std::string waiting;
  };
  File& file_of(const std::string& name, const Header& header);
  void write_out(const std::string& name, File& file);
  std::string folder_, suffix_, label_, line_starts_;
  std::unordered_map<std::string, File> files_;
};

}  // namespace acc::tracking
