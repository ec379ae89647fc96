#include "model/peft/factor_methods.h"

#include <array>

#include "common/error.h"
#include "model/peft/adalora.h"
#include "model/peft/boft.h"
#include "model/peft/c3a.h"
#include "model/peft/delora.h"
#include "model/peft/fourierft.h"
#include "model/peft/gralora.h"
#include "model/peft/hira.h"
#include "model/peft/hra.h"
#include "model/peft/lycoris.h"
#include "model/peft/miss.h"
#include "model/peft/oft.h"
#include "model/peft/pvera.h"
#include "model/peft/randlora.h"
#include "model/peft/road.h"
#include "model/peft/shira.h"
#include "model/peft/vera.h"

namespace acc {
namespace {

// A file's tensor must be floating-point with `dims` dimensions; `what` says what it holds.
std::string refusal_unless(const at::Tensor& tensor, int64_t dims, const std::string& what) {
  if (tensor.is_floating_point() && tensor.dim() == dims) return "";
  return "must be a " + std::to_string(dims) + "-D floating-point tensor (" + what + ")";
}

std::string rank_decides(const LoraConfig& config, const std::string& module) {
  return "r " + concat(config.rank_of(module));
}

FactorMethod lycoris(PeftType type, const char* adaptable) {
  return {type,
          adaptable,
          lycoris_suffixes(type),
          "factors",
          [](const std::string&, const at::Tensor& t) -> std::string {
            if (t.is_floating_point() && t.dim() >= 2 && t.dim() <= 4) return "";
            return std::string("must be a floating-point tensor of 2 to 4 dimensions (LoHa's and LoKr's factors)");
          },
          /*files_hold_every_tensor=*/false,
          /*files_hold_biases=*/false,
          /*rank_and_scaling=*/true,
          make_lycoris_adapters,
          lycoris_factor_shapes,
          rank_decides,
          [](const LoraConfig&) { return std::string(); },
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config) {
            return (w + lycoris_delta(config.peft_type, factors, adapter.scaling, w.sizes())).to(w.scalar_type());
          },
          lycoris_output_adapter,
          nullptr};
}

FactorMethod vera() {
  return {
      PeftType::Vera,
      "VeRA adapts linear layers (transformers' Conv1D too)",
      {kVeraLambdaB, kVeraLambdaD},
      "vectors",
      [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 1, "VeRA's vectors"); },
      /*files_hold_every_tensor=*/true,
      /*files_hold_biases=*/true,
      /*rank_and_scaling=*/false,
      make_vera_adapters,
      vera_factor_shapes,
      rank_decides,
      // The same projections: the same seed and rank everywhere, saved or not alike (PEFT's check).
      [](const LoraConfig& config) {
        return "r " + concat(config.r) + ", projection_prng_key " + concat(config.projection_prng_key) +
               " and save_projection " + (config.save_projection ? "true" : "false");
      },
      [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
        const int64_t in = as_linear_layout(adapter.site, w).size(1);
        return (w + vera_delta(adapter, factor_named(factors, kVeraLambdaB), factor_named(factors, kVeraLambdaD), in))
            .to(w.scalar_type());
      },
      [](const LoraAdapter& adapter, const LoraConfig& config, std::shared_ptr<const bool> enabled) {
        return vera_output_adapter(adapter, config.dropout, std::move(enabled));
      },
      nullptr};
}

FactorMethod pvera() {
  return {PeftType::Pvera,
          "PVeRA adapts linear layers (transformers' Conv1D too)",
          {kPveraLambdaB, kPveraLambdaD},
          "vectors",
          [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 1, "PVeRA's vectors"); },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_pvera_adapters,
          pvera_factor_shapes,
          rank_decides,
          // VeRA's (the same projections), and whether evaluation samples.
          [](const LoraConfig& config) {
            return "r " + concat(config.r) + ", projection_prng_key " + concat(config.projection_prng_key) +
                   ", save_projection " + (config.save_projection ? "true" : "false") + " and sample_at_inference " +
                   (config.pvera_sample_at_inference ? "true" : "false");
          },
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
            return pvera_merged_weight(adapter, w, factors);
          },
          pvera_output_adapter,
          nullptr};
}

