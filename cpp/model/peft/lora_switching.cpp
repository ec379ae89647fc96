// LoraAdapters' side of PEFT's several named adapters (model/named_adapters.cpp): taking an
// adapter's branches off its layers and putting them back, handing a kept adapter's tensors to
// freshly wired layers, exchanging the tensors of adapters wired alike, and freezing those kept aside.
#include "common/error.h"
#include "model/peft/factor_methods.h"
#include "model/peft/ia3.h"
#include "model/peft/lora.h"

namespace acc {

void LoraAdapters::install() const {
  for (const auto& adapter : adapters_) {
    if (adapter.site.set_output_adapter) adapter.site.set_output_adapter(output_adapter(adapter));
    if (is_ia3(adapter) && adapter.site.set_input_adapter)
      adapter.site.set_input_adapter(ia3_input_adapter(adapter, enabled_));
    const FactorMethod* method = factor_method(adapter);
    if (method && method->input_adapter && adapter.site.set_input_adapter)
      adapter.site.set_input_adapter(method->input_adapter(adapter, config_, enabled_));
  }
}

void LoraAdapters::uninstall() const {
  for (const auto& adapter : adapters_) {
    if (adapter.site.set_output_adapter) adapter.site.set_output_adapter(nullptr);
    if (adapter.site.set_input_adapter) adapter.site.set_input_adapter(nullptr);
  }
}

void LoraAdapters::adopt(LoraAdapters&& kept, bool enabled) {
  const auto& my_tokens = tokens_.adapters();
  const auto& kept_tokens = kept.tokens_.adapters();
  require(kept.adapters_.size() == adapters_.size() && kept_tokens.size() == my_tokens.size() &&
              kept.tokens_.standalone() == tokens_.standalone(),
          "the adapters kept do not fit the model's layers");
  for (size_t k = 0; k < my_tokens.size(); ++k)
    require(my_tokens[k].site.module == kept_tokens[k].site.module && my_tokens[k].indices == kept_tokens[k].indices,
            "the trainable tokens kept for '", kept_tokens[k].site.module, "' do not fit the layer '",
            my_tokens[k].site.module, "'");
  for (size_t k = 0; k < adapters_.size(); ++k) {
    const LoraAdapter &to = adapters_[k], &from = kept.adapters_[k];
    const auto same_shape = [](const at::Tensor& x, const at::Tensor& y) {
      return x.defined() == y.defined() && (!x.defined() || x.sizes() == y.sizes());
    };
    bool same_factors = to.factors.size() == from.factors.size();
    for (size_t k = 0; same_factors && k < to.factors.size(); ++k)
      same_factors =
          to.factors[k].first == from.factors[k].first && same_shape(to.factors[k].second, from.factors[k].second);
    require(to.site.module == from.site.module && same_shape(to.a, from.a) && same_shape(to.b, from.b) &&
                same_shape(to.ia3, from.ia3) && same_factors && to.magnitude.defined() == from.magnitude.defined() &&
                to.b_bias.defined() == from.b_bias.defined(),
            "the adapter kept for '", from.site.module, "' does not fit the layer '", to.site.module, "'");
  }
  swap_in(kept, enabled);  // `kept` is left the draws that wired the layers, for the caller to drop
  tokens_.swap_deltas(kept.tokens_);
  std::swap(originals_, kept.originals_);
  std::swap(originals_dropped_because_, kept.originals_dropped_because_);
  bring_saved_modules_back();
}

bool LoraAdapters::wired_like(const LoraAdapters& other) const {
  if (other.adapters_.size() != adapters_.size() || !tokens_.empty() || !other.tokens_.empty() || !originals_.empty() ||
      !other.originals_.empty())
    return false;
  for (size_t k = 0; k < adapters_.size(); ++k) {
    const LinearSite &mine = adapters_[k].site, &theirs = other.adapters_[k].site;
    if (mine.module != theirs.module || mine.parameter != theirs.parameter || mine.owner != theirs.owner ||
        bool(mine.set_output_adapter) != bool(theirs.set_output_adapter) ||
        is_ia3(adapters_[k]) != is_ia3(other.adapters_[k]) || adapters_[k].method != other.adapters_[k].method)
      return false;
  }
  return true;
}

bool LoraAdapters::exchange(LoraAdapters& other, bool enabled) {
  if (!wired_like(other)) return false;
  swap_in(other, enabled);
  return true;
}

void LoraAdapters::swap_in(LoraAdapters& other, bool enabled) {
  for (size_t k = 0; k < adapters_.size(); ++k) {
    LoraAdapter &mine = adapters_[k], &theirs = other.adapters_[k];
    std::swap(mine.a, theirs.a);
    std::swap(mine.b, theirs.b);
    std::swap(mine.magnitude, theirs.magnitude);
    std::swap(mine.b_bias, theirs.b_bias);
    std::swap(mine.ia3, theirs.ia3);
    std::swap(mine.factors, theirs.factors);
    std::swap(mine.ranknum, theirs.ranknum);
    std::swap(mine.projections, theirs.projections);
    std::swap(mine.indices, theirs.indices);
    std::swap(mine.buffers, theirs.buffers);
    std::swap(mine.generator, theirs.generator);
    std::swap(mine.method, theirs.method);
    std::swap(mine.feedforward, theirs.feedforward);
    std::swap(mine.r, theirs.r);
    std::swap(mine.scaling, theirs.scaling);
  }
  std::swap(config_, other.config_);
  std::swap(allocator_, other.allocator_);
  *enabled_ = enabled;
  install();
}

void LoraAdapters::set_trainable(bool trainable) const {
  const bool mica = config_.init == "mica";  // trains A alone
  for (const auto& adapter : adapters_) {
    std::vector<const at::Tensor*> tensors = {&adapter.a, &adapter.b, &adapter.magnitude, &adapter.b_bias,
                                              &adapter.ia3};
    for (const auto& entry : adapter.factors) tensors.push_back(&entry.second);
    for (const at::Tensor* t : tensors) {
      if (!t->defined()) continue;
      const bool trains = trainable && !(mica && t == &adapter.b);
      at::Tensor handle = *t;
      handle.set_requires_grad(trains);
      if (!trains) handle.mutable_grad() = at::Tensor();
    }
  }
  for (const auto& tokens : tokens_.adapters()) {
    at::Tensor handle = tokens.delta;
    handle.set_requires_grad(trainable);
    if (!trainable) handle.mutable_grad() = at::Tensor();
  }
}

}  // namespace acc
