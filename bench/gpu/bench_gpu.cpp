// The GPU benchmark: one TorchScript decoder (bench/gpu/export_gpt.py: GPT-2 small, ~124M
// parameters) trained with AdamW under autocast, in one process,
//   (a) by a plain libtorch C++ loop: torch::jit::load, torch::optim::AdamW, autocast, cross-entropy,
//       backward, step (fp16: loss scaling as torch's GradScaler does it);
//   (b) through the C API only (accelerate.h): mixed_precision, acc_prepare, acc_backward...
// on the same token batches, in phases (a), (b), (a) [, (b), (a)...] so that drift shows. Each phase
// loads the model afresh (same initial weights), runs --warmup steps, then times --steps steps with
// the device synchronised after each; GPU memory peaks are reset at each phase's start.
// Prints a table; --json FILE writes every figure; --tokens-out FILE writes the token batches
// (int64 [batches, batch, context + 1], raw little-endian) for accelerate_gpt.py, the Python
// Accelerate variant (c).
//
//   bench_gpu --model gpt.pt [--precision bf16|fp16|fp32] [--batch 8] [--context N] [--steps 30]
//             [--warmup 5] [--rounds 1] [--device cuda|cpu] [--batches 4] [--seed 0]
//             [--json FILE] [--tokens-out FILE]
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/script.h>
#include <torch/version.h>

#ifdef ACC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "accelerate.h"
#include "common/compat.h"
#include "common/device.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

#define ACC_CHECK(expr)                                                                              \
  do {                                                                                               \
    if ((expr) != ACC_OK) throw std::runtime_error(std::string(#expr) + ": " + acc_last_error_message()); \
  } while (0)

struct Config {
  std::string model;
  std::string precision = "bf16";  // bf16, fp16, fp32
  std::string device;              // cuda:0 or cpu
  int64_t batch = 8;
  int64_t context = 0;  // 0: the model's
  int steps = 30;
  int warmup = 5;
  int rounds = 1;
  int64_t batches = 4;
  uint64_t seed = 0;
  double lr = 3e-4;
  double weight_decay = 0.01;
  std::string json_path;
  std::string tokens_out;
};

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "bench_gpu: %s\nusage: bench_gpu --model gpt.pt [--precision bf16|fp16|fp32] [--batch N] "
               "[--context N] [--steps N] [--warmup N] [--rounds N] [--device cuda|cpu] [--batches N] "
               "[--seed N] [--json FILE] [--tokens-out FILE]\n",
               message);
  std::exit(2);
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") usage("the GPU benchmark");
    if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
    const std::string v = argv[++i];
    if (arg == "--model") c.model = v;
    else if (arg == "--precision") c.precision = v == "no" ? "fp32" : v;
    else if (arg == "--device") c.device = v;
    else if (arg == "--batch") c.batch = std::stoll(v);
    else if (arg == "--context") c.context = std::stoll(v);
    else if (arg == "--steps") c.steps = std::stoi(v);
    else if (arg == "--warmup") c.warmup = std::stoi(v);
    else if (arg == "--rounds") c.rounds = std::stoi(v);
    else if (arg == "--batches") c.batches = std::stoll(v);
    else if (arg == "--seed") c.seed = std::stoull(v);
    else if (arg == "--lr") c.lr = std::stod(v);
    else if (arg == "--weight-decay") c.weight_decay = std::stod(v);
    else if (arg == "--json") c.json_path = v;
    else if (arg == "--tokens-out") c.tokens_out = v;
    else usage(("unknown argument " + arg).c_str());
  }
  if (c.model.empty()) usage("--model is required");
  if (c.precision != "bf16" && c.precision != "fp16" && c.precision != "fp32") usage("--precision: bf16, fp16 or fp32");
  if (c.batch < 1 || c.steps < 1 || c.warmup < 0 || c.rounds < 1 || c.batches < 1 || c.context < 0)
    usage("--batch, --steps, --rounds and --batches must be >= 1, --warmup and --context >= 0");
  if (c.device.empty()) c.device = torch::cuda::is_available() ? "cuda" : "cpu";
  if (c.device == "cuda") c.device = "cuda:0";
  if (c.device != "cpu" && c.device.rfind("cuda:", 0) != 0) usage("--device: cuda, cuda:N or cpu");
  if (c.device != "cpu" && !torch::cuda::is_available()) usage("--device cuda: CUDA is not available here");
  if (c.precision == "fp16" && c.device == "cpu") usage("--precision fp16 needs a CUDA device (CPU autocast is bf16)");
  return c;
}

