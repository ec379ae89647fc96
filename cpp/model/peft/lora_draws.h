// What LoraAdapters::add draws and computes for a new linear adapter (model/peft/lora.cpp), for the
// code that remakes one as PEFT's update_layer does (EVA's new ranks, model/peft/lora_eva.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "model/peft/lora.h"

namespace acc {

// torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5)), the adapters' usual draw: a tensor with no
// element is left as it is, drawing nothing (PyTorch warns; libtorch's would divide by its zero fan).
void kaiming_uniform_sqrt5(at::Tensor& t);
// nn.Linear(in, out, bias=False)'s own initialisation (Kaiming-uniform, a = sqrt(5)), float32.
at::Tensor new_linear_weight(int64_t out, int64_t in);
// DoRA's magnitude at the start for layer weight `w` and the adapter's A, B and scaling.
at::Tensor initial_magnitude(const at::Tensor& w, const LoraAdapter& adapter);

}  // namespace acc
