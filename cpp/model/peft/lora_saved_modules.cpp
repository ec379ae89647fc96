// The modules to save as they were when the adapters were added (PEFT's ModulesToSaveWrapper's
// original_module): what a disabled forward computes with, and what the model's tensors hold again
// while the adapter that trains its copy of them is kept aside.
#include <ATen/core/grad_mode.h>

#include "common/error.h"
#include "model/peft/lora.h"

namespace acc {

LoraAdapters::OriginalsInUse LoraAdapters::originals_in_use() const {
  std::vector<OriginalsInUse::Swapped> swapped;
  if (enabled()) return OriginalsInUse(std::move(swapped));
  if (!originals_dropped_because_.empty())
    fail(Status::Unsupported, "a forward with adapters disabled beside modules_to_save (or LN tuning's modules): ",
         originals_dropped_because_);
  if (originals_.empty()) return OriginalsInUse(std::move(swapped));
  if (at::GradMode::is_enabled())
    fail(Status::Unsupported, "a forward with adapters disabled beside modules_to_save (or LN tuning's modules) ",
         "needs no gradients (ACC_FORWARD_NO_GRAD): those modules train in place here, and their original values ",
         "are put in for the forward only");
  for (const auto& original : originals_) {
    swapped.push_back({original.live, original.live.detach(), original.live.requires_grad()});
    original.live.set_data(original.kept);
    if (original.live.is_leaf()) original.live.set_requires_grad(false);
  }
  return OriginalsInUse(std::move(swapped));
}

LoraAdapters::OriginalsInUse::~OriginalsInUse() {
  for (auto& swapped : swapped_) {
    swapped.live.set_data(swapped.own);
    if (swapped.live.is_leaf()) swapped.live.set_requires_grad(swapped.requires_grad);
  }
}

void LoraAdapters::move_originals(c10::optional<at::Device> device, c10::optional<at::ScalarType> dtype) {
  for (auto& original : originals_) {
    for (at::Tensor* t : {&original.kept, &original.aside}) {
      if (!t->defined()) continue;
      const at::ScalarType target = dtype && t->is_floating_point() ? *dtype : t->scalar_type();
      *t = t->to(device.value_or(t->device()), target);
    }
  }
}

void LoraAdapters::put_saved_modules_aside() {
  at::NoGradGuard no_grad;
  for (auto& original : originals_) {
    original.aside = original.live.detach().clone();
    original.live.copy_(original.kept);
    original.live.mutable_grad() = at::Tensor();  // the gradient was the copy's
  }
}

void LoraAdapters::bring_saved_modules_back() {
  at::NoGradGuard no_grad;
  for (auto& original : originals_) {
    if (!original.aside.defined()) continue;
    original.live.copy_(original.aside);
    original.aside = at::Tensor();
  }
}

NamedTensors LoraAdapters::saved_modules_aside() const {
  NamedTensors out;
  for (const auto& original : originals_)
    if (original.aside.defined()) out.emplace_back(original.name, original.aside);
  return out;
}

NamedTensors LoraAdapters::kept_originals() const {
  NamedTensors out;
  for (const auto& original : originals_) out.emplace_back(original.name, original.kept);
  return out;
}

std::vector<std::string> LoraAdapters::saved_module_names() const {
  std::vector<std::string> out;
  for (const auto& original : originals_) out.push_back(original.name);
  return out;
}

void LoraAdapters::keep_originals_again() {
  at::NoGradGuard no_grad;
  for (auto& original : originals_) original.kept.copy_(original.live);
}

}  // namespace acc