FactorMethod oft() {
  return {
      PeftType::Oft,
      "OFT adapts linear layers",
      {kOftSuffix},
      "factors",
      [](const std::string&, const at::Tensor& t) {
        return refusal_unless(t, 2, "OFT's rotations: blocks x block (block - 1) / 2");
      },
      /*files_hold_every_tensor=*/true,
      /*files_hold_biases=*/true,
      /*rank_and_scaling=*/false,
      make_oft_adapters,
      oft_factor_shapes,
      [](const LoraConfig& config, const std::string&) {
        return "r " + concat(config.oft_r) + " and oft_block_size " + concat(config.oft_block_size);
      },
      // The same rotations from the same weights.
      [](const LoraConfig& config) {
        return std::string("coft ") + (config.coft ? "true (eps " + concat(config.eps) + ")" : "false") +
               " and use_cayley_neumann " +
               (config.use_cayley_neumann ? "true (" + concat(config.num_cayley_neumann_terms) + " terms)" : "false");
      },
      // (coft projects the weight in place, as PEFT's merge does)
      [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config) {
        return oft_merged_weight(w, adapter, factor_named(factors, kOftSuffix), OftRotation::of(config));
      },
      // PEFT's forward returns the layer's output in its input's dtype (under autocast too).
      [](const LoraAdapter&, const LoraConfig&, std::shared_ptr<const bool>) -> OutputAdapter {
        return [](const at::Tensor& input, const at::Tensor& output, bool) { return output.to(input.scalar_type()); };
      },
      [](const LoraAdapter& adapter, const LoraConfig& config, std::shared_ptr<const bool> enabled) {
        return oft_input_adapter(adapter, OftRotation::of(config), std::move(enabled));
      }};
}

FactorMethod adalora() {
  return {PeftType::Adalora,
          "AdaLoRA adapts linear layers (transformers' Conv1D too) and 2-D convolutions",
          {kAdaloraA, kAdaloraB, kAdaloraE},
          "factors",
          [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 2, "AdaLoRA's A, B and E"); },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_adalora_adapters,
          adalora_factor_shapes,
          [](const LoraConfig& config, const std::string&) {
            return "init_r " + concat(config.adalora.init_r) + " and its rank_pattern";
          },
          // The same scaling (lora_alpha over ranknum, init_r).
          [](const LoraConfig& config) {
            return "init_r " + concat(config.adalora.init_r) + " and lora_alpha " + concat(config.alpha);
          },
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
            return (w + adalora_delta(adapter, factors, w.sizes())).to(w.scalar_type());
          },
          [](const LoraAdapter& adapter, const LoraConfig& config, std::shared_ptr<const bool> enabled) {
            return adalora_output_adapter(adapter, config.dropout, std::move(enabled));
          },
          nullptr};
}

FactorMethod boft() {
  return {PeftType::Boft,
          "BOFT adapts linear layers and 2-D convolutions",
          {kBoftR, kBoftS},
          "factors",
          [](const std::string& suffix, const at::Tensor& t) {
            return suffix == kBoftR ? refusal_unless(t, 4, "BOFT's boft_R: factors x blocks x block x block")
                                    : refusal_unless(t, 2, "BOFT's boft_s: out x 1");
          },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_boft_adapters,
          boft_factor_shapes,
          [](const LoraConfig& config, const std::string&) {
            return "boft_block_size " + concat(config.boft_block_size) + ", boft_block_num " +
                   concat(config.boft_block_num) + " and boft_n_butterfly_factor " +
                   concat(config.boft_n_butterfly_factor);
          },
          [](const LoraConfig&) { return std::string(); },
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
            return boft_merged_weight(w, adapter, factor_named(factors, kBoftR), factor_named(factors, kBoftS));
          },
          [](const LoraAdapter& adapter, const LoraConfig& config, std::shared_ptr<const bool> enabled) {
            return boft_output_adapter(adapter, config.dropout, std::move(enabled));
          },
          [](const LoraAdapter& adapter, const LoraConfig& config, std::shared_ptr<const bool> enabled) {
            return boft_input_adapter(adapter, config.dropout, std::move(enabled));
          }};
}

FactorMethod hra() {
  return {PeftType::Hra,
          "HRA adapts linear layers and 2-D convolutions",
          {kHraU},
          "factors",
          [](const std::string&, const at::Tensor& t) {
            return refusal_unless(t, 2, "HRA's hra_u: in x r, a convolution's in * kernel^2 x r");
          },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_hra_adapters,
          hra_factor_shapes,
          rank_decides,
          [](const LoraConfig& config) { return std::string("apply_GS ") + (config.hra_apply_gs ? "true" : "false"); },
          [](const LoraAdapter&, const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config) {
            return hra_merged_weight(w, factor_named(factors, kHraU), config.hra_apply_gs);
          },
          [](const LoraAdapter& adapter, const LoraConfig& config, std::shared_ptr<const bool> enabled) {
            return hra_output_adapter(adapter, config.hra_apply_gs, std::move(enabled));
          },
          nullptr};
}

