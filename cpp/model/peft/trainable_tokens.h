// PEFT's trainable_token_indices (its TrainableTokensLayer, what LoRA fine-tuning uses for new special
// tokens): chosen rows of an embedding's weight train, the rest of it stays frozen, and only those
// rows are saved. Each targeted layer gets a parameter `delta` (n x dim) that starts as a copy of the
// rows; every forward computes with W.index_copy(0, indices, delta) in place of W — PEFT's own
// arithmetic, so the gradient reaches delta through index_copy. A layer sharing the weight (an LM
// head tied to the embedding) computes with the same replaced weight, as PEFT's tied adapter does.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/peft/lora_config.h"
#include "tensor/named_tensors.h"

namespace acc {

// An adapter's parameter is named its module's name and this (PEFT's, without its adapter name):
// beside LoRA (PEFT's TrainableTokensWrapper holds the layer as its token_adapter), or alone (PEFT's
// TRAINABLE_TOKENS method, whose layer replaces the module).
constexpr const char* kTokenDeltaSuffix = ".token_adapter.trainable_tokens_delta";
constexpr const char* kStandaloneTokenDeltaSuffix = ".trainable_tokens_delta";

// A layer whose weight's rows are tokens: an embedding, or a linear layer without bias reading a
// vocabulary (an LM head). `use_weight` makes it compute with another tensor (the parameter itself
// restores it); a layer that reads another's weight through it (a spec model's tied head) has no
// site of its own.
struct TokenSite {
  std::string module;
  at::Tensor weight;  // tokens x dim
  std::function<void(const at::Tensor&)> use_weight;
  bool is_embedding = true;
  bool has_bias = false;  // a linear layer's
};

struct TokenAdapter {
  TokenSite site;
  std::vector<TokenSite> tied;  // the other layers holding the same weight
  std::vector<int64_t> indices;
  at::Tensor index;  // the indices as an int64 tensor (moved to the weight's device where used)
  at::Tensor delta;  // the parameter: the rows' values (n x dim, the weight's dtype)
};

class TrainableTokens {
 public:
  bool empty() const { return adapters_.empty(); }
  const std::vector<TokenAdapter>& adapters() const { return adapters_; }

  // The adapters `indices` asks for, each layer matched as PEFT matches it (a module whose name ends
  // with the key), delta copied from the rows. Checks everything (the modules exist and are such
  // layers, indices in range and distinct, one list per weight, none of them `lora_modules`) before
  // returning; the model changes only when the caller installs the result.
  static std::vector<TokenAdapter> make(const TokenIndices& indices, const std::vector<TokenSite>& sites,
                                        const std::vector<std::string>& lora_modules);
  // PEFT's TrainableTokensConfig (`config.peft_type` TrainableTokens): the rows standalone_indices
  // of every layer the targets match (exact names, or a name's end after a dot, or the regular
  // expression; none: the input embedding), in module order; a matched layer whose weight an earlier
  // one's adapter holds (a tied head) computes with that adapter's rows. `other_modules`: the
  // model's modules that are neither, which the targets must not match. Each delta starts as the
  // rows (the caller draws PEFT's init_weights false values). Checks as `make`, changing nothing.
  static std::vector<TokenAdapter> make_standalone(const LoraConfig& config, const std::vector<TokenSite>& sites,
                                                   const std::vector<std::string>& other_modules);
  // `standalone`: made by make_standalone, whose parameters PEFT names otherwise.
  void install(std::vector<TokenAdapter> adapters, bool standalone = false) {
    adapters_ = std::move(adapters);
    standalone_ = standalone;
  }
  void clear() { adapters_.clear(); }
  // Exchanges the deltas with `other`'s, adapter by adapter (the same layers and rows: the caller
  // checked), each keeping its own layers.
  void swap_deltas(TrainableTokens& other) {
    for (size_t k = 0; k < adapters_.size() && k < other.adapters_.size(); ++k)
      std::swap(adapters_[k].delta, other.adapters_[k].delta);
  }
  bool standalone() const { return standalone_; }
  // What follows a module's name in its delta's name (kTokenDeltaSuffix or kStandaloneTokenDeltaSuffix).
  const char* suffix() const { return standalone_ ? kStandaloneTokenDeltaSuffix : kTokenDeltaSuffix; }

  // Adapter k's parameter under its name ("<module>" and suffix()).
  void append_parameters(size_t k, NamedTensors* out) const;

  // `weight` with the adapter's rows replaced by `delta` (PEFT's get_merged_weights).
  static at::Tensor replaced(const at::Tensor& weight, const TokenAdapter& adapter, const at::Tensor& delta);

  // While the returned guard lives, each adapter's layers compute with the replaced weight.
  class Applied {
   public:
    explicit Applied(std::vector<const TokenAdapter*> applied) : applied_(std::move(applied)) {}
    Applied(Applied&& other) noexcept : applied_(std::move(other.applied_)) { other.applied_.clear(); }
    Applied(const Applied&) = delete;
    Applied& operator=(const Applied&) = delete;
    ~Applied();

   private:
    std::vector<const TokenAdapter*> applied_;
  };
  Applied apply() const;

  // `state` with each adapter's rows written into its weight's entry and the delta's entry left out.
  NamedTensors merged(const NamedTensors& state) const;
  // Writes the rows into the weights in place (PEFT's merge; a tied layer sees them, as in PEFT).
  void merge_into_weights() const;

 private:
  std::vector<TokenAdapter> adapters_;
  bool standalone_ = false;
};

}  // namespace acc
