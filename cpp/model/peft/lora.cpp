#include "model/peft/lora.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "common/autocast_guard.h"
#include "common/error.h"
#include "common/text.h"
#include "model/peft/adalora.h"
#include "model/peft/adalora_allocator.h"
#include "model/peft/boft.h"
#include "model/peft/corda.h"
#include "model/peft/factor_methods.h"
#include "model/peft/ia3.h"
#include "model/peft/loftq.h"
#include "model/peft/lora_draws.h"
#include "model/peft/lora_ga.h"
#include "model/peft/lora_init.h"
#include "model/peft/lycoris.h"
#include "model/peft/oft.h"
#include "model/peft/vera.h"

namespace acc {

void kaiming_uniform_sqrt5(at::Tensor& t) {
  if (t.numel() > 0) torch::nn::init::kaiming_uniform_(t, std::sqrt(5.0));
}

// nn.Linear(in, out, bias=False)'s own initialisation, which PEFT's adapters go through first.
at::Tensor new_linear_weight(int64_t out, int64_t in) {
  at::Tensor w = at::empty({out, in}, at::kFloat);
  kaiming_uniform_sqrt5(w);
  return w;
}

namespace {

// The weight delta (B A) * scaling, as PEFT's get_delta_weight computes it.
at::Tensor lora_delta(const at::Tensor& a, const at::Tensor& b, double scaling) { return at::matmul(b, a) * scaling; }

// nn.Conv{1,2,3}d(in, out, kernel, bias=False)'s own initialisation (Kaiming over in x kernel).
at::Tensor new_conv_weight(int64_t out, int64_t in, c10::IntArrayRef kernel) {
  std::vector<int64_t> sizes = {out, in};
  sizes.insert(sizes.end(), kernel.begin(), kernel.end());
  at::Tensor w = at::empty(sizes, at::kFloat);
  kaiming_uniform_sqrt5(w);
  return w;
}

std::vector<int64_t> repeated(int64_t value, size_t n) { return std::vector<int64_t>(n, value); }

// F.conv{1,2,3}d(x, w, bias, stride=..., padding=..., groups=...), by the weight's dimensions: the
// ops PEFT's layers call, which autocast knows by name.
at::Tensor conv_nd(const at::Tensor& x, const at::Tensor& w, c10::IntArrayRef stride, c10::IntArrayRef padding,
                   int64_t groups, const at::Tensor& bias = {}) {
  const std::vector<int64_t> dilation = repeated(1, stride.size());
  switch (w.dim()) {
    case 3:
      return at::conv1d(x, w, bias, stride, padding, dilation, groups);
    case 4:
      return at::conv2d(x, w, bias, stride, padding, dilation, groups);
    default:
      return at::conv3d(x, w, bias, stride, padding, dilation, groups);
  }
}

// PEFT's convolution branch: lora_B(lora_A(x)), A with the layer's kernel, stride and padding, B 1 x 1
// with its groups (and lora_bias's bias).
at::Tensor conv_branch(const at::Tensor& x, const at::Tensor& a, const at::Tensor& b, const at::Tensor& b_bias,
                       const ConvGeometry& geometry) {
  const size_t dims = static_cast<size_t>(a.dim()) - 2;
  const at::Tensor h = conv_nd(x, a, geometry.stride, geometry.padding, 1);
  return conv_nd(h, b, repeated(1, dims), repeated(0, dims), geometry.groups, b_bias);
}

// A convolution's B A as PEFT's DoRA takes it (its get_lora_weight: a product of the flattened
// kernels, in the layer weight's shape).
at::Tensor conv_lora_weight(const at::Tensor& a, const at::Tensor& b, c10::IntArrayRef weight_shape) {
  const int64_t r = a.size(0);
  return at::mm(b.view({-1, r}), a.view({r, -1})).reshape(weight_shape);
}

// DoRA's norms of a convolution's adapted weight, one per output channel (PEFT's _DoraConvNdLayer
// get_weight_norm): over all other dimensions, shaped 1 x out x 1 ..., the magnitude's shape.
at::Tensor conv_weight_norm(const at::Tensor& w, const at::Tensor& lora_weight, double scaling) {
  const at::Tensor sum = w + lora_weight * scaling;
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < sum.dim(); ++d) dims.push_back(d);
  return at::linalg_vector_norm(sum, 2, dims, /*keepdim=*/true, c10::nullopt).transpose(1, 0);
}

// PEFT's merge of lora_bias: the layer's bias plus lora_B's times the scaling, in the bias's dtype.
at::Tensor adapted_bias(const at::Tensor& bias, const at::Tensor& b_bias, double scaling) {
  return (bias + b_bias * scaling).to(bias.scalar_type());
}

// Whether the layer's weight holds the adapter's delta transposed (PEFT's fan_in_fan_out): an
// embedding's (num_embeddings x dim) and transformers' Conv1D's (in x out).
bool transposed_layout(const LinearSite& site) { return site.embedding || site.fan_in_fan_out; }

}  // namespace

void require_linear_layer(const LinearSite& site, const char* method) {
  const char* kind = site.conv ? "a convolution" : site.embedding ? "an embedding" : nullptr;
  if (site.attention || !site.owner.empty()) kind = "an attention's projection";
  if (adapts_parameter(site)) kind = "a parameter adapted itself (target_parameters)";
  if (kind)
    fail(Status::Unsupported, method, ": '", site.module, "' is ", kind, "; ", method,
         " starts linear layers (nn.Linear, transformers' Conv1D) only, as PEFT's: leave it out of target_modules");
}

void refuse_uncalled_layer(const LinearSite& site, const char* method, const char* missing) {
  fail(Status::Unsupported, method, " cannot adapt '", site.module,
       "': the model's forward never calls it as a module (it reads its weight itself), so there is no ", missing,
       "; call the layer as a module or leave it out of target_modules");
}

void require_linear_or_plain_conv2d(const LinearSite& site, const char* method, const char* peft_conv) {
  if (site.embedding || site.attention || site.fan_in_fan_out || adapts_parameter(site))
    fail(Status::InvalidArgument, method, " cannot adapt '", site.module, "': PEFT's ", method,
         " takes torch.nn.Linear and torch.nn.Conv2d only");
  if (site.quantized) fail(Status::Unsupported, method, " on the quantised layer '", site.module, "' is not built");
  if (!site.conv) return;
  const ConvGeometry& g = *site.conv;
  const at::Tensor& w = site.weight;
  if (w.dim() != 4)
    fail(Status::Unsupported, method, " on the ", w.dim() - 2, "-D convolution '", site.module,
         "' is not built (PEFT's ", method, " takes torch.nn.Conv2d)");
  auto uniform = [](const std::vector<int64_t>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
  };
  const bool plain = w.size(2) == w.size(3) && uniform(g.stride) && uniform(g.padding) && g.groups == 1 &&
                     dilation_refusal(g.dilation).empty() && g.refusal.empty();
  if (!plain)
    fail(Status::Unsupported, method, " on the convolution '", site.module, "': PEFT's ", peft_conv,
         " computes with a square kernel, one stride, one padding, no dilation and no groups (the first of each), ",
         "which would change what this layer computes");
}

void require_plain_linear(const LinearSite& site, const char* method, const char* missing) {
  if (site.conv || site.embedding || site.attention || site.fan_in_fan_out || !site.owner.empty() ||
      adapts_parameter(site))
    fail(Status::InvalidArgument, method, " cannot adapt '", site.module, "': PEFT's ", method,
         " takes torch.nn.Linear only");
  if (site.quantized) fail(Status::Unsupported, method, " on the quantised layer '", site.module, "' is not built");
  if (!site.set_output_adapter) refuse_uncalled_layer(site, method, missing);
}

void require_linear_or_conv1d(const LinearSite& site, const char* method, const char* missing, const char* bnb_module) {
  if (site.conv || site.embedding || site.attention || !site.owner.empty() || adapts_parameter(site))
    fail(Status::InvalidArgument, method, " cannot adapt '", site.module, "': PEFT's ", method,
         " takes torch.nn.Linear and transformers' Conv1D only");
  if (site.quantized)
    fail(Status::Unsupported, method, " on the quantised layer '", site.module, "' is not built",
         bnb_module ? std::string(" (PEFT's ") + bnb_module + ")" : std::string());
  if (!site.set_output_adapter) refuse_uncalled_layer(site, method, missing);
}

at::Tensor as_linear_layout(const LinearSite& site, const at::Tensor& w) { return transposed_layout(site) ? w.t() : w; }

