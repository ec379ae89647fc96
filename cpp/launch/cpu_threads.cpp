#include "launch/cpu_threads.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
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

int default_threads_per_process(bool cpu_job, int local_processes) {
  if (!cpu_job) return 1;
  return std::max(1, physical_cores() / std::max(1, local_processes));
}

}  // namespace acc
