// LoRA adapters (Hu et al. 2021; what PEFT's LoraConfig gives Python users): a linear layer's weight W
// is trained as W + (B A) * scaling with W frozen, A (r x in) and B (out x r) new parameters.
//
// Two ways in. A layer that takes an output adapter (a spec model's, model/adaptable_linear.h; a
// TorchScript module's that its forward calls as a module, model/script_lora.h) computes as PEFT's
// LoRA layer does: its output plus B(A(dropout(x))) * scaling. Any other linear layer (one whose
// weight a TorchScript forward reads itself) gets the adapted weight W + (B A) * scaling in place
// of W for the duration of a forward (LoraAdapters::apply): the same to rounding; dropout on the
// input has no weight-side form. DoRA and lora_bias extend both ways as PEFT's layer does.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/output_adapter.h"
#include "model/peft/lora_config.h"
#include "model/peft/trainable_tokens.h"
#include "tensor/named_tensors.h"

namespace acc {

// An adapter's parameters are named its module's name and these (PEFT's, without its adapter name).
constexpr const char* kLoraASuffix = ".lora_A.weight";
constexpr const char* kLoraBSuffix = ".lora_B.weight";
constexpr const char* kLoraBBiasSuffix = ".lora_B.bias";                // lora_bias
constexpr const char* kLoraMagnitudeSuffix = ".lora_magnitude_vector";  // DoRA
// An embedding's (PEFT's ParameterDict entries, no ".weight").
constexpr const char* kLoraEmbeddingASuffix = ".lora_embedding_A";
constexpr const char* kLoraEmbeddingBSuffix = ".lora_embedding_B";

// Where a convolution (PyTorch's nn.Conv1d/2d/3d) takes its input: PEFT's lora_A is a convolution
// of the layer's kernel size, stride and padding (dilation 1, one group) from all its input
// channels, lora_B a 1 x ... x 1 convolution with the layer's groups. With groups the adapter's
// branch has no weight of the layer's shape: it cannot be merged (PEFT's NotImplementedError).
struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  // Why no PEFT adapter would compute as its layer does here (padding_mode, a padding given as a
  // string): adapting this layer is Unsupported with it. Empty: adaptable (LoRA's lora_A takes no
  // dilation either: dilation_refusal).
  std::string refusal;
};
// Why LoRA cannot adapt a convolution of this dilation: empty where every entry is 1.
std::string dilation_refusal(c10::IntArrayRef dilation);

// How an embedding (PyTorch's nn.Embedding) looks its rows up, which PEFT's lora_embedding_A lookup
// repeats: A (r x num_embeddings) is looked up as the layer is, B (embedding_dim x r) multiplies.
struct EmbeddingLookup {
  int64_t padding_idx = -1;  // none
  bool scale_grad_by_freq = false;
  // Why PEFT's lookup would not compute as its layer does here (max_norm renormalises A in place,
  // sparse gradients): LoRA on this layer is Unsupported with it. Empty: adaptable.
  std::string refusal;
};

