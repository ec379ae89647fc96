// A folder's files as a zip archive (stored, not compressed): what ClearML's SDK makes of an offline
// session at close, which Python's zipfile and ClearML's importer read.
#pragma once

#include <string>

namespace acc {

// Writes every regular file under `folder` (recursively, in name order) into the zip `zip_path`,
// named by its path relative to `folder` with '/' between parts (UTF-8 names flagged so), without
// directory entries; through a temporary beside `zip_path`. InvalidArgument when the archive would
// need ZIP64 (a file or the archive of 4 GiB or more, 65535 files or more); an Io error naming the
// file otherwise.
void zip_folder(const std::string& folder, const std::string& zip_path);

}  // namespace acc
