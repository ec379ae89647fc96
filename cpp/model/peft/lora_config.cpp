#include "model/peft/lora_config.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <regex>

#include "common/error.h"
#include "common/json_input.h"
#include "common/module_regex.h"
#include "common/text.h"
#include "common/utf8.h"
#include "model/peft/lora_init.h"

namespace acc {
const std::vector<std::string>& peft_task_types() {
  static const std::vector<std::string> types = {"SEQ_CLS",   "SEQ_2_SEQ_LM", "CAUSAL_LM",
                                                 "TOKEN_CLS", "QUESTION_ANS", "FEATURE_EXTRACTION"};
  return types;
}

namespace {

// PEFT's module list in this library's text form: names separated by commas, or "re:" followed by
// a regular expression (handed to `set_regex`). It is written into adapter_config.json: UTF-8 only.
void read_module_names(const char* key, const std::string& text, std::vector<std::string>* names,
                       const std::function<void(const std::string&)>& set_regex) {
  require(is_utf8(text), key, " '", printable_utf8(text), "' is not valid UTF-8");
  if (text.rfind("re:", 0) == 0) {
    // (an empty one would read as no target_modules at all: target_parameters alone)
    require(text.size() > 3, key, " 're:' has no regular expression after it");
    return set_regex(text.substr(3));
  }
  for (const auto& name : split_trimmed(text, ',')) {
    require(!name.empty(), key, " '", text, "' has an empty name");
    names->push_back(name);
  }
}

// Integers separated by commas (`what` says what they are).
std::vector<int64_t> parse_integers(const std::string& text, const char* key, const char* what) {
  std::vector<int64_t> out;
  for (const auto& number : split_trimmed(text, ',')) {
    const auto value = parse_integer(number);
    require(value.has_value(), key, " '", text, "' must be ", what, " separated by commas");
    out.push_back(*value);
  }
  return out;
}

// The keys every PEFT method's options end with: what adapter_config.json keeps for PEFT's AutoPeftModel.
void bind_texts(OptionTable<LoraConfig>& t) {
  using L = LoraConfig;
  t.bind("base_model_name_or_path", "written to adapter_config.json (PEFT's AutoPeftModel loads it)",
         &L::base_model_name_or_path);
  t.bind("revision", "the base model's revision, written to adapter_config.json", &L::revision);
  t.bind("task_type", "PEFT's task type (e.g. CAUSAL_LM), written to adapter_config.json", &L::task_type)
      .one_of(peft_task_types());
}

// exclude_modules and modules_to_save, as LoRA's, IA3's and LoHa's options take them.
void bind_modules_to_save(OptionTable<LoraConfig>& t) {
  t.bind("modules_to_save", "modules trained whole beside the adapters and saved with them (a head)",
         &LoraConfig::modules_to_save_spec);
}

void bind_module_lists(OptionTable<LoraConfig>& t) {
  t.bind("exclude_modules", "modules left unadapted, named as target_modules are", &LoraConfig::exclude_spec);
  bind_modules_to_save(t);
}

// rank_pattern, alpha_pattern (giving `alpha`, the method's name for it), layers_to_transform and
// layers_pattern, as LoRA's and LoHa's options take them.
// layers_to_transform and layers_pattern, as every method's options but IA3's take them.
void bind_layers(OptionTable<LoraConfig>& t) {
  using L = LoraConfig;
  t.bind("layers_to_transform", "the layer numbers to adapt, separated by commas (default: all)",
         &L::layers_to_transform_spec);
  t.bind("layers_pattern", "expressions naming the layer lists layers_to_transform numbers, separated by commas",
         &L::layers_pattern_spec);
}

void bind_patterns_and_layers(OptionTable<LoraConfig>& t, const std::string& alpha) {
  using L = LoraConfig;
  t.bind("rank_pattern", "ranks of their own: a JSON object from module-name expressions to r", &L::rank_pattern_spec);
  t.bind("alpha_pattern", alpha + "s of their own: a JSON object from module-name expressions to " + alpha,
         &L::alpha_pattern_spec);
  bind_layers(t);
}

// The keys LoHa's and LoKr's options share before their own (PEFT's LycorisConfig).
void bind_lycoris_dropouts(OptionTable<LoraConfig>& t) {
  using L = LoraConfig;
  t.bind("r", "the rank of each product", &L::r).at_least(1).at_most(kMaxLoraRank);
  t.bind("alpha", "the scaling is alpha / r", &L::alpha).at_least(-kMaxLoraAlpha).at_most(kMaxLoraAlpha);
  t.bind("rank_dropout", "in training, the probability of dropping each output row of the delta", &L::rank_dropout)
      .at_least(0)
      .at_most(1);
  t.bind("module_dropout", "in training, the probability of leaving a layer's branch out", &L::module_dropout)
      .at_least(0)
      .at_most(1);
}

}  // namespace

const OptionTable<LoraConfig>& lora_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Lora, [](OptionTable<L>& t) {
    t.bind("r", "the adapters' rank", &L::r).at_least(1).at_most(kMaxLoraRank);
    // Within float's range: the scaling multiplies float32 outputs (an inf would make 0 * inf NaNs).
    // Either sign, as PEFT takes it.
    t.bind("lora_alpha", "the scaling is lora_alpha / r", &L::alpha).at_least(-kMaxLoraAlpha).at_most(kMaxLoraAlpha);
    t.bind("lora_dropout", "dropout on the adapted layer's input", &L::dropout).at_least(0).at_most(1);
    t.bind("use_rslora", "scale by lora_alpha / sqrt(r)", &L::use_rslora);
    t.bind("use_dora", "DoRA: train a magnitude per output beside the adapters", &L::use_dora);
    t.bind("lora_bias", "lora_B has a trained bias too", &L::lora_bias);
    t.bind("fan_in_fan_out",
           "PEFT's flag for weights stored in x out (transformers' Conv1D); each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("init_lora_weights",
           "Kaiming A and zero B (true), N(0, 1/r) A (gaussian), nn.Linear's (false), from the weight, which "
           "keeps the residual (olora, pissa, pissa_niter_<n>), or B the weight's minor singular vectors, frozen, "
           "and A zero (mica), or both from a random orthogonal matrix, B A zero (orthogonal), or A from the "
           "layers' inputs, B zero (eva: acc_model_initialize_lora_eva computes it), or both from the weight "
           "decomposed along the inputs' covariance, which keeps the residual (corda: acc_model_add_lora_corda), or "
           "from the gradient's singular vectors, the weight keeping the residual (lora_ga: acc_model_add_lora_ga), or "
           "the weight quantised and both from the quantisation error's singular vectors (loftq)",
           &L::init)
        .one_of(
            {"true", "gaussian", "false", "olora", "pissa", "mica", "orthogonal", "eva", "corda", "lora_ga", "loftq"})
        .checked_by(check_lora_init);  // and pissa_niter_<n>
    t.bind("eva_rho", "eva: a layer's rank is at most round(r * eva_rho) (PEFT's EvaConfig.rho)", &L::eva,
           &EvaConfig::rho)
        .at_least(1)
        .at_most(1e9);
    t.bind("eva_tau", "eva: the cosine similarity at which a layer's components count as converged", &L::eva,
           &EvaConfig::tau)
        .at_least(0)
        .at_most(1);
    t.bind("eva_use_label_mask", "eva: positions whose label is eva_label_mask_value are left out", &L::eva,
           &EvaConfig::use_label_mask);
    t.bind("eva_label_mask_value", "eva: the label of the positions left out", &L::eva, &EvaConfig::label_mask_value);
    t.bind("eva_whiten", "eva: the components divided by the square roots of their singular values", &L::eva,
           &EvaConfig::whiten);
    t.bind("eva_adjust_scaling_factors", "eva: lora_alpha scaled with a layer's new rank (its scaling kept)",
           &L::eva, &EvaConfig::adjust_scaling_factors);
    t.bind("corda_method", "corda: the adapters start from the largest components (ipm) or the smallest (kpm)",
           &L::corda_method)
        .one_of({"ipm", "kpm"});
    t.bind("corda_use_float16_for_covariance",
           "corda: the inputs' covariance summed in their own dtype (half precision) instead of float32",
           &L::corda_use_float16_for_covariance);
    t.bind("lora_ga_direction", "lora_ga: which of the gradient's 2 r singular vectors A and B take", &L::lora_ga,
           &LoraGaConfig::direction)
        .one_of({"ArB2r", "A2rBr", "ArBr", "random"});
    t.bind("lora_ga_scale", "lora_ga: how B is scaled", &L::lora_ga, &LoraGaConfig::scale)
        .one_of({"stable", "weight_svd", "gd_scale", "unit"});
    t.bind("lora_ga_stable_gamma", "lora_ga: the gamma of the stable scale", &L::lora_ga, &LoraGaConfig::stable_gamma)
        .at_least(1)
        .at_most(1 << 30);
    t.bind("loftq_bits", "loftq: 4 (bitsandbytes' NF4) or 8 (its row-wise int8)", &L::loftq, &LoftqConfig::bits)
        .one_of_ints({4, 8});
    t.bind("loftq_iter", "loftq: the alternating rounds of quantising and decomposing", &L::loftq, &LoftqConfig::iter)
        .at_least(1)
        .at_most(kMaxLoftqIter);
    t.bind("exclude_modules", "modules left unadapted, named as target_modules are", &L::exclude_spec);
    t.bind("target_parameters",
           "parameters adapted themselves (a mixture of experts' expert weights): \"<module>.<parameter>\" names, "
           "separated by commas, or PEFT's JSON list",
           &L::target_parameters_spec);
    t.bind("modules_to_save", "modules trained whole beside the adapters and saved with them (a head)",
           &L::modules_to_save_spec);
    t.bind("bias", "which biases train beside the adapters: none, all, lora_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "lora_only"});
    bind_patterns_and_layers(t, "lora_alpha");
    t.bind("trainable_token_indices",
           "embedding rows that train beside the adapters: indices separated by commas (the input embedding's), or "
           "a JSON object from module names to lists of indices",
           &L::token_indices_spec);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& trainable_tokens_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::TrainableTokens, [](OptionTable<L>& t) {
    t.bind("token_indices",
           "the rows that train, in every target: indices separated by commas, or PEFT's JSON list (required)",
           &L::standalone_indices_spec);
    t.bind("init_weights", "the rows start as the layer's (true) or as torch.randn draws (false)",
           &L::tokens_from_weights);
    bind_texts(t);
  });
  return table;
}

LoraConfig LoraConfig::trainable_tokens(const std::string& targets, const Options& options) {
  require(options.kind() == OptionsKind::TrainableTokens, "trainable tokens' options must be of kind ",
          "trainable_tokens, got ", options_kind_name(options.kind()));
  LoraConfig config = trainable_tokens_option_table().read(options);
  config.peft_type = PeftType::TrainableTokens;
  const std::string text = trimmed(targets);
  if (!text.empty())
    read_module_names("target_modules", text, &config.target_names,
                      [&](const std::string& expression) { config.set_target_regex(expression); });
  const std::string indices = trimmed(config.standalone_indices_spec);
  require(!indices.empty(), "token_indices is not set: name the rows to train (e.g. \"32000,32001\")");
  config.set_standalone_indices(
      indices.front() == '[' ? parse_ordered_json_input(indices, "token_indices")
                             : nlohmann::ordered_json(parse_integers(indices, "token_indices", "token indices")));
  for (const std::string* value : {&config.base_model_name_or_path, &config.revision, &config.task_type})
    require(is_utf8(*value), "'", printable_utf8(*value), "' is not valid UTF-8");
  return config;
}

const OptionTable<LoraConfig>& ia3_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Ia3, [](OptionTable<L>& t) {
    t.bind("feedforward_modules",
           "the targets whose vector scales their input instead of their output: names separated by commas, or "
           "\"re:\" and an expression",
           &L::feedforward_spec);
    t.bind("fan_in_fan_out",
           "PEFT's flag for weights stored in x out (transformers' Conv1D); each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("init_ia3_weights", "the vectors start as ones (true) or as torch.randn draws (false)",
           &L::init_ia3_weights);
    bind_module_lists(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& loha_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Loha, [](OptionTable<L>& t) {
    bind_lycoris_dropouts(t);
    t.bind("use_effective_conv2d", "a convolution wider than 1 x 1 in PEFT's CP form (hada_t1, hada_t2)",
           &L::use_effective_conv2d);
    t.bind("init_weights", "hada_w2_b starts as zeros, so the model starts unchanged (false: drawn as the others)",
           &L::loha_init_weights);
    bind_module_lists(t);
    bind_patterns_and_layers(t, "alpha");
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& lokr_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Lokr, [](OptionTable<L>& t) {
    bind_lycoris_dropouts(t);
    t.bind("use_effective_conv2d",
           "a convolution's w2 in PEFT's CP form (lokr_t2, w2_a, w2_b) for kernels wider than 1",
           &L::use_effective_conv2d);
    t.bind("decompose_both", "w1 too is a rank-r product (w1_a w1_b) where r is below half its larger side",
           &L::decompose_both);
    t.bind("decompose_factor", "the factorisation's divisor for out and in (-1: near their square roots)",
           &L::decompose_factor)
        .at_least(-(1LL << 31))
        .at_most(1LL << 31);
    t.bind("rank_dropout_scale", "rank dropout rescales the kept rows by their fraction", &L::rank_dropout_scale);
    t.bind("init_weights",
           "w1 (or w1_a) starts as zeros, so the model starts unchanged (true), every factor drawn (false), or w2 "
           "(or w2_b) zeros as LyCORIS starts (lycoris)",
           &L::lokr_init_weights)
        .one_of({"true", "false", "lycoris"});
    bind_module_lists(t);
    bind_patterns_and_layers(t, "alpha");
    bind_texts(t);
  });
  return table;
}

namespace {

// VeRA's settings, which PVeRA takes too: its dropout under `dropout_key`, "<method>_only" as `only`.
void bind_vera_settings(OptionTable<LoraConfig>& t, const char* dropout_key, const char* only) {
  using L = LoraConfig;
  t.bind("r", "the projections' rank", &L::vera_r).at_least(1).at_most(kMaxLoraRank);
  t.bind("projection_prng_key", "the seed of the generator the projections are drawn from (modulo 2^64)",
         &L::projection_prng_key);
  t.bind("save_projection", "the projections are written to the adapter's files (else drawn again from the seed)",
         &L::save_projection);
  t.bind(dropout_key, "dropout on each adapted layer's input to its branch", &L::dropout).at_least(0).at_most(1);
  // Within float32's range, as lambda_d holds it (and as adapter_config.json is read back).
  t.bind("d_initial", "lambda_d's starting value", &L::d_initial).at_least(-kMaxLoraAlpha).at_most(kMaxLoraAlpha);
  t.bind("fan_in_fan_out",
         "PEFT's flag for weights stored in x out (transformers' Conv1D); each layer's kind decides, as in PEFT",
         &L::fan_in_fan_out);
  t.bind("bias", std::string("which biases train beside the adapters: none, all, ") + only + " (the adapted layers')",
         &L::bias)
      .one_of({"none", "all", only});
  t.bind("init_weights", "lambda_d starts as d_initial and lambda_b as zeros (false: torch.randn and ones)",
         &L::vera_init_weights);
  t.bind("modules_to_save", "modules trained whole beside the adapters and saved with them (a head)",
         &L::modules_to_save_spec);
  bind_layers(t);
  bind_texts(t);
}

}  // namespace

const OptionTable<LoraConfig>& vera_option_table() {
  static const OptionTable<LoraConfig> table(
      OptionsKind::Vera, [](OptionTable<LoraConfig>& t) { bind_vera_settings(t, "vera_dropout", "vera_only"); });
  return table;
}

const OptionTable<LoraConfig>& pvera_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Pvera, [](OptionTable<L>& t) {
    bind_vera_settings(t, "pvera_dropout", "pvera_only");
    t.bind("sample_at_inference", "evaluation samples the middle too (false: its mean)", &L::pvera_sample_at_inference);
    t.bind("generator_seed", "the seed of each layer's own generator for the samples (none: the global generator)",
           &L::pvera_generator_seed);
  });
  return table;
}

