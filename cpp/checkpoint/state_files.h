// The small files of a save_state checkpoint: raw bytes and JSON (every error names the file), the
// JSON forms of scheduler, GradScaler and data-loader states, and the RNG states as named tensors.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "data/dataloader.h"
#include "model/model.h"
#include "optim/scheduler.h"

namespace acc {

// Accelerate's names for the i-th object of a kind: model.safetensors, model_1.safetensors, ...
std::string indexed_name(const std::string& stem, size_t i, const std::string& extension);
std::string join_path(const std::string& dir, const std::string& name);

std::string read_file(const std::string& path);
nlohmann::json read_json(const std::string& path);

// A field of a checkpoint's JSON file; an Io error naming the file when it is missing or mistyped.
template <class T>
T json_field(const nlohmann::json& j, const char* key, const std::string& path) {
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail(Status::Io, "checkpoint file '", path, "' lacks a valid '", key, "'");
  }
}

void write_scheduler_state(const std::string& path, const SchedulerState& state);
SchedulerState read_scheduler_state(const std::string& path);

struct ScalerState {
  double scale = 0;
  int64_t growth_tracker = 0;
};
void write_scaler_state(const std::string& path, const ScalerState& state);
ScalerState read_scaler_state(const std::string& path);

void write_loader_states(const std::string& path, const std::vector<LoaderState>& states);
std::vector<LoaderState> read_loader_states(const std::string& path);

// The states of every generator a resumed run needs (the CPU's, each GPU's), as byte tensors.
NamedTensors capture_rng_states();
// Checks saved states against this process's generators; returns what sets them.
std::function<void()> prepare_rng_restore(const NamedTensors& saved, const std::string& path);

}  // namespace acc