FactorMethod fourierft() {
  return {PeftType::Fourierft,
          "FourierFT adapts linear layers (transformers' Conv1D too)",
          {kFourierSpectrum},
          "factors",
          [](const std::string&, const at::Tensor& t) {
            return refusal_unless(t, 1, "FourierFT's spectrum: n_frequency entries");
          },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_fourierft_adapters,
          fourierft_factor_shapes,
          [](const LoraConfig& config, const std::string& module) {
            return "n_frequency " + concat(config.n_frequency_of(module));
          },
          // The same places and scaling.
          [](const LoraConfig& config) {
            return "scaling " + concat(config.fourier_scaling) + " and random_loc_seed " +
                   concat(config.random_loc_seed);
          },
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config) {
            const at::Tensor linear = as_linear_layout(adapter.site, w);  // out x in
            const at::Tensor delta =
                fourierft_delta(factor_named(factors, kFourierSpectrum), linear.size(0), linear.size(1), config);
            return (w + as_linear_layout(adapter.site, delta)).to(w.scalar_type());
          },
          fourierft_output_adapter,
          nullptr};
}

FactorMethod miss() {
  return {PeftType::Miss,
          "MiSS adapts linear layers",
          {kMissBlock},
          "factors",
          [](const std::string&, const at::Tensor& t) -> std::string {
            if (t.is_floating_point() && (t.dim() == 2 || t.dim() == 3)) return "";
            return "must be a floating-point tensor of 2 dimensions (MiSS's r x out or r x mini_r shard) or 3 "
                   "(\"bat\"'s out/r x r x r)";
          },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_miss_adapters,
          miss_factor_shapes,
          [](const LoraConfig& config, const std::string&) {
            return "r " + concat(config.r) + " and init_weights " + config.miss_init +
                   (config.miss_init == "mini" ? " (mini_r " + concat(config.miss_mini_r) + ")" : "");
          },
          // "bat" computes with the weight's blocks, the others add the shard's branch.
          [](const LoraConfig& config) {
            return std::string(config.miss_init == "bat" ? "init_weights bat" : "init_weights other than bat");
          },
          [](const LoraAdapter&, const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config) {
            return miss_merged_weight(w, factor_named(factors, kMissBlock), config);
          },
          miss_output_adapter,
          nullptr};
}

FactorMethod c3a() {
  return {
      PeftType::C3a,
      "C3A adapts linear layers",
      {kC3aKernel},
      "factors",
      [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 3, "C3A's kernel: out/b x in/b x b"); },
      /*files_hold_every_tensor=*/true,
      /*files_hold_biases=*/true,
      /*rank_and_scaling=*/false,
      make_c3a_adapters,
      c3a_factor_shapes,
      [](const LoraConfig& config, const std::string& module) {
        return "block_size " + concat(config.block_size_of(module));
      },
      [](const LoraConfig&) { return std::string(); },  // (the kernel's shape says it all)
      [](const LoraAdapter&, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
        return c3a_merged_weight(w, factor_named(factors, kC3aKernel));
      },
      c3a_output_adapter,
      nullptr};
}

FactorMethod shira() {
  return {PeftType::Shira,
          "SHiRA adapts linear layers",
          {kShiraWeight},
          "values",
          [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 1, "SHiRA's trained entries"); },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/false,
          /*rank_and_scaling=*/false,
          make_shira_adapters,
          shira_factor_shapes,
          [](const LoraConfig& config, const std::string&) { return "r " + concat(config.r); },
          [](const LoraConfig&) { return std::string(); },  // (the places come with the values)
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
            return shira_merged_weight(w, factor_named(factors, kShiraWeight), adapter.indices);
          },
          shira_output_adapter,
          nullptr};
}

FactorMethod randlora() {
  return {PeftType::Randlora,
          "RandLoRA adapts linear layers (transformers' Conv1D too)",
          {kRandloraLambda, kRandloraGamma},
          "factors",
          [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 2, "RandLoRA's lambda and gamma"); },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_randlora_adapters,
          randlora_factor_shapes,
          rank_decides,
          // The same bases: the same seed, rank and kind everywhere, saved or not alike (PEFT's check),
          // and the same scaling.
          [](const LoraConfig& config) {
            return "r " + concat(config.r) + ", projection_prng_key " + concat(config.projection_prng_key) +
                   (config.randlora_very_sparse ? ", very_sparse"
                    : config.randlora_sparse    ? ", sparse"
                                                : "") +
                   ", randlora_alpha " + concat(config.randlora_alpha) + " and save_projection " +
                   (config.save_projection ? "true" : "false");
          },
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
            return randlora_merged_weight(adapter, w, factor_named(factors, kRandloraLambda),
                                          factor_named(factors, kRandloraGamma));
          },
          randlora_output_adapter,
          nullptr};
}

FactorMethod delora() {
  return {PeftType::Delora,
          "DeLoRA adapts linear layers",
          {kDeloraA, kDeloraB, kDeloraLambda, kDeloraWeightNorm},
          "tensors",
          delora_file_tensor_refusal,
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_delora_adapters,
          delora_factor_shapes,
          rank_decides,
          [](const LoraConfig&) { return std::string(); },  // (the tensors say it all)
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& tensors, const LoraConfig&) {
            return delora_merged_weight(adapter, w, tensors);
          },
          delora_output_adapter,
          nullptr};
}

