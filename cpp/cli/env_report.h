// `accelerate env`: what a bug report needs — this library's version and build, libtorch, CUDA,
// NCCL, BLAS, the CPU and GPUs, and the config in effect.
#pragma once

#include <optional>
#include <string>

#include "config/config_file.h"

namespace acc {

// `config_path`: the config file found (none: none was); `config`: its contents.
// `problem`: why the config file asked for cannot be used (its message names it); the report says so
// instead of describing another file.
std::string env_report(const std::optional<std::string>& config_path, const std::optional<ClusterConfig>& config,
                       const std::optional<std::string>& problem = std::nullopt);

}  // namespace acc
