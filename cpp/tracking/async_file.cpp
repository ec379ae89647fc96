#include "tracking/async_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/thread_name.h"

namespace acc::tracking {
namespace {

// Tasks waiting beyond this make callers wait: memory stays bounded if the disk stalls.
constexpr size_t kMaxQueued = 1 << 16;
// The writer is woken by a caller only once this many tasks wait; otherwise it looks at the queue
// every kPoll. A wake-up per log call would cost the training thread a futex call and the machine
// a context switch per tracker.
constexpr size_t kWakeBatch = 512;
constexpr auto kPoll = std::chrono::milliseconds(50);
// How long an exiting process waits for a writer's queue to reach the disk.
constexpr auto kExitFlushLimit = std::chrono::seconds(10);

// Where the file's complete records end: the offset of the last flush and the offsets after each
// task run since. After a failed write the file is cut back to the last of them that the disk holds
// in full, so that readers never meet half a record (a JSON line, a CSV row, an event).
class RecordEnds {
 public:
  explicit RecordEnds(std::FILE* file) { flushed(file); }
  // Returns where the task's bytes end (-1 without a file).
  off_t task_done(std::FILE* file) {
    if (!file) return -1;
    ends_.push_back(ftello(file));
    return ends_.back();
  }
  void flushed(std::FILE* file) {
    ends_.clear();
    flushed_ = file ? ftello(file) : -1;
  }
  void file_replaced() {  // rewritten by a task: the earlier offsets are another file's
    ends_.clear();
    flushed_ = -1;
  }
  // Drops what stdio still holds (nothing more reaches the file) and cuts the file back to its last
  // whole record (the last flush's end where the file cannot be measured): where that ends, and
  // whether the file ends there now (not where the file system refused the cut).
  struct Cut {
    off_t end;
    bool done;
  };
  Cut cut_back(std::FILE* file) const {
    __fpurge(file);
    struct stat st;
    if (fstat(fileno(file), &st) != 0) return {flushed_, flushed_ < 0 || cut_to(file, flushed_)};
    off_t end = flushed_;
    for (const off_t e : ends_)
      if (e <= st.st_size) end = std::max(end, e);
    return {end, end < 0 || end >= st.st_size || cut_to(file, end)};
  }
  static bool cut_to(std::FILE* file, off_t end) { return ftruncate(fileno(file), end) == 0; }

 private:
  off_t flushed_ = -1;
  std::vector<off_t> ends_;
};

// The run's file, opened to append (or emptied first); refused unless a regular file: opening a
// FIFO would wait for a reader for ever, and a device is no log.
std::FILE* open_regular_file(const std::string& path, bool truncate) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd < 0) {
    const int open_errno = errno;
    refuse_unless_regular(path);  // a FIFO without a reader fails the non-blocking open (ENXIO)
    fail(Status::Io, "cannot open ", path, " for writing: ", std::strerror(open_errno));
  }
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (!regular || (truncate && ::ftruncate(fd, 0) != 0) || ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) != 0) {
    const int error = errno;
    ::close(fd);
    if (!regular) fail(Status::Io, "'", path, "' is not a regular file");
    fail(Status::Io, "cannot open ", path, " for writing: ", std::strerror(error));
  }
  // At the end from the start: stdio's position (where RecordEnds measures complete records from)
  // is the descriptor's, which an append-only open leaves at 0 until the first write.
  if (::lseek(fd, 0, SEEK_END) < 0) {
    const int error = errno;
    ::close(fd);
    fail(Status::Io, "cannot open ", path, " for writing: ", std::strerror(error));
  }
  std::FILE* file = ::fdopen(fd, "ab");
  if (!file) {
    const int error = errno;
    ::close(fd);
    fail(Status::Io, "cannot open ", path, " for writing: ", std::strerror(error));
  }
  return file;
}

// The writers still open when the process exits (a program that returns from main with its
// accelerator alive): what they hold is put on disk first. Never destroyed (other exit handlers may
// run after this one); a forked child, which has no writer threads, leaves them alone.
struct OpenWriters {
  std::mutex mutex;
  std::set<AsyncFile*> files;
  pid_t owner = ::getpid();
};
OpenWriters& open_writers() {
  static OpenWriters* const writers = new OpenWriters;
  return *writers;
}

// A fork copies the writers' stdio buffers into the child, whose exit() would write them into the
// parent's files again (records twice, cut in half): the child drops them. The registry is held
// across the fork, so that the child's copy is whole.
void lock_writers_before_fork() { open_writers().mutex.lock(); }
void unlock_writers_in_parent() { open_writers().mutex.unlock(); }
void drop_writers_buffers_in_child() {
  OpenWriters& writers = open_writers();
  for (AsyncFile* file : writers.files) file->drop_buffered_in_child();
  writers.mutex.unlock();
}