namespace {

// The L2 norm of each row of an adapted weight, in its dtype (torch.linalg.norm(w, dim=1)).
at::Tensor row_norms(const at::Tensor& weight) {
  return at::linalg_vector_norm(weight, 2, {1}, false, c10::nullopt).to(weight.scalar_type());
}

// DoRA's row norms ||W + scaling * lora_weight|| (PEFT's get_weight_norm).
at::Tensor weight_norm(const at::Tensor& w, const at::Tensor& lora_weight, double scaling) {
  return row_norms(w + lora_weight * scaling);
}

}  // namespace

// DoRA's magnitude at the start (PEFT's DoraLinearLayer.update_layer): the adapted weight's row
// norms, lora_weight as lora_B @ lora_A (a convolution's: its output channels' norms).
at::Tensor initial_magnitude(const at::Tensor& w, const LoraAdapter& adapter) {
  at::NoGradGuard no_grad;
  // In a tensor of its own with the usual strides (the norms' are the transpose's, which DDP's
  // Reducer would lay out otherwise than the gradients).
  if (adapter.site.conv)
    return conv_weight_norm(w, conv_lora_weight(adapter.a, adapter.b, w.sizes()), adapter.scaling)
        .clone(at::MemoryFormat::Contiguous);
  // An embedding's: a norm per embedding dimension, of the weight's transpose (PEFT's fan_in_fan_out);
  // a Conv1D's a norm per output, of its transpose too.
  return weight_norm(as_linear_layout(adapter.site, w), at::matmul(adapter.b, adapter.a), adapter.scaling);
}

namespace {

// PEFT's DoraLinearVariant.forward and DoraLinearLayer.forward on the layer's output: result +
// (m / ||W + s B A|| - 1) * base + m / ||W + s B A|| * B(A(x)) * s, the norm not differentiated;
// base is the layer's output without its bias, or with dropout in training W applied to the
// dropped-out input. B A is taken as PEFT takes it, lora_B(lora_A(I))^T. A Conv1D's weight (in x out)
// is transposed for the norms and that product, as PEFT's DoraLinearLayer transposes it.
OutputAdapter dora_output_adapter(const LoraAdapter& adapter, double p, std::shared_ptr<const bool> enabled) {
  return [a = adapter.a, b = adapter.b, m = adapter.magnitude, w = adapter.site.weight, bias = adapter.site.bias,
          scaling = adapter.scaling, p, fan_in_fan_out = adapter.site.fan_in_fan_out,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output;
    at::Tensor x = input.to(a.scalar_type());
    const at::Tensor weight = fan_in_fan_out ? w.t() : w;  // out x in
    at::Tensor base;
    if (p > 0 && training) {
      x = at::dropout(x, p, training);
      base = at::linear(x, weight.to(x.scalar_type()));
    } else {
      base = bias.defined() ? output - bias : output;
    }
    const at::Tensor eye = at::eye(a.size(1), a.options().requires_grad(false));
    const at::Tensor lora_weight = at::linear(at::linear(eye, a), b).t().to(x.scalar_type());
    const at::Tensor norm = weight_norm(weight.to(x.scalar_type()), lora_weight.detach(), scaling).detach();
    const at::Tensor scale = (m / norm).view({1, -1});
    const at::Tensor dora = (scale - 1) * base + scale * at::linear(at::linear(x, a), b) * scaling;
    return (output + dora).to(output.scalar_type());
  };
}

// The same for a convolution (PEFT's _DoraConvNdVariant and _DoraConvNdLayer.forward): the norms per
// output channel, the layer's bias taken off along the channel dimension, base with dropout the
// layer's convolution (no bias) of the dropped-out input.
OutputAdapter dora_conv_output_adapter(const LoraAdapter& adapter, double p, std::shared_ptr<const bool> enabled) {
  return [a = adapter.a, b = adapter.b, m = adapter.magnitude, w = adapter.site.weight, bias = adapter.site.bias,
          scaling = adapter.scaling, geometry = *adapter.site.conv, p,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output;
    at::Tensor x = input.to(a.scalar_type());
    at::Tensor base;
    if (p > 0 && training) {
      x = at::dropout(x, p, training);
      base = conv_nd(x, w.to(x.scalar_type()), geometry.stride, geometry.padding, geometry.groups);
    } else if (bias.defined()) {
      std::vector<int64_t> shape(static_cast<size_t>(output.dim()), 1);
      shape[1] = -1;
      base = output - bias.view(shape);
    } else {
      base = output;
    }
    const at::Tensor lora_weight = conv_lora_weight(a, b, w.sizes()).to(x.scalar_type());
    const at::Tensor norm = conv_weight_norm(w.to(x.scalar_type()), lora_weight.detach(), scaling).detach();
    const at::Tensor scale = m / norm;
    const at::Tensor dora = (scale - 1) * base + scale * conv_branch(x, a, b, {}, geometry) * scaling;
    return (output + dora).to(output.scalar_type());
  };
}

// PEFT's lora.bnb.Linear4bit.forward (and Linear8bitLt's, the same without the clone): the base
// result cloned, the branch computed in the adapters' dtype and cast to the result's before it is
// added; under autocast (torch.is_autocast_enabled(), which asks about CUDA's) neither cast.
OutputAdapter quantized_output_adapter(const LoraAdapter& adapter, double p, std::shared_ptr<const bool> enabled) {
  const at::Tensor a = adapter.a, b = adapter.b, b_bias = adapter.b_bias;
  const double scaling = adapter.scaling;
  return [a, b, b_bias, scaling, p, enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output;
    const at::Tensor result = output.clone();
    const bool convert = !current_autocast(c10::DeviceType::CUDA);
    at::Tensor x = convert ? input.to(a.scalar_type()) : input;
    if (p > 0) x = at::dropout(x, p, training);
    const at::Tensor branch = at::linear(at::linear(x, a), b, b_bias) * scaling;
    return result + (convert ? branch.to(result.scalar_type()) : branch);
  };
}

// PEFT's Embedding.forward: result + (embedding(x, A^T) @ B^T) * scaling, A looked up as the layer
// looks up its rows; no dropout (PEFT's embedding layer does not apply its lora_dropout).
OutputAdapter embedding_output_adapter(const LoraAdapter& adapter, std::shared_ptr<const bool> enabled) {
  return [a = adapter.a, b = adapter.b, scaling = adapter.scaling, lookup = *adapter.site.embedding, enabled](
             const at::Tensor& input, const at::Tensor& output, bool) {
    if (!*enabled) return output;
    const at::Tensor after_a = at::embedding(a.t(), input, lookup.padding_idx, lookup.scale_grad_by_freq, false);
    return (output + at::matmul(after_a, b.t()) * scaling).to(output.scalar_type());
  };
}

// PEFT's DoraEmbeddingVariant.forward and DoraEmbeddingLayer.forward: m / ||W^T + s (A^T B^T)^T|| (one
// norm per embedding dimension, not differentiated) times the output and the branch.
OutputAdapter dora_embedding_output_adapter(const LoraAdapter& adapter, std::shared_ptr<const bool> enabled) {
  return [a = adapter.a, b = adapter.b, m = adapter.magnitude, w = adapter.site.weight, scaling = adapter.scaling,
          lookup = *adapter.site.embedding, enabled](const at::Tensor& input, const at::Tensor& output, bool) {
    if (!*enabled) return output;
    const at::Tensor lora_weight = at::matmul(a.t(), b.t()).t();
    const at::Tensor norm = weight_norm(w.t(), lora_weight.detach(), scaling).detach();
    const at::Tensor scale = m / norm;
    const at::Tensor after_a = at::embedding(a.t(), input, lookup.padding_idx, lookup.scale_grad_by_freq, false);
    const at::Tensor dora = scale * at::matmul(after_a, b.t()) * scaling;
    return (scale * output + dora).to(output.scalar_type());
  };
}

// Checks a convolution target: LoRA where PEFT's adapter computes as the layer does.
void check_conv_site(const LinearSite& site, const LoraConfig& config) {
  const std::string& module = site.module;
  if (!site.conv->refusal.empty())
    fail(Status::Unsupported, "LoRA on the convolution '", module, "': ", site.conv->refusal);
  if (const std::string dilated = dilation_refusal(site.conv->dilation); !dilated.empty())
    fail(Status::Unsupported, "LoRA on the convolution '", module, "': ", dilated);
  // PEFT's _ConvNd re-initialises its adapters by name and knows neither decompositions nor the
  // orthogonal start (its "Unknown initialization" ValueError).
  require(!decomposes_weight(config.init) && config.init != "orthogonal", "init_lora_weights ", config.init,
          " on the convolution '", module, "': PEFT's convolution layers take only true, gaussian and false (its ",
          "ValueError)");
  require(config.init != "mica", "init_lora_weights mica on the convolution '", module,
          "': PEFT's convolution layers do not take MiCA");
  const int64_t groups = site.conv->groups, r = config.rank_of(module);
  if (groups == 1) return;
  // As PEFT's _ConvNd: lora_B takes the layer's groups, so r must divide among them.
  require(r % groups == 0, "LoRA on the convolution '", module, "' with groups ", groups, ": r ", r,
          " is not divisible by its groups (as PEFT requires); choose another rank (rank_pattern) or leave the ",
          "layer out");
  if (!site.set_output_adapter)
    fail(Status::Unsupported, "LoRA on the convolution '", module, "' with groups ", groups,
         ": the forward reads its weight itself, and a grouped convolution's adapter has no weight of the ",
         "layer's shape to put there (PEFT cannot merge it either); call the layer as a module");
}

// Checks an embedding target against what PEFT's Embedding layer takes.
void check_embedding_site(const LinearSite& site, const LoraConfig& config) {
  const std::string& module = site.module;
  if (!site.embedding->refusal.empty())
    fail(Status::Unsupported, "LoRA on the embedding '", module, "': ", site.embedding->refusal);
  require(!config.lora_bias, "lora_bias is not supported on the embedding '", module, "' (as in PEFT)");
  // PEFT's Embedding has no PiSSA, OLoRA or orthogonal start: it re-initialises its adapters as for
  // `true` (zero A, normal B) whatever else is named, and leaves the layer's weight as it is. Of the
  // starts a config can name, only EVA's (from files) is not taken here.
  if (config.init == "loftq")
    fail(Status::Unsupported, "init_lora_weights loftq on the embedding '", module,
         "' is not built (PEFT's Embedding fails on it: its loftq_init is called without the configuration)");
  if (config.init == "eva")
    fail(Status::Unsupported, "init_lora_weights ", config.init, " on the embedding '", module,
         "' is not built (PEFT's embedding layer takes true, gaussian, false, mica, and olora, pissa and orthogonal ",
         "as true)");
  if (!site.set_output_adapter)
    fail(Status::Unsupported, "LoRA on the embedding '", module, "': the forward reads its weight itself instead of ",
         "calling the layer, and PEFT's embedding adapter adds to the layer's output (an adapted weight would reach ",
         "every other reader of it, such as a tied head); call the layer as a module");
}

// Checks an attention target against what PEFT's lora.MultiheadAttention takes (also for its out_proj,
// adapted with it): plain LoRA through the weights, which its forward merges before it runs.
void check_attention_site(const LinearSite& site, const LoraConfig& config) {
  const std::string& attention = pattern_name(site);
  require(!config.use_dora, "use_dora on the attention '", attention,
          "': PEFT's lora.MultiheadAttention does not take DoRA (its ValueError)");
  // PEFT's other initialisations read the layer's `weight`, which nn.MultiheadAttention lacks (its
  // AttributeError); "eva" only zeroes B (a file's adapters then replace both).
  if (config.init != "true" && config.init != "gaussian" && config.init != "false" && config.init != "eva")
    fail(Status::Unsupported, "init_lora_weights ", config.init, " on the attention '", attention,
         "' is not built (PEFT's lora.MultiheadAttention has no weight of its own to decompose)");
  if (config.lora_bias)
    fail(Status::Unsupported, "lora_bias on the attention '", attention,
         "': its forward reads its weights itself, which leaves no place for lora_B's bias (PEFT's merge before "
         "each forward leaves the in_proj's out)");
}

// The draws of an adapter PEFT makes and then replaces: lora.MultiheadAttention gives its out_proj
// adapters first, then its in_proj's, then gives the out_proj new ones (its update_layer updates
// both). The global stream moves as PEFT's does.
void discarded_linear_draws(int64_t in, int64_t out, int64_t r, const std::string& init) {
  at::Tensor a = new_linear_weight(r, in);
  (void)new_linear_weight(out, r);
  if (init == "true") kaiming_uniform_sqrt5(a);
  if (init == "gaussian") a.normal_(0.0, 1.0 / static_cast<double>(r));
}

}  // namespace

