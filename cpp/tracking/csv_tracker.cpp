#include "tracking/csv_tracker.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "common/error.h"
#include "common/files.h"
#include "tracking/hparams.h"
#include "tracking/torn_tail.h"

namespace acc::tracking {

struct CsvTracker::Table {
  std::vector<std::string> columns;  // after step and wall_time
  std::unordered_map<std::string, size_t> index;
  size_t header_bytes = 0;  // of the header as it is in the file (0: no header yet)

  void add(const std::string& name) {
    index.emplace(name, columns.size());
    columns.push_back(name);
  }
};

namespace {

std::string quoted(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos && !field.empty() && field.front() != ' ' &&
      field.back() != ' ')
    return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string header_line(const std::vector<std::string>& columns) {
  std::string line = "step,wall_time";
  for (const auto& c : columns) line += "," + quoted(c);
  return line + "\n";
}

// Shortest text that reads back as the same double; nan and infinities as "nan", "inf", "-inf".
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string row_line(const Record& r, const CsvTracker::Table& table) {
  std::vector<std::string> cells(table.columns.size());
  for (size_t i = 0; i < r.names.size(); ++i) cells[table.index.at(r.names[i])] = number_text(r.values[i]);
  for (size_t i = 0; i < r.text_names.size(); ++i) cells[table.index.at(r.text_names[i])] = quoted(r.texts[i]);
  char time[32];
  std::snprintf(time, sizeof time, "%.6f", r.wall_time);
  std::string line = std::to_string(r.step) + "," + time;
  for (const auto& cell : cells) line += "," + cell;
  return line + "\n";
}

// Rewrites the file with the table's header, each row of the body padded with `added` empty cells.
void widen(std::FILE*& file, const std::string& path, CsvTracker::Table& table, size_t added) {
  // Closed whatever fclose says: the writer must not use or close it again.
  const int closed = std::fclose(file), close_error = errno;
  file = nullptr;
  if (closed != 0) fail(Status::Io, "cannot write ", path, ": ", std::strerror(close_error));
  const std::string header = header_line(table.columns);
  write_through_temporary(path, [&](const std::string& temporary) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(Status::Io, "cannot rewrite ", path, " with new columns: ", std::strerror(errno));
    write_stream(temporary, [&](std::ostream& out) {
      out << header;
      in.seekg(static_cast<std::streamoff>(table.header_bytes));
      const std::string pad(added, ',');
      // A row is one line unless a quoted text holds line breaks.
      RecordEnds ends(/*quoted_fields=*/true);
      std::string row;
      for (std::string line; std::getline(in, line);) {
        row += line;
        for (const char c : line) ends.feed(c);
        if (!ends.feed('\n')) {
          row += '\n';
          continue;
        }
        out << row << pad << '\n';
        row.clear();
      }
      if (!row.empty())
        fail(Status::Io, path, " ends inside a quoted text: it is not a metrics table of the csv tracker");
    });
  });
  table.header_bytes = header.size();
  file = std::fopen(path.c_str(), "ab");
  if (!file) fail(Status::Io, "cannot reopen ", path, ": ", std::strerror(errno));
}

}  // namespace

void CsvTracker::check_name(const std::string& name) const {
  require(name != "step" && name != "wall_time", "log: \"", name, "\" is a column of the csv tracker's own (",
          "metrics.csv begins step,wall_time): name the value otherwise");
}

std::vector<std::string> parse_csv_record(const std::string& text, size_t* consumed) {
  std::vector<std::string> fields(1);
  bool quoted_field = false;
  size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted_field) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted_field = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted_field = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      ++i;
      break;
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  if (consumed) *consumed = i;
  return fields;
}

void CsvTracker::finish() {
  FileTracker::finish();
  lock_.reset();
}

void CsvTracker::start(const std::string& project_name, const nlohmann::json&) {
  finish();  // the last run's file and lock
  lock_ = std::make_unique<FileLock>(make_run_dir(logging_dir_, project_name) + "/metrics.csv.lock",
                                     "csv: another run is writing this table; its lock file", std::chrono::seconds(0));
  // Appends (nothing written yet). Its rows depend on the header its table holds: stopping at an
  // error keeps the two in step.
  open_run(project_name, "metrics.csv", /*truncate=*/false, std::chrono::seconds(1));
  table_ = std::make_shared<Table>();
  // An existing table (a resumed run) keeps its columns.
  if (std::ifstream in{path_, std::ios::binary}) {
    // The header line, however long (thousands of columns): read in growing pieces until it ends.
    std::string head;
    std::vector<std::string> fields;
    size_t consumed = 0;
    constexpr size_t kLongestHeader = size_t{64} << 20;  // a file past it is not a table of ours
    for (size_t want = 64 * 1024;; want *= 2) {
      if (want > kLongestHeader)
        fail(Status::Io, path_, " exists but its first line is longer than any metrics table's header");
      head.assign(want, '\0');
      in.clear();
      in.seekg(0);
      in.read(head.data(), static_cast<std::streamsize>(want));
      head.resize(static_cast<size_t>(in.gcount()));
      if (head.empty()) break;
      fields = parse_csv_record(head, &consumed);
      if (head[consumed - 1] == '\n' || head.size() < want) break;  // a whole line, or all the file holds
    }
    if (!head.empty()) {
      if (fields.size() < 2 || fields[0] != "step" || fields[1] != "wall_time" || head[consumed - 1] != '\n')
        fail(Status::Io, path_, " exists but is not a metrics table written by the csv tracker");
      for (size_t i = 2; i < fields.size(); ++i) table_->add(fields[i]);
      table_->header_bytes = consumed;
      drop_torn_tail(path_, /*quoted_fields=*/true, "0123456789");  // our table: a row begins with its step
    }
  }
}

void CsvTracker::log(const std::shared_ptr<const Record>& record) {
  running_file().post([record, table = table_](std::FILE*& file, const std::string& path) {
    size_t added = 0;
    for (const auto* names : {&record->names, &record->text_names})
      for (const auto& name : *names)
        if (!table->index.count(name)) {
          table->add(name);
          ++added;
        }
    if (table->header_bytes == 0) {
      const std::string header = header_line(table->columns);
      write_all(file, path, header);
      table->header_bytes = header.size();
    } else if (added > 0) {
      widen(file, path, *table, added);
    }
    write_all(file, path, row_line(*record, *table));
  });
}

}  // namespace acc::tracking