void flush_open_writers_at_exit() {
  OpenWriters& writers = open_writers();
  const std::lock_guard<std::mutex> lock(writers.mutex);
  if (::getpid() != writers.owner) return;
  for (AsyncFile* file : writers.files) {
    try {
      file->flush(kExitFlushLimit);
    } catch (...) {
    }
  }
}

}  // namespace

AsyncFile::AsyncFile(std::string path, bool truncate, std::chrono::milliseconds flush_interval,
                     AfterAnError after_an_error)
    : path_(std::move(path)), flush_interval_(flush_interval), after_an_error_(after_an_error) {
  file_ = open_regular_file(path_, truncate);
  start_writer();
}

void AsyncFile::start_writer() {
  thread_ = std::thread([this] {
    name_this_thread("acc-tracker");
    run();
  });
  static const bool at_exit =
      std::atexit(flush_open_writers_at_exit) == 0 &&
      ::pthread_atfork(lock_writers_before_fork, unlock_writers_in_parent, drop_writers_buffers_in_child) == 0;
  static_cast<void>(at_exit);
  OpenWriters& writers = open_writers();
  const std::lock_guard<std::mutex> lock(writers.mutex);
  writers.files.insert(this);
}

AsyncFile::AsyncFile(TasksOwnFiles, std::string label, std::function<void()> flush_files,
                     AfterAnError after_an_error)
    : path_(std::move(label)),
      flush_interval_(std::chrono::seconds(1)),
      after_an_error_(after_an_error),
      flush_files_(std::move(flush_files)) {
  start_writer();
}

AsyncFile::~AsyncFile() {
  try {
    close();
  } catch (...) {
  }
}

void AsyncFile::drop_buffered_in_child() {
  if (file_) ::__fpurge(file_);
}

void write_all(std::FILE* file, const std::string& path, const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size())
    fail(Status::Io, "cannot write ", path, ": ", std::strerror(errno));
}

void AsyncFile::append(std::string bytes) {
  enqueue([bytes = std::move(bytes)](std::FILE*& file, const std::string& path) { write_all(file, path, bytes); });
}

void AsyncFile::post(Task task) { enqueue(std::move(task)); }

void AsyncFile::require_own_process() const {
  // Its writer thread stayed in the parent (a mutex may even be held by it): never waited for here.
  if (::getpid() != owner_)
    fail(Status::InvalidArgument, path_, " is written by the process that opened it; this process is a fork of ",
         "it, whose writer thread is not here (log from the parent, or open trackers in this process)");
}

void AsyncFile::enqueue(Task task) {
  require_own_process();
  std::unique_lock<std::mutex> lock(sync_->mutex);
  if (closed_) fail(Status::NotInitialized, path_, " is closed");
  sync_->progress.wait(lock, [&] { return queue_.size() < kMaxQueued || !error_.empty(); });
  report_error();
  queue_.push_back(std::move(task));
  ++queued_;
  if (queue_.size() == kWakeBatch) sync_->wake.notify_one();
}

void AsyncFile::flush(std::optional<std::chrono::milliseconds> limit) {
  if (::getpid() != owner_) return;  // the parent's writer holds what there is to flush
  std::unique_lock<std::mutex> lock(sync_->mutex);
  if (closed_) return;
  const uint64_t target = queued_;
  flush_requested_ = true;
  sync_->wake.notify_one();
  const auto done = [&] { return flushed_ >= target || !error_.empty(); };
  if (limit)
    sync_->progress.wait_for(lock, *limit, done);
  else
    sync_->progress.wait(lock, done);
  report_error();
}

std::string lost_so_far(uint64_t& dropped, const char* unit) {
  if (dropped == 0) return "";
  return " (" + std::to_string(std::exchange(dropped, 0)) + " " + unit + "s lost so far: more came than " +
         std::to_string(kMaxWaitingBytes >> 20) + " MiB could wait)";
}

void AsyncFile::report_error() {
  if (error_.empty()) return;
  std::string error = error_;
  if (after_an_error_ == AfterAnError::Retry) error_.clear();  // the writer sets it again if it fails again
  fail(Status::Io, error);
}

void AsyncFile::close() {
  {
    OpenWriters& writers = open_writers();
    const std::lock_guard<std::mutex> lock(writers.mutex);
    writers.files.erase(this);
  }
  if (::getpid() != owner_) {  // a forked child: the writer thread and the file are the parent's
    // Its handle names no thread here (one of the child's own may have its number): neither joined
    // nor detached, kept for good.
    if (thread_.joinable()) static_cast<void>(new std::thread(std::move(thread_)));
    file_ = nullptr;  // (its buffer was dropped at the fork: drop_buffered_in_child)
    static_cast<void>(sync_.release());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(sync_->mutex);
    if (closed_) return;
    closed_ = stopping_ = true;
    sync_->wake.notify_one();
  }
  thread_.join();
  std::string error;
  {
    std::lock_guard<std::mutex> lock(sync_->mutex);
    error = error_;
  }
  if (file_ && std::fclose(file_) != 0 && error.empty()) error = "cannot close " + path_ + ": " + std::strerror(errno);
  file_ = nullptr;
  if (!error.empty()) fail(Status::Io, error);
}

