// Precompiled header: the heavy torch headers every implementation file uses.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn.h>
#include <torch/optim.h>
#include <torch/script.h>

#include <nlohmann/json.hpp>