// A linear layer (or a TorchScript model's convolution) adapters can adapt: `weight` is the layer's
// own parameter; `set_output_adapter` (where the layer takes one) amends its output, else
// `use_weight` makes it compute with another tensor (the parameter itself restores it).
// Members have initializers so that a site listed with its first fields alone takes the defaults of
// the rest (clang's -Wmissing-field-initializers warns only of members without one).
struct LinearSite {
  std::string module;
  at::Tensor weight{};
  std::function<void(const at::Tensor&)> use_weight{};
  std::function<void(OutputAdapter)> set_output_adapter{};
  // Where `weight` is another module's parameter too (a head tied to the embedding): the name the
  // model lists it under. Merging would change both layers, so it is refused (see require_mergeable).
  std::string tied_to{};
  at::Tensor bias{};  // the layer's bias, undefined if none (DoRA's output takes the layer's without it)
  std::optional<ConvGeometry> conv{};  // set for a convolution: A (r x in x kernel), B (out x r x 1...)
  std::optional<EmbeddingLookup> embedding{};  // set for an embedding: weight num_embeddings x dim
  // transformers' Conv1D (GPT-2's attention and MLP layers): a linear layer whose weight is in x out,
  // computing x W + b; PEFT adapts it as a linear layer with fan_in_fan_out (its delta transposed).
  bool fan_in_fan_out = false;
  // nn.MultiheadAttention, as PEFT's lora.MultiheadAttention adapts it (q, k and v of one size): the
  // site's weight is its in_proj_weight (3 E x E), which its forward reads itself, and targeting it
  // adapts its out_proj too.
  bool attention = false;
  // The attention whose out_proj this linear layer is. Adapted as part of it (the attention
  // targeted), the adapter takes the attention's rank and alpha, and PEFT's files name it
  // "<attention>.base_layer.out_proj.lora_A.weight".
  std::string owner{};
  // PEFT's lora.ParamWrapper (target_parameters): one parameter adapted itself, `parameter` its name
  // in the model ("<module of the parameter>.<its name>"). `module` is then PEFT's name for the
  // wrapper: the parameter's module, with ".base_layer" once for each parameter of that module
  // targeted after it (PEFT nests one wrapper in the next). Empty for a layer.
  std::string parameter{};
  // A 3-D parameter's number of experts (its first dimension; 0 for a 2-D parameter), and whether
  // its module says `is_transposed` (transformers' MoE experts): PEFT's lora_A then takes the
  // second dimension as the input, else the third.
  int64_t experts = 0;
  bool experts_transposed = false;
  // A layer with a quantised weight (model/quantized_linear.h): `weight` is a zero placeholder of
  // its shape in the dtype where PEFT's bnb layer puts its adapters, its output adapted as PEFT's
  // lora.bnb.Linear4bit and Linear8bitLt adapt it.
  bool quantized = false;
  // A quantised layer's merge, PEFT's bnb one: the weight dequantised to its dtype, `delta` added (in
  // the promoted dtype), quantised again as it was (its tensors keep their identity).
  std::function<void(const at::Tensor& delta)> requantize{};
  // The same merge left out of the layer: its state-dict entries as they would be (save_model).
  std::function<NamedTensors(const at::Tensor& delta)> requantized_entries{};
  // Where the layer also takes an input adapter ((IA)^3 on its input, model/peft/ia3.h), beside its
  // set_output_adapter.
  std::function<void(InputAdapter)> set_input_adapter{};
};

// Whether the site is a parameter adapted itself (target_parameters), not a layer.
inline bool adapts_parameter(const LinearSite& site) { return !site.parameter.empty(); }
// Fails (Unsupported, naming `method` and the module) unless the site is a linear layer (nn.Linear,
// transformers' Conv1D): no convolution, embedding, attention projection or parameter adapted
// itself. The data-driven starts (EVA, CorDA, LoRA-GA) compute linear layers only, as PEFT's.
void require_linear_layer(const LinearSite& site, const char* method);
// Fails unless the site is what PEFT's BOFT and HRA take: nn.Linear (a spec's linear) or nn.Conv2d;
// transformers' Conv1D, an embedding, an attention or a parameter is InvalidArgument (PEFT's
// TypeError), naming `method` and the module. A quantised layer, a convolution that is not 2-D, or
// one whose kernel is not square or that has several strides or paddings, dilation or groups is
// Unsupported, naming `peft_conv` (PEFT's class, which computes with the first of each size, so
// adapting such a layer would change what it computes).
void require_linear_or_plain_conv2d(const LinearSite& site, const char* method, const char* peft_conv);
// Fails unless the site is what PEFT's MiSS and C3A take: nn.Linear (a spec's linear) the forward
// calls as a module; a convolution, transformers' Conv1D, an embedding, an attention or a parameter
// is InvalidArgument (PEFT's TypeError), a quantised layer Unsupported, naming `method` and the module
// (refuse_uncalled_layer's `missing` for a layer the forward does not call).
void require_plain_linear(const LinearSite& site, const char* method, const char* missing);
// The same for what PEFT's VeRA, FourierFT, RandLoRA and GraLoRA take: nn.Linear or transformers'
// Conv1D the forward calls as a module (anything else InvalidArgument, PEFT's TypeError or
// ValueError; a quantised layer Unsupported, PEFT's `bnb_module` where it has one).
void require_linear_or_conv1d(const LinearSite& site, const char* method, const char* missing,
                              const char* bnb_module = nullptr);
// Fails (Unsupported, naming `method` and the module) for a layer the model's forward never calls as
// a module (it reads its weight itself): there is no call for the adapter to act on (`missing`: what
// PEFT's layer computes from it, e.g. "input to rotate").
[[noreturn]] void refuse_uncalled_layer(const LinearSite& site, const char* method, const char* missing);