std::optional<c10::ScalarType> autocast_dtype(const std::string& precision) {
  if (precision == "bf16") return at::kBFloat16;
  if (precision == "fp16") return at::kHalf;
  return std::nullopt;
}

// ---- device helpers: everything CUDA-only is behind ACC_WITH_CUDA ----

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

void reset_memory_stats(const c10::Device& device) {
#ifdef ACC_WITH_CUDA
  if (device.is_cuda()) {
    acc::initialize_cuda();  // libtorch 2.x refuses the allocator's statistics before CUDA started
    torch::cuda::synchronize(device.index());
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  }
#else
  (void)device;
#endif
}

// Peak bytes allocated and reserved by the caching allocator since the last reset (-1 on the CPU).
std::pair<int64_t, int64_t> memory_peaks(const c10::Device& device) {
#ifdef ACC_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return {static_cast<int64_t>(stats.allocated_bytes[0].peak), static_cast<int64_t>(stats.reserved_bytes[0].peak)};
  }
#else
  (void)device;
#endif
  return {-1, -1};
}

std::string device_description(const c10::Device& device) {
#ifdef ACC_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->name;
#else
  (void)device;
#endif
  return "CPU";
}

// ---- the token batches: int64 [batches, batch, context + 1]; inputs are the first `context`
// tokens, targets the last `context` (shifted by one), flattened as the model's logits are ----

struct Tokens {
  at::Tensor all;
  std::vector<at::Tensor> inputs;   // [batch, context], CPU
  std::vector<at::Tensor> targets;  // [batch * context], CPU
};

Tokens make_tokens(const Config& c, int64_t vocab) {
  Tokens t;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(c.seed);
  t.all = at::randint(vocab, {c.batches, c.batch, c.context + 1}, gen, at::TensorOptions().dtype(at::kLong));
  for (int64_t i = 0; i < c.batches; ++i) {
    at::Tensor b = t.all[i];
    t.inputs.push_back(b.slice(1, 0, c.context).contiguous());
    t.targets.push_back(b.slice(1, 1, c.context + 1).reshape({-1}).contiguous());
  }
  return t;
}

void write_tokens(const Tokens& t, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  const at::Tensor all = t.all.contiguous();
  out.write(static_cast<const char*>(all.data_ptr()), static_cast<std::streamsize>(all.nbytes()));
  if (!out) throw std::runtime_error("cannot write the token batches to " + path);
}

// ---- (a) plain libtorch ----

