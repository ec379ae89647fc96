// LOMO and AdaLomo against AdamW and plain SGD on the same model, in one process, interleaved round
// by round: a stack of transformer encoder layers (d_model 768, 8 heads, feed-forward 3072; 57M
// parameters) over 64 tokens, batch 2, MSE loss, each optimizer prepared by its own accelerator.
// AdamW and SGD: acc_backward, then the step (all gradients exist at once); LOMO: acc_lomo_backward
// (each parameter updated as its gradient completes, the gradient dropped); AdaLomo:
// acc_backward_lr. Reported: the bytes of live CPU tensors held between steps (weights and
// optimizer state; tensor_memory.h), their peak during a step, and the step time.
//
//   bench_lomo [--quick]
#include <cstdio>
#include <string>
#include <vector>

#include "transformer_stack.h"

namespace {

struct Loop {
  const char* name;
  bool fused;  // LOMO: the update happens inside backward
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *y = nullptr;
  int64_t held_bytes = 0, step_bytes = 0;
  std::vector<double> times;

  Loop(const char* name_, const char* algorithm, const char* lr, const std::string& spec, int64_t batch, int64_t tokens,
       int64_t d)
      : name(name_), fused(std::string(algorithm).find("lomo") != std::string::npos) {
    const int64_t before = counting()->live();
    OK(acc_accelerator_create(nullptr, &acc));
    OK(acc_set_seed(1));
    OK(acc_model_from_spec(spec.c_str(), &model));
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o));
    OK(acc_options_set(o, "lr", lr));
    OK(acc_optimizer_create(model, algorithm, o, &opt));
    acc_options_free(o);
    OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
    transformer_stack_batch(batch, tokens, d, &x, &y);
    step();  // optimizer state exists from the first step on
    held_bytes = counting()->live() - before;
    step_bytes = 0;
  }
  ~Loop() {
    acc_tensor_free(x);
    acc_tensor_free(y);
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
  void step() {
    const int64_t before = counting()->live();
    counting()->reset_peak();
    acc_tensor *out = nullptr, *loss = nullptr;
    OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out));
    OK(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss));
    if (fused) {
      OK(acc_backward_lr(acc, loss, 1e-4));
    } else {
      OK(acc_backward(acc, loss));
      OK(acc_optimizer_step(opt));
    }
    step_bytes = std::max(step_bytes, counting()->peak() - before);
    OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  counting();
  const int blocks = quick ? 2 : 8;
  const int64_t batch = 2, tokens = quick ? 8 : 64, d = quick ? 32 : 768;
  const std::string spec = transformer_stack_spec(blocks, d, 0.0);
  Loop adamw("AdamW", "adamw", "1e-4", spec, batch, tokens, d), sgd("SGD", "sgd", "1e-4", spec, batch, tokens, d),
      lomo("LOMO", "lomo", "1e-4", spec, batch, tokens, d),
      adalomo("AdaLomo", "adalomo", "1e-4", spec, batch, tokens, d);
  Loop* loops[] = {&adamw, &sgd, &lomo, &adalomo};
  for (int round = 0; round < (quick ? 1 : 5); ++round)
    for (Loop* loop : loops) loop->times.push_back(time_steps(*loop, quick ? 1 : 2));
  std::printf("%d transformer blocks (d_model %lld, 8 heads), batch %lld x %lld tokens\n", blocks,
              static_cast<long long>(d), static_cast<long long>(batch), static_cast<long long>(tokens));
  const double base_peak = static_cast<double>(adamw.held_bytes + adamw.step_bytes);
  const double base_time = median(adamw.times);
  for (Loop* loop : loops) {
    const double peak = static_cast<double>(loop->held_bytes + loop->step_bytes);
    std::printf("%-8s held %7.1f MiB, peak %7.1f MiB, %8.1f ms/step   peak %.3f, time %.3f of AdamW's\n", loop->name,
                loop->held_bytes / 1048576.0, peak / 1048576.0, median(loop->times) / 1000, peak / base_peak,
                median(loop->times) / base_time);
  }
  return 0;
}