// The name of the site's weight in the model ("<module>.weight", an attention's
// "<module>.in_proj_weight").
std::string weight_name(const LinearSite& site);
// Whether the site is an attention's in_proj or the out_proj adapted with it (a site from
// targeted_sites): PEFT's lora.MultiheadAttention, which merges its adapters before each forward.
bool adapted_with_attention(const LinearSite& site);
// Sets `owner` on each "<attention>.out_proj" among `sites` whose attention is among them, for a
// model's linear_sites (an attention listed before its out_proj, as named_modules lists them).
void mark_attention_out_projs(std::vector<LinearSite>& sites);
// What LoRA adapts, for errors naming a target that is none of these; what `config`'s method adapts.
extern const char* const kAdaptableLayers;
const char* adaptable_layers(const LoraConfig& config);
// The name rank_pattern and alpha_pattern match for the site: its module's, or the attention's whose
// out_proj came with it.
const std::string& pattern_name(const LinearSite& site);

// The sites `config` targets, in the model's order (copies): an attention's out_proj joins its
// targeted attention (`owner` kept), an out_proj targeted by its own name is a linear layer as any
// other (`owner` cleared). Both named is InvalidArgument (PEFT would adapt it twice). Then the
// parameter sites among `sites` that target_parameters names, in the model's order, each `module`
// named as PEFT nests its wrappers; a parameter of a layer target_modules adapts, or of no module
// (the model's own), is Unsupported, one that is not a 2-D or 3-D floating-point tensor
// InvalidArgument (PEFT's ValueError).
std::vector<LinearSite> targeted_sites(const LoraConfig& config, const std::vector<LinearSite>& sites);

// A linear layer's (or Conv1D's) input and output sizes, whichever way its weight is laid out.
int64_t in_features(const LinearSite& site);
int64_t out_features(const LinearSite& site);

// `w`, a weight as `site` stores it, in nn.Linear's layout (out x in: PEFT's transpose(w,
// fan_in_fan_out): a Conv1D's or an embedding's transposed); and such a matrix back in the stored layout.
at::Tensor as_linear_layout(const LinearSite& site, const at::Tensor& w);

// The names of an adapter's A and B after its module's ("<module>.lora_A.weight", an embedding's
// "<module>.lora_embedding_A").
const char* lora_a_suffix(const LinearSite& site);
const char* lora_b_suffix(const LinearSite& site);

struct VeraProjections;  // model/peft/vera.h
class AdaloraAllocator;  // model/peft/adalora_allocator.h

// A trained tensor's name after its module's (PEFT's ParameterDict entry without the adapter name)
// and its shape for one layer (LoraAdapter::factors).
struct FactorShape {
  std::string suffix;
  std::vector<int64_t> shape;
};

struct LoraAdapter {
  LinearSite site;  // `owner` set only where the adapter came with its attention's
  // lora_A.weight (r x in), lora_B.weight (out x r); a convolution's with its kernel's dimensions
  // (lora_B's 1 x ... x 1, out x r / groups); an embedding's lora_embedding_A (r x num_embeddings)
  // and lora_embedding_B (dim x r)
  at::Tensor a, b;
  int64_t r;        // the module's rank and scaling (LoraConfig::rank_of, scaling_of)
  double scaling;
  // DoRA's lora_magnitude_vector (out; a convolution's 1 x out x 1 ..., PEFT's shape); undefined
  // without use_dora
  at::Tensor magnitude{};
  at::Tensor b_bias{};     // lora_B.bias (out); undefined without lora_bias
  // (IA)^3's ia3_l (model/peft/ia3.h) in PEFT's shape, where the adapter is one (a and b undefined): a
  // linear layer's out x 1, or 1 x in where `feedforward` (the vector scales the input); a
  // convolution's 1 x channels x 1 x 1.
  at::Tensor ia3{};
  bool feedforward = false;
  // The trained tensors of a method beyond LoRA under their names after the module's, in PEFT's
  // registration order, where the adapter is one (a and b undefined; r and scaling its layer's): a
  // LyCORIS adapter's factors (model/peft/lycoris.h: LoHa's hada_w1_a ..., LoKr's lokr_w1 ...) or VeRA's
  // vectors (model/peft/vera.h: vera_lambda_b, vera_lambda_d).
  NamedTensors factors{};
  PeftType method = PeftType::Lora;  // whose adapter this is (IA3, LoHa, LoKr, VeRA, OFT, AdaLoRA set it)
  // AdaLoRA's ranknum (1, frozen, in the layer's dtype: its init_r), listed after its factors.
  at::Tensor ranknum{};
  // VeRA's frozen projections or RandLoRA's bases, one pair shared by the adapter's layers
  // (model/peft/vera.h, randlora.h); null for every other method.
  std::shared_ptr<VeraProjections> projections{};
  // SHiRA's places of its values in the weight (model/peft/shira.h: 2 x K int32, frozen; in the
  // adapter's files, not in the model's state); undefined for every other method.
  at::Tensor indices{};
  // A method's frozen tensors of the layer, buffers of the model's state and in its files, under
  // their names after the module's (DeLoRA's delora_w_norm, model/peft/delora.h); none for the others.
  NamedTensors buffers{};
  // PVeRA's layer's own generator for its samples (generator_seed, model/peft/pvera.h); undefined
  // for the others.
  at::Generator generator{};
};

