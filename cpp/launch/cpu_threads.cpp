#include "launch/cpu_threads.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace acc {
namespace fs = std::filesystem;

int physical_cores() {
  std::set<std::pair<std::string, std::string>> cores;  // (package, core) of every CPU
  std::error_code ec;
  for (fs::directory_iterator it("/sys/devices/system/cpu", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 || name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    std::string package, core;
    std::ifstream(it->path() / "topology" / "physical_package_id") >> package;
    std::ifstream(it->path() / "topology" / "core_id") >> core;
    if (package.empty() || core.empty()) continue;  // offline, or no topology
    cores.emplace(package, core);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

bool machine_has_nvidia_gpu() {
  std::error_code ec;
  fs::directory_iterator gpus("/proc/driver/nvidia/gpus", ec);
  return !ec && gpus != fs::directory_iterator();
}

namespace {

// The variable's value where it is a whole number of at least 0 (Accelerate's get_int_from_env).
std::optional<long> count_from_env(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0) return std::nullopt;
  return value;
}

}  // namespace

int default_threads_per_process(bool cpu_job, int local_processes) {
  if (!cpu_job) return 1;
  long local = std::max(1, local_processes);
  for (const char* name : {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE"})
    if (const auto size = count_from_env(name)) {
      local = std::max(1L, *size);
      break;
    }
  return static_cast<int>(std::max(1L, physical_cores() / local));
}

bool inherited_thread_count_usable() {
  const auto count = count_from_env("OMP_NUM_THREADS");
  return count && *count > 0;
}

}  // namespace acc
