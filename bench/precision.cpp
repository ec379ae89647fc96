// Step time of fp32 vs bf16 (the MLP 784-1024-1024-10 and a small CNN at batch 64), and of gradient
// accumulation with k=4 vs k=1, through the C API. The variants compared run interleaved, round by
// round, in one process, so a busy machine slows both alike; the figures are medians of rounds.
//
//   bench_precision [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "accelerate.h"
#include "bench_util.h"

namespace {


const std::string kMlp = mlp_spec({784, 1024, 1024, 10});
const char* kCnn = R"([{"type":"conv2d","in_channels":1,"out_channels":16,"kernel_size":3,"padding":1},{"type":"relu"},
                       {"type":"maxpool2d","kernel_size":2},
                       {"type":"conv2d","in_channels":16,"out_channels":32,"kernel_size":3,"padding":1},{"type":"relu"},
                       {"type":"maxpool2d","kernel_size":2},{"type":"flatten"},
                       {"type":"linear","in_features":1568,"out_features":10}])";

// A prepared model + AdamW under one accelerator configuration, stepping on a fixed batch.
class Trainer {
 public:
  Trainer(const std::string& spec, const char* mixed_precision, int64_t accumulation, std::vector<int64_t> input_shape) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
    OK(acc_options_set(o, "cpu", "1"));
    OK(acc_options_set(o, "mixed_precision", mixed_precision));
    OK(acc_options_set_int(o, "gradient_accumulation_steps", accumulation));
    OK(acc_accelerator_create(o, &acc_));
    acc_options_free(o);
    OK(acc_model_from_spec(spec.c_str(), &model_));
    OK(acc_optimizer_create(model_, "adamw", nullptr, &opt_));
    OK(acc_prepare(acc_, &model_, &opt_, nullptr, nullptr));
    int64_t n = 1;
    for (int64_t d : input_shape) n *= d;
    std::vector<float> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f;
    std::vector<int64_t> y(static_cast<size_t>(input_shape[0]));
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>(i % 10);
    OK(acc_tensor_from_host(x.data(), x.size() * 4, input_shape.data(), input_shape.size(), ACC_DTYPE_FLOAT32, &x_));
    const int64_t batch = input_shape[0];
    OK(acc_tensor_from_host(y.data(), y.size() * 8, &batch, 1, ACC_DTYPE_INT64, &y_));
  }
  ~Trainer() {
    acc_tensor_free(x_);
    acc_tensor_free(y_);
    acc_optimizer_free(opt_);
    acc_model_free(model_);
    acc_accelerator_free(acc_);
  }

  // One micro-step: forward, loss, backward, and the optimizer step when the window ends.
  void step() {
    acc_tensor *out = nullptr, *loss = nullptr;
    OK(acc_accumulate_begin(acc_));
    OK(acc_model_forward1(model_, x_, 0, &out));
    OK(acc_loss_cross_entropy(out, y_, ACC_REDUCTION_MEAN, 0.0, &loss));
    OK(acc_backward(acc_, loss));
    OK(acc_optimizer_step(opt_));
    OK(acc_optimizer_zero_grad(opt_));
    OK(acc_accumulate_end(acc_));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }

 private:
  acc_accelerator* acc_ = nullptr;
  acc_model* model_ = nullptr;
  acc_optimizer* opt_ = nullptr;
  acc_tensor* x_ = nullptr;
  acc_tensor* y_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  const int rounds = quick ? 1 : 7, steps = quick ? 2 : 10;
  OK(acc_set_seed(0));
  {
    Trainer fp32(kMlp, "no", 1, {64, 784}), bf16(kMlp, "bf16", 1, {64, 784});
    report("MLP 784-1024-1024-10, batch 64", "fp32", "bf16", interleaved(fp32, bf16, rounds, steps));
  }
  {
    Trainer fp32(kCnn, "no", 1, {64, 1, 28, 28}), bf16(kCnn, "bf16", 1, {64, 1, 28, 28});
    report("CNN 2xconv3x3, batch 64, 28x28", "fp32", "bf16", interleaved(fp32, bf16, rounds, steps));
  }
  {
    Trainer k1(kMlp, "no", 1, {64, 784}), k4(kMlp, "no", 4, {64, 784});
    report("MLP, accumulation (per micro-step)", "k=1", "k=4", interleaved(k1, k4, rounds, steps * 2));
  }
  return 0;
}
