#include "profiling/profile_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

namespace acc {
namespace {

double microseconds(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// As torch's format_time: seconds, milliseconds or microseconds, three decimals.
std::string format_time(double us) {
  char text[32];
  if (us >= 1e6) std::snprintf(text, sizeof text, "%.3fs", us / 1e6);
  else if (us >= 1e3) std::snprintf(text, sizeof text, "%.3fms", us / 1e3);
  else std::snprintf(text, sizeof text, "%.3fus", us);
  return text;
}

std::string format_percent(double part, double whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return text;
}

// Each span's time minus that of the spans nested in it on the same thread (the operators it called).
std::vector<uint64_t> self_times(const std::vector<ProfiledEvent>& events) {
  std::vector<size_t> order;
  for (size_t i = 0; i < events.size(); ++i)
    if (!events[i].is_memory) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &x = events[a], &y = events[b];
    if (x.on_device != y.on_device) return x.on_device < y.on_device;
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.duration_ns > y.duration_ns;  // the enclosing one first
  });
  std::vector<uint64_t> self(events.size(), 0);
  std::vector<size_t> open;  // enclosing spans, innermost last
  for (size_t k = 0; k < order.size(); ++k) {
    const ProfiledEvent& e = events[order[k]];
    if (k > 0) {
      const ProfiledEvent& previous = events[order[k - 1]];
      if (previous.thread != e.thread || previous.on_device != e.on_device) open.clear();
    }
    while (!open.empty() && events[open.back()].start_ns + events[open.back()].duration_ns <= e.start_ns) open.pop_back();
    self[order[k]] = e.duration_ns;
    if (!open.empty()) self[open.back()] -= std::min(self[open.back()], e.duration_ns);
    open.push_back(order[k]);
  }
  return self;
}

struct Row {
  std::string name;
  uint64_t calls = 0, self_ns = 0, total_ns = 0, device_self_ns = 0, device_total_ns = 0, flops = 0;
};

std::string padded(const std::string& text, size_t width, bool left) {
  if (text.size() >= width) return text;
  const std::string pad(width - text.size(), ' ');
  return left ? text + pad : pad + text;
}

}  // namespace

std::string chrome_trace_json(const std::vector<ProfiledEvent>& events, int64_t process_index) {
  using nlohmann::json;
  const int64_t pid = ::getpid();
  json trace = json::array();
  trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", "rank " + std::to_string(process_index)}}}});
  for (const auto& e : events) {
    json item = {{"name", e.name}, {"pid", pid}, {"tid", e.thread}, {"ts", microseconds(e.start_ns)}};
    json args = json::object();
    if (e.is_memory) {
      item["ph"] = "i";
      item["s"] = "t";
      args["Bytes"] = e.bytes;
      args["Device Type"] = e.on_device ? "device" : "cpu";
    } else {
      item["ph"] = "X";
      item["dur"] = microseconds(e.duration_ns);
      item["cat"] = e.on_device ? "kernel" : "cpu_op";
      if (!e.shapes.empty()) args["Input Dims"] = e.shapes;
      if (e.sequence_nr >= 0) args["Sequence number"] = e.sequence_nr;
      if (e.flops > 0) args["flops"] = e.flops;
      // As Kineto's trace writes them: frames joined by ";", modules by ".".
      if (!e.stack.empty()) args["Call stack"] = joined(e.stack, ";");
      if (!e.module_hierarchy.empty()) args["Module Hierarchy"] = joined(e.module_hierarchy, ".");
    }
    if (e.on_device) {
      item["tid"] = "stream";
      args["device"] = e.device_index;
    }
    item["args"] = std::move(args);
    trace.push_back(std::move(item));
  }
  return json{{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

std::string key_averages_table(const std::vector<ProfiledEvent>& events, size_t row_limit) {
  const auto self = self_times(events);
  std::map<std::string, Row> rows;
  uint64_t self_total = 0, device_total = 0;
  bool any_flops = false, any_device = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.is_memory) continue;
    Row& row = rows[e.name];
    row.name = e.name;
    ++row.calls;
    if (e.on_device) {
      row.device_self_ns += self[i], row.device_total_ns += e.duration_ns, device_total += self[i], any_device = true;
    } else {
      row.self_ns += self[i], row.total_ns += e.duration_ns, self_total += self[i];
    }
    row.flops += e.flops;
    any_flops = any_flops || e.flops > 0;
  }
  std::vector<Row> sorted;
  for (auto& [name, row] : rows) sorted.push_back(row);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) {
    return a.self_ns + a.device_self_ns > b.self_ns + b.device_self_ns;
  });
  if (sorted.size() > row_limit) sorted.resize(row_limit);

  constexpr size_t kNameWidth = 55, kWidth = 14;
  std::vector<std::string> header = {"Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (any_device) header.insert(header.end(), {"Self device", "Self device %", "Device total"});
  header.push_back("# of Calls");
  if (any_flops) header.push_back("Total FLOPs");
  const std::string rule = std::string(kNameWidth, '-') + [&] {
    std::string r;
    for (size_t i = 0; i < header.size(); ++i) r += "  " + std::string(kWidth, '-');
    return r;
  }() + "\n";
  std::string out = rule + padded("Name", kNameWidth, false);
  for (const auto& h : header) out += "  " + padded(h, kWidth, false);
  out += "\n" + rule;
  for (const auto& row : sorted) {
    std::string name = row.name.size() > kNameWidth ? row.name.substr(0, kNameWidth - 3) + "..." : row.name;
    std::vector<std::string> cells = {format_percent(row.self_ns, self_total), format_time(microseconds(row.self_ns)),
                                      format_percent(row.total_ns, self_total), format_time(microseconds(row.total_ns)),
                                      format_time(microseconds(row.total_ns) / static_cast<double>(row.calls))};
    if (any_device)
      cells.insert(cells.end(), {format_time(microseconds(row.device_self_ns)), format_percent(row.device_self_ns, device_total),
                                 format_time(microseconds(row.device_total_ns))});
    cells.push_back(std::to_string(row.calls));
    if (any_flops) {
      char flops[32];
      std::snprintf(flops, sizeof flops, "%.3f", static_cast<double>(row.flops));
      cells.push_back(row.flops > 0 ? flops : "--");
    }
    out += padded(name, kNameWidth, false);
    for (const auto& c : cells) out += "  " + padded(c, kWidth, false);
    out += "\n";
  }
  out += rule + "Self CPU time total: " + format_time(microseconds(self_total)) + "\n";
  if (any_device) out += "Self device time total: " + format_time(microseconds(device_total)) + "\n";
  return out;
}

}  // namespace acc
