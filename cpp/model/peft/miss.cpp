#include "model/peft/miss.h"

#include <ATen/core/grad_mode.h>

#include <string>
#include <utility>

#include "common/error.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

bool bat(const LoraConfig& config) { return config.miss_init == "bat"; }
bool mini(const LoraConfig& config) { return config.miss_init == "mini"; }

// PEFT's MiSS takes nn.Linear only, whose output it adds to or computes anew.
void check_site(const LinearSite& site, const LoraConfig& config) {
  require_plain_linear(site, "MiSS", "input and output to adapt");
  const int64_t in = in_features(site), out = out_features(site);
  if (bat(config) && (in % config.r != 0 || out % config.r != 0))
    fail(Status::InvalidArgument, "MiSS (init_weights \"bat\") cannot adapt '", site.module, "': its ", out, " x ", in,
         " weight is not made of ", config.r, " x ", config.r, " blocks (r must divide both; PEFT's ValueError)");
  if (mini(config) && out % config.miss_mini_r != 0)
    fail(Status::InvalidArgument, "MiSS (init_weights \"mini\") cannot adapt '", site.module, "': mini_r ",
         config.miss_mini_r, " does not divide its ", out, " outputs (PEFT's ValueError)");
}

// PEFT's get_delta_weight ("bat"): W (out x in) as out/r x in/r blocks of r x r, each times its row's
// shard, plus the shard, laid back as out x in; in the shard's dtype (W cast to it).
at::Tensor bat_delta(const at::Tensor& block, const at::Tensor& w) {
  const int64_t r = block.size(-1);
  const at::Tensor blocks =
      w.to(block.scalar_type()).reshape({w.size(0) / r, r, w.size(1) / r, r}).permute({2, 0, 1, 3});
  const at::Tensor result = at::matmul(blocks, block) + block;
  return result.permute({1, 2, 0, 3}).reshape(w.sizes());
}

// "mini"'s repetition of its r x mini_r shard along the outputs (0 for the other variants).
int64_t mini_r_of(const LoraConfig& config) { return mini(config) ? config.miss_mini_r : 0; }

// miss_block as r x out: "mini"'s r x mini_r repeated along the outputs.
at::Tensor full_block(const at::Tensor& block, int64_t out, int64_t mini_r) {
  return mini_r > 0 ? block.repeat({1, out / mini_r}) : block;
}

}  // namespace

std::vector<FactorShape> miss_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t out = out_features(site), r = config.r;
  if (bat(config)) return {{kMissBlock, {out / r, r, r}}};
  return {{kMissBlock, {r, mini(config) ? config.miss_mini_r : out}}};
}

std::vector<LoraAdapter> make_miss_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config);
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    at::Tensor block = at::zeros(miss_factor_shapes(config, site).front().shape, at::kFloat);
    if (config.miss_init == "false") kaiming_uniform_sqrt5(block);  // (every other variant starts at zeros)
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), config.r, 1.0};
    adapter.factors = {{kMissBlock, adapter_parameter(block, site)}};
    adapter.method = PeftType::Miss;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor miss_merged_weight(const at::Tensor& w, const at::Tensor& block, const LoraConfig& config) {
  if (bat(config)) return (w + bat_delta(block, w)).to(w.scalar_type());
  // Column c gains row c % r of the shard (PEFT's get_delta_weight_miss: the blocks, then the rest).
  const int64_t out = w.size(0), in = w.size(1);
  const at::Tensor shard = full_block(block, out, mini_r_of(config));
  const int64_t r = shard.size(0);
  const at::Tensor laid = shard.t().repeat({1, (in + r - 1) / r}).slice(1, 0, in);
  return (w + laid).to(w.scalar_type());
}

OutputAdapter miss_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them.
  const at::Tensor block = adapter.factors[0].second, weight = adapter.site.weight, bias = adapter.site.bias;
  if (bat(config))
    return [block, weight, bias, enabled](const at::Tensor& input, const at::Tensor& output, bool) {
      if (!*enabled) return output.to(input.scalar_type());
      // PEFT's forward: the frozen weight plus its delta, the input and bias cast to that sum's dtype.
      const at::Tensor w = weight.detach();
      const at::Tensor merged = w + bat_delta(block, w);
      const at::Tensor b = bias.defined() ? bias.to(merged.scalar_type()) : bias;
      return at::linear(input.to(merged.scalar_type()), merged, b).to(input.scalar_type());
    };
  const int64_t out = out_features(adapter.site);
  const int64_t mini_r = mini_r_of(config);
  const double dropout = config.dropout;
  return [block, out, mini_r, dropout, enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    const at::Tensor shard = full_block(block, out, mini_r);
    const int64_t r = shard.size(0), in = input.size(-1);
    // PEFT's order: the input zero-padded to a multiple of r, cast to the shard's dtype, dropped out,
    // its r-wide blocks summed, times the shard.
    at::Tensor x = in % r != 0 ? at::constant_pad_nd(input, {0, r - in % r}, 0) : input;
    x = x.to(shard.scalar_type());
    if (dropout > 0) x = at::dropout(x, dropout, training);
    std::vector<int64_t> blocks(x.sizes().begin(), x.sizes().end() - 1);
    blocks.push_back(x.size(-1) / r);
    blocks.push_back(r);
    const at::Tensor summed = at::sum(x.reshape(blocks), -2);
    return (output + at::matmul(summed, shard)).to(input.scalar_type());
  };
}

}  // namespace acc
