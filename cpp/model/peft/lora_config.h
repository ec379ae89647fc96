// PEFT's LoraConfig as this library reads it (ACC_OPTIONS_LORA, adapter_config.json): the targets,
// the modules trained whole, the per-module ranks and alphas, and which layers a name selects.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/option_table.h"

namespace at {
class Tensor;
}

namespace acc {

// The largest lora_alpha: float's largest, since the scaling multiplies float32 outputs.
constexpr double kMaxLoraAlpha = 3.4028234663852886e38;
constexpr int64_t kMaxLoraRank = 1 << 20;
// FourierFT's n_frequency at most (a spectrum of 2^31 entries; PEFT's randperm covers out x in).
constexpr int64_t kMaxFrequencies = int64_t{1} << 31;
// AdaLoRA's step settings at most: JSON's exact integers, as adapter_config.json is read back.
constexpr int64_t kMaxAdaloraSteps = int64_t{1} << 53;
constexpr int64_t kMaxLoftqIter = 10000;  // LoftQ's rounds, each an SVD (its paper takes 1 to 5)

// PEFT's trainable_token_indices: the module each list is for ("" for the model's input embedding:
// its first embedding layer) and the token indices, in their order (model/peft/trainable_tokens.h).
using TokenIndices = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// An adapter configuration's PEFT method (its peft_type): LoRA (with trainable token rows beside it
// or not), PEFT's TrainableTokensConfig (rows of embeddings trained alone), its IA3Config ((IA)^3:
// a trained vector scaling each targeted layer's output or input, model/peft/ia3.h), its LoHaConfig
// (a Hadamard product of two low-rank products added to the weight, model/peft/loha.h) or its
// LoKrConfig (a Kronecker product of two factors added to the weight, model/peft/lokr.h) or its
// VeraConfig (two trained vectors scaling frozen random projections shared by the layers,
// model/peft/vera.h) or its OFTConfig (each layer's input rotated block by block, model/peft/oft.h) or its
// AdaLoraConfig (LoRA in an SVD form whose ranks a budget prunes while it trains, model/peft/adalora.h)
// or its BOFTConfig (each layer's input rotated by butterfly factors of block rotations, model/peft/boft.h)
// or its HRAConfig (each layer's weight times Householder reflections, model/peft/hra.h) or its
// FourierFTConfig (a sparse spectrum of each layer's delta trained, model/peft/fourierft.h) or its
// LNTuningConfig (the targeted modules, layer norms, trained themselves: LoraConfig::tuned_module) or
// its MissConfig (one shard shared by each layer's input blocks, model/peft/miss.h) or its C3AConfig
// (each layer's delta a block circulant matrix, model/peft/c3a.h) or its ShiraConfig (entries of each
// weight trained at fixed places, model/peft/shira.h) or its RandLoraConfig (random bases shared by
// the layers, scaled by each layer's trained tensors, model/peft/randlora.h) or its DeloraConfig
// (a normalised low-rank delta of trained strength, model/peft/delora.h) or its RoadConfig (each
// layer's output rotated pair by pair and scaled, model/peft/road.h) or its GraloraConfig (each
// layer's delta cut into k x k blocks, each its own low-rank product, model/peft/gralora.h) or its
// HiraConfig (each layer's weight times a low-rank product, added to it, model/peft/hira.h) or its
// PveraConfig (VeRA's vectors giving a sampled middle, model/peft/pvera.h).
enum class PeftType {
  Lora,
  TrainableTokens,
  Ia3,
  Loha,
  Lokr,
  Vera,
  Oft,
  Adalora,
  Boft,
  Hra,
  Fourierft,
  LnTuning,
  Miss,
  C3a,
  Shira,
  Randlora,
  Delora,
  Road,
  Gralora,
  Hira,
  Pvera
};
// PEFT's peft_type as adapter_config.json writes it.
inline const char* peft_type_name(PeftType type) {
  switch (type) {
    case PeftType::Lora:
      return "LORA";
    case PeftType::Ia3:
      return "IA3";
    case PeftType::Loha:
      return "LOHA";
    case PeftType::Lokr:
      return "LOKR";
    case PeftType::Vera:
      return "VERA";
    case PeftType::Oft:
      return "OFT";
    case PeftType::Adalora:
      return "ADALORA";
    case PeftType::Boft:
      return "BOFT";
    case PeftType::Hra:
      return "HRA";
    case PeftType::Fourierft:
      return "FOURIERFT";
    case PeftType::LnTuning:
      return "LN_TUNING";
    case PeftType::Miss:
      return "MISS";
    case PeftType::C3a:
      return "C3A";
    case PeftType::Shira:
      return "SHIRA";
    case PeftType::Randlora:
      return "RANDLORA";
    case PeftType::Delora:
      return "DELORA";
    case PeftType::Road:
      return "ROAD";
    case PeftType::Gralora:
      return "GRALORA";
    case PeftType::Hira:
      return "HIRA";
    case PeftType::Pvera:
      return "PVERA";
    case PeftType::TrainableTokens:
      break;
  }
  return "TRAINABLE_TOKENS";
}

// The method's name as errors give it: "LoRA", "IA3", "LoHa", "LoKr", "trainable tokens".
inline const char* peft_method_name(PeftType type) {
  switch (type) {
    case PeftType::Lora:
      return "LoRA";
    case PeftType::Ia3:
      return "IA3";
    case PeftType::Loha:
      return "LoHa";
    case PeftType::Lokr:
      return "LoKr";
    case PeftType::Vera:
      return "VeRA";
    case PeftType::Oft:
      return "OFT";
    case PeftType::Adalora:
      return "AdaLoRA";
    case PeftType::Boft:
      return "BOFT";
    case PeftType::Hra:
      return "HRA";
    case PeftType::Fourierft:
      return "FourierFT";
    case PeftType::LnTuning:
      return "LN tuning";
    case PeftType::Miss:
      return "MiSS";
    case PeftType::C3a:
      return "C3A";
    case PeftType::Shira:
      return "SHiRA";
    case PeftType::Randlora:
      return "RandLoRA";
    case PeftType::Delora:
      return "DeLoRA";
    case PeftType::Road:
      return "RoAd";
    case PeftType::Gralora:
      return "GraLoRA";
    case PeftType::Hira:
      return "HiRA";
    case PeftType::Pvera:
      return "PVeRA";
    case PeftType::TrainableTokens:
      break;
  }
  return "trainable tokens";
}

struct CordaComponents;  // model/peft/corda.h
using CordaStarts = std::map<std::string, CordaComponents>;
// Each targeted layer's averaged weight gradient, as its weight is stored (model/peft/lora_ga.h).
using LoraGaGradients = std::map<std::string, at::Tensor>;

// PEFT's LoraGAConfig (init_lora_weights "lora_ga", model/peft/lora_ga.h): which of the gradient's 2 r
// singular vectors A and B take ("ArB2r": A the first r, B the next r; "A2rBr"; "ArBr": alternating;
// "random"), and how B is scaled ("stable": out^(1/4) / sqrt(stable_gamma); "weight_svd": the
// weight's largest singular value over B's first; "gd_scale": both divided by the scaling; "unit").
struct LoraGaConfig {
  std::string direction = "ArB2r";
  std::string scale = "stable";
  int64_t stable_gamma = 16;
};

// PEFT's LoftQConfig (init_lora_weights "loftq", model/peft/loftq.h): the bits of the quantisation (4:
// bitsandbytes' NF4, 8: its row-wise int8) and the alternating quantise-and-decompose rounds.
struct LoftqConfig {
  int64_t bits = 4;
  int64_t iter = 1;
};

// PEFT's EvaConfig (init_lora_weights "eva": Explained Variance Adaptation, model/peft/eva.h): rho bounds
// a layer's rank at r * rho, tau is the cosine similarity at which a layer's components count as
// converged, positions whose label is label_mask_value are left out (use_label_mask), whiten divides
// the components by the square roots of their singular values, adjust_scaling_factors keeps each
// layer's scaling when its rank changes (lora_alpha scaled with it).
struct EvaConfig {
  double rho = 2.0;
  double tau = 0.99;
  bool use_label_mask = true;
  int64_t label_mask_value = -100;
  bool whiten = false;
  bool adjust_scaling_factors = true;
};

// PEFT's AdaLoraConfig (peft_type Adalora, model/peft/adalora.h; lora_alpha, lora_dropout and the
// layer settings are LoRA's fields): every layer starts at rank init_r; after tinit steps the
// budget of ranks falls as a cubic to target_r per layer at total_step - tfinal, pruned every
// deltaT steps by the importance the RankAllocator smooths with beta1 and beta2; orth_reg_weight
// weighs the orthogonal regularization; init_lora_weights zeroes E and draws A and B from normal(0,
// 0.02) (false: torch.randn).
using AdaloraPattern = std::vector<std::pair<std::string, std::vector<bool>>>;  // by module, init_r flags each
struct AdaloraConfig {
  int64_t target_r = 8;
  int64_t init_r = 12;
  int64_t tinit = 0;
  int64_t tfinal = 0;
  int64_t delta_t = 1;
  double beta1 = 0.85;
  double beta2 = 0.85;
  double orth_reg_weight = 0.5;
  int64_t total_step = 0;  // PEFT's None: required
  bool init_weights = true;
  // PEFT's rank_pattern: the entries of each layer's E (over init_r) that the last pruning kept, or
  // that a file's layers hold; empty before either. Written to and read from the files.
  AdaloraPattern rank_pattern;
  // The pattern the adapters' tensors were cut to (a file's rank_pattern, PEFT's
  // resize_modules_by_rank_pattern): a layer of it holds the rows of its kept entries only, the
  // others all init_r rows. Pruning in memory zeroes entries and cuts nothing.
  AdaloraPattern held;
  // The entries of `module`'s E that rank_pattern keeps, or null where it has none for it.
  const std::vector<bool>* kept(const std::string& module) const;
  // The entries (of init_r) that `module`'s rows stand for: held's kept ones, else all.
  std::vector<int64_t> held_rows(const std::string& module) const;
};

// PEFT's LoraConfig. The ACC_OPTIONS_LORA keys fill the numbers and flags (lora_option_table); the
// target modules are an argument of their own.
struct LoraConfig {
  // PEFT's target_modules: module names (a module matches one if its name is it or ends with
  // "." + it), or one regular expression that must match a whole name (PEFT's string form).
  std::vector<std::string> target_names;
  std::string target_regex;                               // set with set_target_regex
  // PEFT's "all-linear" (any case): every linear layer (nn.Linear, transformers' Conv1D) but a
  // transformers model's output layer, which the model turns into target_names when adapters are
  // added (Model::with_all_linear), as PEFT writes them.
  bool all_linear = false;
  std::function<bool(const std::string&)> regex_matches;  // target_regex, compiled once
  // PEFT's exclude_modules, in the same two forms: a module they match gets no adapter.
  std::vector<std::string> exclude_names;
  std::string exclude_regex;
  std::function<bool(const std::string&)> exclude_matches;
  std::string exclude_spec;  // the option: names separated by commas, or "re:" and an expression
  // PEFT's target_parameters: parameters adapted themselves (its lora.ParamWrapper; a mixture of
  // experts' 3-D expert weights), each matching "<module>.<parameter>" or the end of that after a
  // dot. Adapted after target_modules' layers, in the model's order.
  std::vector<std::string> target_parameters;
  std::string target_parameters_spec;  // the option: names separated by commas, or PEFT's JSON list
  // PEFT's modules_to_save: modules trained whole beside the adapters (a classifier head) and saved
  // with them; a module matches a name its own name ends with, as in PEFT (no dot needed). A
  // task_type of SEQ_CLS or TOKEN_CLS adds PEFT's "classifier" and "score", QUESTION_ANS its
  // "qa_outputs", which may match nothing; names given that match nothing are an error.
  std::vector<std::string> modules_to_save;
  std::string modules_to_save_spec;    // the option: names separated by commas
  bool modules_to_save_given = false;  // by the option (a file's list is checked against its tensors)
  // PEFT's bias: "none", "all" (every parameter named "bias" or "*.bias" trains), "lora_only" (the
  // adapted layers' biases train); the biases that train are saved with the adapters.
  std::string bias = "none";
  // PEFT's layers_to_transform: with target_modules given as names, a module a name ends with (not
  // one named exactly) is adapted only in these layers: the number after the first component that
  // follows a dot ("model.layers.3.q_proj": 3), or after one that layers_pattern (PEFT's list of
  // regular expressions) matches. None: every layer.
  std::vector<int64_t> layers_to_transform;
  std::vector<std::string> layers_pattern;
  std::vector<std::function<std::optional<std::string>(const std::string&)>> layer_index_matchers;
  std::string layers_to_transform_spec, layers_pattern_spec;  // the options: numbers or names, by commas
  // PEFT's rank_pattern and alpha_pattern: regular expressions, in order, each matched against a
  // module's name or its end after a dot (PEFT's `(.*\.)?(key)$`), the first that matches giving
  // the module its own r or lora_alpha.
  template <typename T>
  struct Pattern {
    std::string key;
    T value;
    std::function<bool(const std::string&)> matches;
  };
  std::vector<Pattern<int64_t>> rank_pattern;
  std::vector<Pattern<double>> alpha_pattern;
  std::string rank_pattern_spec, alpha_pattern_spec;  // the options: JSON objects, as in adapter_config.json
  // FourierFT's n_frequency_pattern or C3A's block_size_pattern (size_pattern_setting), matched as
  // PEFT's FourierFTModel and C3AModel match them (size_of).
  std::vector<Pattern<int64_t>> size_pattern;
  std::string size_pattern_spec;
  // PEFT's trainable_token_indices: rows of embeddings that train beside the adapters, saved with
  // them (model/peft/trainable_tokens.h). Empty: none.
  TokenIndices token_indices;
  std::string token_indices_spec;  // the option: indices separated by commas, or PEFT's JSON list or object
  // PEFT's peft_type. For TrainableTokens (PEFT's TrainableTokensConfig) the target modules are
  // target_names / target_regex (none given: the model's input embedding, whose name is written as
  // PEFT writes it), every target trains the rows `standalone_indices`, which start as the rows
  // (PEFT's init_weights, `tokens_from_weights`) or as torch.randn draws; the LoRA fields are unused.
  PeftType peft_type = PeftType::Lora;
  std::vector<int64_t> standalone_indices;
  std::string standalone_indices_spec;  // the option token_indices: indices by commas, or a JSON list
  bool tokens_from_weights = true;
  // PEFT's IA3Config (peft_type Ia3): feedforward_modules, the targets whose vector scales their
  // input instead of their output, as names (PEFT's key.endswith(name): no dot needed) or one
  // regular expression matching a whole name; init_ia3_weights: the vectors start as ones (false:
  // as PEFT's torch.randn draws). The LoRA fields are unused.
  std::vector<std::string> feedforward_names;
  std::string feedforward_regex;
  std::function<bool(const std::string&)> feedforward_matches;
  std::string feedforward_spec;  // the option: names separated by commas, or "re:" and an expression
  bool init_ia3_weights = true;
  // PEFT's LoHaConfig (peft_type Loha; r, alpha, the patterns and layer settings are LoRA's fields):
  // in training, each output row of the delta is kept with probability 1 - rank_dropout (rescaled
  // by the kept fraction), and each layer's branch is left out with probability module_dropout;
  // init_weights draws w2_b as zeros (false: Kaiming-uniform as the others); use_effective_conv2d:
  // a convolution wider than 1 x 1 in PEFT's CP form (cores hada_t1, hada_t2).
  double rank_dropout = 0;
  double module_dropout = 0;
  bool use_effective_conv2d = false;
  bool loha_init_weights = true;
  // PEFT's LoKrConfig (peft_type Lokr; rank_dropout, module_dropout and use_effective_conv2d as
  // LoHa's, which LoKr builds for every kernel): w1 too is a rank-r product where r is below half its
  // larger side (decompose_both); the factorisation's divisor (decompose_factor, -1: near the square
  // root); the kept rows rescaled by their fraction (rank_dropout_scale); the draws ("true": w1 or
  // w1_a zero, "false": all drawn, "lycoris": w2 or w2_b zero).
  bool decompose_both = false;
  int64_t decompose_factor = -1;
  bool rank_dropout_scale = false;
  std::string lokr_init_weights = "true";
  // PEFT's VeraConfig (peft_type Vera; its vera_dropout is `dropout`, its bias `bias` with "vera_only"
  // as "lora_only"): the projections' rank (r, PEFT's default 256), drawn from a generator seeded
  // projection_prng_key and written to the adapter's files where save_projection; lambda_d starts
  // as d_initial and lambda_b as zeros (init_weights; false: torch.randn and ones).
  int64_t vera_r = 256;
  int64_t projection_prng_key = 0;
  bool save_projection = true;
  double d_initial = 0.1;
  bool vera_init_weights = true;
  // PEFT's PveraConfig (peft_type Pvera) takes VeRA's settings above (its pvera_dropout is `dropout`,
  // its bias "pvera_only") and these: whether evaluation samples too (sample_at_inference; else the
  // mean), and the seed of each layer's own generator for the samples (generator_seed; none: the
  // global generator).
  bool pvera_sample_at_inference = false;
  std::optional<int64_t> pvera_generator_seed;
  // PEFT's OFTConfig (peft_type Oft; its module_dropout is `module_dropout`, which PEFT's linear
  // forward does not apply): the blocks per layer (oft_r) or their size (oft_block_size, where oft_r
  // is 0), each adjusted to divide the input; coft's projection (eps); one rotation for all blocks
  // (block_share); the Cayley-Neumann series of num_cayley_neumann_terms terms, else the Cayley
  // transform by a solve; the weights zeros (oft_init_weights; false: normal(0, 0.1)).
  int64_t oft_r = 0;
  int64_t oft_block_size = 32;
  bool coft = false;
  double eps = 6e-5;
  bool block_share = false;
  bool use_cayley_neumann = true;
  int64_t num_cayley_neumann_terms = 5;
  bool oft_init_weights = true;
  AdaloraConfig adalora;
  // PEFT's BOFTConfig (peft_type Boft; its boft_dropout is `dropout`, its bias `bias` with
  // "boft_only" as "lora_only"): the blocks' size or their number (one of them 0), the butterfly's
  // factors (1: one block diagonal), the weights zeros and ones (init_weights; false: normal draws).
  int64_t boft_block_size = 4;
  int64_t boft_block_num = 0;
  int64_t boft_n_butterfly_factor = 1;
  bool boft_init_weights = true;
  // PEFT's HRAConfig (peft_type Hra; its r is `r`, its bias `bias` with "hra_only" as "lora_only"):
  // the reflections orthonormalised by Gram-Schmidt (apply_GS), and drawn in equal pairs (init_weights).
  bool hra_apply_gs = false;
  bool hra_init_weights = true;
  // PEFT's FourierFTConfig (peft_type Fourierft; its bias `bias` with "fourier_only" as
  // "lora_only"): each layer's trained spectrum entries (n_frequency_pattern's for the modules it
  // names), the seed of their places, the delta's scaling, the spectrum zeros (init_weights) or randn.
  int64_t n_frequency = 1000;
  double fourier_scaling = 150.0;
  int64_t random_loc_seed = 777;
  bool fourier_init_weights = false;
  // PEFT's C3AConfig (peft_type C3a; its bias `bias` with "c3a_only" as "lora_only"): each layer's
  // circulant blocks' size (block_size_pattern's for the modules it names) and the kernel's start
  // ("xavier_uniform", PEFT's default and its false, "kaiming_uniform", "gaussian", or "true": zeros).
  int64_t c3a_block_size = 256;
  std::string c3a_init = "xavier_uniform";
  // PEFT's ShiraConfig (peft_type Shira; its r is `r`, taken from shira_r, PEFT's default): r (in +
  // out) entries of each layer's weight train at places its mask function picks ("random": from a
  // generator seeded random_seed, or a new generator's default seed where none is given), starting
  // as zeros (init_weights) or torch.randn draws.
  int64_t shira_r = 32;
  std::string shira_mask_type = "random";
  std::optional<int64_t> shira_random_seed;
  bool shira_init_weights = true;
  // PEFT's RandLoraConfig (peft_type Randlora; its r is `r`, taken from randlora_r, PEFT's default;
  // its randlora_dropout `dropout`, its bias `bias` with "randlora_only" as "lora_only"; the bases
  // drawn from projection_prng_key and saved where save_projection, as VeRA's): the scaling is
  // randlora_alpha / r; the bases are Kaiming draws, or ternary sparse ones.
  int64_t randlora_r = 32;
  double randlora_alpha = 640.0;
  bool randlora_sparse = false;
  bool randlora_very_sparse = false;
  bool randlora_init_weights = true;
  // PEFT's DeloraConfig (peft_type Delora; its r is `r`, taken from delora_r, its rank_pattern
  // rank_pattern; its delora_lambda `alpha`, taken from delora_lambda, its lambda_pattern
  // alpha_pattern; its module_dropout `dropout`, its bias `bias` with "delora_only" as "lora_only"):
  // B starts as zeros (init_weights) or Kaiming draws.
  int64_t delora_r = 8;
  double delora_lambda = 15.0;
  bool delora_init_weights = true;
  // PEFT's RoadConfig (peft_type Road): the variant (road_1: one angle and scale per pair of outputs,
  // road_2: per output, road_4: per output and column of the rotation), the groups whose halves pair
  // up, and whether the angles start as zeros and the scales as ones (else normal draws).
  std::string road_variant = "road_1";
  int64_t road_group_size = 64;
  bool road_init_weights = true;
  // PEFT's GraloraConfig (peft_type Gralora; its r is `r`, taken from gralora_r, PEFT's default; its
  // gralora_dropout `dropout`, its bias `bias` with "gralora_only" as "lora_only"): the blocks per
  // side (k, dividing r and each layer's sides), the plain LoRA pair's rank beside them, alpha (the
  // scaling is alpha / (r + hybrid_r)), and B's start (zeros, or Kaiming draws).
  int64_t gralora_r = 32;
  int64_t gralora_hybrid_r = 0;
  double gralora_alpha = 64;
  int64_t gralora_k = 2;
  bool gralora_init_weights = true;
  // PEFT's HiraConfig (peft_type Hira; its r is `r`, taken from hira_r, PEFT's default, its
  // rank_pattern rank_pattern; its hira_dropout `dropout`): A's start, "true" (Kaiming draws, B
  // zeros), "gaussian" (normal draws, B zeros) or "false" (A and B as torch.randn drew them).
  int64_t hira_r = 32;
  std::string hira_init = "true";
  // PEFT's MissConfig (peft_type Miss; its r is `r`, taken from miss_r, PEFT's default; its
  // miss_dropout `dropout`, its bias `bias` with "MiSS_only" as "lora_only"): the variant, PEFT's
  // init_weights ("true": zeros, "false": Kaiming draws, "bat", "mini"), and mini's shard width along
  // the outputs.
  int64_t miss_r = 64;
  std::string miss_init = "true";
  int64_t miss_mini_r = 1;
  int64_t r = 8;
  double alpha = 8;
  double dropout = 0;
  bool use_rslora = false;  // scaling alpha / sqrt(r) instead of alpha / r
  // PEFT's: the targets' weights are in x out (transformers' Conv1D). Each layer's kind decides, as
  // in PEFT, which sets this to the last adapted linear layer's kind (written so to adapter_config.json).
  bool fan_in_fan_out = false;
  // PEFT's use_dora (DoRA, Liu et al. 2024): each adapted layer also trains a magnitude per output,
  // m, and computes with m * (W + (B A) * scaling) / ||W + (B A) * scaling|| (row norms, not
  // differentiated), as PEFT's DoraLinearLayer does.
  bool use_dora = false;
  // PEFT's lora_bias: lora_B has a bias too (PEFT's use: adapters extracted from a full fine-tune),
  // added to the branch before the scaling; merging adds it, scaled, to the layer's bias.
  bool lora_bias = false;
  // PEFT's init_lora_weights: "true" (Kaiming A, zero B), "gaussian", "false"; read from files also
  // "eva" and "orthogonal" (initialisations the loaded weights replace, kept for the next save).
  std::string init = "true";
  EvaConfig eva;  // PEFT's eva_config, used (and written to adapter_config.json) with init "eva"
  // PEFT's corda_config (init "corda", Model::add_lora_corda): "ipm" or "kpm", and whether the
  // inputs' covariance is summed in their own dtype instead of float32.
  std::string corda_method = "ipm";
  bool corda_use_float16_for_covariance = false;
  // The components CorDA computed for each targeted layer (model/peft/corda.h), which add() starts the
  // adapters from; only while they are added (the adapters' configuration drops them).
  std::shared_ptr<const CordaStarts> corda;
  // PEFT's lora_ga_config (init "lora_ga", Model::begin_lora_ga / add_lora_ga), and the gradients
  // add() starts the adapters from, only while they are added; a layer without one (adapters read
  // from a file) starts as with "true", as PEFT's lora_ga_init falls back.
  LoraGaConfig lora_ga;
  LoftqConfig loftq;  // PEFT's loftq_config, used (and written) with init "loftq"
  // PEFT's ensure_weight_tying: the adapters (or modules to save) of layers whose weights are tied
  // share one set. Read from files and written back; where it would tie something (a tied layer
  // adapted, or modules to save on a model with tied layers), LoraAdapters::add refuses it (not built).
  bool ensure_weight_tying = false;
  std::shared_ptr<const LoraGaGradients> lora_ga_gradients;
  // Kept in adapter_config.json for PEFT's AutoPeftModel (which base model, which class); "" is null.
  std::string base_model_name_or_path, revision, task_type;