std::string AsyncFile::torn_tail_error(off_t whole_until) const {
  return path_ + " ends in part of a record that cannot be cut back to the whole records' end (byte " +
         std::to_string(whole_until) + "): " + std::strerror(errno) +
         (after_an_error_ == AfterAnError::Retry ? " (nothing more is appended until it can)" : "");
}

// Records the disk refused, kept to be written again, at most this many: past it the oldest go
// (memory stays bounded while a disk stays full), and the error says how many.
constexpr size_t kMaxRetried = kMaxQueued;

void AsyncFile::run() {
  auto last_flush = std::chrono::steady_clock::now();
  RecordEnds ends(file_);
  const bool retrying = after_an_error_ == AfterAnError::Retry;
  // Retrying: the tasks run since the last flush, with where each one's bytes end, and the tasks to
  // run again at the front of the next batch.
  std::deque<std::pair<Task, off_t>> unflushed;
  std::deque<Task> again;
  uint64_t dropped = 0;
  // Where a file left ending in part of a record (its cut-back refused too) must be cut before
  // anything more is appended: a record written after the fragment would be torn for good.
  off_t torn_from = -1;
  std::unique_lock<std::mutex> lock(sync_->mutex);
  for (;;) {
    // Work is picked up every kPoll, at once when a batch is waiting, on flush() and on close().
    sync_->wake.wait_for(lock, kPoll, [&] { return queue_.size() >= kWakeBatch || stopping_ || flush_requested_; });
    std::deque<Task> batch;
    batch.swap(queue_);
    while (!again.empty()) batch.push_front(std::move(again.back())), again.pop_back();
    const uint64_t upto = queued_;
    const bool must_flush = flush_requested_ || stopping_;
    const bool stop = stopping_;
    flush_requested_ = false;
    const bool failed = !error_.empty() && !retrying;  // stopping at an error: nothing more is written
    lock.unlock();
    sync_->progress.notify_all();  // room in the queue again
    std::string error;
    size_t ran = 0;
    if (torn_from >= 0) {
      if (RecordEnds::cut_to(file_, torn_from)) {
        static_cast<void>(::fseeko(file_, 0, SEEK_END));
        ends.flushed(file_);
        torn_from = -1;
      } else {
        error = torn_tail_error(torn_from);
      }
    }
    for (; error.empty() && ran < batch.size() && !failed; ++ran) {
      std::FILE* const before = file_;
      try {
        batch[ran](file_, path_);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (file_ != before) ends.file_replaced();
      if (!error.empty()) break;
      const off_t end = ends.task_done(file_);
      if (retrying && file_) unflushed.emplace_back(std::move(batch[ran]), end);
    }
    const auto now = std::chrono::steady_clock::now();
    bool flushed = false;
    if (error.empty() && !failed && (must_flush || now - last_flush >= flush_interval_)) {
      if (file_) {
        if (std::fflush(file_) != 0) {
          error = "cannot write " + path_ + ": " + std::strerror(errno);
        } else {
          ends.flushed(file_);
          unflushed.clear();
        }
      } else if (flush_files_) {
        try {
          flush_files_();
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      last_flush = now;
      flushed = error.empty();
    }
    if (!error.empty() && file_) {
      const RecordEnds::Cut cut = torn_from >= 0 ? RecordEnds::Cut{torn_from, false} : ends.cut_back(file_);
      if (!cut.done && torn_from < 0) {
        error += "; " + torn_tail_error(cut.end);
        torn_from = retrying ? cut.end : -1;
      }
      if (retrying) {
        // What the disk does not hold whole runs again, in order, then the task that failed and the rest.
        for (auto& [task, end] : unflushed)
          if (end > cut.end) again.push_back(std::move(task));
        unflushed.clear();
        for (size_t i = ran; i < batch.size(); ++i) again.push_back(std::move(batch[i]));
        for (; again.size() > kMaxRetried; ++dropped) again.pop_front();
        // Appends go on from the end kept (stdio's position is the descriptor's again).
        static_cast<void>(::fseeko(file_, 0, SEEK_END));
        ends.flushed(file_);
      }
    } else if (!error.empty() && retrying) {
      // Tasks that write files of their own (an image) run again, the one that failed first: the
      // rest of the batch is never dropped behind it.
      for (size_t i = ran; i < batch.size(); ++i) again.push_back(std::move(batch[i]));
      for (; again.size() > kMaxRetried; ++dropped) again.pop_front();
    }
    if (dropped > 0 && !error.empty())
      error += " (" + std::to_string(dropped) + " records lost so far: the disk refused them while more came)";
    lock.lock();
    if (!error.empty() && error_.empty()) error_ = error;
    if (flushed) flushed_ = upto;
    sync_->progress.notify_all();
    if (stop && queue_.empty()) return;
  }
}

}  // namespace acc::tracking
