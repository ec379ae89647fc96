// LOMO and AdaLomo against AdamW and plain SGD on the same model, in one process, interleaved round
// by round: a stack of transformer encoder layers (d_model 768, 8 heads, feed-forward 3072; 57M
// parameters) over 64 tokens, batch 2, MSE loss, each optimizer prepared by its own accelerator.
// AdamW and SGD: acc_backward, then the step (all gradients exist at once); LOMO and AdaLomo:
// acc_backward_lr (each parameter updated as its gradient completes, the gradient dropped). Reported: the bytes of live
// CPU tensors held between steps (weights and optimizer state; tensor_memory.h), their peak during a step, and the step
// time.
//
//   bench_lomo [--quick]
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "transformer_stack.h"

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  counting();
  const int blocks = quick ? 2 : 8;
  const int64_t batch = 2, tokens = quick ? 8 : 64, d = quick ? 32 : 768;
  const std::string spec = transformer_stack_spec(blocks, d, 0.0);
  const auto loop = [&](const char* algorithm) {
    return std::make_unique<TransformerStackLoop>(spec, batch, tokens, d, nullptr,
                                                  StackTraining{algorithm, "1e-4", /*prepared=*/true});
  };
  const char* names[] = {"AdamW", "SGD", "LOMO", "AdaLomo"};
  std::unique_ptr<TransformerStackLoop> loops[] = {loop("adamw"), loop("sgd"), loop("lomo"), loop("adalomo")};
  std::vector<double> times[4];
  for (int round = 0; round < (quick ? 1 : 5); ++round)
    for (int i = 0; i < 4; ++i) times[i].push_back(time_steps(*loops[i], quick ? 1 : 2));
  std::printf("%d transformer blocks (d_model %lld, 8 heads), batch %lld x %lld tokens\n", blocks,
              static_cast<long long>(d), static_cast<long long>(batch), static_cast<long long>(tokens));
  const double base_peak = static_cast<double>(loops[0]->held_bytes + loops[0]->step_bytes);
  const double base_time = median(times[0]);
  for (int i = 0; i < 4; ++i) {
    const double peak = static_cast<double>(loops[i]->held_bytes + loops[i]->step_bytes);
    std::printf("%-8s held %7.1f MiB, peak %7.1f MiB, %8.1f ms/step   peak %.3f, time %.3f of AdamW's\n", names[i],
                loops[i]->held_bytes / 1048576.0, peak / 1048576.0, median(times[i]) / 1000, peak / base_peak,
                median(times[i]) / base_time);
  }
  return 0;
}
