// A log file a killed run left ending inside a record (stdio writes its buffer out wherever it fills,
// so a kill can cut any record): the next run appends only after the last complete one.
#pragma once

#include <string>

namespace acc::tracking {

// Finds where records end, one character at a time: at a line break, outside double quotes where
// `quoted_fields` (CSV's fields, RFC 4180: quotes enclose line breaks, and an escaped quote is two,
// which leaves the parity as it was).
class RecordEnds {
 public:
  explicit RecordEnds(bool quoted_fields) : quoted_fields_(quoted_fields) {}
  // True when `c` ends a record.
  bool feed(char c) {
    if (quoted_fields_ && c == '"') in_quotes_ = !in_quotes_;
    return c == '\n' && !in_quotes_;
  }

 private:
  bool quoted_fields_;
  bool in_quotes_ = false;
};

// Cuts `path` back to the end of its last complete record: a line ending in '\n', outside double
// quotes where `quoted_fields` (CSV's fields, whose quotes enclose line breaks). Says so on stderr
// when it drops anything. Nothing to do for a missing or whole file. A tail that does not begin as
// the tracker's records begin (`record_starts`, one of its characters) is not one the tracker left:
// Io error naming the file, which stays as it is.
void drop_torn_tail(const std::string& path, bool quoted_fields, const std::string& record_starts);

}  // namespace acc::tracking
