// A run's artifacts in MLflow's local artifact store: what MLflow's LocalArtifactRepository does for
// log_artifact (a file copied into the folder) and log_artifacts (a folder's tree copied into it,
// merged with what is there).
#pragma once

#include <string>

namespace acc::tracking::mlflow {

// Copies the file or the folder's tree at `local_path` into `destination` (made if absent): a file
// as <destination>/<its name>, a folder's files at their relative paths. Each file is written
// through a temporary renamed into place, so a reader never sees half of one. A path that is
// neither a file nor a folder, or a folder holding anything else (a FIFO, a device), is refused
// before anything is copied (InvalidArgument naming it); a failed copy is Io naming the file.
void copy_artifact(const std::string& local_path, const std::string& destination);

}  // namespace acc::tracking::mlflow