// The adapter's factors, then its buffers: every tensor a merge of a method of factors reads.
NamedTensors factors_and_buffers(const LoraAdapter& adapter);

// The factor named `suffix` among `factors` (null where there is none); and the one that must be
// there (Internal where it is not).
const at::Tensor* find_factor(const NamedTensors& factors, const std::string& suffix);
const at::Tensor& factor_named(const NamedTensors& factors, const std::string& suffix);

// A linear layer's input size, or a convolution's input channels times its kernel's elements: the
// width of the matrix PEFT's AdaLoRA and BOFT make of its weight.
int64_t unrolled_in_features(const LinearSite& site);

// An adapter tensor as PEFT leaves it: moved to the layer's device and dtype, then float32 again
// where that dtype is half precision (autocast_adapter_dtype); a parameter requires grad.
at::Tensor adapter_placed(const at::Tensor& drawn, const LinearSite& site);
at::Tensor adapter_parameter(const at::Tensor& drawn, const LinearSite& site);

// Whether the adapter is an (IA)^3 vector, OFT's rotations or AdaLoRA's triplet, rather than a LoRA pair.
inline bool is_ia3(const LoraAdapter& adapter) { return adapter.ia3.defined(); }
inline bool is_oft(const LoraAdapter& adapter) { return adapter.method == PeftType::Oft; }
inline bool is_adalora(const LoraAdapter& adapter) { return adapter.method == PeftType::Adalora; }
inline bool is_boft(const LoraAdapter& adapter) { return adapter.method == PeftType::Boft; }
inline bool is_lycoris(const LoraAdapter& adapter) {
  return adapter.method == PeftType::Loha || adapter.method == PeftType::Lokr;
}

// (B A) * scaling as PEFT's get_delta_weight computes it, in the weight's layout (a convolution's
// through the product of its 1 x 1 kernels, or A convolved with B). Unsupported for a convolution
// with groups (no such weight exists).
at::Tensor weight_delta(const LoraAdapter& adapter);

// The layer's weight as adapted: W + (B A) * scaling, with DoRA m / ||W + (B A) * scaling|| times
// that (the norm not differentiated), computed in the wider dtype and rounded once to W's (PEFT's
// merge); autograd reaches the adapter's tensors through it where gradients are on. `w` is the
// layer's weight (the adapter's own, or a gathered copy of it).
at::Tensor adapted_weight(const at::Tensor& w, const LoraAdapter& adapter);

class LoraAdapters {
 public:
  // Whether the model has no PEFT adapter at all: no LoRA adapter, no trainable tokens.
  bool empty() const { return adapters_.empty() && tokens_.empty() && tuned_modules_.empty(); }
  // The number of LoRA adapters (adapted linear layers).
  size_t size() const { return adapters_.size(); }
  // What acc_model_lora_count reports: the adapted layers and parameters, or LN tuning's modules.
  size_t count() const { return adapters_.size() + tuned_modules_.size(); }
  // LN tuning's modules (PEFT's LNTuningConfig), trained in place: their names, in the model's order.
  const std::vector<std::string>& tuned_modules() const { return tuned_modules_; }
  const LoraConfig& config() const { return config_; }
  const std::vector<LoraAdapter>& adapters() const { return adapters_; }
  // The rows of embeddings that train beside the adapters (trainable_token_indices), or alone
  // (PEFT's TRAINABLE_TOKENS method, add_tokens).
  const TrainableTokens& tokens() const { return tokens_; }