std::string weight_name(const LinearSite& site) {
  if (adapts_parameter(site)) return site.parameter;
  return site.module + (site.attention ? ".in_proj_weight" : ".weight");
}

// PEFT matches rank_pattern and alpha_pattern against a targeted parameter's name.
const std::string& pattern_name(const LinearSite& site) {
  if (adapts_parameter(site)) return site.parameter;
  return site.owner.empty() ? site.module : site.owner;
}

bool adapted_with_attention(const LinearSite& site) { return site.attention || !site.owner.empty(); }

void mark_attention_out_projs(std::vector<LinearSite>& sites) {
  const std::string suffix = ".out_proj";
  std::unordered_set<std::string> attentions;
  for (auto& site : sites) {
    if (site.attention) attentions.insert(site.module);
    const std::string& name = site.module;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        attentions.count(name.substr(0, name.size() - suffix.size())))
      site.owner = name.substr(0, name.size() - suffix.size());
  }
}

const char* const kAdaptableLayers =
    "LoRA adapts linear layers (transformers' Conv1D too), attention (nn.MultiheadAttention, a spec's "
    "multihead_attention), convolutions and embeddings";

const char* adaptable_layers(const LoraConfig& config) {
  if (config.peft_type == PeftType::Ia3)
    return "IA3 adapts linear layers (transformers' Conv1D too) and 2-D and 3-D convolutions";
  if (const FactorMethod* method = factor_method(config.peft_type)) return method->adaptable;
  return kAdaptableLayers;
}

namespace {

// The parameter sites target_parameters names, after the layers `chosen` (see targeted_sites).
std::vector<LinearSite> targeted_parameters(const LoraConfig& config, const std::vector<LinearSite>& sites,
                                            const std::vector<LinearSite>& chosen) {
  std::vector<LinearSite> out;
  if (config.target_parameters.empty()) return out;
  for (const auto& site : sites) {
    if (!adapts_parameter(site) || !config.targets_parameter(site.parameter)) continue;
    const std::string owner = enclosing_module(site.parameter);
    const at::Tensor& w = site.weight;
    require((w.dim() == 2 || w.dim() == 3) && w.is_floating_point(), "target_parameters '",
            config.describe_target_parameters(), "' matches '", site.parameter, "', a ",
            w.is_floating_point() ? "" : "non-floating-point ", w.dim(), "-D tensor: LoRA adapts 2-D and 3-D ",
            "floating-point parameters (as PEFT's lora.ParamWrapper)");
    if (owner.empty())
      fail(Status::Unsupported, "target_parameters '", config.describe_target_parameters(), "' matches '",
           site.parameter, "', a parameter of the model itself: PEFT adapts a parameter by wrapping the module ",
           "that holds it, and the model's own module has none around it");
    // PEFT wraps the module, which would put its adapted layers' adapters under other names.
    for (const auto& layer : chosen)
      if (layer.module == owner || layer.module.rfind(owner + ".", 0) == 0)
        fail(Status::Unsupported, "target_parameters adapts '", site.parameter, "' and target_modules the layer '",
             layer.module, "' in the same module '", owner, "': not built; adapt that module's parameters or its ",
             "layers");
    out.push_back(site);
  }
  // PEFT wraps a module once for each of its targeted parameters, in the order it lists them, each
  // wrapper around the last: the first parameter's adapter sits deepest.
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = i + 1; j < out.size(); ++j)
      if (enclosing_module(out[i].parameter) == enclosing_module(out[j].parameter)) out[i].module += ".base_layer";
  return out;
}

}  // namespace

std::vector<LinearSite> targeted_sites(const LoraConfig& config, const std::vector<LinearSite>& sites) {
  std::vector<LinearSite> chosen;
  for (const auto& site : sites) {
    if (adapts_parameter(site)) continue;
    const bool with_attention = !site.owner.empty() && config.targets(site.owner);
    require(!with_attention || !config.targets(site.module), "target_modules '", config.describe_targets(),
            "' matches both the attention '", site.owner, "' and its out_proj '", site.module,
            "': targeting the attention adapts its out_proj with it (PEFT's lora.MultiheadAttention); name one of "
            "them");
    if (!with_attention && !config.targets(site.module)) continue;
    chosen.push_back(site);
    if (!with_attention) chosen.back().owner.clear();  // an out_proj targeted by its own name
  }
  for (auto& site : targeted_parameters(config, sites, chosen)) chosen.push_back(std::move(site));
  return chosen;
}

