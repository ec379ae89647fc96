// The checkpoint part of fp16's GradScaler: its scale and growth tracker as scaler.json.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_part.h"
#include "precision/grad_scaler.h"

namespace acc {

std::unique_ptr<CheckpointPart> scaler_part(std::shared_ptr<GradScaler> scaler);
// A state read from `path` (this library's scaler.json or Python's scaler.pt), checked; what loads it.
// Without `rules`, the scaler's own stay.
StagedLoad staged_scaler_load(std::shared_ptr<GradScaler> scaler, double scale, int64_t growth_tracker,
                              int64_t hysteresis, const std::optional<GradScaler::ScaleRules>& rules,
                              const std::string& path);

}  // namespace acc
