#include "model/attention_mask.h"

#include <limits>

#include "common/error.h"

namespace acc {

at::Tensor checked_key_padding_mask(const char* layer, const char* name, const at::Tensor& mask, bool unbatched,
                                    const at::Tensor& keys) {
  if (!mask.defined()) return mask;
  const int64_t b = keys.size(0), s = keys.size(1);
  const std::vector<int64_t> expected = unbatched ? std::vector<int64_t>{s} : std::vector<int64_t>{b, s};
  require(mask.sizes() == at::IntArrayRef(expected) && (mask.scalar_type() == at::kBool || mask.is_floating_point()),
          layer, ": ", name, " must be a bool (true: ignore that key) or floating (added to the scores) tensor ",
          unbatched ? "[keys] = " : "[batch, keys] = ", at::IntArrayRef(expected), ", got ", mask.scalar_type(), " ",
          mask.sizes());
  require(mask.device() == keys.device(), layer, ": ", name, " is on ", mask.device(), ", its keys on ", keys.device());
  return unbatched ? mask.unsqueeze(0) : mask;
}

at::Tensor attention_bias(bool causal, const at::Tensor& key_padding_mask, int64_t heads, int64_t t, int64_t s,
                          const at::TensorOptions& options) {
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor bias;
  if (causal) bias = at::full({t, s}, -inf, options).triu(1);
  if (key_padding_mask.defined()) {
    const int64_t b = key_padding_mask.size(0);
    at::Tensor pad = key_padding_mask.scalar_type() == at::kBool
                         ? at::zeros({b, s}, options).masked_fill(key_padding_mask, -inf)
                         : key_padding_mask.to(options.dtype());
    // One row per batch element and head, as the scores are laid out; broadcast over the queries.
    pad = pad.view({b, 1, 1, s}).expand({b, heads, 1, s}).reshape({b * heads, 1, s});
    // PyTorch fills -inf into the causal mask where a key is padded; adding -inf gives the same
    // numbers. A float mask is added to the causal one (1.13 refuses that pair; 2.x adds them).
    bias = bias.defined() ? bias + pad : pad;
  }
  return bias;
}

std::vector<std::string> attention_bias_script(bool causal, const std::string& key_padding_mask, int64_t heads) {
  std::vector<std::string> lines;
  if (causal) lines.push_back("bias = torch.full([t, n], float(\"-inf\"), dtype=q.dtype, device=q.device).triu(1)");
  if (key_padding_mask.empty()) return lines;
  const std::string h = std::to_string(heads), m = key_padding_mask;
  lines.insert(lines.end(), {
      "if " + m + ".is_floating_point():",
      "    pad = " + m + ".to(q.dtype)",
      "else:",
      "    pad = torch.zeros([b, n], dtype=q.dtype, device=q.device).masked_fill(" + m + ", float(\"-inf\"))",
      "pad = pad.view([b, 1, 1, n]).expand([b, " + h + ", 1, n]).reshape([b * " + h + ", 1, n])",
      causal ? "bias = bias + pad" : "bias = pad",
  });
  return lines;
}

}  // namespace acc