std::string dilation_refusal(c10::IntArrayRef dilation) {
  const bool dilated = std::any_of(dilation.begin(), dilation.end(), [](int64_t d) { return d != 1; });
  return dilated ? "it has a dilation, which PEFT's lora_A does not take" : "";
}

// A 3-D parameter's (experts x d1 x d2): PEFT's lora_A takes d2 as the input and lora_B gives d1,
// or the other way round where the module says is_transposed.
int64_t in_features(const LinearSite& site) {
  if (site.experts > 0) return site.weight.size(site.experts_transposed ? 1 : 2);
  return site.weight.size(site.fan_in_fan_out ? 0 : 1);
}
int64_t out_features(const LinearSite& site) {
  if (site.experts > 0) return site.weight.size(site.experts_transposed ? 2 : 1);
  return site.weight.size(site.fan_in_fan_out ? 1 : 0);
}

const char* lora_a_suffix(const LinearSite& site) { return site.embedding ? kLoraEmbeddingASuffix : kLoraASuffix; }
const char* lora_b_suffix(const LinearSite& site) { return site.embedding ? kLoraEmbeddingBSuffix : kLoraBSuffix; }

namespace {

// Refuses (InvalidArgument) target_modules that match no layer and target_parameters that match no
// parameter among `sites`, naming examples of what there is.
void require_targets_matched(const LoraConfig& config, const std::vector<LinearSite>& sites,
                             const std::vector<LinearSite>& chosen) {
  std::string layer_examples, parameter_examples;
  size_t layers = 0, parameters = 0;
  for (const auto& site : sites) {
    const bool parameter = adapts_parameter(site);
    std::string& list = parameter ? parameter_examples : layer_examples;
    if ((parameter ? parameters : layers)++ < 4)
      list += (list.empty() ? "" : ", ") + (parameter ? site.parameter : site.module);
  }
  const bool any_layer =
      std::any_of(chosen.begin(), chosen.end(), [](const LinearSite& s) { return !adapts_parameter(s); });
  const bool any_parameter = !chosen.empty() && adapts_parameter(chosen.back());  // parameters come last
  if (!config.target_names.empty() || !config.target_regex.empty())
    require(any_layer, "target_modules '", config.describe_targets(), "' matches no linear layer, convolution or ",
            "embedding (", layers == 0 ? std::string("the model has none") : "its layers are e.g. " + layer_examples,
            ")");
  // PEFT warns where one of the two matches nothing and goes on: here it is refused, as target_modules.
  if (!config.target_parameters.empty())
    require(any_parameter, "target_parameters '", config.describe_target_parameters(), "' matches no parameter (",
            parameters == 0 ? std::string("this model's forward takes no replaced parameter: target_parameters "
                                          "needs a TorchScript model")
                            : "parameters are named e.g. " + parameter_examples,
            ")");
}

// LoRA-GA's averaged gradient of `module`'s weight, or null where there is none.
const at::Tensor* lora_ga_gradient(const LoraConfig& config, const std::string& module) {
  if (!config.lora_ga_gradients) return nullptr;
  const auto found = config.lora_ga_gradients->find(module);
  return found == config.lora_ga_gradients->end() ? nullptr : &found->second;
}

// PEFT's ensure_weight_tying, where it would tie the adapters or modules to save of layers sharing
// a weight (it adapts a targeted layer's tied partners too): not built (Unsupported). Token rows of
// tied layers are tied with or without it, as PEFT ties them (model/peft/trainable_tokens.h). Elsewhere
// PEFT only warns, and neither does anything here.
void require_no_tying(const LoraConfig& config, const std::vector<LinearSite>& sites,
                      const std::vector<LinearSite>& chosen) {
  const bool saves = !config.modules_to_save.empty();
  for (const LinearSite& site : sites)
    for (const LinearSite& other : sites) {
      // (A TorchScript layer is listed twice, as a layer and its weight as a parameter site: itself.)
      if (&site == &other || site.module == other.module || !site.weight.is_same(other.weight)) continue;
      const bool adapted = std::any_of(chosen.begin(), chosen.end(), [&](const LinearSite& c) {
        return c.module == site.module || c.module == other.module;
      });
      if (adapted || saves)
        fail(Status::Unsupported, "ensure_weight_tying on a model whose '", site.module, "' and '", other.module,
             "' share their weight: tying their ", adapted ? "adapters" : "modules to save",
             " is not built; set it to false to keep them apart");
    }
}

// What PEFT's lora.ParamWrapper refuses (ValueError: InvalidArgument), and the initialisations not
// built for it (Unsupported).
void check_parameter_settings(const LoraConfig& config) {
  auto refuse = [&](bool set, const char* what) {
    require(!set, "target_parameters: ", what,
            " does not apply to a parameter adapted itself (as PEFT's lora.ParamWrapper refuses it)");
  };
  refuse(config.dropout != 0, "lora_dropout");
  refuse(config.use_dora, "use_dora");
  refuse(config.lora_bias, "lora_bias");
  if (config.init != "true" && config.init != "false" && config.init != "gaussian" && config.init != "eva")
    fail(Status::Unsupported, "target_parameters with init_lora_weights '", config.init,
         "' is not built (true, false, gaussian and eva are)");
}

}  // namespace