// torch.autocast(device, dtype) as a scope: enable, set the dtype, nest; on exit drop the cast
// cache when leaving the outermost scope and restore the previous state.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, std::optional<c10::ScalarType> dtype)
      : device_(device), on_(dtype.has_value()) {
    if (!on_) return;
    prev_enabled_ = acc::compat::autocast_enabled(device_);
    prev_dtype_ = acc::compat::autocast_dtype(device_);
    acc::compat::set_autocast_enabled(device_, true);
    acc::compat::set_autocast_dtype(device_, *dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    acc::compat::set_autocast_enabled(device_, prev_enabled_);
    acc::compat::set_autocast_dtype(device_, prev_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool on_;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = at::kFloat;
};

class PlainLoop {
 public:
  PlainLoop(const Config& c, const Tokens& tokens)
      : device_(c.device), dtype_(autocast_dtype(c.precision)), fp16_(c.precision == "fp16") {
    module_ = torch::jit::load(c.model, device_);
    module_.train();
    for (const auto& p : module_.parameters()) params_.push_back(p);
    opt_ = std::make_unique<torch::optim::AdamW>(params_,
                                                 torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
    for (size_t i = 0; i < tokens.inputs.size(); ++i) {
      inputs_.push_back(tokens.inputs[i].to(device_));
      targets_.push_back(tokens.targets[i].to(device_));
    }
    if (fp16_) {  // torch.amp.GradScaler's defaults, as Accelerate uses them
      const auto on = at::TensorOptions().device(device_);
      scale_ = at::full(at::IntArrayRef{}, 65536.0, on.dtype(at::kFloat));  // 0-dim, as GradScaler
      growth_tracker_ = at::zeros(at::IntArrayRef{}, on.dtype(at::kInt));
    }
  }

  void step(size_t i) {
    const size_t k = i % inputs_.size();
    at::Tensor loss;
    {
      AutocastScope autocast(device_.type(), dtype_);
      std::vector<torch::jit::IValue> in{inputs_[k]};
      const at::Tensor logits = module_.forward(in).toTensor();
      loss = torch::nn::functional::cross_entropy(logits, targets_[k]);
    }
    if (fp16_) {
      (loss * scale_).backward();
      at::NoGradGuard no_grad;
      std::vector<at::Tensor> grads;
      for (auto& p : params_)
        if (p.grad().defined()) grads.push_back(p.grad());
      at::Tensor found_inf = at::zeros(at::IntArrayRef{}, scale_.options());
      const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
      at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
      if (found_inf.item<float>() == 0.0f)  // GradScaler.step: skip the step on inf/NaN
        opt_->step();
      else
        ++skipped_;
      at::_amp_update_scale_(scale_, growth_tracker_, found_inf, 2.0, 0.5, 2000);
    } else {
      loss.backward();
      opt_->step();
    }
    // Gradients to none, as PyTorch 2's zero_grad() and the C API's do.
    for (auto& p : params_) p.mutable_grad().reset();
    last_loss_ = loss.detach();
  }

  double last_loss() const { return last_loss_.item<double>(); }
  int64_t skipped() const { return skipped_; }

 private:
  c10::Device device_;
  std::optional<c10::ScalarType> dtype_;
  bool fp16_;
  torch::jit::Module module_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> opt_;
  std::vector<at::Tensor> inputs_, targets_;
  at::Tensor scale_, growth_tracker_, last_loss_;
  int64_t skipped_ = 0;
};

// ---- (b) the C API ----

class Options {
 public:
  explicit Options(acc_options_kind kind) { ACC_CHECK(acc_options_create(kind, &o_)); }
  ~Options() { acc_options_free(o_); }
  Options(const Options&) = delete;
  Options& operator=(const Options&) = delete;
  acc_options* get() const { return o_; }

 private:
  acc_options* o_ = nullptr;
};

class CapiLoop {
 public:
  CapiLoop(const Config& c, const Tokens& tokens) {
    try {
      Options accelerator(ACC_OPTIONS_ACCELERATOR);
      ACC_CHECK(acc_options_set_bool(accelerator.get(), "cpu", c.device == "cpu" ? 1 : 0));
      const char* mixed_precision = c.precision == "fp32" ? "no" : c.precision.c_str();
      ACC_CHECK(acc_options_set(accelerator.get(), "mixed_precision", mixed_precision));
      ACC_CHECK(acc_accelerator_create(accelerator.get(), &acc_));
      ACC_CHECK(acc_model_load_torchscript(c.model.c_str(), &model_));
      Options adamw(ACC_OPTIONS_OPTIMIZER);
      ACC_CHECK(acc_options_set_double(adamw.get(), "lr", c.lr));
      ACC_CHECK(acc_options_set_double(adamw.get(), "weight_decay", c.weight_decay));
      ACC_CHECK(acc_optimizer_create(model_, "adamw", adamw.get(), &opt_));
      ACC_CHECK(acc_prepare(acc_, &model_, &opt_, nullptr, nullptr));
      char* device = nullptr;
      ACC_CHECK(acc_accelerator_device(acc_, &device));
      device_ = device;
      acc_string_free(device);
      for (size_t i = 0; i < tokens.inputs.size(); ++i) {
        inputs_.push_back(to_device(tokens.inputs[i]));
        targets_.push_back(to_device(tokens.targets[i]));
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~CapiLoop() { release(); }
  CapiLoop(const CapiLoop&) = delete;
  CapiLoop& operator=(const CapiLoop&) = delete;

  void step(size_t i) {
    const size_t k = i % inputs_.size();
    acc_tensor *logits = nullptr, *loss = nullptr;
    ACC_CHECK(acc_model_forward1(model_, inputs_[k], ACC_FORWARD_DEFAULT, &logits));
    const acc_status s = acc_loss_cross_entropy(logits, targets_[k], ACC_REDUCTION_MEAN, 0.0, &loss);
    acc_tensor_free(logits);
    ACC_CHECK(s);
    acc_tensor_free(last_loss_);
    last_loss_ = loss;
    ACC_CHECK(acc_backward(acc_, loss));
    ACC_CHECK(acc_optimizer_step(opt_));
    ACC_CHECK(acc_optimizer_zero_grad(opt_));
    int was_skipped = 0;
    ACC_CHECK(acc_accelerator_optimizer_step_was_skipped(acc_, &was_skipped));
    skipped_ += was_skipped ? 1 : 0;
  }

  double last_loss() const {
    double v = std::nan("");
    if (last_loss_) ACC_CHECK(acc_tensor_item(last_loss_, &v));
    return v;
  }
  int64_t skipped() const { return skipped_; }
  const std::string& device() const { return device_; }

 private:
  acc_tensor* to_device(const at::Tensor& t) {
    acc_tensor *host = nullptr, *dev = nullptr;
    const std::vector<int64_t> dims(t.sizes().begin(), t.sizes().end());
    ACC_CHECK(acc_tensor_from_host(t.data_ptr(), t.nbytes(), dims.data(), dims.size(), ACC_DTYPE_INT64, &host));
    const acc_status s = acc_tensor_to(host, device_.c_str(), ACC_DTYPE_UNDEFINED, &dev);
    acc_tensor_free(host);
    ACC_CHECK(s);
    return dev;
  }
  void release() {
    for (auto* t : inputs_) acc_tensor_free(t);
    for (auto* t : targets_) acc_tensor_free(t);
    inputs_.clear();
    targets_.clear();
    acc_tensor_free(last_loss_);
    acc_optimizer_free(opt_);
    acc_model_free(model_);
    acc_accelerator_free(acc_);
    last_loss_ = nullptr;
    opt_ = nullptr;
    model_ = nullptr;
    acc_ = nullptr;
  }

  acc_accelerator* acc_ = nullptr;
  acc_model* model_ = nullptr;
  acc_optimizer* opt_ = nullptr;
  acc_tensor* last_loss_ = nullptr;
  std::vector<acc_tensor*> inputs_, targets_;
  std::string device_;
  int64_t skipped_ = 0;
};

// ---- phases and figures ----

struct Phase {
  std::string variant;  // "a" or "b"
  int index = 0;        // the how-many-th phase of this variant
  std::vector<double> step_ms;
  double first_loss = std::nan(""), last_loss = std::nan("");
  int64_t skipped = 0;
  int64_t peak_allocated = -1, peak_reserved = -1;
  double setup_s = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? std::nan("") : s / static_cast<double>(v.size());
}

template <typename Loop>
Phase run_phase(const std::string& variant, int index, const Config& c, const Tokens& tokens) {
  const c10::Device device(c.device);
  Phase ph;
  ph.variant = variant;
  ph.index = index;
  reset_memory_stats(device);
  {
    const auto t0 = Clock::now();
    Loop loop(c, tokens);
    synchronize(device);
    ph.setup_s = std::chrono::duration<double>(Clock::now() - t0).count();
    size_t i = 0;
    for (int w = 0; w < c.warmup; ++w, ++i) {
      loop.step(i);
      if (i == 0) ph.first_loss = loop.last_loss();
    }
    synchronize(device);
    for (int s = 0; s < c.steps; ++s, ++i) {
      const auto start = Clock::now();
      loop.step(i);
      synchronize(device);
      ph.step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      if (i == 0) ph.first_loss = loop.last_loss();  // only when there is no warmup
    }
    ph.last_loss = loop.last_loss();
    ph.skipped = loop.skipped();
    const auto peaks = memory_peaks(device);
    ph.peak_allocated = peaks.first;
    ph.peak_reserved = peaks.second;
  }
  reset_memory_stats(device);  // what the phase cached goes back before the next one
  return ph;
}

const char* variant_name(const std::string& v) { return v == "a" ? "(a) plain libtorch" : "(b) C API"; }

double gib(int64_t bytes) { return bytes < 0 ? std::nan("") : static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json phase_json(const Phase& p, int64_t tokens_per_step) {
  const double ms = median(p.step_ms);
  const double fastest = p.step_ms.empty() ? std::nan("") : *std::min_element(p.step_ms.begin(), p.step_ms.end());
  return json{{"variant", p.variant},
              {"index", p.index},
              {"ms_per_step", number(ms)},
              {"ms_mean", number(mean(p.step_ms))},
              {"ms_min", number(fastest)},
              {"tokens_per_s", number(tokens_per_step / (ms / 1000.0))},
              {"peak_allocated_bytes", p.peak_allocated},
              {"peak_reserved_bytes", p.peak_reserved},
              {"first_loss", number(p.first_loss)},
              {"last_loss", number(p.last_loss)},
              {"skipped_steps", p.skipped},
              {"setup_s", number(p.setup_s)},
              {"step_ms", p.step_ms}};
}

// One variant over all its phases: the median of every timed step, the largest memory peaks.
json variant_json(const std::vector<Phase>& phases, const std::string& v, int64_t tokens_per_step) {
  std::vector<double> all;
  int64_t alloc = -1, reserved = -1, skipped = 0;
  double first = std::nan(""), last = std::nan("");
  int n = 0;
  for (const auto& p : phases) {
    if (p.variant != v) continue;
    all.insert(all.end(), p.step_ms.begin(), p.step_ms.end());
    alloc = std::max(alloc, p.peak_allocated);
    reserved = std::max(reserved, p.peak_reserved);
    skipped += p.skipped;
    if (n++ == 0) first = p.first_loss, last = p.last_loss;
  }
  const double ms = median(all);
  return json{{"name", variant_name(v)},
              {"phases", n},
              {"ms_per_step", number(ms)},
              {"ms_mean", number(mean(all))},
              {"tokens_per_s", number(tokens_per_step / (ms / 1000.0))},
              {"peak_allocated_bytes", alloc},
              {"peak_reserved_bytes", reserved},
              {"first_loss", number(first)},
              {"last_loss", number(last)},
              {"skipped_steps", skipped}};
}

void print_row(const char* label, double ms, double ms_mean, int64_t tokens_per_step, int64_t alloc, int64_t reserved,
               double first, double last) {
  std::printf("  %-24s %10.2f %10.2f %12.0f %10.2f %10.2f   %8.4f -> %8.4f\n", label, ms, ms_mean,
              tokens_per_step / (ms / 1000.0), gib(alloc), gib(reserved), first, last);
}

}  // namespace

int main(int argc, char** argv) {
  const Config c0 = parse(argc, argv);
  Config c = c0;
  json out{{"bench", "bench_gpu"}, {"ok", false}};
  int rc = 0;
  try {
    // The model's shape, from a first load on the CPU: vocab and context from the embeddings.
    int64_t vocab = 0, max_context = 0, parameters = 0;
    {
      torch::jit::Module m = torch::jit::load(c.model);
      for (const auto& p : m.named_parameters()) {
        parameters += p.value.numel();
        if (p.name == "wte.weight") vocab = p.value.size(0);
        if (p.name == "wpe.weight") max_context = p.value.size(0);
      }
    }
    if (vocab <= 0 || max_context <= 0)
      throw std::runtime_error("the model has no wte.weight / wpe.weight: export it with bench/gpu/export_gpt.py");
    if (c.context == 0) c.context = max_context;
    if (c.context > max_context)
      throw std::runtime_error("--context " + std::to_string(c.context) + " exceeds the model's " +
                               std::to_string(max_context));
    const int64_t tokens_per_step = c.batch * c.context;
    const c10::Device device(c.device);
    const std::string gpu = device_description(device);
    out.update(json{{"precision", c.precision},
                    {"device", c.device},
                    {"device_name", gpu},
                    {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                                     std::to_string(TORCH_VERSION_PATCH)},
                    {"accelerate_build", acc_build_info()},
                    {"model", c.model},
                    {"parameters", parameters},
                    {"vocab", vocab},
                    {"batch", c.batch},
                    {"context", c.context},
                    {"tokens_per_step", tokens_per_step},
                    {"steps", c.steps},
                    {"warmup", c.warmup},
                    {"rounds", c.rounds},
                    {"token_batches", c.batches},
                    {"seed", c.seed},
                    {"lr", c.lr},
                    {"weight_decay", c.weight_decay}});

    const Tokens tokens = make_tokens(c, vocab);
    if (!c.tokens_out.empty()) write_tokens(tokens, c.tokens_out);

    std::printf("bench_gpu: %.1fM-parameter decoder on %s (%s), %s, batch %lld x context %lld, %d timed steps after %d "
                "warmup, libtorch %d.%d\n",
                parameters / 1e6, c.device.c_str(), gpu.c_str(),
                c.precision == "fp32" ? "fp32" : (c.precision + " autocast").c_str(), static_cast<long long>(c.batch),
                static_cast<long long>(c.context), c.steps, c.warmup, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR);
    std::fflush(stdout);

    std::vector<Phase> phases;
    int na = 0, nb = 0;
    auto record = [&](Phase p) {
      std::printf("  phase %-22s %8.2f ms/step (setup %.1f s, loss %.4f -> %.4f%s)\n",
                  (std::string(variant_name(p.variant)) + " #" + std::to_string(p.index + 1)).c_str(),
                  median(p.step_ms), p.setup_s, p.first_loss, p.last_loss,
                  p.skipped ? (", " + std::to_string(p.skipped) + " skipped steps").c_str() : "");
      std::fflush(stdout);
      phases.push_back(std::move(p));
    };
    try {
      record(run_phase<PlainLoop>("a", na++, c, tokens));
      for (int r = 0; r < c.rounds; ++r) {
        record(run_phase<CapiLoop>("b", nb++, c, tokens));
        record(run_phase<PlainLoop>("a", na++, c, tokens));
      }
    } catch (...) {
      json ps = json::array();
      for (const auto& p : phases) ps.push_back(phase_json(p, tokens_per_step));
      out["phases"] = ps;
      throw;
    }

    json ps = json::array();
    for (const auto& p : phases) ps.push_back(phase_json(p, tokens_per_step));
    out["phases"] = ps;
    out["a"] = variant_json(phases, "a", tokens_per_step);
    out["b"] = variant_json(phases, "b", tokens_per_step);
    const double ma = out["a"]["ms_per_step"].is_number() ? out["a"]["ms_per_step"].get<double>() : std::nan("");
    const double mb = out["b"]["ms_per_step"].is_number() ? out["b"]["ms_per_step"].get<double>() : std::nan("");
    out["ratio_b_over_a"] = number(mb / ma);
    out["ok"] = true;

    std::printf("\n  %-24s %10s %10s %12s %10s %10s   %s\n", c.precision.c_str(), "ms/step", "mean ms", "tokens/s",
                "peak GiB", "rsrv GiB", "loss first -> last");
    for (const auto& p : phases)
      print_row((std::string(variant_name(p.variant)) + " #" + std::to_string(p.index + 1)).c_str(), median(p.step_ms),
                mean(p.step_ms), tokens_per_step, p.peak_allocated, p.peak_reserved, p.first_loss, p.last_loss);
    for (const char* v : {"a", "b"}) {
      const json& j = out[v];
      print_row((std::string(variant_name(v)) + " (all)").c_str(), j["ms_per_step"].get<double>(),
                j["ms_mean"].get<double>(), tokens_per_step, j["peak_allocated_bytes"].get<int64_t>(),
                j["peak_reserved_bytes"].get<int64_t>(), std::nan(""), std::nan(""));
    }
    std::printf("  (b)/(a) = %.4f (target <= 1.03)\n", mb / ma);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "bench_gpu: error: %s\n", e.what_without_backtrace());
    out["error"] = e.what_without_backtrace();
    rc = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: error: %s\n", e.what());
    out["error"] = e.what();
    rc = 1;
  }
  if (!c.json_path.empty()) {
    std::ofstream f(c.json_path);
    f << out.dump(1) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench_gpu: cannot write %s\n", c.json_path.c_str());
      rc = 1;
    }
  }
  return rc;
}
