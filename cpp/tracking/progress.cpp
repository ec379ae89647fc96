#include "tracking/progress.h"

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

}  // namespace

std::string Progress::bar_line(const std::string& description, int64_t count, int64_t total, double elapsed,
                               const std::string& postfix) {
  std::string line = description.empty() ? "" : description + " ";
  char text[96];
  if (total > 0) {
    const double fraction = std::min(1.0, static_cast<double>(count) / static_cast<double>(total));
    const int filled = static_cast<int>(fraction * kBarWidth);
    std::snprintf(text, sizeof text, "%3d%%|", static_cast<int>(fraction * 100));
    line += text + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "| ";
    std::snprintf(text, sizeof text, "%lld/%lld [%s<%s, ", static_cast<long long>(count),
                  static_cast<long long>(total), clock_text(elapsed).c_str(),
                  clock_text(eta(count, total, elapsed)).c_str());
  } else {
    std::snprintf(text, sizeof text, "%lld [%s, ", static_cast<long long>(count), clock_text(elapsed).c_str());
  }
  line += text + rate_text(count, elapsed) + "]";
  if (!postfix.empty()) line += " " + postfix;
  return line;
}

std::string Progress::plain_line(const std::string& description, int64_t count, int64_t total, double elapsed,
                                 const std::string& postfix) {
  std::string line = description.empty() ? "" : description + ": ";
  char text[96];
  if (total > 0)
    std::snprintf(text, sizeof text, "%lld/%lld (%d%%)", static_cast<long long>(count), static_cast<long long>(total),
                  static_cast<int>(100.0 * std::min(count, total) / static_cast<double>(total)));
  else
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(count));
  line += std::string(text) + ", " + rate_text(count, elapsed) + ", elapsed " + clock_text(elapsed);
  if (total > 0) line += ", ETA " + clock_text(eta(count, total, elapsed));
  if (!postfix.empty()) line += ", " + postfix;
  return line;
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
  next_plain_ = total_ > 0 ? std::max<int64_t>(1, total_ / 10) : 0;
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
    if (total_ > 0) {  // the next tenth of the total past the count, short of overflowing
      const int64_t tenth = std::max<int64_t>(1, total_ / 10);
      const int64_t tenths = count_ / tenth + 1;
      next_plain_ =
          tenths > std::numeric_limits<int64_t>::max() / tenth ? std::numeric_limits<int64_t>::max() : tenths * tenth;
    }
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
    const std::string line = bar_line(description_, count_, total_, t, postfix_);
    std::fprintf(out_, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", plain_line(description_, count_, total_, t, postfix_).c_str());
  }
  std::fflush(out_);
}

}  // namespace acc::tracking