size_t LoraAdapters::add(const LoraConfig& config, const std::vector<LinearSite>& sites,
                         const std::vector<std::string>& other_modules, const std::vector<TokenSite>& token_sites,
                         const NamedTensors& saved_modules, bool weights_pending) {
  require_none_yet();
  if (config.peft_type == PeftType::LnTuning) return add_tuned_modules(config, saved_modules, weights_pending);
  for (const auto& module : other_modules)
    require(!config.targets(module), "target_modules '", config.describe_targets(), "' matches '", module,
            "', which is not a linear layer; ", adaptable_layers(config));
  const std::vector<LinearSite> chosen = targeted_sites(config, sites);
  require_targets_matched(config, sites, chosen);
  if (config.peft_type != PeftType::Lora) {  // (IA)^3 or a method of factors
    std::vector<LoraAdapter> made = config.peft_type == PeftType::Ia3
                                        ? make_ia3_adapters(config, chosen)
                                        : factor_method(config.peft_type)->make(config, chosen);
    take_new(config, chosen, std::move(made), {}, {}, saved_modules, weights_pending);
    return adapters_.size();
  }
  if (config.ensure_weight_tying) require_no_tying(config, sites, chosen);
  if (!chosen.empty() && adapts_parameter(chosen.back())) check_parameter_settings(config);
  // As PEFT's LoraConfig.
  require(!(config.lora_bias && config.use_dora), "lora_bias is not supported with use_dora (as in PEFT)");
  require(!config.lora_bias || config.init == "true" || config.init == "false",
          "lora_bias is only supported with init_lora_weights true or false (PEFT's LoraConfig's ValueError), got '",
          config.init, "'");
  // PEFT's variants do not combine (its "Invalid or unsupported variant combination").
  require(!(config.init == "mica" && config.use_dora), "init_lora_weights mica does not combine with use_dora (as in ",
          "PEFT)");
  for (const LinearSite& site : chosen) {
    if (site.embedding) check_embedding_site(site, config);
    if (site.conv) check_conv_site(site, config);
    if (adapted_with_attention(site)) check_attention_site(site, config);
    // PEFT's orthogonal_init raises for an odd rank (after drawing nn.Linear's adapters): refused first.
    if (config.init == "orthogonal" && !site.embedding && !site.conv)
      require(config.rank_of(pattern_name(site)) % 2 == 0, "init_lora_weights 'orthogonal' needs an even rank (as ",
              "PEFT's); '", site.module, "' has r ", config.rank_of(pattern_name(site)));
    // PEFT's olora_init factors the weight as it is stored, which for a Conv1D (in x out) gives
    // adapters of the wrong shape (or, square, ones that change the layer's output).
    // So does its loftq_init (its A and B then have each other's widths).
    if (site.fan_in_fan_out && (config.init == "olora" || config.init == "loftq"))
      fail(Status::Unsupported, "init_lora_weights ", config.init, " on '", site.module,
           "' (transformers' Conv1D, whose weight is in x out): PEFT's ", config.init,
           " takes nn.Linear's layout and would not start from the layer's output here; use pissa or another ",
           "initialisation");
  }
  // PEFT's bnb layer dequantises the weight for these; here it never exists as floats.
  for (const LinearSite& site : chosen)
    if (site.quantized &&
        (config.use_dora || !(config.init == "true" || config.init == "false" || config.init == "gaussian")))
      fail(Status::Unsupported, "LoRA on the quantised layer '", site.module,
           "' is built with init_lora_weights true, ", "false or gaussian and without use_dora, not ",
           config.use_dora ? "use_dora" : config.init.c_str());
  // The branch's bias has no place in a weight the forward reads itself.
  if (config.lora_bias)
    for (const LinearSite& site : chosen)
      if (!site.set_output_adapter)
        fail(Status::Unsupported, "lora_bias cannot apply to '", site.module,
             "': the forward reads its weight itself, ",
             "so it is adapted through its weight (W + B A * scaling), which leaves no place for lora_B's bias");
  // PiSSA and OLoRA change the layer's weight: where another module shares it, that one would change too.
  if (decomposes_weight(config.init))
    for (const LinearSite& site : chosen)
      if (!site.tied_to.empty() && !site.embedding)  // an embedding's weight stays (check_embedding_site)
        fail(Status::Unsupported, "init_lora_weights '", config.init, "' would change the weight of '", site.module,
             "', which is tied to '", site.tied_to, "' (the tied layer would change too); leave '", site.module,
             "' out of target_modules or use another initialisation");
  // An attention's adapters take no dropout (PEFT's lora.MultiheadAttention merges them into the
  // weights its forward reads, where its lora_dropout has no input to act on).
  if (config.dropout != 0)
    for (const LinearSite& site : chosen)
      if (!site.set_output_adapter && !adapted_with_attention(site))
        fail(Status::Unsupported, "lora_dropout ", config.dropout, " cannot apply to '", site.module,
             "': the layer is adapted through its weight (W + B A * scaling), which leaves no place for dropout on "
             "its input; use lora_dropout 0");

  if (config.init == "corda") {  // its start comes from data (Model::add_lora_corda)
    require(config.corda != nullptr,
            "init_lora_weights corda starts from the layers' inputs on data: add the adapters ",
            "with acc_model_add_lora_corda");
    for (const LinearSite& site : chosen) {
      const auto found = config.corda->find(site.module);
      require(found != config.corda->end() && found->second.s.size(0) == config.rank_of(pattern_name(site)),
              "CorDA computed no components of rank ", config.rank_of(pattern_name(site)), " for '", site.module, "'");
    }
  }
  std::vector<LoraAdapter> made;
  std::vector<at::Tensor> residuals(chosen.size());  // PiSSA's and OLoRA's new layer weights, set at the end
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < chosen.size(); ++k) {
    const LinearSite* site = &chosen[k];
    // An embedding's "out" is num_embeddings, its "in" the embedding dimension (PEFT's names).
    const int64_t out = site->embedding ? site->weight.size(0) : out_features(*site),
                  in = site->embedding ? site->weight.size(1) : in_features(*site),
                  r = config.rank_of(pattern_name(*site));
    // PEFT's ParamWrapper gives each expert its own r rows of A and columns of B.
    const int64_t rows = r * std::max<int64_t>(site->experts, 1);
    if (site->attention) discarded_linear_draws(in, in, r, config.init);  // its out_proj's first adapters
    // PEFT makes lora_A = nn.Linear(in, r) and lora_B = nn.Linear(r, out) (each drawing its default
    // initialisation) and then re-initialises them: the same draws keep the global stream in step.
    // A convolution's adapters are convolutions (PEFT's conv_layer(in, r, kernel, ...) and
    // conv_layer(r, out, 1 x ... x 1)), drawn as nn.Conv{1,2,3}d draws them.
    // A grouped convolution's lora_A takes all its input channels, its lora_B r / groups per output.
    const auto kernel = site->weight.sizes().slice(2);
    const int64_t groups = site->conv ? site->conv->groups : 1;
    // An embedding's are PEFT's torch.randn((r, num_embeddings)) and torch.randn((dim, r)).
    at::Tensor a = site->embedding ? at::randn({r, out}, at::kFloat)
                   : site->conv    ? new_conv_weight(r, in * groups, kernel)
                                   : new_linear_weight(rows, in);
    at::Tensor b = site->embedding ? at::randn({in, r}, at::kFloat)
                   : site->conv    ? new_conv_weight(out, r / groups, repeated(1, kernel.size()))
                                   : new_linear_weight(out, rows);
    at::Tensor b_bias;
    if (config.lora_bias) {  // nn.Linear's (nn.Conv's) bias initialisation, after its weight's
      const double bound = 1.0 / std::sqrt(static_cast<double>(r / groups));
      b_bias = at::empty({out}, at::kFloat).uniform_(-bound, bound);
    }
    if (config.init == "mica") {  // PEFT's mica_init: B the minor singular vectors (frozen), A zero
      const at::Tensor minor =
          minor_components(site->module, as_linear_layout(*site, site->weight), r, weights_pending);
      if (minor.defined()) {
        a.zero_();
        b = minor;
      }
    } else if (site->embedding && config.init != "false") {  // PEFT's reset_lora_parameters: zero A, normal B
      a.zero_();
      b.normal_();
    } else if (config.init == "orthogonal") {  // lora_bias keeps nn.Linear's bias, as PEFT leaves it
      std::tie(a, b) = orthogonal_start(in, out, r);
    } else if (config.init == "true" || (config.init == "lora_ga" && !lora_ga_gradient(config, site->module))) {
      // (PEFT's lora_ga_init falls back to true without a gradient: adapters read from a file.)
      kaiming_uniform_sqrt5(a);
      b.zero_();
      if (b_bias.defined()) b_bias.zero_();
    } else if (config.init == "gaussian") {
      a.normal_(0.0, 1.0 / static_cast<double>(r));
      b.zero_();
      if (b_bias.defined()) b_bias.zero_();
    } else if (config.init == "eva") {
      b.zero_();  // PEFT's placeholder until EVA's data-driven A: a loaded adapter replaces both
    } else if (decomposes_weight(config.init) && weights_pending) {
      skip_decomposition(config.init, site->module, site->weight, r);
    } else if (decomposes_weight(config.init)) {  // after nn.Linear's draws, as in PEFT's update_layer
      // PiSSA decomposes a Conv1D's weight transposed (out x in) and transposes the residual back.
      const at::Tensor weight = as_linear_layout(*site, site->weight);
      const double scaling = config.scaling_of(pattern_name(*site));
      WeightDecomposition start =
          config.init == "corda" ? corda_start(site->module, weight, config.corda->at(site->module), scaling)
          : config.init == "lora_ga"
              ? lora_ga_start(site->module, weight, as_linear_layout(*site, *lora_ga_gradient(config, site->module)),
                              site->weight.size(0), r, scaling, config.lora_ga)
          : config.init == "loftq" ? loftq_start(site->module, weight, r, config.loftq)
                                   : decompose_weight(config.init, site->module, weight, r, scaling);
      a = std::move(start.a);
      b = std::move(start.b);
      residuals[k] = as_linear_layout(*site, start.residual);
    }
    // "false" keeps nn.Linear's initialisation.
    // PEFT moves the adapters to the layer's device and dtype, initialises DoRA's magnitude there,
    // and then (autocast_adapter_dtype) makes a half-precision layer's adapters float32 again: they
    // start rounded to the layer's precision.
    LoraAdapter adapter{*site, a.to(site->weight.options()), b.to(site->weight.options()), r,
                        config.scaling_of(pattern_name(*site))};
    if (config.use_dora)  // from the weight the layer will have
      adapter.magnitude = initial_magnitude(residuals[k].defined() ? residuals[k] : site->weight, adapter);
    if (b_bias.defined()) adapter.b_bias = b_bias.to(site->weight.options());
    for (at::Tensor* t : {&adapter.a, &adapter.b, &adapter.magnitude, &adapter.b_bias})
      if (t->defined()) *t = adapter_parameter(*t, *site);
    // MiCA trains A alone: PEFT freezes lora_B (lora_bias, its bias, is refused beside it).
    if (config.init == "mica") adapter.b.set_requires_grad(false);
    made.push_back(std::move(adapter));
  }
  std::vector<std::string> adapted;
  for (const LinearSite& site : chosen) adapted.push_back(site.module);
  std::vector<TokenAdapter> tokens = TrainableTokens::make(config.token_indices, token_sites, adapted);
  for (const auto& adapter : tokens)  // as PEFT refuses it
    require(!config.saves(adapter.site.module + ".weight"), "'", adapter.site.module,
            "' is both in modules_to_save and in trainable_token_indices: train it whole or train its tokens");
  take_new(config, chosen, std::move(made), std::move(tokens), residuals, saved_modules, weights_pending);
  return adapters_.size();
}

