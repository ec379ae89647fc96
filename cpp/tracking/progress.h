// A progress display for training loops, shown by each machine's first process only. On a
// terminal it is one line redrawn in place (at most 10 times a second):
//   epoch 1  42%|##########----------------|  420/1000 [00:12<00:16, 35.1 it/s] loss 0.412
// Elsewhere (a log file, a pipe, TERM=dumb) it prints plain lines, one per 10% of the total (every
// 30 seconds when the total is unknown), and a last one on close:
//   epoch 1: 420/1000 (42%), 35.1 it/s, elapsed 00:12, ETA 00:16, loss 0.412
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace acc::tracking {

class Progress {
 public:
  // total <= 0: unknown. terminal: none decides from `out` (isatty, and TERM is not "dumb").
  Progress(int64_t total, std::string description, bool enabled, std::FILE* out = stdout,
           std::optional<bool> terminal = std::nullopt);
  ~Progress();  // close()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(int64_t n);
  // Text shown after the counters (e.g. "loss 0.412"); shown from the next display on.
  void set_postfix(std::string text);
  // Shows the final state; later updates are ignored.
  void close();

  // The text of a display (without line ends) after `elapsed` seconds; a terminal's line fits in
  // `columns` (0: unknown, the full bar).
  static std::string bar_line(const std::string& description, int64_t count, int64_t total, double elapsed,
                              const std::string& postfix, int columns = 0);
  static std::string plain_line(const std::string& description, int64_t count, int64_t total, double elapsed,
                                const std::string& postfix);
  // The count at which `k` of the total's tenths are done (rounded up).
  static int64_t tenth_mark(int64_t total, int k);

 private:
  void show(bool final);
  double elapsed() const;

  int64_t total_;
  std::string description_, postfix_;
  bool enabled_, terminal_;
  std::FILE* out_;
  int64_t count_ = 0;
  int64_t next_plain_ = 0;  // the count of the next plain line
  bool closed_ = false;
  std::chrono::steady_clock::time_point start_, last_shown_;
};

}  // namespace acc::tracking
