// A file written by a background thread, so that logging never waits for the disk: callers queue
// work and return at once; the thread runs it in order and flushes the file every flush interval,
// on flush() and on close(). A write error is reported by the next call on the caller's side
// (append, post, flush, close), as ACC_ERR_IO. Then, for a file of records that only appends them
// (AfterAnError::Retry: each task appends bytes that depend on nothing but its record), the records
// the disk did not take are written again with the next ones, so a run goes on once the disk has
// room (what is still unwritten at close() is lost, and reported); otherwise nothing more is
// written. A process that exits with writers still open (their owner never closed) has their
// queues put on disk first, each for at most 10 seconds.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace acc::tracking {

// Writes all of `bytes` to `file` (the writer thread's); an Io error naming `path` otherwise.
void write_all(std::FILE* file, const std::string& path, const std::string& bytes);

// The bytes of refused records a retrying tracker keeps for the disk at most (its memory stays
// bounded while a disk stays full); past it, new records are dropped and counted.
constexpr size_t kMaxWaitingBytes = size_t{64} << 20;
// " (N <unit>s lost so far: more came than 64 MiB could wait)" where `dropped` is not 0 (then 0,
// the count starting again), else "".
std::string lost_so_far(uint64_t& dropped, const char* unit);

class AsyncFile {
 public:
  // Runs on the writer thread with the open file (which it may close and reopen, e.g. to rewrite it)
  // and its path. Exceptions become the file's error.
  using Task = std::function<void(std::FILE*& file, const std::string& path)>;

  enum class AfterAnError { Stop, Retry };
  // Opens `path` for appending (creating it), or truncated when `truncate`. Throws Io on failure.
  AsyncFile(std::string path, bool truncate, std::chrono::milliseconds flush_interval = std::chrono::seconds(1),
            AfterAnError after_an_error = AfterAnError::Stop);
  // A writer without a file of its own: its tasks (given a null file) write the files they name, and
  // `label` (e.g. a folder) names it in errors. `flush_files` runs on the writer thread where a file
  // would be flushed (every flush interval, on flush() and on close()); its exceptions become the
  // writer's error.
  // With AfterAnError::Retry, flush_files keeps what the disk refused to write it later, and a task
  // that fails (writing a file of its own) runs again later, with the tasks behind it.
  struct TasksOwnFiles {};
  AsyncFile(TasksOwnFiles, std::string label, std::function<void()> flush_files,
            AfterAnError after_an_error = AfterAnError::Stop);
  ~AsyncFile();  // close(), errors ignored
  AsyncFile(const AsyncFile&) = delete;
  AsyncFile& operator=(const AsyncFile&) = delete;

  void append(std::string bytes);
  void post(Task task);
  // Returns when everything queued so far is on disk (flushed to the OS), or once `limit` passed.
  void flush(std::optional<std::chrono::milliseconds> limit = std::nullopt);
  // flush(), then stops the thread and closes the file. Further calls are errors.
  void close();
  const std::string& path() const { return path_; }
  // In a forked child: drops what the file's stdio buffer holds, the parent's to write; else the
  // child's exit() would write it into the parent's file a second time.
  void drop_buffered_in_child();

 private:
  void start_writer();
  void run();
  void enqueue(Task task);
  // Throws the error the writer met, if any (under the mutex); retrying, it is reported once.
  void report_error();
  // The error of a file left ending in part of a record, its whole records ending at `whole_until`
  // (errno: why the cut failed).
  std::string torn_tail_error(off_t whole_until) const;

  const std::string path_;
  const std::chrono::milliseconds flush_interval_;
  const AfterAnError after_an_error_ = AfterAnError::Stop;
  std::FILE* file_ = nullptr;
  std::function<void()> flush_files_;  // without a file of its own
  struct Sync {
    std::mutex mutex;
    std::condition_variable wake, progress;
  };
  // On the heap: a forked child leaves it be (its condition variables may count the parent's
  // waiting writer, and destroying them would wait for it forever).
  std::unique_ptr<Sync> sync_ = std::make_unique<Sync>();
  std::deque<Task> queue_;
  uint64_t queued_ = 0, flushed_ = 0;  // tasks queued; tasks run and flushed
  bool flush_requested_ = false, stopping_ = false, closed_ = false;
  std::string error_;
  std::thread thread_;
  const pid_t owner_ = ::getpid();  // the process whose thread writes
  // Fails (InvalidArgument) in a forked child, whose writer thread stayed in the parent.
  void require_own_process() const;
};

}  // namespace acc::tracking
