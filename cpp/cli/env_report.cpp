#include "cli/env_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/build_info.h"
#include "common/device.h"
#ifdef ACC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

extern char** environ;

namespace acc {
namespace {

std::string first_value(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "";
}

std::string os_name() {
  std::string pretty = first_value("/etc/os-release", "PRETTY_NAME");
  auto eq = pretty.find('=');
  if (eq != std::string::npos) pretty = pretty.substr(eq + 1);
  if (pretty.size() >= 2 && pretty.front() == '"') pretty = pretty.substr(1, pretty.size() - 2);
  utsname u{};
  uname(&u);
  return std::string(u.sysname) + " " + u.release + " " + u.machine + (pretty.empty() ? "" : " (" + pretty + ")");
}

std::string yes_no(bool v) { return v ? "yes" : "no"; }

}  // namespace

std::string env_report(const std::optional<std::string>& config_path, const std::optional<ClusterConfig>& config,
                       const std::optional<std::string>& problem) {
  const auto info = nlohmann::json::parse(build_info_json());
  std::ostringstream out;
  out << "Copy-and-paste the text below in your GitHub issue\n\n";
  out << "- accelerate (C++ runtime) version: " << info["library"].get<std::string>() << ", C ABI "
      << info["abi"].get<int>() << "\n";
  out << "- Platform: " << os_name() << "\n";
  out << "- Compiler: " << info["compiler"].get<std::string>() << " (C++11 ABI: " << yes_no(info["cxx11_abi"]) << ")\n";
  out << "- libtorch version: " << info["libtorch"].get<std::string>() << "\n";
  out << "- CUDA: " << (info["cuda_built"].get<bool>() ? "built" : "not built") << ", available: " << yes_no(info["cuda"])
      << ", devices: " << info["cuda_devices"].get<int>() << "\n";
#ifdef ACC_WITH_CUDA
  for (int i = 0; i < cuda_device_count(); ++i) {
    const auto* p = at::cuda::getDeviceProperties(i);
    out << "  - GPU " << i << ": " << p->name << ", " << (p->totalGlobalMem >> 20) << " MiB, compute capability "
        << p->major << "." << p->minor << "\n";
  }
#endif
  out << "- NCCL: " << (info["nccl"].get<bool>() ? "built (multi-GPU jobs use it)" : "not built") << "\n";
  out << "- Gloo: " << yes_no(info["gloo"]) << "\n";
  out << "- BLAS: " << info["blas"].get<std::string>() << "\n";
  const std::string cpu = first_value("/proc/cpuinfo", "model name");
  out << "- CPU: " << (cpu.empty() ? "unknown" : cpu) << ", " << std::thread::hardware_concurrency()
      << " logical cores\n";
  const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  char ram_text[32];
  std::snprintf(ram_text, sizeof ram_text, "%.2f GiB", ram / (1024.0 * 1024 * 1024));
  out << "- System RAM: " << ram_text << "\n";
  std::string vars;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    if (entry.rfind("ACCELERATE_", 0) == 0 || entry.rfind("HF_HOME=", 0) == 0) vars += "\t- " + entry + "\n";
  }
  out << "- Environment:" << (vars.empty() ? " no ACCELERATE_* variables\n" : "\n" + vars);
  if (problem) {
    out << "- Config file: cannot be used: " << *problem << "\n";
  } else if (!config_path) {
    out << "- Config file: not found (looked for " << default_config_path() << ")\n";
  } else {
    out << "- Config file: " << *config_path << "\n- Config in effect:\n";
    std::istringstream yaml(config_to_yaml(*config));
    for (std::string line; std::getline(yaml, line);) out << "\t" << (line.rfind(" ", 0) == 0 ? "  " : "- ") << line << "\n";
    for (const auto& w : config->warnings) out << "- Config warning: " << w << "\n";
  }
  return out.str();
}

}  // namespace acc