void LoraAdapters::take_new(const LoraConfig& config, const std::vector<LinearSite>& chosen,
                            std::vector<LoraAdapter> made, std::vector<TokenAdapter> tokens,
                            const std::vector<at::Tensor>& residuals, const NamedTensors& saved_modules,
                            bool weights_pending) {
  // Nothing can fail from here on: the layers' weights change only now.
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < residuals.size(); ++k)
    if (residuals[k].defined()) chosen[k].weight.copy_(residuals[k]);
  std::vector<Original> originals;
  for (const auto& entry : saved_modules)  // placeholders' values are taken again when they arrive
    originals.push_back(
        {entry.first, entry.second,
         weights_pending ? at::empty(entry.second.sizes(), entry.second.options()) : entry.second.detach().clone(),
         at::Tensor()});
  config_ = config;
  config_.corda.reset();  // CorDA's components and LoRA-GA's gradients served their start
  config_.lora_ga_gradients.reset();
  // PEFT sets its config's fan_in_fan_out to each linear layer's kind as it adapts it (with a
  // warning), so its file says the last one's.
  for (const LinearSite& site : chosen)
    if (!site.conv && !site.embedding && !site.attention) config_.fan_in_fan_out = site.fan_in_fan_out;
  // IA3's feedforward names that are not among the targets' (the targets "all-linear" became the
  // layers' full names) are written as the feedforward layers' names: the file then passes PEFT's
  // subset check, which its reader applies (PEFT writes a file it cannot read back here).
  if (config_.peft_type == PeftType::Ia3 && config_.feedforward_regex.empty() && config_.target_regex.empty()) {
    bool subset = true;
    for (const auto& name : config_.feedforward_names)
      subset = subset &&
               std::find(config_.target_names.begin(), config_.target_names.end(), name) != config_.target_names.end();
    if (!subset) {
      config_.feedforward_names.clear();
      for (const LoraAdapter& adapter : made)
        if (adapter.feedforward) config_.feedforward_names.push_back(adapter.site.module);
    }
  }
  adapters_ = std::move(made);
  allocator_ = config_.peft_type == PeftType::Adalora
                   ? std::make_shared<AdaloraAllocator>(config_.adalora, adapters_.size())
                   : nullptr;
  tokens_.install(std::move(tokens), /*standalone=*/false);
  originals_ = std::move(originals);
  originals_dropped_because_.clear();
  *enabled_ = true;
  install();
}

void LoraAdapters::require_none_yet() const {
  if (empty()) return;
  if (config_.peft_type == PeftType::TrainableTokens)
    fail(Status::InvalidArgument, "the model already has trainable tokens (PEFT's TRAINABLE_TOKENS, on '",
         tokens_.adapters().front().site.module, "'); merge them (acc_model_merge_lora) before adding adapters");
  fail(Status::InvalidArgument, "the model already has ", peft_method_name(config_.peft_type), " adapters (",
       config_.describe_targets(), "); merge them (acc_model_merge_lora) before adding others");
}

size_t LoraAdapters::add_tokens(const LoraConfig& config, const std::vector<TokenSite>& token_sites,
                                const std::vector<std::string>& other_modules) {
  require_none_yet();
  std::vector<TokenAdapter> tokens = TrainableTokens::make_standalone(config, token_sites, other_modules);
  LoraConfig kept = config;
  // PEFT writes the input embedding it chose as target_modules, a name (read back as an expression).
  if (kept.target_names.empty() && kept.target_regex.empty()) kept.set_target_regex(tokens.front().site.module);
  // Nothing can fail from here on.
  if (!config.tokens_from_weights) {  // PEFT's update_layer: torch.randn in the weight's dtype and place
    at::NoGradGuard no_grad;
    for (auto& adapter : tokens)
      adapter.delta = at::randn(adapter.delta.sizes(), adapter.delta.options()).set_requires_grad(true);
  }
  config_ = std::move(kept);
  adapters_.clear();
  tokens_.install(std::move(tokens), /*standalone=*/true);
  originals_.clear();
  originals_dropped_because_.clear();
  *enabled_ = true;
  return tokens_.adapters().size();
}

OutputAdapter LoraAdapters::output_adapter(const LoraAdapter& adapter) const {
  // PEFT's Linear.forward: result + lora_B(lora_A(dropout(x))) * scaling, the input cast to the
  // adapters' dtype and the sum back to the layer's. The tensors are captured as handles: moves
  // (Model::to) and sharding's storage swaps keep them.
  const at::Tensor a = adapter.a, b = adapter.b, b_bias = adapter.b_bias;
  // An attention's adapters take no dropout (PEFT's lora.MultiheadAttention merges them into its weights).
  const double scaling = adapter.scaling, p = adapted_with_attention(adapter.site) ? 0.0 : config_.dropout;
  std::shared_ptr<const bool> enabled = enabled_;
  if (is_ia3(adapter)) return ia3_output_adapter(adapter, enabled);
  if (const FactorMethod* method = factor_method(adapter)) return method->output_adapter(adapter, config_, enabled);
  if (adapter.magnitude.defined())
    return adapter.site.conv        ? dora_conv_output_adapter(adapter, p, enabled)
           : adapter.site.embedding ? dora_embedding_output_adapter(adapter, enabled)
                                    : dora_output_adapter(adapter, p, enabled);
  if (adapter.site.embedding) return embedding_output_adapter(adapter, enabled);
  if (adapter.site.quantized) return quantized_output_adapter(adapter, p, enabled);
  // Disabled: PEFT's layer returns its base layer's output, before its dropout draws. A convolution's
  // branch is PEFT's conv_layer pair (conv_branch).
  return [a, b, b_bias, scaling, p, enabled, conv = adapter.site.conv](const at::Tensor& input,
                                                                       const at::Tensor& output, bool training) {
    if (!*enabled) return output;
    at::Tensor x = input.to(a.scalar_type());
    if (p > 0) x = at::dropout(x, p, training);
    const at::Tensor branch = conv ? conv_branch(x, a, b, b_bias, *conv) : at::linear(at::linear(x, a), b, b_bias);
    return (output + branch * scaling).to(output.scalar_type());
  };
}

NamedTensors LoraAdapters::named_parameters() const {
  NamedTensors out;
  for (size_t k = 0; k < adapters_.size(); ++k) append_parameters(k, &out);
  for (size_t k = 0; k < tokens_.adapters().size(); ++k) tokens_.append_parameters(k, &out);
  return out;
}

NamedTensors LoraAdapters::named_buffers() const {
  NamedTensors out = shared_state_buffers(*this);
  for (const LoraAdapter& adapter : adapters_)
    for (const auto& [suffix, buffer] : adapter.buffers) out.emplace_back(adapter.site.module + suffix, buffer);
  return out;
}

void LoraAdapters::append_parameters(size_t k, NamedTensors* out) const {
  const LoraAdapter& adapter = adapters_[k];
  if (is_ia3(adapter)) return out->emplace_back(adapter.site.module + kIa3Suffix, adapter.ia3), void();
  if (!adapter.factors.empty()) {  // LoHa's, LoKr's, VeRA's
    for (const auto& [suffix, factor] : adapter.factors) out->emplace_back(adapter.site.module + suffix, factor);
    if (adapter.ranknum.defined()) out->emplace_back(adapter.site.module + kAdaloraRanknum, adapter.ranknum);
    return;
  }
  out->emplace_back(adapter.site.module + lora_a_suffix(adapter.site), adapter.a);
  out->emplace_back(adapter.site.module + lora_b_suffix(adapter.site), adapter.b);
  if (adapter.b_bias.defined()) out->emplace_back(adapter.site.module + kLoraBBiasSuffix, adapter.b_bias);
  if (adapter.magnitude.defined()) out->emplace_back(adapter.site.module + kLoraMagnitudeSuffix, adapter.magnitude);
}

