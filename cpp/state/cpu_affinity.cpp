#include "state/cpu_affinity.h"

#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/files.h"
#include "common/options.h"
#include "common/text.h"

#ifdef ACC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace acc {
namespace {

int cpu_number(const std::string& text, const std::string& what) {
  require(!text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos, what,
          ": '", text, "' is not a CPU number");
  return std::stoi(text);
}

[[maybe_unused]] void set_affinity(const std::vector<int>& cores) {  // used with CUDA only
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int core : cores)
    if (core < CPU_SETSIZE) CPU_SET(core, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    fail(Status::Io, "cannot pin the process to CPU cores: ", std::strerror(errno));
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text, const std::string& what) {
  std::vector<int> cores;
  const size_t end = text.find_last_not_of("\r\n");  // the file's line ends
  const std::string list = trimmed(end == std::string::npos ? "" : text.substr(0, end + 1));
  if (list.empty()) return cores;
  for (const auto& range : split_trimmed(list, ',')) {
    const size_t dash = range.find('-');
    const int first = cpu_number(range.substr(0, dash), what);
    const int last = dash == std::string::npos ? first : cpu_number(range.substr(dash + 1), what);
    require(first <= last, what, ": the range '", range, "' runs backwards");
    for (int core = first; core <= last; ++core) cores.push_back(core);
  }
  return cores;
}

std::string pci_device_path(int domain, int bus, int device) {
  char id[32];
  std::snprintf(id, sizeof id, "%04x:%02x:%02x.0", domain, bus, device);
  return std::string("/sys/bus/pci/devices/") + id;
}

std::vector<int> pin_to_device_cores(const c10::Device& device) {
  if (!device.is_cuda()) return {};
#ifdef ACC_WITH_CUDA
  const auto* p = at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index());
  const std::string path = pci_device_path(p->pciDomainID, p->pciBusID, p->pciDeviceID) + "/local_cpulist";
  const auto text = read_whole_file(path);
  const auto cores = text ? parse_cpu_list(*text, path) : std::vector<int>{};
  if (cores.empty()) {
    std::fprintf(stderr, "accelerate: warning: enable_cpu_affinity: %s does not list the GPU's cores; the process "
                 "stays unpinned\n", path.c_str());
    return {};
  }
  set_affinity(cores);
  return cores;
#else
  return {};  // no CUDA device in a build without CUDA
#endif
}

void apply_cpu_affinity_setting(const c10::Device& device, int64_t local_rank) {
  // Read as Accelerate's parse_flag_from_env reads them: a value that is no truth value is refused.
  const auto flag = [](const char* name) {
    const char* value = std::getenv(name);
    if (!value || !*value) return false;
    const auto parsed = parse_bool(value);
    require(parsed.has_value(), "environment variable ", name, "='", value, "' must be true or false");
    return *parsed;
  };
  const bool debug = flag("ACCELERATE_DEBUG_MODE");
  if (!flag("ACCELERATE_CPU_AFFINITY")) return;
  const auto cores = pin_to_device_cores(device);
  if (!cores.empty() && debug)
    std::fprintf(stderr, "accelerate: assigning %zu CPU cores to process %lld\n", cores.size(),
                 static_cast<long long>(local_rank));
}

}  // namespace acc