  // Adds an adapter to every site the config targets, initialised as PEFT does (same draws from the
  // global generator, in the sites' order). Fails, changing nothing, if none matches, a match is
  // not a linear layer (`other_modules` lists the model's other module names), or adapters exist.
  // `weights_pending`: the sites' weights are placeholders that the main process's values replace
  // when the model is prepared (adapters included): PiSSA and OLoRA only take their draws there.
  // The config's trainable_token_indices pick among `token_sites` (after the adapters' draws).
  // `saved_modules`: the parameters and buffers of the modules to save, whose values now are kept
  // for a disabled forward (PEFT's ModulesToSaveWrapper keeps the original module).
  size_t add(const LoraConfig& config, const std::vector<LinearSite>& sites,
             const std::vector<std::string>& other_modules, const std::vector<TokenSite>& token_sites,
             const NamedTensors& saved_modules = {}, bool weights_pending = false);

  // PEFT's TrainableTokensConfig (`config.peft_type` TrainableTokens): rows of the layers its targets
  // match train alone (TrainableTokens::make_standalone), starting as the rows or, without
  // init_weights, as torch.randn draws in the layers' order (PEFT's). The config keeps the layer a
  // default target resolved to, as PEFT writes it. Fails, changing nothing, as add does. Returns how
  // many layers have rows.
  size_t add_tokens(const LoraConfig& config, const std::vector<TokenSite>& token_sites,
                    const std::vector<std::string>& other_modules);

  // "<module>.lora_A.weight", "<module>.lora_B.weight", with lora_bias "<module>.lora_B.bias" and
  // with DoRA "<module>.lora_magnitude_vector", per adapter, in order; then the trainable tokens'
  // "<module>.token_adapter.trainable_tokens_delta".
  NamedTensors named_parameters() const;
  // The adapters' buffers, which the model's state holds beside its own: VeRA's shared projections
  // (model/peft/vera.h) or RandLoRA's bases (model/peft/randlora.h), under their state names
  // (SharedTensors), and each adapter's own (LoraAdapter::buffers, "<module>.<name>").
  NamedTensors named_buffers() const;
  // Adapter k's parameters under their names, as named_parameters lists them.
  void append_parameters(size_t k, NamedTensors* out) const;
  // A model's own parameters (`own`, in its order) with each adapter's two right after its layer's
  // own parameters, where PEFT's layer lists them (base_layer's, then lora_A, lora_B, DoRA's
  // magnitude), and each trainable tokens' delta after its layer's weight: the order of
  // PEFT's model.parameters(), which optimizers and gradient clipping's total norm follow. An
  // adapter whose layer lists none of its own (its weight tied to an earlier module's) comes last.
  NamedTensors placed_among(NamedTensors own) const;

  // While the returned guard lives, the weight-adapted layers compute with W + (B A) * scaling,
  // and the layers with trainable tokens with their rows replaced; autograd reaches A, B and the
  // tokens' deltas through them.
  class Applied {
   public:
    Applied(std::vector<const LoraAdapter*> applied, std::optional<TrainableTokens::Applied> tokens)
        : applied_(std::move(applied)), tokens_(std::move(tokens)) {}
    Applied(Applied&& other) noexcept : applied_(std::move(other.applied_)), tokens_(std::move(other.tokens_)) {
      other.applied_.clear();
    }
    Applied(const Applied&) = delete;
    Applied& operator=(const Applied&) = delete;
    ~Applied();

   private:
    std::vector<const LoraAdapter*> applied_;
    std::optional<TrainableTokens::Applied> tokens_;
  };
  Applied apply() const;

  // PEFT's enable_adapter_layers / disable_adapter_layers (and its disable_adapter scope): while
  // disabled every adapted layer computes as its base layer alone, drawing no dropout mask and
  // making no adapted weight. New adapters start enabled.
  void set_enabled(bool enabled) { *enabled_ = enabled; }
  // Whether there are adapters (or trainable tokens) and they are enabled.
  bool enabled() const { return !empty() && *enabled_; }

