#include "model/peft/fourierft.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <utility>

#include "common/error.h"

namespace acc {
namespace {

// PEFT's FourierFT takes nn.Linear and transformers' Conv1D, whose forward it adds to.
void check_site(const LinearSite& site, const LoraConfig& config) {
  require_linear_or_conv1d(site, "FourierFT", "input to add the branch's output from");
  const int64_t n = config.n_frequency_of(site.module), entries = in_features(site) * out_features(site);
  if (n > entries)
    fail(Status::InvalidArgument, "FourierFT cannot adapt '", site.module, "': n_frequency ", n,
         " is more than its weight's ", entries, " entries (PEFT's ValueError)");
}

// The spectrum's places, rows then columns (2 x n): the first n of torch.randperm(out * in) drawn
// from a generator seeded random_loc_seed, as PEFT's update_layer draws them.
at::Tensor spectrum_places(int64_t out, int64_t in, int64_t n, int64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  const at::Tensor flat = at::randperm(out * in, generator, at::TensorOptions().dtype(at::kLong)).slice(0, 0, n);
  return at::stack({at::floor_divide(flat, in), at::remainder(flat, in)});
}

// PEFT's get_delta_weight: the spectrum laid at its places in an out x in float32 matrix (torch.fft
// takes no half precision), the real part of its inverse 2-D FFT, scaled, in the spectrum's dtype.
at::Tensor spectrum_delta(const at::Tensor& spectrum, const at::Tensor& places, int64_t out, int64_t in,
                          double scaling) {
  at::Tensor dense = at::zeros({out, in}, spectrum.options().dtype(at::kFloat));
  const at::Tensor at_device = places.to(spectrum.device());
  dense.index_put_({at_device[0], at_device[1]}, spectrum.to(at::kFloat));
  return (at::real(at::fft_ifft2(dense)) * scaling).to(spectrum.scalar_type());
}

}  // namespace

std::vector<FactorShape> fourierft_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  return {{kFourierSpectrum, {config.n_frequency_of(site.module)}}};
}

std::vector<LoraAdapter> make_fourierft_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config);
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    const int64_t n = config.n_frequency_of(site.module);
    at::Tensor spectrum = at::randn({n}, at::kFloat);  // drawn either way, as PEFT's
    if (config.fourier_init_weights) spectrum.zero_();
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), n, config.fourier_scaling};
    adapter.factors = {{kFourierSpectrum, adapter_parameter(spectrum, site)}};
    adapter.method = PeftType::Fourierft;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor fourierft_delta(const at::Tensor& spectrum, int64_t out, int64_t in, const LoraConfig& config) {
  return spectrum_delta(spectrum, spectrum_places(out, in, spectrum.size(0), config.random_loc_seed), out, in,
                        config.fourier_scaling);
}

OutputAdapter fourierft_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                       std::shared_ptr<const bool> enabled) {
  // The places drawn once here (PEFT's indices), the spectrum a handle: moves and sharding's storage
  // swaps keep it.
  const LinearSite& site = adapter.site;
  const at::Tensor spectrum = adapter.factors[0].second;
  const int64_t out = out_features(site), in = in_features(site);
  const at::Tensor places = spectrum_places(out, in, spectrum.size(0), config.random_loc_seed);
  const double scaling = config.fourier_scaling;
  return [spectrum, places, out, in, scaling, enabled](const at::Tensor& input, const at::Tensor& output, bool) {
    if (!*enabled) return output.to(input.scalar_type());
    const at::Tensor delta = spectrum_delta(spectrum, places, out, in, scaling);
    return (output + at::linear(input.to(delta.scalar_type()), delta)).to(input.scalar_type());
  };
}

}  // namespace acc
