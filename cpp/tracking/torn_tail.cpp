#include "tracking/torn_tail.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/error.h"

namespace acc::tracking {

void drop_torn_tail(const std::string& path, bool quoted_fields, const std::string& record_starts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::vector<char> chunk(size_t{1} << 20);
  uint64_t offset = 0, record_end = 0;
  RecordEnds ends(quoted_fields);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    for (size_t i = 0; i < got; ++i)
      if (ends.feed(chunk[i])) record_end = offset + i + 1;
    offset += got;
  }
  if (record_end == offset) return;
  in.clear();
  in.seekg(static_cast<std::streamoff>(record_end));
  const int first = in.get();
  if (first == EOF || record_starts.find(static_cast<char>(first)) == std::string::npos)
    fail(Status::Io, "'", path, "' does not end with a complete line, and its last line is not one of this tracker's ",
         "records: it was not written by this tracker, so it is left as it is");
  if (::truncate(path.c_str(), static_cast<off_t>(record_end)) != 0)
    fail(Status::Io, "'", path, "' ends inside a record (a run stopped while writing it) and cannot be cut back: ",
         std::strerror(errno));
  std::fprintf(stderr,
               "accelerate: '%s' ended inside a record (the last run was stopped while writing it): its last %llu "
               "bytes were dropped\n",
               path.c_str(), static_cast<unsigned long long>(offset - record_end));
}

}  // namespace acc::tracking