  // The modules to save as they were when the adapters were added (PEFT's original_module), which a
  // disabled forward computes with: while the returned guard lives (only while disabled) their
  // tensors hold the kept values, written back to nowhere but the kept copies (a BatchNorm's
  // statistics), and are frozen as PEFT's original module is (libtorch 2.x's matmul folds by
  // requires_grad). Such a forward must run without gradients (Unsupported otherwise: the modules
  // train in place here, so a backward would reach the trained tensors).
  class OriginalsInUse {
   public:
    struct Swapped {
      at::Tensor live, own;  // the model's tensor, a handle on its trained data
      bool requires_grad;
    };
    explicit OriginalsInUse(std::vector<Swapped> swapped) : swapped_(std::move(swapped)) {}
    OriginalsInUse(OriginalsInUse&& other) noexcept : swapped_(std::move(other.swapped_)) { other.swapped_.clear(); }
    OriginalsInUse(const OriginalsInUse&) = delete;
    OriginalsInUse& operator=(const OriginalsInUse&) = delete;
    ~OriginalsInUse();

   private:
    std::vector<Swapped> swapped_;
  };
  OriginalsInUse originals_in_use() const;
  bool keeps_originals() const { return !originals_.empty() && originals_dropped_because_.empty(); }
  // Why the originals went (drop_originals), empty where they did not.
  const std::string& originals_dropped_because() const { return originals_dropped_because_; }
  // The kept values follow the model (Model::to), and are taken again from it where they were
  // placeholders (weights that arrived from the main process, cpu_ram_efficient_loading).
  void move_originals(c10::optional<at::Device> device, c10::optional<at::ScalarType> dtype);
  void keep_originals_again();
  // Several named adapters each train their own copy of the modules they save (PEFT's
  // ModulesToSaveWrapper per adapter): kept aside, an adapter holds its copies' values and the
  // model's tensors are the originals again; brought back, its values are written into them.
  void put_saved_modules_aside();
  void bring_saved_modules_back();
  // LN tuning's modules as they were (PEFT's unload: its base_layer), the modules to save beside it
  // keeping their trained values (their wrapper's copy) unless `modules_to_save_too` (PEFT's
  // delete_adapter of the last adapter: its wrapper computes with original_module then); returns the
  // tensors put back.
  std::vector<at::Tensor> restore_originals(bool modules_to_save_too);
  // The values of the modules it saves that an adapter kept aside holds, under the model's names.
  NamedTensors saved_modules_aside() const;
  // The values the modules it saves had when the adapters were added (what a disabled forward and
  // unload compute with), under the model's names: handles, which a checkpoint's values are copied
  // into. Empty where none are kept (stage 3 dropped them).
  NamedTensors kept_originals() const;
  // The names of the parameters and buffers of the modules it saves.
  std::vector<std::string> saved_module_names() const;
  // The kept copies go, `why` (stage 3 holds slices of the modules): a disabled forward and LN
  // tuning's unload are then refused, saying why.
  void drop_originals(std::string why) {
    if (originals_.empty()) return;
    originals_dropped_because_ = std::move(why);
    originals_.clear();
  }
  // The kept copies' values are unknown, `why` (a checkpoint held none of them), refused as above
  // until values arrive for all of them (originals_known_again); their tensors stay to take them.
  void originals_unknown(std::string why) {
    if (!originals_.empty()) originals_dropped_because_ = std::move(why);
  }
  void originals_known_again() {
    if (!originals_.empty()) originals_dropped_because_.clear();
  }

  // Fails (Unsupported, naming `action` and both names) where an adapted weight is tied to another
  // module's: PEFT merges such a weight in place, warning that the other layer changes too. Also
  // where lora_bias adapts a layer without a bias, or LoRA a convolution with groups.
  void require_mergeable(const char* action) const;

  // `state` (a state dict with the adapters' entries) with every adapted weight merged
  // (W + (B A) * scaling, in W's dtype), the trainable tokens written into their rows, and the
  // adapters' entries left out: the base model's layout.
  NamedTensors merged(const NamedTensors& state) const;
  // Adds each adapter's (B A) * scaling into its layer's weight, in place; the adapters stay (a
  // caller that keeps them restores the weights).
  // `unmerged`: the weights as they were before the named adapters merged in turn before this one
  // (by the weight's TensorImpl): a method whose merge multiplies the weight (HiRA's W * (B A),
  // FactorMethod::unmerged_weight) takes it from there, as PEFT takes its base weight from before
  // any merge.
  void merge_into_weights(const std::unordered_map<const c10::TensorImpl*, at::Tensor>* unmerged = nullptr) const;
  // Merges into the layers' weights in place and removes the adapters and the trainable tokens
  // (PEFT's merge_and_unload).
  void merge_and_remove();