NamedTensors LoraAdapters::placed_among(NamedTensors own) const {
  if (empty()) return own;
  // What goes after a layer's own parameters: its LoRA adapter's, or its trainable tokens' delta.
  struct Addition {
    std::string module;  // the layer (a targeted parameter's module: PEFT's wrapper lists it first)
    std::function<void(NamedTensors*)> append;
    // An attention's: PEFT's lora.MultiheadAttention lists its adapters after everything its base
    // layer holds, its out_proj's adapters included.
    bool after_subtree = false;
  };
  std::vector<Addition> additions;
  for (size_t k = 0; k < adapters_.size(); ++k)
    additions.push_back(
        {adapts_parameter(adapters_[k].site) ? enclosing_module(adapters_[k].site.parameter) : adapters_[k].site.module,
         [this, k](NamedTensors* out) { append_parameters(k, out); }, adapters_[k].site.attention});
  for (size_t k = 0; k < tokens_.adapters().size(); ++k)
    additions.push_back(
        {tokens_.adapters()[k].site.module, [this, k](NamedTensors* out) { tokens_.append_parameters(k, out); }});
  // One pass over `own` (the model lists its parameters at every step's clipping and zeroing): the
  // last parameter each such layer holds itself (not a submodule's; an attention's: in its subtree).
  // (A module with several targeted parameters has an addition for each, in their order.)
  std::unordered_map<std::string, std::vector<size_t>> addition_of, subtree_addition_of;
  for (size_t k = 0; k < additions.size(); ++k)
    (additions[k].after_subtree ? subtree_addition_of : addition_of)[additions[k].module].push_back(k);
  std::vector<size_t> last_own(additions.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    size_t dot = own[i].first.rfind('.');
    if (dot == std::string::npos) continue;
    auto it = addition_of.find(own[i].first.substr(0, dot));
    if (it != addition_of.end())
      for (size_t k : it->second) last_own[k] = i;
    for (; dot != std::string::npos && dot > 0 && !subtree_addition_of.empty();
         dot = own[i].first.rfind('.', dot - 1)) {
      auto in_subtree = subtree_addition_of.find(own[i].first.substr(0, dot));
      if (in_subtree != subtree_addition_of.end())
        for (size_t k : in_subtree->second) last_own[k] = i;
    }
  }
  std::vector<std::vector<size_t>> after(own.size());  // the additions that follow own[i]
  std::vector<size_t> last;
  for (size_t k = 0; k < additions.size(); ++k) (last_own[k] < own.size() ? after[last_own[k]] : last).push_back(k);
  for (auto& following : after)
    std::stable_partition(following.begin(), following.end(), [&](size_t k) { return !additions[k].after_subtree; });
  NamedTensors out;
  for (size_t i = 0; i < own.size(); ++i) {
    out.push_back(std::move(own[i]));
    for (size_t k : after[i]) additions[k].append(&out);
  }
  for (size_t k : last) additions[k].append(&out);
  return out;
}

const at::Tensor* find_factor(const NamedTensors& factors, const std::string& suffix) {
  for (const auto& [name, tensor] : factors)
    if (name == suffix) return &tensor;
  return nullptr;
}

const at::Tensor& factor_named(const NamedTensors& factors, const std::string& suffix) {
  const at::Tensor* found = find_factor(factors, suffix);
  if (!found) fail(Status::Internal, "an adapter lacks its '", suffix.substr(1), "'");
  return *found;
}

int64_t unrolled_in_features(const LinearSite& site) {
  if (!site.conv) return in_features(site);
  int64_t in = site.weight.size(1);
  for (int64_t d = 2; d < site.weight.dim(); ++d) in *= site.weight.size(d);
  return in;
}

NamedTensors factors_and_buffers(const LoraAdapter& adapter) {
  NamedTensors all = adapter.factors;
  all.insert(all.end(), adapter.buffers.begin(), adapter.buffers.end());
  return all;
}

at::Tensor adapter_placed(const at::Tensor& drawn, const LinearSite& site) {
  const at::Tensor placed = drawn.to(site.weight.options());
  const bool low = site.weight.scalar_type() == at::kHalf || site.weight.scalar_type() == at::kBFloat16;
  return low ? placed.to(at::kFloat) : placed;
}

at::Tensor adapter_parameter(const at::Tensor& drawn, const LinearSite& site) {
  return adapter_placed(drawn, site).set_requires_grad(true);
}

at::Tensor weight_delta(const LoraAdapter& adapter) {
  const at::Tensor &a = adapter.a, &b = adapter.b;
  // PEFT's ParamWrapper.get_delta_weight over experts: A (r E x in) as experts x r x in, B (out x
  // r E) as out x r x experts, multiplied expert by expert into the parameter's layout.
  if (adapter.site.experts > 0) {
    const int64_t experts = adapter.site.experts;
    const at::Tensor a3 = a.reshape({experts, -1, a.size(-1)}), b3 = b.reshape({b.size(0), -1, experts});
    // PEFT's equations, letters and all (einsum plans its contraction by its labels).
    return at::einsum(adapter.site.experts_transposed ? "o r e, e r i -> e i o" : "o r e, e r i -> e o i", {b3, a3}) *
           adapter.scaling;
  }
  // An embedding's and a Conv1D's: PEFT's transpose(B @ A, fan_in_fan_out) * scaling.
  if (transposed_layout(adapter.site)) return lora_delta(a, b, adapter.scaling).t();
  if (!adapter.site.conv) return lora_delta(a, b, adapter.scaling);
  if (adapter.site.conv->groups != 1)
    fail(Status::Unsupported, "the LoRA adapter of the convolution '", adapter.site.module, "' with groups ",
         adapter.site.conv->groups, " has no weight of the layer's shape (PEFT cannot merge it either)");
  // PEFT's _ConvNd.get_delta_weight: a 2-D 1 x 1 kernel as a product, any other by convolving A's
  // transpose with B.
  if (a.dim() == 4 && a.size(2) == 1 && a.size(3) == 1)
    return at::matmul(b.squeeze(3).squeeze(2), a.squeeze(3).squeeze(2)).unsqueeze(2).unsqueeze(3) * adapter.scaling;
  const size_t dims = static_cast<size_t>(a.dim()) - 2;
  return conv_nd(a.transpose(0, 1), b, repeated(1, dims), repeated(0, dims), 1).transpose(0, 1) * adapter.scaling;
}

at::Tensor adapted_weight(const at::Tensor& w, const LoraAdapter& adapter) {
  const at::Tensor delta = weight_delta(adapter);
  // PEFT's ParamWrapper adds the delta in the parameter's dtype (its _LoraParameterProxy).
  if (adapts_parameter(adapter.site)) return w + delta.to(w.scalar_type());
  if (!adapter.magnitude.defined()) return (w + delta).to(w.scalar_type());
  // PEFT's DoRA merge: m / ||W + delta|| (detached) times W + delta, per output row (a convolution's
  // per output channel, an embedding's per dimension and a Conv1D's per output: their columns).
  const at::Tensor sum = w + delta;
  if (transposed_layout(adapter.site))
    return ((adapter.magnitude / row_norms(w.t() + delta.t() * 1.0).detach()).view({1, -1}) * sum).to(w.scalar_type());
  std::vector<int64_t> factor_shape(static_cast<size_t>(w.dim()), 1);
  factor_shape[0] = -1;
  const at::Tensor norm = (adapter.site.conv ? conv_weight_norm(w, delta, 1.0) : row_norms(sum)).detach();
  return ((adapter.magnitude / norm).view(factor_shape) * sum).to(w.scalar_type());
}

LoraAdapters::Applied LoraAdapters::apply() const {
  std::vector<const LoraAdapter*> applied;
  if (!enabled()) return Applied(std::move(applied), std::nullopt);
  for (const auto& adapter : adapters_) {
    if (adapter.site.set_output_adapter) continue;  // adapts its output itself
    const at::Tensor& w = adapter.site.weight;
    adapter.site.use_weight(adapted_weight(w, adapter));
    applied.push_back(&adapter);
  }
  return Applied(std::move(applied), tokens_.apply());
}

LoraAdapters::Applied::~Applied() {
  for (const LoraAdapter* adapter : applied_) adapter->site.use_weight(adapter->site.weight);
}