const OptionTable<LoraConfig>& oft_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Oft, [](OptionTable<L>& t) {
    t.bind("r", "the blocks per layer (0: from oft_block_size)", &L::oft_r).at_least(0).at_most(kMaxLoraRank);
    t.bind("oft_block_size", "the size of each block (0: from r)", &L::oft_block_size)
        .at_least(0)
        .at_most(kMaxLoraRank);
    t.bind("module_dropout", "kept in the configuration (PEFT's linear layers do not apply it)", &L::module_dropout)
        .at_least(0)
        .at_most(1);
    t.bind("coft", "each block's rotation kept within eps of the identity (constrained OFT)", &L::coft);
    t.bind("eps", "coft's bound", &L::eps).at_least(0).at_most(kMaxLoraAlpha);
    t.bind("block_share", "one rotation for all the blocks of a layer", &L::block_share);
    t.bind("use_cayley_neumann", "the Cayley transform by PEFT's Neumann series (false: by a solve)",
           &L::use_cayley_neumann);
    t.bind("num_cayley_neumann_terms", "the series' terms", &L::num_cayley_neumann_terms).at_least(1).at_most(64);
    t.bind("fan_in_fan_out", "PEFT's flag for weights stored in x out; each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("bias", "which biases train beside the rotations: none, all, oft_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "oft_only"});
    t.bind("init_weights", "the rotations start as the identity (false: their weights normal(0, 0.1))",
           &L::oft_init_weights);
    bind_module_lists(t);
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& adalora_option_table() {
  using L = LoraConfig;
  using A = AdaloraConfig;
  static const OptionTable<L> table(OptionsKind::Adalora, [](OptionTable<L>& t) {
    t.bind("target_r", "the average rank per layer the budget ends at", &L::adalora, &A::target_r)
        .at_least(0)
        .at_most(kMaxLoraRank);
    t.bind("init_r", "each layer's rank at the start", &L::adalora, &A::init_r).at_least(1).at_most(kMaxLoraRank);
    // At most 2^53, as adapter_config.json's integers are read back (JSON's exact range).
    t.bind("tinit", "the steps of warm-up before any pruning", &L::adalora, &A::tinit)
        .at_least(0)
        .at_most(kMaxAdaloraSteps);
    t.bind("tfinal", "the steps of fine-tuning after the last pruning", &L::adalora, &A::tfinal)
        .at_least(0)
        .at_most(kMaxAdaloraSteps);
    t.bind("deltaT", "the steps between two prunings", &L::adalora, &A::delta_t).at_least(1).at_most(kMaxAdaloraSteps);
    t.bind("beta1", "the smoothing of the importance (sensitivity)", &L::adalora, &A::beta1);
    t.bind("beta2", "the smoothing of its uncertainty", &L::adalora, &A::beta2);
    t.bind("orth_reg_weight", "the weight of the orthogonal regularization (acc_model_adalora_loss)", &L::adalora,
           &A::orth_reg_weight)
        .at_least(0)
        .at_most(kMaxLoraAlpha);
    t.bind("total_step", "the training's steps, required (the budget's schedule ends there)", &L::adalora,
           &A::total_step)
        .at_most(kMaxAdaloraSteps);
    // At most float's largest: the scaling multiplies float32 outputs (an inf would make 0 * inf NaNs).
    // Not above 0: PEFT's scaling is then the rank.
    t.bind("lora_alpha", "the scaling is lora_alpha / (rank + 1e-5), the rank fixed at init_r", &L::alpha)
        .at_least(-kMaxLoraAlpha)
        .at_most(kMaxLoraAlpha);
    t.bind("lora_dropout", "dropout on the adapted layer's input", &L::dropout).at_least(0).at_most(1);
    t.bind("fan_in_fan_out",
           "PEFT's flag for weights stored in x out (transformers' Conv1D); each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("bias", "which biases train beside the adapters: none, all, lora_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "lora_only"});
    t.bind("init_lora_weights", "E starts as zeros and A and B as normal(0, 0.02) draws (false: torch.randn)",
           &L::adalora, &A::init_weights);
    bind_module_lists(t);
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& boft_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Boft, [](OptionTable<L>& t) {
    t.bind("boft_block_size", "the size of each block (0: from boft_block_num)", &L::boft_block_size)
        .at_least(0)
        .at_most(kMaxLoraRank);
    t.bind("boft_block_num", "the blocks per factor (0: from boft_block_size)", &L::boft_block_num)
        .at_least(0)
        .at_most(kMaxLoraRank);
    t.bind("boft_n_butterfly_factor", "the butterfly's factors (1: one block diagonal)", &L::boft_n_butterfly_factor)
        .at_least(1)
        .at_most(30);
    t.bind("boft_dropout", "in training, the fraction of one factor's blocks made the identity", &L::dropout)
        .at_least(0)
        .at_most(1);
    t.bind("fan_in_fan_out", "PEFT's flag for weights stored in x out; each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("bias", "which biases train beside the rotations: none, all, boft_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "boft_only"});
    t.bind("init_weights", "the rotations start as the identity and the scales as ones (false: normal draws)",
           &L::boft_init_weights);
    bind_module_lists(t);
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& hra_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Hra, [](OptionTable<L>& t) {
    t.bind("r", "the Householder reflections per layer (an even r starts the layer unchanged)", &L::r)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("apply_GS", "the reflections orthonormalised by Gram-Schmidt (one reflection I - 2 U U^T)",
           &L::hra_apply_gs);
    t.bind("bias", "which biases train beside the reflections: none, all, hra_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "hra_only"});
    t.bind(
        "init_weights",
        "the reflections drawn in equal pairs, the layer unchanged at the start without apply_GS (false: each drawn)",
        &L::hra_init_weights);
    bind_module_lists(t);
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& fourierft_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Fourierft, [](OptionTable<L>& t) {
    t.bind("n_frequency", "the spectrum's entries trained per layer", &L::n_frequency)
        .at_least(1)
        .at_most(kMaxFrequencies);
    t.bind("scaling", "the delta's scaling (PEFT's lora_alpha's role)", &L::fourier_scaling)
        .at_least(-kMaxLoraAlpha)
        .at_most(kMaxLoraAlpha);
    t.bind("random_loc_seed", "the seed of the entries' places (torch.randperm)", &L::random_loc_seed);
    t.bind("fan_in_fan_out", "PEFT's flag for weights stored in x out; each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("bias", "which biases train beside the spectrum: none, all, fourier_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "fourier_only"});
    t.bind("init_weights", "the spectrum starts as zeros (false: torch.randn, PEFT's default)",
           &L::fourier_init_weights);
    t.bind("n_frequency_pattern", "n_frequency of their own: a JSON object from module-name expressions to counts",
           &L::size_pattern_spec);
    bind_module_lists(t);
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& miss_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Miss, [](OptionTable<L>& t) {
    t.bind("r", "the shard's rows: the width of the input's blocks (\"bat\": of the weight's square blocks)",
           &L::miss_r)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("miss_dropout", "dropout on the layer's (padded) input to the shard's branch", &L::dropout)
        .at_least(0)
        .at_most(1);
    t.bind("mini_r", "\"mini\": the shard's width along the outputs, repeated out / mini_r times", &L::miss_mini_r)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("init_weights",
           "the variant: true (the shard zeros, the layer unchanged), false (Kaiming draws), bat (the weight's "
           "blocks times their shard), mini (an r x mini_r shard repeated along the outputs)",
           &L::miss_init)
        .one_of({"true", "false", "bat", "mini"});
    t.bind("bias", "which biases train beside the shards: none, all, MiSS_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "MiSS_only"});
    bind_module_lists(t);
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& c3a_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::C3a, [](OptionTable<L>& t) {
    t.bind("block_size", "the circulant blocks' size, which must divide the layer's inputs and outputs",
           &L::c3a_block_size)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("block_size_pattern", "block sizes of their own: a JSON object from module-name expressions to sizes",
           &L::size_pattern_spec);
    t.bind("init_weights",
           "the kernel's start: xavier_uniform (PEFT's default, and its false), kaiming_uniform, gaussian, or true "
           "(zeros, the layer unchanged)",
           &L::c3a_init)
        .one_of({"xavier_uniform", "false", "kaiming_uniform", "gaussian", "true"});
    t.bind("bias", "which biases train beside the kernels: none, all, c3a_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "c3a_only"});
    bind_modules_to_save(t);  // (PEFT's C3AConfig has no exclude_modules)
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& shira_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Shira, [](OptionTable<L>& t) {
    t.bind("r", "each layer trains r (in + out) entries of its weight (not a rank: the delta is sparse)", &L::shira_r)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("mask_type", "how the places are picked: random (PEFT's random_mask)", &L::shira_mask_type)
        .one_of({"random"});
    t.bind("random_seed",
           "the seed of each layer's mask generator (default none: a new generator's default seed, so layers of one "
           "shape share their places)",
           &L::shira_random_seed);
    t.bind("init_weights", "the trained entries start as zeros (false: torch.randn draws)", &L::shira_init_weights);
    bind_modules_to_save(t);  // (PEFT's ShiraConfig has no exclude_modules, bias or layer settings)
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& randlora_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Randlora, [](OptionTable<L>& t) {
    t.bind("r",
           "the bases' rank (fewer trained values as it grows: each layer trains r x n and n x its smaller side, "
           "n = ceil(smaller side / r))",
           &L::randlora_r)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("projection_prng_key", "the seed of the generator the bases are drawn from (modulo 2^64)",
           &L::projection_prng_key);
    t.bind("save_projection", "the bases are written to the adapter's files (else drawn again from the seed)",
           &L::save_projection);
    t.bind("sparse", "ternary sparse bases (-1, 0, 1 with 1/6, 2/3, 1/6)", &L::randlora_sparse);
    t.bind("very_sparse", "ternary bases sparser still (-1 and 1 with 1 / sqrt(the smaller side) each)",
           &L::randlora_very_sparse);
    t.bind("randlora_dropout", "dropout on each adapted layer's input to its branch", &L::dropout)
        .at_least(0)
        .at_most(1);
    t.bind("randlora_alpha", "the scaling is randlora_alpha / r", &L::randlora_alpha)
        .at_least(-kMaxLoraAlpha)
        .at_most(kMaxLoraAlpha);
    t.bind("bias", "which biases train beside the adapters: none, all, randlora_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "randlora_only"});
    t.bind("init_weights", "lambda starts as zeros (the layer unchanged; false: torch.randn draws)",
           &L::randlora_init_weights);
    bind_modules_to_save(t);  // (PEFT's RandLoraConfig has no exclude_modules)
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& delora_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Delora, [](OptionTable<L>& t) {
    t.bind("r", "the rank of each layer's A and B", &L::delora_r).at_least(1).at_most(kMaxLoraRank);
    t.bind("delora_lambda", "the delta's starting strength (the norm bound PEFT trains as delora_lambda)",
           &L::delora_lambda)
        .at_least(-kMaxLoraAlpha)
        .at_most(kMaxLoraAlpha);
    t.bind("module_dropout", "dropout on each adapted layer's input to its branch", &L::dropout).at_least(0).at_most(1);
    t.bind("bias", "which biases train beside the adapters: none, all, delora_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "delora_only"});
    t.bind("init_weights", "B starts as zeros, the layer unchanged (false: Kaiming draws)", &L::delora_init_weights);
    t.bind("rank_pattern", "ranks of their own: a JSON object from module-name expressions to r",
           &L::rank_pattern_spec);
    t.bind("lambda_pattern", "delora_lambda of their own: a JSON object from module-name expressions to values",
           &L::alpha_pattern_spec);
    bind_module_lists(t);
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& ln_tuning_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::LnTuning, [](OptionTable<L>& t) {
    bind_module_lists(t);
    bind_texts(t);
  });
  return table;
}

const std::vector<bool>* AdaloraConfig::kept(const std::string& module) const {
  for (const auto& [name, entries] : rank_pattern)
    if (name == module) return &entries;
  return nullptr;
}

std::vector<int64_t> AdaloraConfig::held_rows(const std::string& module) const {
  std::vector<int64_t> rows;
  for (const auto& [name, entries] : held)
    if (name == module) {
      for (size_t i = 0; i < entries.size(); ++i)
        if (entries[i]) rows.push_back(static_cast<int64_t>(i));
      return rows;
    }
  for (int64_t i = 0; i < init_r; ++i) rows.push_back(i);
  return rows;
}

void check_adalora_schedule(const AdaloraConfig& config) {
  require(config.total_step >= 1, "AdaLoRA needs total_step, the training's steps (got ", config.total_step,
          "): its budget's schedule ends there (PEFT's AdaLoraConfig refuses it too)");
  require(config.tinit < config.total_step - config.tfinal, "AdaLoRA's schedule leaves no steps to prune in: tinit ",
          config.tinit, " must come before total_step - tfinal = ", config.total_step - config.tfinal,
          " (decrease tinit or tfinal, or increase total_step; PEFT's ValueError)");
  for (const auto& [name, beta] : {std::pair{"beta1", config.beta1}, std::pair{"beta2", config.beta2}})
    require(beta > 0 && beta < 1, "AdaLoRA's ", name, " must lie in (0, 1) (PEFT's RankAllocator asserts it), got ",
            beta);
}

namespace {

// What LoraConfig::from and LoraConfig::ia3 read alike: target_modules (the text, trimmed),
// exclude_modules, modules_to_save (with the task type's head) and the texts.
void read_shared_settings(LoraConfig& config, const std::string& text) {
  if (LoraConfig::is_all_linear(text))
    config.all_linear = true;
  else if (!text.empty())
    read_module_names("target_modules", text, &config.target_names,
                      [&](const std::string& expression) { config.set_target_regex(expression); });
  const std::string excluded = trimmed(config.exclude_spec);
  if (!excluded.empty())
    read_module_names("exclude_modules", excluded, &config.exclude_names,
                      [&](const std::string& expression) { config.set_exclude_regex(expression); });
  const std::string saved = trimmed(config.modules_to_save_spec);
  require(is_utf8(saved), "modules_to_save '", printable_utf8(saved), "' is not valid UTF-8");
  if (!saved.empty()) {
    for (const auto& name : split_trimmed(saved, ',')) {
      require(!name.empty(), "modules_to_save '", saved, "' has an empty name");
      config.modules_to_save.push_back(name);
    }
    config.modules_to_save_given = true;
  }
  // PEFT's PeftModelFor{SequenceClassification,TokenClassification,QuestionAnswering} train their
  // task's head whole (and write these names into adapter_config.json).
  if (config.task_type == "SEQ_CLS" || config.task_type == "TOKEN_CLS")
    config.modules_to_save.insert(config.modules_to_save.end(), {"classifier", "score"});
  else if (config.task_type == "QUESTION_ANS")
    config.modules_to_save.push_back("qa_outputs");
  const std::pair<const char*, const std::string*> texts[] = {
      {"base_model_name_or_path", &config.base_model_name_or_path},
      {"revision", &config.revision},
      {"task_type", &config.task_type}};
  for (const auto& [key, value] : texts)
    require(is_utf8(*value), key, " '", printable_utf8(*value), "' is not valid UTF-8");
}

// rank_pattern, alpha_pattern, layers_to_transform and layers_pattern from their options.
void read_patterns_and_layers(LoraConfig& config) {
  for (const auto& [setting, spec] :
       {std::pair<const char*, const std::string*>{"rank_pattern", &config.rank_pattern_spec},
        {config.alpha_pattern_setting(), &config.alpha_pattern_spec}})
    if (!trimmed(*spec).empty()) config.add_patterns(setting, parse_ordered_json_input(*spec, setting));
  const std::string layers = trimmed(config.layers_to_transform_spec);
  if (!layers.empty()) config.layers_to_transform = parse_integers(layers, "layers_to_transform", "layer numbers");
  const std::string layer_lists = trimmed(config.layers_pattern_spec);
  if (!layer_lists.empty()) config.set_layers_pattern(split_trimmed(layer_lists, ','));
  config.check_layer_settings(/*layers_to_transform_given=*/!config.layers_to_transform.empty());
}

// A PEFT method's options (of `kind`; `method` names it in errors) read by `table`, its peft_type set.
LoraConfig method_options(const char* method, OptionsKind kind, const OptionTable<LoraConfig>& table, PeftType type,
                          const Options& options) {
  require(options.kind() == kind, method, " options must be of kind ", options_kind_name(kind), ", got ",
          options_kind_name(options.kind()));
  LoraConfig config = table.read(options);
  config.peft_type = type;
  return config;
}

// FourierFT's n_frequency_pattern or C3A's block_size_pattern from its option, a JSON object.
void read_size_pattern(LoraConfig& config) {
  const std::string pattern = trimmed(config.size_pattern_spec);
  if (pattern.empty()) return;
  const char* setting = config.size_pattern_setting();
  const nlohmann::ordered_json object = parse_ordered_json_input(pattern, setting);
  require(object.is_object(), setting, " must be a JSON object from module-name expressions to sizes, ",
          "e.g. {\"q_proj\": 500}");
  for (const auto& [key, value] : object.items()) {
    require(value.is_number_integer(), setting, "'s '", key, "' must be an integer size");
    config.add_size_pattern(key, size_value(value, setting, key));
  }
}

// What a method's configuration ends with: its bias setting "<method>_only" (`own`, if any) as this
// library's "lora_only", the targets (required; `layers` says what they are), the shared settings,
// the patterns and the layer settings.
void read_method_targets(LoraConfig& config, const std::string& targets, const char* layers,
                         const char* own = nullptr) {
  if (own && config.bias == own) config.bias = "lora_only";  // the adapted layers' biases train
  const std::string text = trimmed(targets);
  require(!text.empty(), "target_modules is empty: name the ", layers, " to adapt (e.g. \"q_proj,v_proj\")");
  read_shared_settings(config, text);
  read_patterns_and_layers(config);
}

}  // namespace

LoraConfig LoraConfig::ia3(const std::string& targets, const Options& options) {
  require(options.kind() == OptionsKind::Ia3, "IA3 options must be of kind ia3, got ",
          options_kind_name(options.kind()));
  LoraConfig config = ia3_option_table().read(options);
  config.peft_type = PeftType::Ia3;
  const std::string text = trimmed(targets);
  require(!text.empty(), "target_modules is empty: name the layers to adapt (e.g. \"k_proj,v_proj,down_proj\")");
  read_shared_settings(config, text);
  const std::string feedforward = trimmed(config.feedforward_spec);
  if (!feedforward.empty())
    read_module_names("feedforward_modules", feedforward, &config.feedforward_names,
                      [&](const std::string& expression) { config.set_feedforward_regex(expression); });
  config.check_feedforward_subset();
  return config;
}

LoraConfig LoraConfig::from(const std::string& targets, const Options& options) {
  require(options.kind() == OptionsKind::Lora, "LoRA options must be of kind lora, got ",
          options_kind_name(options.kind()));
  LoraConfig config = lora_option_table().read(options);
  const std::string parameters = trimmed(config.target_parameters_spec);
  if (!parameters.empty() && parameters.front() == '[') {
    config.set_target_parameters(parse_ordered_json_input(parameters, "target_parameters"));
  } else if (!parameters.empty()) {
    require(is_utf8(parameters), "target_parameters '", printable_utf8(parameters), "' is not valid UTF-8");
    config.set_target_parameters(nlohmann::ordered_json(split_trimmed(parameters, ',')));
  }
  const std::string text = trimmed(targets);
  // PEFT's target_modules None: the parameters alone.
  require(!text.empty() || !config.target_parameters.empty(),
          "target_modules is empty: name the linear layers to adapt (e.g. \"q_proj,v_proj\"), or the parameters "
          "(option target_parameters)");
  read_shared_settings(config, text);
  read_patterns_and_layers(config);
  const std::string tokens = trimmed(config.token_indices_spec);
  if (!tokens.empty() && (tokens.front() == '{' || tokens.front() == '['))
    config.set_token_indices(parse_ordered_json_input(tokens, "trainable_token_indices"));
  else if (!tokens.empty())
    config.set_token_indices(
        nlohmann::ordered_json(parse_integers(tokens, "trainable_token_indices", "token indices")));
  return config;
}

const OptionTable<LoraConfig>& road_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Road, [](OptionTable<L>& t) {
    t.bind("variant",
           "road_1 (one angle and scale per pair of outputs), road_2 (per output) or road_4 (per output and column "
           "of each rotation)",
           &L::road_variant)
        .one_of({"road_1", "road_2", "road_4"});
    t.bind("group_size",
           "outputs j and j + group_size / 2 of each group pair up; even, and a divisor of each layer's outputs",
           &L::road_group_size)
        .at_least(2)
        .at_most(kMaxLoraRank);
    t.bind("init_weights",
           "the angles start as zeros and the scales as ones, the layer unchanged (false: normal draws)",
           &L::road_init_weights);
    bind_modules_to_save(t);  // (PEFT's RoadConfig has no exclude_modules, bias or layer settings)
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& gralora_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Gralora, [](OptionTable<L>& t) {
    t.bind("r", "the rank of each layer's blocks together (each of the k x k blocks r / k)", &L::gralora_r)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("hybrid_r", "the rank of a plain LoRA pair beside the blocks (0: none)", &L::gralora_hybrid_r)
        .at_least(0)
        .at_most(kMaxLoraRank);
    t.bind("alpha", "the scaling is alpha / (r + hybrid_r)", &L::gralora_alpha)
        .at_least(-kMaxLoraAlpha)
        .at_most(kMaxLoraAlpha);
    t.bind("gralora_dropout", "dropout on each adapted layer's input to its branches", &L::dropout)
        .at_least(0)
        .at_most(1);
    t.bind("gralora_k", "the blocks each side of a layer is cut into (dividing r and the layer's sides)", &L::gralora_k)
        .at_least(1)
        .at_most(kMaxLoraRank);
    t.bind("fan_in_fan_out", "PEFT's flag for weights stored in x out; each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("bias", "which biases train beside the adapters: none, all, gralora_only (the adapted layers')", &L::bias)
        .one_of({"none", "all", "gralora_only"});
    t.bind("init_weights", "B starts as zeros, the layer unchanged (false: Kaiming draws)", &L::gralora_init_weights);
    bind_modules_to_save(t);  // (PEFT's GraloraConfig has no exclude_modules)
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

const OptionTable<LoraConfig>& hira_option_table() {
  using L = LoraConfig;
  static const OptionTable<L> table(OptionsKind::Hira, [](OptionTable<L>& t) {
    t.bind("r", "the rank of each layer's A and B", &L::hira_r).at_least(1).at_most(kMaxLoraRank);
    t.bind("hira_dropout", "dropout on each adapted layer's input to its branch", &L::dropout).at_least(0).at_most(1);
    t.bind("fan_in_fan_out", "PEFT's flag for weights stored in x out; each layer's kind decides, as in PEFT",
           &L::fan_in_fan_out);
    t.bind("init_weights",
           "true (A Kaiming draws, B zeros: the layer unchanged), gaussian in any case (A normal draws, B zeros) or "
           "false (A and B as torch.randn drew them)",
           &L::hira_init);  // (checked by LoraConfig::hira: PEFT takes "gaussian" in any case)
    t.bind("rank_pattern", "ranks of their own: a JSON object from module-name expressions to r",
           &L::rank_pattern_spec);
    bind_module_lists(t);  // (PEFT's HiraConfig has no bias)
    bind_layers(t);
    bind_texts(t);
  });
  return table;
}

LoraConfig LoraConfig::of_kind(const std::string& targets, const Options& options) {
  switch (options.kind()) {
    case OptionsKind::Ia3:
      return ia3(targets, options);
    case OptionsKind::Loha:
      return loha(targets, options);
    case OptionsKind::Lokr:
      return lokr(targets, options);
    case OptionsKind::Vera:
      return vera(targets, options);
    case OptionsKind::Oft:
      return oft(targets, options);
    case OptionsKind::Adalora:
      return adalora_config(targets, options);
    case OptionsKind::Boft:
      return boft(targets, options);
    case OptionsKind::Hra:
      return hra(targets, options);
    case OptionsKind::Fourierft:
      return fourierft(targets, options);
    case OptionsKind::LnTuning:
      return ln_tuning(targets, options);
    case OptionsKind::Miss:
      return miss(targets, options);
    case OptionsKind::C3a:
      return c3a(targets, options);
    case OptionsKind::Shira:
      return shira(targets, options);
    case OptionsKind::Randlora:
      return randlora(targets, options);
    case OptionsKind::Delora:
      return delora(targets, options);
    case OptionsKind::Road:
      return road(targets, options);
    case OptionsKind::Gralora:
      return gralora(targets, options);
    case OptionsKind::Hira:
      return hira(targets, options);
    case OptionsKind::Pvera:
      return pvera(targets, options);
    default:
      return from(targets, options);  // (which refuses a kind that is not lora)
  }
}

namespace {

// LoHa's or LoKr's configuration from `options` of their kind.
LoraConfig lycoris(PeftType method, const std::string& targets, const Options& options) {
  const bool lokr = method == PeftType::Lokr;
  LoraConfig config = method_options(lokr ? "LoKr" : "LoHa", lokr ? OptionsKind::Lokr : OptionsKind::Loha,
                                     lokr ? lokr_option_table() : loha_option_table(), method, options);
  read_method_targets(config, targets, "layers");
  return config;
}

}  // namespace

LoraConfig LoraConfig::loha(const std::string& targets, const Options& options) {
  return lycoris(PeftType::Loha, targets, options);
}

LoraConfig LoraConfig::lokr(const std::string& targets, const Options& options) {
  return lycoris(PeftType::Lokr, targets, options);
}

LoraConfig LoraConfig::oft(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("OFT", OptionsKind::Oft, oft_option_table(), PeftType::Oft, options);
  // PEFT's OFTConfig check: one of the two, not both.
  require((config.oft_r != 0) != (config.oft_block_size != 0), "OFT takes r or oft_block_size, one of them non-zero ",
          "and the other 0 (r x oft_block_size is the layer's input): got r ", config.oft_r, " and oft_block_size ",
          config.oft_block_size);
  read_method_targets(config, targets, "linear layers", "oft_only");
  return config;
}

LoraConfig LoraConfig::adalora_config(const std::string& targets, const Options& options) {
  LoraConfig config =
      method_options("AdaLoRA", OptionsKind::Adalora, adalora_option_table(), PeftType::Adalora, options);
  check_adalora_schedule(config.adalora);
  read_method_targets(config, targets, "layers");
  return config;
}

LoraConfig LoraConfig::boft(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("BOFT", OptionsKind::Boft, boft_option_table(), PeftType::Boft, options);
  // PEFT's BOFTConfig check: one of the two, not both.
  require((config.boft_block_size != 0) != (config.boft_block_num != 0), "BOFT takes boft_block_size or ",
          "boft_block_num, one of them non-zero and the other 0: got boft_block_size ", config.boft_block_size,
          " and boft_block_num ", config.boft_block_num);
  read_method_targets(config, targets, "layers", "boft_only");
  return config;
}

LoraConfig LoraConfig::hra(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("HRA", OptionsKind::Hra, hra_option_table(), PeftType::Hra, options);
  read_method_targets(config, targets, "layers", "hra_only");
  return config;
}

LoraConfig LoraConfig::fourierft(const std::string& targets, const Options& options) {
  LoraConfig config =
      method_options("FourierFT", OptionsKind::Fourierft, fourierft_option_table(), PeftType::Fourierft, options);
  read_size_pattern(config);
  read_method_targets(config, targets, "linear layers", "fourier_only");
  return config;
}

LoraConfig LoraConfig::c3a(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("C3A", OptionsKind::C3a, c3a_option_table(), PeftType::C3a, options);
  read_size_pattern(config);
  read_method_targets(config, targets, "linear layers", "c3a_only");
  return config;
}

LoraConfig LoraConfig::shira(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("SHiRA", OptionsKind::Shira, shira_option_table(), PeftType::Shira, options);
  config.r = config.shira_r;
  read_method_targets(config, targets, "linear layers");
  return config;
}

LoraConfig LoraConfig::randlora(const std::string& targets, const Options& options) {
  LoraConfig config =
      method_options("RandLoRA", OptionsKind::Randlora, randlora_option_table(), PeftType::Randlora, options);
  config.r = config.randlora_r;
  read_method_targets(config, targets, "linear layers", "randlora_only");
  return config;
}

LoraConfig LoraConfig::delora(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("DeLoRA", OptionsKind::Delora, delora_option_table(), PeftType::Delora, options);
  config.r = config.delora_r;
  config.alpha = config.delora_lambda;
  read_method_targets(config, targets, "linear layers", "delora_only");
  return config;
}

LoraConfig LoraConfig::road(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("RoAd", OptionsKind::Road, road_option_table(), PeftType::Road, options);
  // PEFT's RoadConfig check.
  require(config.road_group_size % 2 == 0, "RoAd's group_size must be even (its halves pair up), got ",
          config.road_group_size);
  read_method_targets(config, targets, "linear layers");
  return config;
}

LoraConfig LoraConfig::gralora(const std::string& targets, const Options& options) {
  LoraConfig config =
      method_options("GraLoRA", OptionsKind::Gralora, gralora_option_table(), PeftType::Gralora, options);
  config.r = config.gralora_r;
  config.alpha = config.gralora_alpha;
  // PEFT's GraloraConfig check.
  require(config.r % config.gralora_k == 0,
          "GraLoRA's r must be a multiple of gralora_k (each block's rank is r / k): ", "got r ", config.r,
          " and gralora_k ", config.gralora_k);
  read_method_targets(config, targets, "linear layers", "gralora_only");
  return config;
}

LoraConfig LoraConfig::hira(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("HiRA", OptionsKind::Hira, hira_option_table(), PeftType::Hira, options);
  config.r = config.hira_r;
  const std::string init = lowercase(config.hira_init);
  require(init == "true" || init == "false" || init == "gaussian",
          "HiRA's init_weights must be true, false or gaussian, got '", config.hira_init, "'");
  config.hira_init = init;
  read_method_targets(config, targets, "linear layers");
  return config;
}

LoraConfig LoraConfig::ln_tuning(const std::string& targets, const Options& options) {
  LoraConfig config =
      method_options("LN tuning", OptionsKind::LnTuning, ln_tuning_option_table(), PeftType::LnTuning, options);
  read_method_targets(config, targets, "modules to tune (e.g. \"input_layernorm,post_attention_layernorm\")");
  return config;
}

LoraConfig LoraConfig::miss(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("MiSS", OptionsKind::Miss, miss_option_table(), PeftType::Miss, options);
  config.r = config.miss_r;
  read_method_targets(config, targets, "linear layers", "MiSS_only");
  return config;
}

LoraConfig LoraConfig::vera(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("VeRA", OptionsKind::Vera, vera_option_table(), PeftType::Vera, options);
  config.r = config.vera_r;
  read_method_targets(config, targets, "linear layers", "vera_only");
  return config;
}

LoraConfig LoraConfig::pvera(const std::string& targets, const Options& options) {
  LoraConfig config = method_options("PVeRA", OptionsKind::Pvera, pvera_option_table(), PeftType::Pvera, options);
  config.r = config.vera_r;
  read_method_targets(config, targets, "linear layers", "pvera_only");
  return config;
}

namespace {

bool names_match(const std::vector<std::string>& names, const std::string& module) {
  for (const auto& name : names)
    if (module == name || ends_with(module, "." + name)) return true;
  return false;
}

}  // namespace

void LoraConfig::set_target_regex(const std::string& expression) {
  regex_matches = module_regex(expression, "target_modules");
  target_regex = expression;
}

void LoraConfig::set_feedforward_regex(const std::string& expression) {
  feedforward_matches = module_regex(expression, "feedforward_modules");
  feedforward_regex = expression;
}

void LoraConfig::check_feedforward_subset() const {
  if (!feedforward_regex.empty() || !target_regex.empty() || all_linear) return;  // PEFT checks two lists only
  for (const auto& name : feedforward_names)
    require(std::find(target_names.begin(), target_names.end(), name) != target_names.end(), "feedforward_modules '",
            name, "' is not among target_modules (", describe_targets(), "): PEFT's IA3Config wants a subset");
}

bool LoraConfig::is_feedforward(const std::string& module) const {
  if (feedforward_matches) return feedforward_matches(module);
  for (const auto& name : feedforward_names)
    if (ends_with(module, name)) return true;
  return false;
}

void LoraConfig::set_exclude_regex(const std::string& expression) {
  exclude_matches = module_regex(expression, "exclude_modules");
  exclude_regex = expression;
}

namespace {

// PEFT's get_pattern_key: `key` matches a module named it or ending in "." and it.
std::function<bool(const std::string&)> pattern_key_matcher(const std::string& key, const char* setting) {
  require(!key.empty(), setting, " has an empty module-name expression");
  require(is_utf8(key), setting, " '", printable_utf8(key), "' is not valid UTF-8");
  return module_regex("(.*\\.)?(" + key + ")", setting);
}

template <typename T>
const T* pattern_value(const std::vector<LoraConfig::Pattern<T>>& patterns, const std::string& module) {
  for (const auto& pattern : patterns)
    if (pattern.matches(module)) return &pattern.value;
  return nullptr;
}

}  // namespace

void LoraConfig::add_rank_pattern(const std::string& key, int64_t rank) {
  require(rank >= 1 && rank <= kMaxLoraRank, "rank_pattern's '", key, "' must be a rank from 1 to ", kMaxLoraRank,
          ", got ", rank);
  rank_pattern.push_back({key, rank, pattern_key_matcher(key, "rank_pattern")});
}

void LoraConfig::add_alpha_pattern(const std::string& key, double value) {
  // Either sign, as PEFT takes an alpha (and DeLoRA's lambda_pattern, a strength).
  const char* setting = alpha_pattern_setting();
  require(std::isfinite(value) && std::abs(value) <= kMaxLoraAlpha, setting, "'s '", key, "' must be ",
          peft_type == PeftType::Delora ? "a strength" : "an alpha", " in [", -kMaxLoraAlpha, ", ", kMaxLoraAlpha,
          "], got ", value);
  alpha_pattern.push_back({key, value, pattern_key_matcher(key, setting)});
}

void LoraConfig::add_patterns(const std::string& setting, const nlohmann::ordered_json& object) {
  require(object.is_object(), setting,
          " must be a JSON object from module-name expressions to values, e.g. {\"q_proj\": 16}");
  for (const auto& [key, value] : object.items()) {
    if (setting == "rank_pattern") {
      require(value.is_number_integer(), "rank_pattern's '", key, "' must be an integer rank");
      add_rank_pattern(key, value.get<int64_t>());
    } else {
      require(value.is_number(), setting, "'s '", key, "' must be a number");
      add_alpha_pattern(key, value.get<double>());
    }
  }
}

void LoraConfig::set_token_indices(const nlohmann::ordered_json& value, const char* setting) {
  auto indices_of = [setting](const std::string& key, const nlohmann::ordered_json& list) {
    const std::string where = key.empty() ? std::string() : " for '" + key + "'";
    require(list.is_array() && !list.empty(), setting, where, " must be a non-empty list of token ", "indices");
    std::vector<int64_t> out;
    for (const auto& index : list) {
      require(index.is_number_integer(), setting, where, " must hold integer token indices");
      out.push_back(index.get<int64_t>());
    }
    return out;
  };
  TokenIndices parsed;
  if (value.is_object()) {
    require(!value.empty(), setting, " is an empty object: name a module and its token indices");
    for (const auto& [key, list] : value.items()) {
      require(!key.empty() && is_utf8(key), setting, " has an empty or non-UTF-8 module name");
      parsed.emplace_back(key, indices_of(key, list));
    }
  } else {
    require(value.is_array(), setting, " must be a list of token indices or an object from module ",
            "names to such lists");
    parsed.emplace_back("", indices_of("", value));
  }
  token_indices = std::move(parsed);
}

void LoraConfig::set_standalone_indices(const nlohmann::ordered_json& value) {
  require(!value.is_object(), "token_indices must be a list of token indices");
  set_token_indices(value, "token_indices");
  standalone_indices = std::move(token_indices.front().second);
  token_indices.clear();
}

void LoraConfig::set_layers_pattern(std::vector<std::string> patterns) {
  layer_index_matchers.clear();
  for (const auto& pattern : patterns) {
    require(!pattern.empty(), "layers_pattern has an empty expression");
    require(is_utf8(pattern), "layers_pattern '", printable_utf8(pattern), "' is not valid UTF-8");
    // PEFT's re.match(rf".*?\.{pattern}\.(\d+)\.", name), matched here as a whole name; the
    // expression valid on its own first (a ")" in it would close the group it is put in).
    (void)module_regex(pattern, "layers_pattern");
    layer_index_matchers.push_back(module_regex_group("(?:.*?\\." + pattern + "\\.(\\d+)\\.).*", "layers_pattern"));
  }
  layers_pattern = std::move(patterns);
}

void LoraConfig::check_layer_settings(bool layers_to_transform_given) const {
  // PEFT's LoraConfig refuses these alike.
  require(target_regex.empty() || (!layers_to_transform_given && layers_pattern.empty()),
          "layers_to_transform and layers_pattern need target_modules as names, not a regular expression (",
          describe_targets(), ")");
  require(layers_pattern.empty() || layers_to_transform_given,
          "layers_pattern is set without layers_to_transform: name the layer numbers to adapt");
}

int64_t size_value(const nlohmann::ordered_json& value, const char* setting, const std::string& key) {
  require(!value.is_number_unsigned() || value.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), setting, "'s '",
          key, "' is ", value.get<uint64_t>(), ", past any size");
  return value.get<int64_t>();
}

std::string LoraConfig::peft_bias() const {
  if (bias != "lora_only") return bias;
  switch (peft_type) {
    case PeftType::Vera:
      return "vera_only";
    case PeftType::Pvera:
      return "pvera_only";
    case PeftType::Oft:
      return "oft_only";
    case PeftType::Boft:
      return "boft_only";
    case PeftType::Hra:
      return "hra_only";
    case PeftType::Fourierft:
      return "fourier_only";
    case PeftType::Miss:
      return "MiSS_only";
    case PeftType::C3a:
      return "c3a_only";
    case PeftType::Randlora:
      return "randlora_only";
    case PeftType::Delora:
      return "delora_only";
    case PeftType::Gralora:
      return "gralora_only";
    default:
      return bias;
  }
}

const char* LoraConfig::size_pattern_setting() const {
  return peft_type == PeftType::C3a ? "block_size_pattern" : "n_frequency_pattern";
}

void LoraConfig::add_size_pattern(const std::string& key, int64_t size) {
  const char* setting = size_pattern_setting();
  const int64_t most = peft_type == PeftType::C3a ? kMaxLoraRank : kMaxFrequencies;
  require(size >= 1 && size <= most, setting, "'s '", key, "' must be a size from 1 to ", most, ", got ", size);
  require(!key.empty() && is_utf8(key), setting, " has an empty or invalid key");
  // The expression PEFT compiles valid and cheap (module_regex's checks; PEFT's re.error), then PEFT's
  // re.match(".*\\.key$", name): anchored at the name's start only, each alternative of `key` apart.
  (void)module_regex(".*\\." + key + "$", setting);
  const auto expression = std::make_shared<const std::regex>(".*\\." + key + "$", std::regex::ECMAScript);
  size_pattern.push_back({key, size, [expression](const std::string& module) {
                            return std::regex_search(module, *expression, std::regex_constants::match_continuous);
                          }});
}

int64_t LoraConfig::size_of(const std::string& module, int64_t fallback) const {
  for (const auto& pattern : size_pattern)
    if (pattern.matches(module)) return pattern.value;
  for (const auto& pattern : size_pattern)
    if (pattern.key == module) return pattern.value;
  return fallback;
}

int64_t LoraConfig::rank_of(const std::string& module) const {
  const int64_t* value = pattern_value(rank_pattern, module);
  return value ? *value : r;
}

double LoraConfig::alpha_of(const std::string& module) const {
  const double* value = pattern_value(alpha_pattern, module);
  return value ? *value : alpha;
}

double LoraConfig::scaling_of(const std::string& module) const {
  const double rank = static_cast<double>(rank_of(module)), a = alpha_of(module);
  return use_rslora ? a / std::sqrt(rank) : a / rank;
}

std::optional<int64_t> LoraConfig::layer_index(const std::string& module) const {
  // Without layers_pattern, PEFT's re.match(r".*?\.[^.]*\.(\d+)\.", name): the first number that
  // follows a component after a dot and has a dot after it.
  std::optional<std::string> digits;
  if (layer_index_matchers.empty()) {
    const std::vector<std::string> parts = split_trimmed(module, '.');
    for (size_t k = 1; k + 2 < parts.size() && !digits; ++k)
      if (!parts[k + 1].empty() && parts[k + 1].find_first_not_of("0123456789") == std::string::npos)
        digits = parts[k + 1];
  } else {
    for (const auto& matcher : layer_index_matchers)
      if ((digits = matcher(module))) break;
  }
  if (!digits) return std::nullopt;
  return parse_integer(*digits);  // Python's int() has no bound; past int64's, no listed layer either
}

bool LoraConfig::targets(const std::string& module) const {
  // As PEFT's check_target_module_exists: an excluded module first, whatever the targets say, then
  // one inside a module to save (a name of the list as whole components of the module's name).
  if (exclude_matches ? exclude_matches(module) : names_match(exclude_names, module)) return false;
  const std::string dotted = "." + module + ".";
  for (const auto& saved : modules_to_save)
    if (dotted.find("." + saved + ".") != std::string::npos) return false;
  if (regex_matches) return regex_matches(module);
  // A module named exactly is adapted whatever its layer; one a name ends with, in the layers
  // layers_to_transform lists (PEFT's order of checks).
  if (std::find(target_names.begin(), target_names.end(), module) != target_names.end()) return true;
  if (!names_match(target_names, module)) return false;
  if (layers_to_transform.empty()) return true;
  const std::optional<int64_t> layer = layer_index(module);
  return layer &&
         std::find(layers_to_transform.begin(), layers_to_transform.end(), *layer) != layers_to_transform.end();
}

bool LoraConfig::is_all_linear(const std::string& text) { return lowercase(text) == "all-linear"; }

bool LoraConfig::targets_parameter(const std::string& name) const { return names_match(target_parameters, name); }

void LoraConfig::set_target_parameters(const nlohmann::ordered_json& value) {
  // PEFT takes a list (a string is its TypeError); its names need a module and a parameter.
  require(value.is_array(), "target_parameters must be a list of parameter names");
  std::vector<std::string> names;
  for (const auto& entry : value) {
    require(entry.is_string(), "target_parameters must hold parameter names");
    const std::string name = entry.get<std::string>();
    require(!name.empty(), "target_parameters has an empty name");
    require(is_utf8(name), "target_parameters '", printable_utf8(name), "' is not valid UTF-8");
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  target_parameters = std::move(names);
}

std::string LoraConfig::tuned_module(const std::string& name) const {
  if (peft_type != PeftType::LnTuning) return "";
  for (const auto& module : enclosing_modules(name))
    if (targets(module)) return module;
  return "";
}

bool LoraConfig::saves(const std::string& name) const { return !saving_module(name).empty(); }

std::string LoraConfig::saving_module(const std::string& name) const {
  std::string tuned = tuned_module(name);
  if (!tuned.empty()) return tuned;  // (LN tuning's modules train whole too)
  for (const auto& module : enclosing_modules(name))
    for (const auto& saved : modules_to_save)
      if (ends_with(module, saved)) return module;
  return "";
}

bool LoraConfig::trains_whole(const std::string& name, bool in_adapted_layer) const {
  if (saves(name)) return true;
  const bool is_bias = name == "bias" || ends_with(name, ".bias");
  return is_bias && (bias == "all" || (bias == "lora_only" && in_adapted_layer));
}

std::string LoraConfig::describe_targets() const {
  auto describe = [](const std::string& regex, const std::vector<std::string>& names) {
    if (!regex.empty()) return "re:" + regex;
    std::string out;
    for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
    return out;
  };
  const std::string excluded = describe(exclude_regex, exclude_names);
  return (all_linear ? std::string("all-linear") : describe(target_regex, target_names)) +
         (excluded.empty() ? "" : " except " + excluded);
}

std::string LoraConfig::describe_target_parameters() const {
  std::string out;
  for (const auto& name : target_parameters) out += (out.empty() ? "" : ",") + name;
  return out;
}

}  // namespace acc
