#include "tracking/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace acc::tracking {
namespace {

constexpr int kBarWidth = 25;
constexpr auto kRedraw = std::chrono::milliseconds(100);
constexpr double kPlainEverySeconds = 30.0;  // plain lines without a known total

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%02lld:%02lld", s / 60, s % 60);
  return text;
}

std::string rate_text(int64_t count, double elapsed) {
  char text[32];
  if (elapsed <= 0 || count <= 0) return "? it/s";
  const double rate = count / elapsed;
  if (rate >= 1.0)
    std::snprintf(text, sizeof text, "%.1f it/s", rate);
  else
    std::snprintf(text, sizeof text, "%.1f s/it", 1.0 / rate);
  return text;
}

double eta(int64_t count, int64_t total, double elapsed) {
  if (count <= 0 || elapsed <= 0) return -1;
  return static_cast<double>(total - count) * elapsed / static_cast<double>(count);
}

bool is_terminal(std::FILE* out) {
  const char* term = std::getenv("TERM");
  return isatty(fileno(out)) && !(term && std::strcmp(term, "dumb") == 0);
}

// The terminal's width in columns (0: unknown), asked each time: the window may be resized.
int terminal_columns(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  const char* columns = std::getenv("COLUMNS");
  const long from_env = columns ? std::strtol(columns, nullptr, 10) : 0;
  return from_env > 0 && from_env < 100000 ? static_cast<int>(from_env) : 0;
}

// Characters on screen, counted as UTF-8 code points (a wide character counts as one).
size_t shown_length(const std::string& text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// `text` cut to its first `length` code points.
std::string first_shown(const std::string& text, size_t length) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == length) return text.substr(0, i);
  return text;
}

// A line break in a description or postfix would end the display's one line: shown as a space.
std::string on_one_line(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return text;
}

}  // namespace

std::string Progress::bar_line(const std::string& description, int64_t count, int64_t total, double elapsed,
                               const std::string& postfix, int columns) {
  std::string head = description.empty() ? "" : on_one_line(description) + " ";
  std::string tail;
  char text[96];
  double fraction = 0;
  if (total > 0) {
    fraction = std::min(1.0, static_cast<double>(count) / static_cast<double>(total));
    std::snprintf(text, sizeof text, "%3d%%|", static_cast<int>(fraction * 100));
    head += text;
    std::snprintf(text, sizeof text, "| %lld/%lld [%s<%s, ", static_cast<long long>(count),
                  static_cast<long long>(total), clock_text(elapsed).c_str(),
                  clock_text(eta(count, total, elapsed)).c_str());
  } else {
    std::snprintf(text, sizeof text, "%lld [%s, ", static_cast<long long>(count), clock_text(elapsed).c_str());
  }
  tail = text + rate_text(count, elapsed) + "]";
  if (!postfix.empty()) tail += " " + on_one_line(postfix);
  // A line wider than the terminal wraps, and \r then goes back to its last row only: the bar
  // narrows to fit (as tqdm's), and what still does not fit is cut, leaving the last column free.
  int bar = total > 0 ? kBarWidth : 0;
  const size_t room = columns > 0 ? static_cast<size_t>(columns - 1) : std::string::npos;
  if (columns > 0 && bar > 0) {
    const size_t rest = shown_length(head) + shown_length(tail);
    bar = rest >= room ? 0 : static_cast<int>(std::min<size_t>(bar, room - rest));
  }
  const int filled = static_cast<int>(fraction * bar);
  const std::string line = head + std::string(filled, '#') + std::string(bar - filled, '-') + tail;
  return columns > 0 ? first_shown(line, room) : line;
}

std::string Progress::plain_line(const std::string& description, int64_t count, int64_t total, double elapsed,
                                 const std::string& postfix) {
  std::string line = description.empty() ? "" : on_one_line(description) + ": ";
  char text[96];
  if (total > 0)
    std::snprintf(text, sizeof text, "%lld/%lld (%d%%)", static_cast<long long>(count), static_cast<long long>(total),
                  static_cast<int>(100.0 * std::min(count, total) / static_cast<double>(total)));
  else
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(count));
  line += std::string(text) + ", " + rate_text(count, elapsed) + ", elapsed " + clock_text(elapsed);
  if (total > 0) line += ", ETA " + clock_text(eta(count, total, elapsed));
  if (!postfix.empty()) line += ", " + on_one_line(postfix);
  return line;
}

// The count at which `k` tenths of `total` are done (rounded up: no more than ten plain lines).
int64_t Progress::tenth_mark(int64_t total, int k) {
  return static_cast<int64_t>((static_cast<__int128>(total) * k + 9) / 10);
}

Progress::Progress(int64_t total, std::string description, bool enabled, std::FILE* out, std::optional<bool> terminal)
    : total_(total > 0 ? total : 0),
      description_(std::move(description)),
      enabled_(enabled),
      terminal_(terminal.value_or(out && is_terminal(out))),
      out_(out),
      start_(std::chrono::steady_clock::now()) {
  require(out != nullptr, "progress: no output stream");
  last_shown_ = start_;
  next_plain_ = total_ > 0 ? tenth_mark(total_, 1) : 0;
  if (enabled_ && terminal_) show(false);
}

Progress::~Progress() { close(); }

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t n) {
  require(n >= 0, "progress: update by ", n, " (must be >= 0)");
  if (closed_) return;
  count_ = n > std::numeric_limits<int64_t>::max() - count_ ? std::numeric_limits<int64_t>::max() : count_ + n;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    if (now - last_shown_ >= kRedraw) show(false);
  } else if (total_ > 0 ? count_ >= next_plain_ && count_ < total_
                        : std::chrono::duration<double>(now - last_shown_).count() >= kPlainEverySeconds) {
    show(false);
    if (total_ > 0)  // the next tenth of the total past the count
      next_plain_ = tenth_mark(total_, static_cast<int>(static_cast<__int128>(count_) * 10 / total_) + 1);
  }
}

void Progress::set_postfix(std::string text) { postfix_ = std::move(text); }

void Progress::close() {
  if (closed_) return;
  closed_ = true;
  if (enabled_) show(true);
}

void Progress::show(bool final) {
  last_shown_ = std::chrono::steady_clock::now();
  const double t = elapsed();
  if (terminal_) {
    // \r and "erase to end of line" redraw in place; the final display keeps its line.
    const std::string line = bar_line(description_, count_, total_, t, postfix_, terminal_columns(out_));
    std::fprintf(out_, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", plain_line(description_, count_, total_, t, postfix_).c_str());
  }
  std::fflush(out_);
}

}  // namespace acc::tracking