void LoraAdapters::require_mergeable(const char* action) const {
  for (const auto& adapter : adapters_)
    if (!adapter.site.tied_to.empty())
      fail(Status::Unsupported, action, ": ", peft_method_name(adapter.method), " adapts '", adapter.site.module,
           "', whose weight is tied to '", adapter.site.tied_to,
           "': merged weights would change both layers or untie them; save the adapters ",
           "(acc_model_save_lora) with the base weights as they are, or leave the tied layer out of target_modules");
  for (const auto& adapter : adapters_)
    if (adapter.b_bias.defined() && !adapter.site.bias.defined())
      fail(Status::Unsupported, action, ": lora_bias adapts '", adapter.site.module, "', which has no bias to merge ",
           "lora_B's into (as PEFT refuses it); save the adapters (acc_model_save_lora)");
  for (const auto& adapter : adapters_)
    if (is_ia3(adapter) && adapter.feedforward && adapter.site.conv && adapter.site.conv->groups != 1)
      fail(Status::Unsupported, action, ": the IA3 vector of the convolution '", adapter.site.module, "' with groups ",
           adapter.site.conv->groups,
           " scales its input channels, which its weight does not hold one by one (PEFT cannot merge it either); ",
           "save the adapters (acc_model_save_lora)");
  for (const auto& adapter : adapters_)
    if (adapter.factors.empty() && !is_ia3(adapter) && adapter.site.conv && adapter.site.conv->groups != 1)
      fail(Status::Unsupported, action, ": LoRA adapts the convolution '", adapter.site.module, "' with groups ",
           adapter.site.conv->groups,
           ", whose adapter has no weight of the layer's shape to merge (PEFT's "
           "NotImplementedError); save the adapters (acc_model_save_lora)");
}

namespace {

// What a quantised layer is quantised again with: its adapter's delta, refused where not finite
// (the codes cannot hold it). `action` starts the error ("save_model ", or nothing).
at::Tensor quantized_delta(const LoraAdapter& adapter, const char* action) {
  at::Tensor delta = weight_delta(adapter);
  require(delta.isfinite().all().item<bool>(), action, "cannot merge into the quantised layer '", adapter.site.module,
          "': its adapter's delta holds inf or NaN");
  return delta;
}

}  // namespace

namespace {

// The weight `w` of an adapter whose tensors are factors merged with `factors` (the adapter's own
// or a state's), as PEFT's merge computes it.
at::Tensor factor_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors,
                                const LoraConfig& config) {
  return factor_method(adapter)->merged_weight(adapter, w, factors, config);
}

}  // namespace

NamedTensors LoraAdapters::merged(const NamedTensors& state) const {
  if (empty()) return state;
  require_mergeable("save_model");
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& entry : state) by_name.emplace(entry.first, &entry.second);
  auto entry_of = [&](const std::string& name) -> const at::Tensor& {
    auto it = by_name.find(name);
    if (it == by_name.end()) fail(Status::Internal, "the state dict lacks the LoRA entry '", name, "'");
    return *it->second;
  };
  std::unordered_map<std::string, at::Tensor> merged_weights;
  std::unordered_set<std::string> adapter_entries;
  for (const auto& adapter : adapters_) {
    const std::string& module = adapter.site.module;
    at::NoGradGuard no_grad;
    if (is_ia3(adapter)) {  // PEFT's merge: the weight scaled, and the bias of a layer whose output it scales
      const at::Tensor& vector = entry_of(module + kIa3Suffix);
      merged_weights[weight_name(adapter.site)] = ia3_weight(entry_of(weight_name(adapter.site)), adapter, vector);
      if (!adapter.feedforward && adapter.site.bias.defined())
        merged_weights[module + ".bias"] = ia3_bias(entry_of(module + ".bias"), vector);
      adapter_entries.insert(module + kIa3Suffix);
      continue;
    }
    if (!adapter.factors.empty()) {  // PEFT's merge with the state's factors (a copy: OFT's coft writes into them)
      NamedTensors stated;
      for (const auto& [suffix, factor] : adapter.factors) {
        stated.emplace_back(suffix, is_oft(adapter) ? entry_of(module + suffix).clone() : entry_of(module + suffix));
        adapter_entries.insert(module + suffix);
      }
      for (const auto& [suffix, buffer] : adapter.buffers) {
        stated.emplace_back(suffix, entry_of(module + suffix));
        adapter_entries.insert(module + suffix);
      }
      if (is_adalora(adapter)) adapter_entries.insert(module + kAdaloraRanknum);
      if (const SharedTensors* shared = adapter.projections ? shared_tensors(adapter.method) : nullptr)
        adapter_entries.insert({shared->state_a, shared->state_b});
      const at::Tensor& w = entry_of(weight_name(adapter.site));
      merged_weights[weight_name(adapter.site)] = factor_merged_weight(adapter, w, stated, config_);
      if (const auto merged_bias = factor_method(adapter)->merged_bias; merged_bias && adapter.site.bias.defined())
        merged_weights[module + ".bias"] = merged_bias(entry_of(module + ".bias"), stated, config_);
      continue;
    }
    LoraAdapter stated = adapter;  // with the state's tensors
    stated.a = entry_of(module + lora_a_suffix(adapter.site));
    stated.b = entry_of(module + lora_b_suffix(adapter.site));
    if (adapter.magnitude.defined()) stated.magnitude = entry_of(module + kLoraMagnitudeSuffix);
    if (adapter.site.quantized)  // quantised again from weight + delta, as merging would, the layer unchanged
      for (auto& [name, tensor] : adapter.site.requantized_entries(quantized_delta(stated, "save_model ")))
        merged_weights[name] = tensor;
    else
      merged_weights[weight_name(adapter.site)] = adapted_weight(entry_of(weight_name(adapter.site)), stated);
    if (adapter.b_bias.defined())
      merged_weights[module + ".bias"] =
          adapted_bias(entry_of(module + ".bias"), entry_of(module + kLoraBBiasSuffix), adapter.scaling);
    adapter_entries.insert({module + lora_a_suffix(adapter.site), module + lora_b_suffix(adapter.site),
                            module + kLoraBBiasSuffix, module + kLoraMagnitudeSuffix});
  }
  NamedTensors out;
  for (const auto& entry : state) {
    if (adapter_entries.count(entry.first)) continue;
    auto it = merged_weights.find(entry.first);
    out.emplace_back(entry.first, it == merged_weights.end() ? entry.second : it->second);
  }
  return tokens_.merged(out);
}

void LoraAdapters::merge_into_weights(const std::unordered_map<const c10::TensorImpl*, at::Tensor>* unmerged) const {
  require_mergeable("merging the adapters");
  at::NoGradGuard no_grad;
  // Every layer's merged weight (and bias) is computed before any changes: a merge that fails (out of
  // memory, a quantised layer's delta not finite) leaves every layer as it was.
  std::vector<std::pair<at::Tensor, at::Tensor>> merged;  // (the layer's tensor, its merged value)
  std::vector<at::Tensor> deltas(adapters_.size());       // quantised layers': quantised again last
  for (size_t k = 0; k < adapters_.size(); ++k) {
    const LoraAdapter& adapter = adapters_[k];
    const at::Tensor& w = adapter.site.weight;
    if (is_ia3(adapter)) {
      merged.emplace_back(w, ia3_weight(w, adapter, adapter.ia3));
      if (!adapter.feedforward && adapter.site.bias.defined())
        merged.emplace_back(adapter.site.bias, ia3_bias(adapter.site.bias, adapter.ia3));
    } else if (!adapter.factors.empty()) {
      NamedTensors tensors = factors_and_buffers(adapter);
      if (const char* name = factor_method(adapter)->unmerged_weight; name && unmerged)
        if (const auto it = unmerged->find(w.unsafeGetTensorImpl()); it != unmerged->end())
          tensors.emplace_back(name, it->second);
      merged.emplace_back(w, factor_merged_weight(adapter, w, tensors, config_));
      if (const auto merged_bias = factor_method(adapter)->merged_bias; merged_bias && adapter.site.bias.defined())
        merged.emplace_back(adapter.site.bias, merged_bias(adapter.site.bias, tensors, config_));
    } else {
      if (adapter.site.quantized)
        deltas[k] = quantized_delta(adapter, "");
      else
        merged.emplace_back(w, adapted_weight(w, adapter));
      if (adapter.b_bias.defined())
        merged.emplace_back(adapter.site.bias, adapted_bias(adapter.site.bias, adapter.b_bias, adapter.scaling));
    }
  }
  for (auto& [tensor, value] : merged) tensor.copy_(value);
  for (size_t k = 0; k < adapters_.size(); ++k)
    if (deltas[k].defined()) adapters_[k].site.requantize(deltas[k]);
  tokens_.merge_into_weights();
}

void LoraAdapters::merge_and_remove() {
  merge_into_weights();
  uninstall();
  adapters_.clear();
  tokens_.clear();
  tuned_modules_.clear();
  originals_.clear();  // PEFT's merge_and_unload keeps the trained copies
  originals_dropped_because_.clear();
}

}  // namespace acc
