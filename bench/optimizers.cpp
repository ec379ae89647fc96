// The optimizer step alone (gradients fixed, no forward or backward), through the C API, on an MLP of
// 6.3M parameters: PyTorch's fused=True kernels (sgd with momentum, adam, adamw, adagrad) against the
// one-tensor rule the same optimizer steps without it, and the optimizers written here over ATen
// (radam, nadam, adamax, adadelta, rprop, asgd) against adam's one-tensor rule, the schedule-free
// ones (adamw_schedule_free, sgd_schedule_free) against adamw's and sgd's; and an averaged
// model's update (AveragedModel's SWA and EMA) against that adam step; bitsandbytes' 8-bit AdamW
// against adamw, with the bytes of their states. The variants compared
// run interleaved, round by round, in one process, so a busy machine slows both alike; the figures
// are medians of rounds. Fused kernels need a libtorch of 2.4 or later: with an older one that line
// says so.
//
//   bench_optimizers [--quick]
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accelerate.h"
#include "bench_util.h"

namespace {

const std::string kMlp = mlp_spec({1024, 2048, 2048, 1024});

// A model with gradients from one backward, and an optimizer over it.
class Stepper {
 public:
  Stepper(const char* algorithm, const std::vector<std::pair<const char*, const char*>>& settings) {
    OK(acc_model_from_spec(kMlp.c_str(), &model_));
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o));
    for (const auto& kv : settings) OK(acc_options_set(o, kv.first, kv.second));
    status_ = acc_optimizer_create(model_, algorithm, o, &opt_);
    acc_options_free(o);
    if (status_ != ACC_OK) {
      error_ = acc_last_error_message();
      return;
    }
    OK(acc_optimizer_set_training(opt_, 1));  // schedule-free's train(); the others ignore it
    const int64_t shape[] = {16, 1024};
    acc_tensor *x = nullptr, *out = nullptr, *loss = nullptr;
    OK(acc_tensor_randn(shape, 2, &x));
    OK(acc_model_forward1(model_, x, 0, &out));
    OK(acc_tensor_mean(out, &loss));
    OK(acc_tensor_backward(loss));
    for (acc_tensor* t : {x, out, loss}) acc_tensor_free(t);
  }
  ~Stepper() {
    acc_optimizer_free(opt_);
    acc_model_free(model_);
  }
  bool ok() const { return status_ == ACC_OK; }
  const std::string& error() const { return error_; }
  void step() { OK(acc_optimizer_step(opt_)); }
  acc_model* model() const { return model_; }
  // The bytes of every state tensor the optimizer holds (after a step).
  double state_bytes() const {
    acc_string_list* params = nullptr;
    OK(acc_model_parameter_names(model_, &params));
    size_t n = 0;
    OK(acc_string_list_size(params, &n));
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      const char* param = nullptr;
      OK(acc_string_list_get(params, i, &param));
      acc_string_list* fields = nullptr;
      OK(acc_optimizer_state_fields(opt_, param, &fields));
      size_t m = 0;
      OK(acc_string_list_size(fields, &m));
      for (size_t j = 0; j < m; ++j) {
        const char* field = nullptr;
        acc_tensor* t = nullptr;
        acc_dtype dtype = ACC_DTYPE_UNDEFINED;
        int64_t numel = 0;
        OK(acc_string_list_get(fields, j, &field));
        OK(acc_optimizer_state(opt_, param, field, &t));
        OK(acc_tensor_dtype(t, &dtype));
        OK(acc_tensor_numel(t, &numel));
        total += static_cast<double>(numel) * static_cast<double>(acc_dtype_size(dtype));
        acc_tensor_free(t);
      }
      acc_string_list_free(fields);
    }
    acc_string_list_free(params);
    return total;
  }

 private:
  acc_model* model_ = nullptr;
  acc_optimizer* opt_ = nullptr;
  acc_status status_ = ACC_OK;
  std::string error_;
};