  // PEFT's several named adapters (model/named_adapters.cpp) keep all but the active one aside:
  // uninstall takes this one's branches off its layers (its tensors stay), install puts them back.
  void install() const;
  void uninstall() const;
  // Takes `kept`'s tensors and configuration in place of this one's, made afresh from kept's
  // configuration to wire the model's layers up (the same sites, in the same order: checked before
  // anything changes), installs them and sets them enabled or not.
  void adopt(LoraAdapters&& kept, bool enabled);
  // Where `other`'s adapters sit on this one's layers wired alike (each layer's output or weight
  // adapted as here; ranks and settings may differ): exchanges tensors and configurations with it,
  // keeping this one's wiring, installs them, enabled or not, and returns true. Otherwise changes
  // nothing and returns false.
  bool exchange(LoraAdapters& other, bool enabled);
  // EVA's data-driven start (model/peft/eva.h; PEFT's _load_eva_state_dict): each adapter's lora_A
  // becomes its layer's components (rank x in, by module name, every adapter's given); an adapter
  // whose rank changes is drawn anew as PEFT's update_layer draws it (B zero, lora_alpha times new
  // rank / r with eva_adjust_scaling_factors), one given rank 0 is removed. The configuration then
  // lists the layers kept as target_modules and their ranks and alphas by name (PEFT's).
  void take_eva_components(const std::vector<std::pair<std::string, at::Tensor>>& components);
  // requires_grad on each adapter tensor that trains (MiCA's lora_B stays frozen), or on none;
  // frozen ones keep no gradient.
  void set_trainable(bool trainable) const;
  // AdaLoRA (model/peft/adalora.h): the loss plus orth_reg_weight times the orthogonal regularization
  // (AdaLoraModel.forward's), and the rank allocator's step (update_and_allocate), which keeps the
  // pattern it prunes to in the configuration (saved with the adapters). InvalidArgument where the
  // adapters are not AdaLoRA's.
  at::Tensor adalora_loss(const at::Tensor& loss) const;
  void adalora_update_and_allocate(int64_t global_step);
  // A file's AdaLoRA tensors loaded into these adapters: its rank_pattern and the rows its layers
  // hold become theirs.
  void take_adalora_patterns(const AdaloraConfig& file);

 private:
  OutputAdapter output_adapter(const LoraAdapter& adapter) const;
  // Fails (InvalidArgument) unless the adapters are AdaLoRA's (its allocator made with them).
  void require_adalora() const;
  // Whether exchange can switch `other` in: see exchange.
  bool wired_like(const LoraAdapters& other) const;
  // Swaps the adapters' tensors, ranks and scalings and the configuration with `other`'s (adapters
  // of the same layers, in the same order), each keeping its own sites; then installs this one's.
  void swap_in(LoraAdapters& other, bool enabled);
  // Fails while the model has adapters or trainable tokens, naming them.
  void require_none_yet() const;
  // LN tuning's add: the targeted modules (those among `saved_modules`' names) train in place, kept
  // as they were for a disabled forward, as modules to save are.
  size_t add_tuned_modules(const LoraConfig& config, const NamedTensors& saved_modules, bool weights_pending);
  // Takes `made` (drawn for `chosen`) and `tokens` as the model's adapters, the sites' weights
  // becoming `residuals` where those are defined (PiSSA's and the like), and installs them.
  void take_new(const LoraConfig& config, const std::vector<LinearSite>& chosen, std::vector<LoraAdapter> made,
                std::vector<TokenAdapter> tokens, const std::vector<at::Tensor>& residuals,
                const NamedTensors& saved_modules, bool weights_pending);

  LoraConfig config_;
  std::vector<LoraAdapter> adapters_;
  std::shared_ptr<AdaloraAllocator> allocator_;  // AdaLoRA's, else null
  TrainableTokens tokens_;
  struct Original {
    std::string name;  // the model's name of it
    at::Tensor live;   // the model's parameter or buffer
    at::Tensor kept;   // its value when the adapters were added
    at::Tensor aside;  // the adapter's value of it while the adapter is kept aside
  };
  std::vector<Original> originals_;
  std::vector<std::string> tuned_modules_;  // LN tuning's
  std::string originals_dropped_because_;   // (see drop_originals)
  // Shared with the output adapters set on the layers, which read it at every forward.
  std::shared_ptr<bool> enabled_ = std::make_shared<bool>(true);
};

}  // namespace acc