  // `targets`: names separated by commas, or "re:" followed by a regular expression; `options` of
  // kind lora.
  static LoraConfig from(const std::string& targets, const Options& options);
  // PEFT's TrainableTokensConfig: `targets` as above, or empty for the model's input embedding;
  // `options` of kind trainable_tokens.
  static LoraConfig trainable_tokens(const std::string& targets, const Options& options);
  // PEFT's IA3Config: `targets` as above (or "all-linear"), `options` of kind ia3.
  static LoraConfig ia3(const std::string& targets, const Options& options);
  // PEFT's LoHaConfig: `targets` as above, `options` of kind loha.
  static LoraConfig loha(const std::string& targets, const Options& options);
  // PEFT's LoKrConfig: `targets` as above, `options` of kind lokr.
  static LoraConfig lokr(const std::string& targets, const Options& options);
  // PEFT's VeraConfig: `targets` as above (or "all-linear"), `options` of kind vera.
  static LoraConfig vera(const std::string& targets, const Options& options);
  // PEFT's OFTConfig: `targets` as above (or "all-linear"), `options` of kind oft.
  static LoraConfig oft(const std::string& targets, const Options& options);
  // PEFT's AdaLoraConfig: `targets` as above (or "all-linear"), `options` of kind adalora.
  static LoraConfig adalora_config(const std::string& targets, const Options& options);
  // PEFT's BOFTConfig: `targets` as above (or "all-linear"), `options` of kind boft.
  static LoraConfig boft(const std::string& targets, const Options& options);
  // PEFT's HRAConfig: `targets` as above (or "all-linear"), `options` of kind hra.
  static LoraConfig hra(const std::string& targets, const Options& options);
  // PEFT's FourierFTConfig: `targets` as above (or "all-linear"), `options` of kind fourierft.
  static LoraConfig fourierft(const std::string& targets, const Options& options);
  // PEFT's MissConfig: `targets` as above (or "all-linear"), `options` of kind miss.
  static LoraConfig miss(const std::string& targets, const Options& options);
  // PEFT's C3AConfig: `targets` as above (or "all-linear"), `options` of kind c3a.
  static LoraConfig c3a(const std::string& targets, const Options& options);
  // PEFT's ShiraConfig: `targets` as above (or "all-linear"), `options` of kind shira.
  static LoraConfig shira(const std::string& targets, const Options& options);
  // PEFT's RandLoraConfig: `targets` as above (or "all-linear"), `options` of kind randlora.
  static LoraConfig randlora(const std::string& targets, const Options& options);
  // PEFT's DeloraConfig: `targets` as above (or "all-linear"), `options` of kind delora.
  static LoraConfig delora(const std::string& targets, const Options& options);
  // PEFT's RoadConfig: `targets` as above (or "all-linear"), `options` of kind road.
  static LoraConfig road(const std::string& targets, const Options& options);
  // PEFT's GraloraConfig: `targets` as above (or "all-linear"), `options` of kind gralora.
  static LoraConfig gralora(const std::string& targets, const Options& options);
  // PEFT's HiraConfig: `targets` as above (or "all-linear"), `options` of kind hira.
  static LoraConfig hira(const std::string& targets, const Options& options);
  // PEFT's PveraConfig: `targets` as above (or "all-linear"), `options` of kind pvera.
  static LoraConfig pvera(const std::string& targets, const Options& options);
  // PEFT's LNTuningConfig: `targets` the modules trained themselves, `options` of kind ln_tuning.
  static LoraConfig ln_tuning(const std::string& targets, const Options& options);
  // The configuration of the method `options` are for: lora, ia3, loha, lokr or vera (PEFT's
  // add_adapter takes any).
  static LoraConfig of_kind(const std::string& targets, const Options& options);
  // An invalid expression is an InvalidArgument error naming it.
  void set_target_regex(const std::string& expression);
  void set_feedforward_regex(const std::string& expression);
  // PEFT's IA3Config check: feedforward_modules given as names must be among target_modules' names.
  void check_feedforward_subset() const;
  // Whether an IA3 target's vector scales its input (PEFT's _check_target_module_feedforward).
  bool is_feedforward(const std::string& module) const;
  void set_exclude_regex(const std::string& expression);
  // Appends to rank_pattern / alpha_pattern, checking the value and the expression (InvalidArgument).
  void add_rank_pattern(const std::string& key, int64_t rank);
  void add_alpha_pattern(const std::string& key, double alpha);
  // PEFT's `setting` ("rank_pattern" or "alpha_pattern") from its JSON object, entries in order.
  void add_patterns(const std::string& setting, const nlohmann::ordered_json& object);
  // Sets token_indices from PEFT's JSON form: a list of indices (for the input embedding) or an
  // object from module names to such lists (InvalidArgument otherwise, naming `setting`).
  void set_token_indices(const nlohmann::ordered_json& value, const char* setting = "trainable_token_indices");
  // Sets standalone_indices (TrainableTokensConfig's token_indices) from PEFT's JSON list.
  void set_standalone_indices(const nlohmann::ordered_json& value);
  // Sets layers_pattern, compiling each expression; checks that the layer settings go together.
  void set_layers_pattern(std::vector<std::string> patterns);
  void check_layer_settings(bool layers_to_transform_given) const;
  // The layer number PEFT reads from a module's name for layers_to_transform (none: no number).
  std::optional<int64_t> layer_index(const std::string& module) const;
  // A module's rank, lora_alpha and scaling (lora_alpha / r, or / sqrt(r) with use_rslora), its
  // patterns applied.
  int64_t rank_of(const std::string& module) const;
  // A size of the module's own, as PEFT's FourierFTModel and C3AModel find it: the first
  // size_pattern key whose `.*\.key$` matches the name from its start (re.match), else the key equal
  // to the name, else `fallback`. FourierFT's n_frequency and C3A's block_size so. Adding a key
  // checks it and its size (InvalidArgument, naming the method's setting).
  int64_t size_of(const std::string& module, int64_t fallback) const;
  int64_t n_frequency_of(const std::string& module) const { return size_of(module, n_frequency); }
  int64_t block_size_of(const std::string& module) const { return size_of(module, c3a_block_size); }
  void add_size_pattern(const std::string& key, int64_t size);
  // The bias setting as the method's PEFT config writes it: "lora_only" under the method's own
  // name ("hra_only", "MiSS_only", ...).
  std::string peft_bias() const;
  // The setting size_pattern is: "block_size_pattern" for C3A, else "n_frequency_pattern".
  const char* size_pattern_setting() const;
  // The setting alpha_pattern is: DeLoRA's "lambda_pattern", else "alpha_pattern".
  const char* alpha_pattern_setting() const {
    return peft_type == PeftType::Delora ? "lambda_pattern" : "alpha_pattern";
  }
  double alpha_of(const std::string& module) const;
  double scaling_of(const std::string& module) const;
  // Whether the config adapts `module`: not excluded, not inside a module to save (PEFT leaves those
  // whole), and named by the targets.
  bool targets(const std::string& module) const;
  // Whether `text` (target_modules) is PEFT's "all-linear" shorthand.
  static bool is_all_linear(const std::string& text);
  // Whether target_parameters names the parameter `name` ("<module>.<parameter>").
  bool targets_parameter(const std::string& name) const;
  // Sets target_parameters from PEFT's JSON list (InvalidArgument otherwise, naming `setting`).
  void set_target_parameters(const nlohmann::ordered_json& value);
  // Whether the parameter or buffer `name` lies in a module modules_to_save names (the module or
  // one of its submodules), PEFT's ModulesToSaveWrapper around it.
  bool saves(const std::string& name) const;
  // The module that makes `name` train whole: LN tuning's (tuned_module) or the outermost enclosing
  // module modules_to_save names; empty where none does.
  std::string saving_module(const std::string& name) const;
  // LN tuning's: the targeted module that encloses the parameter or buffer `name` (PEFT trains a
  // copy of it; here it trains in place, kept as a module to save is), empty where none does or the
  // method is another. The outermost where several do (PEFT's wrapping of both fails: refused
  // when adding).
  std::string tuned_module(const std::string& name) const;
  // Whether some of the model's own tensors train whole beside the adapters (modules to save, the
  // biases bias trains, LN tuning's modules).
  bool trains_modules_whole() const {
    return !modules_to_save.empty() || bias != "none" || peft_type == PeftType::LnTuning;
  }
  // Whether the parameter `name` trains beside the adapters and is saved with them: in a module to
  // save, or a bias the bias setting trains. `adapted`: whether its module is an adapted layer.
  bool trains_whole(const std::string& name, bool in_adapted_layer) const;
  std::string describe_targets() const;
  std::string describe_target_parameters() const;
};

// PEFT's TaskType values, the task_type its configurations take (any other is its ValueError).
const std::vector<std::string>& peft_task_types();

const OptionTable<LoraConfig>& lora_option_table();
const OptionTable<LoraConfig>& trainable_tokens_option_table();
const OptionTable<LoraConfig>& ia3_option_table();
const OptionTable<LoraConfig>& loha_option_table();
const OptionTable<LoraConfig>& lokr_option_table();
const OptionTable<LoraConfig>& vera_option_table();
const OptionTable<LoraConfig>& oft_option_table();
const OptionTable<LoraConfig>& adalora_option_table();
const OptionTable<LoraConfig>& boft_option_table();
const OptionTable<LoraConfig>& hra_option_table();
const OptionTable<LoraConfig>& fourierft_option_table();
const OptionTable<LoraConfig>& miss_option_table();
const OptionTable<LoraConfig>& c3a_option_table();
const OptionTable<LoraConfig>& shira_option_table();
const OptionTable<LoraConfig>& randlora_option_table();
const OptionTable<LoraConfig>& delora_option_table();
const OptionTable<LoraConfig>& road_option_table();
const OptionTable<LoraConfig>& gralora_option_table();
const OptionTable<LoraConfig>& hira_option_table();
const OptionTable<LoraConfig>& pvera_option_table();
// A JSON integer as the size pattern `setting`'s value for `key`; one past int64's range is refused
// (InvalidArgument, naming it as given).
int64_t size_value(const nlohmann::ordered_json& value, const char* setting, const std::string& key);
const OptionTable<LoraConfig>& ln_tuning_option_table();
// Fails (InvalidArgument, naming the setting) where PEFT's AdaLoraConfig would refuse `config`'s
// schedule: total_step below 1, tinit not before total_step - tfinal, betas outside (0, 1).
void check_adalora_schedule(const AdaloraConfig& config);

}  // namespace acc