// An averaged model of a Stepper's model, updated at each step (acc_averaged_model_update).
class Averager {
 public:
  Averager(acc_model* model, const char* strategy) : model_(model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_AVERAGED_MODEL, &o));
    OK(acc_options_set(o, "strategy", strategy));
    OK(acc_averaged_model_create(model, o, &averaged_));
    acc_options_free(o);
  }
  ~Averager() { acc_averaged_model_free(averaged_); }
  bool ok() const { return true; }
  std::string error() const { return {}; }
  void step() { OK(acc_averaged_model_update(averaged_, model_)); }

 private:
  acc_model* model_;
  acc_averaged_model* averaged_ = nullptr;
};

template <typename B>
void compare(const char* what, const char* name_a, Stepper& a, const char* name_b, B& b, int rounds, int steps) {
  if (!b.ok()) {
    std::printf("%-34s %s: %s\n", what, name_b, b.error().c_str());
    return;
  }
  report(what, name_a, name_b, interleaved(a, b, rounds, steps, /*warm_up=*/1));  // the first step makes the states
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  const int rounds = quick ? 1 : 7, steps = quick ? 2 : 10;
  std::printf("optimizer step alone, MLP 1024-2048-2048-1024 (6.3M parameters), fp32, CPU\n");
  const std::pair<const char*, std::vector<std::pair<const char*, const char*>>> fusable[] = {
      {"sgd", {{"momentum", "0.9"}}}, {"adam", {}}, {"adamw", {}}, {"adagrad", {}}};
  for (const auto& entry : fusable) {
    auto fused_settings = entry.second;
    fused_settings.emplace_back("fused", "true");
    Stepper one_tensor(entry.first, entry.second), fused(entry.first, fused_settings);
    compare(entry.first, "one-tensor", one_tensor, "fused", fused, rounds, steps);
  }
  for (const char* algorithm : {"radam", "nadam", "adamax", "adadelta", "rprop", "asgd"}) {
    Stepper adam("adam", {}), other(algorithm, {});
    compare(algorithm, "adam", adam, algorithm, other, rounds, steps);
  }
  const std::pair<const char*, const char*> schedule_free[] = {{"adamw", "adamw_schedule_free"},
                                                               {"sgd", "sgd_schedule_free"}};
  for (const auto& [plain, without_schedule] : schedule_free) {
    Stepper baseline(plain, {}), other(without_schedule, {});
    compare(without_schedule, plain, baseline, without_schedule, other, rounds, steps);
  }
  // bitsandbytes' 8-bit optimizers against the PyTorch rule each stands for: step time and state.
  const std::tuple<const char*, const char*, std::vector<std::pair<const char*, const char*>>> eight_bit_pairs[] = {
      {"adamw", "adamw_8bit", {}},
      {"adamw", "ademamix_8bit", {}},
      {"sgd", "sgd_8bit", {{"lr", "0.01"}, {"momentum", "0.9"}}},
      {"rmsprop", "rmsprop_8bit", {}},
      {"adagrad", "adagrad_8bit", {}}};
  for (const auto& [plain, eight, settings] : eight_bit_pairs) {
    Stepper baseline(plain, settings), eight_bit(eight, settings);
    compare(eight, plain, baseline, eight, eight_bit, rounds, steps);
    std::printf("%-34s %s %.1f MiB, %s %.1f MiB: %.3f\n", "optimizer state", plain, baseline.state_bytes() / 1048576.0,
                eight, eight_bit.state_bytes() / 1048576.0, eight_bit.state_bytes() / baseline.state_bytes());
  }
  for (const char* strategy : {"swa", "ema"}) {  // after its first update, which copies
    Stepper adam("adam", {});
    Averager averaged(adam.model(), strategy);
    const std::string what = std::string("averaged model update, ") + strategy;
    compare(what.c_str(), "adam", adam, "update", averaged, rounds, steps);
  }
  return 0;
}
