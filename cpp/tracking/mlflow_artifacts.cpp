#include "tracking/mlflow_artifacts.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/files.h"

namespace acc::tracking::mlflow {
namespace fs = std::filesystem;
namespace {

void copy_into_place(const fs::path& from, const fs::path& to) {
  make_folders(to.parent_path().string(), "the artifact folder");
  write_through_temporary(to.string(), [&](const std::string& temporary) {
    std::error_code ec;
    fs::copy_file(from, temporary, fs::copy_options::overwrite_existing, ec);
    if (ec) fail(Status::Io, "mlflow: cannot copy the artifact ", from.string(), ": ", ec.message());
  });
}

}  // namespace

void copy_artifact(const std::string& local_path, const std::string& destination) {
  std::error_code ec;
  const fs::file_status status = fs::status(local_path, ec);
  if (fs::is_regular_file(status)) {
    copy_into_place(local_path, fs::path(destination) / fs::path(local_path).filename());
    return;
  }
  require(fs::is_directory(status), "log_artifact: ", local_path, " is neither a file nor a folder");
  // Every entry is checked before the first is copied (symbolic links are followed, as shutil.copytree's
  // default copies what they point at).
  std::vector<std::pair<fs::path, fs::path>> files;
  for (fs::recursive_directory_iterator it(local_path, fs::directory_options::follow_directory_symlink, ec), end;
       !ec && it != end; it.increment(ec)) {
    const fs::file_status entry = it->status(ec);
    if (ec) break;
    if (fs::is_directory(entry)) continue;
    require(fs::is_regular_file(entry), "log_artifact: ", it->path().string(),
            " is neither a file nor a folder (a FIFO or a device is no artifact)");
    // Lexically (the iterator's path is the folder's and the entries' names): a symbolic link keeps its
    // place in the tree, wherever it points.
    files.emplace_back(it->path(), fs::path(destination) / it->path().lexically_relative(local_path));
  }
  if (ec) fail(Status::Io, "log_artifact: cannot read the folder ", local_path, ": ", ec.message());
  make_folders(destination, "the artifact folder");
  for (const auto& [from, to] : files) copy_into_place(from, to);
}

}  // namespace acc::tracking::mlflow
