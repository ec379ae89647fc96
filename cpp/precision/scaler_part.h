// The checkpoint part of fp16's GradScaler: its scale and growth tracker as scaler.json.
#pragma once

#include <memory>

#include "checkpoint/checkpoint_part.h"
#include "precision/grad_scaler.h"

namespace acc {

std::unique_ptr<CheckpointPart> scaler_part(std::shared_ptr<GradScaler> scaler);

}  // namespace acc