FactorMethod road() {
  return {PeftType::Road,
          "RoAd adapts linear layers",
          {kRoadTheta, kRoadAlpha},
          "factors",
          [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 1, "RoAd's angles and scales"); },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/false,
          /*rank_and_scaling=*/false,
          make_road_adapters,
          road_factor_shapes,
          [](const LoraConfig& config, const std::string&) { return "variant " + config.road_variant; },
          // The same pairs.
          [](const LoraConfig& config) { return "group_size " + concat(config.road_group_size); },
          [](const LoraAdapter&, const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config) {
            return road_merged_weight(w, factors, config);
          },
          road_output_adapter,
          nullptr,
          road_merged_bias};
}

FactorMethod gralora() {
  return {PeftType::Gralora,
          "GraLoRA adapts linear layers (transformers' Conv1D too)",
          {kGraloraA, kGraloraB, kGraloraGeneralA, kGraloraGeneralB},
          "factors",
          [](const std::string& suffix, const at::Tensor& t) {
            return suffix == kGraloraA || suffix == kGraloraB
                       ? refusal_unless(t, 3, "GraLoRA's blocks: k x in/k x r and k x r x out/k")
                       : refusal_unless(t, 2, "GraLoRA's hybrid pair");
          },
          /*files_hold_every_tensor=*/false,  // (the hybrid pair with hybrid_r only: the shapes say)
          /*files_hold_biases=*/true,
          /*rank_and_scaling=*/false,
          make_gralora_adapters,
          gralora_factor_shapes,
          [](const LoraConfig& config, const std::string&) {
            return "r " + concat(config.r) + ", gralora_k " + concat(config.gralora_k) + " and hybrid_r " +
                   concat(config.gralora_hybrid_r);
          },
          // The same scaling.
          [](const LoraConfig& config) { return "alpha " + concat(config.gralora_alpha); },
          gralora_merged_weight,
          gralora_output_adapter,
          nullptr};
}

FactorMethod hira() {
  return {PeftType::Hira,
          "HiRA adapts linear layers (transformers' Conv1D too)",
          {kHiraA, kHiraB},
          "factors",
          [](const std::string&, const at::Tensor& t) { return refusal_unless(t, 2, "HiRA's A and B"); },
          /*files_hold_every_tensor=*/true,
          /*files_hold_biases=*/false,
          /*rank_and_scaling=*/false,
          make_hira_adapters,
          hira_factor_shapes,
          rank_decides,
          [](const LoraConfig&) { return std::string(); },  // (the factors say it all)
          [](const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors, const LoraConfig&) {
            return hira_merged_weight(adapter, w, factors);
          },
          hira_output_adapter,
          nullptr,
          nullptr,
          kHiraUnmergedWeight};
}

}  // namespace

const SharedTensors* shared_tensors(PeftType type) {
  static const SharedTensors vera{
      kVeraProjectionA, kVeraProjectionB, kVeraBufferA, kVeraBufferB, 2, vera_projection_shapes, false};
  static const SharedTensors randlora{
      kRandloraBasesA, kRandloraBasesB, kRandloraBufferA, kRandloraBufferB, 3, randlora_bases_shapes, true};
  static const SharedTensors pvera{
      kPveraProjectionA, kPveraProjectionB, kPveraBufferA, kPveraBufferB, 2, pvera_projection_shapes, false};
  if (type == PeftType::Vera) return &vera;
  if (type == PeftType::Pvera) return &pvera;
  if (type == PeftType::Randlora) return &randlora;
  return nullptr;
}

NamedTensors shared_state_buffers(const LoraAdapters& adapters) {
  if (adapters.adapters().empty() || !adapters.adapters().front().projections) return {};
  const LoraAdapter& first = adapters.adapters().front();
  const SharedTensors& shared = *shared_tensors(first.method);
  return {{shared.state_a, first.projections->a}, {shared.state_b, first.projections->b}};
}

const FactorMethod* factor_method(PeftType type) {
  static const std::array<FactorMethod, 17> methods = {
      lycoris(PeftType::Loha, "LoHa adapts linear layers and 1-D and 2-D convolutions"),
      lycoris(PeftType::Lokr, "LoKr adapts linear layers and 1-D and 2-D convolutions"),
      vera(),
      oft(),
      adalora(),
      boft(),
      hra(),
      fourierft(),
      miss(),
      c3a(),
      shira(),
      randlora(),
      delora(),
      road(),
      gralora(),
      hira(),
      pvera()};
  for (const FactorMethod& method : methods)
    if (method.type == type) return &method;
  return nullptr;
}

}  // namespace acc
