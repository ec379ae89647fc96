// Model's side of PEFT's replace_lora_weights_loftq (model/peft/loftq.h, loftq_replacement): the adapters
// of a model quantised to 4 bits restart from LoftQ's factors of each layer's quantisation error,
// the unquantised weights read from the model's own safetensors files. PEFT computes it on CUDA
// only; here on the layer's device.
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "model/model.h"
#include "model/peft/loftq.h"

namespace acc {
namespace {

constexpr const char* kWhat = "replace_lora_weights_loftq";

// One layer's work, every input checked. The adapter's tensors are held themselves (handles to
// the adapter's own), not the adapter: `keep` may call the library, even remove the adapters.
struct Replacement {
  std::string module;
  at::Tensor a, b;  // lora_A's and lora_B's weights
  int64_t r;
  at::Tensor weight;       // the unquantised weight, on the layer's device
  at::Tensor dequantized;  // the 4-bit weight as it computes
};

const at::Tensor* find_entry(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [key, tensor] : tensors)
    if (key == name) return &tensor;
  return nullptr;
}

}  // namespace

size_t Model::replace_lora_weights_loftq(const NamedTensors& weights, const std::string& source,
                                         const std::string& adapter,
                                         const std::function<bool(const std::string& module)>& keep) {
  const std::string name = adapter.empty() ? active_adapter_ : adapter;
  const LoraAdapters* adapters = nullptr;
  if (name == active_adapter_ && !lora_.empty())
    adapters = &lora_;
  else if (const auto it = inactive_.find(name); it != inactive_.end())
    adapters = &it->second;
  require(adapters != nullptr, kWhat, ": the model has no LoRA adapter named '", name, "'");
  require_weights(kWhat);
  require_whole_parameters(kWhat);
  std::vector<Replacement> work;
  for (const LoraAdapter& a : adapters->adapters()) {
    if (!a.site.quantized) continue;
    const at::Tensor dequantized = four_bit_dequantized(a.site.module);
    if (!dequantized.defined()) continue;  // PEFT's replaces the adapters of Linear4bit layers only
    const std::string key = a.site.module + ".weight";
    const at::Tensor* weight = find_entry(weights, key);
    require(weight != nullptr, kWhat, ": '", source, "' holds no '", key,
            "' (the unquantised weight of a 4-bit layer)");
    require(weight->is_floating_point() && weight->sizes() == dequantized.sizes(), kWhat, ": '", key, "' in '", source,
            "' is ", weight->scalar_type(), " of shape ", weight->sizes(),
            ", not the layer's floating-point weight of shape ", dequantized.sizes());
    // LoftQ computes in float32, as PEFT: a float64 weight must fit it too.
    require(weight->to(at::kFloat).isfinite().all().item<bool>(), kWhat, ": '", key, "' in '", source,
            "' holds inf or NaN, or values beyond float32's range, in which LoftQ computes");
    require(a.r <= std::min(dequantized.size(0), dequantized.size(1)), kWhat, ": r ", a.r, " of '", a.site.module,
            "' exceeds its weight's rank bound");
    work.push_back({a.site.module, a.a, a.b, a.r, weight->to(dequantized.device()), dequantized});
  }
  require(!work.empty(), kWhat, ": no LoRA adapter of '", name,
          "' is on a 4-bit layer (PEFT's \"No bnb LoRA module found on the model\")");
  // `keep` may run the model, not change its adapters: the count and the rollback are of these.
  const std::shared_ptr<void> hold = hold_trainable_set(
      "acc_model_replace_lora_weights_loftq is replacing the adapters: inside its keep callback they cannot be "
      "added, removed, switched or merged",
      /*freezing_too=*/true, /*merging_too=*/true);
  at::NoGradGuard no_grad;
  // Each layer's earlier adapters (as PEFT keeps them for its rollback), all brought back where
  // `keep` fails.
  struct Earlier {
    at::Tensor a, b;            // the adapter's tensors
    at::Tensor data_a, data_b;  // what they held
  };
  std::vector<Earlier> earlier;
  const auto restore = [](const Earlier& e) {
    e.a.set_data(e.data_a);
    e.b.set_data(e.data_b);
  };
  size_t kept = 0;
  try {
    for (const Replacement& job : work) {
      at::Tensor a, b;
      try {
        std::tie(a, b) = loftq_replacement(job.weight, job.dequantized, job.r);
      } catch (const c10::Error& e) {
        fail(Status::InvalidArgument, kWhat, ": the quantisation error of '", job.module, "' (its weight from '",
             source, "') cannot be factored: ", e.what_without_backtrace());
      }
      // Near float32's limits the error or its factors overflow: refused, as PEFT's NaN adapters would train nothing.
      require(a.isfinite().all().item<bool>() && b.isfinite().all().item<bool>(), kWhat,
              ": LoftQ's factors of the quantisation error of '", job.module, "' (its weight from '", source,
              "') are not finite: the weight is too close to float32's limits");
      // As PEFT's `.data =`: the adapters take the float32 factors; their tensors keep their identity.
      earlier.push_back({job.a, job.b, job.a.variable_data(), job.b.variable_data()});
      job.a.set_data(a.to(job.a.device()));
      job.b.set_data(b.to(job.b.device()));
      if (!keep || keep(job.module))
        ++kept;
      else
        restore(earlier.back());
    }
  } catch (...) {
    for (const Earlier& e : earlier) restore(e);
    throw;
  }
  return kept;
}

}  // namespace acc
