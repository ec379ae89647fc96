// LoRA on a TorchScript model as PEFT computes it. PEFT's layer computes base(x) + B(A(dropout(x))) *
// scaling, which needs the layer's input: weight substitution (model/peft/lora.h) cannot see it, and
// rounds otherwise (W + B A * scaling is one product where PEFT adds two). So a
// copy of forward has every call inlined except the calls of the adapted linear layers, and each of
// those is followed by a marker that runs the layer's OutputAdapter on the call's input and output
// — where PEFT's layer adds its branch, in the same order, so dropout draws the same numbers. The
// module itself (and what save_torchscript writes) is untouched.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/output_adapter.h"

namespace acc {

// Forward with markers after every call of `layers` (module paths of linear layers); taking self
// first. A layer the forward never calls as a module (its weight read directly) is Unsupported,
// naming it: PEFT's hook would not see such a use either.
// Calls of `calls_kept` (module paths: 4-bit layers, which a later pass marks) stay calls.
// `mark_inputs`: each call's input also goes through a marker first, which runs the layer's
// InputAdapter ((IA)^3's feedforward vectors); the output marker still gets the layer's own input.
std::shared_ptr<torch::jit::Graph> mark_adapted_linears(const torch::jit::Module& module,
                                                        const std::vector<std::string>& layers, int64_t token,
                                                        const std::set<std::string>& calls_kept = {},
                                                        bool mark_inputs = false);
// Whether `call` (a layer's forward, self first) takes one tensor and returns one, as a marker needs.
bool takes_and_returns_a_tensor(const torch::jit::Node* call);
// Of `layers`, in their order, those the forward calls as a module, each call taking and returning
// one tensor: the layers a marker can adapt as PEFT's layer does.
std::vector<std::string> layers_called_as_modules(const torch::jit::Module& module,
                                                  const std::vector<std::string>& layers);
// The same on `graph` (a forward taking self first, such as stage 3's with its unit markers, whose
// planning kept the layers' calls): every other call is inlined, so a marker lands after its layer's
// call and before the end marker of the unit running it.
void mark_adapted_linears(torch::jit::Graph& graph, const std::vector<std::string>& layers, int64_t token,
                          const std::set<std::string>& calls_kept = {}, bool mark_inputs = false);

// What the markers of `token` run: adapters[i] for layer i (an empty one passes the output on) and
// inputs[i] before it (likewise),
// in training mode when `training` says so. Null adapters remove the entry.
struct MarkedAdapters {
  std::vector<OutputAdapter> adapters;
  std::function<bool()> training;
  std::vector<InputAdapter> inputs{};  // where the forward was marked with mark_inputs (sized as adapters)
};
void install_output_adapters(int64_t token, std::shared_ptr<MarkedAdapters> adapters);

}  // namespace acc
