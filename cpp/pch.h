// Precompiled header: the heavy torch headers most implementation files use. Not torch/nn.h: its
// module templates (conv, pooling, ...) cost every file ~1.7 s of instantiations at its end even
// when it uses none of them (2.4 s against 0.7 s for an empty file on clang 14); the few files that
// build modules include the headers they use.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/optim.h>
#include <torch/script.h>

#include <nlohmann/json.hpp>
