// Activation checkpointing against the plain run, interleaved round by round in one process: a
// stack of transformer encoder layers (d_model 256, 8 heads, feed-forward 1024) over sequences of
// 256 tokens, batch 8, AdamW; the peak bytes of live CPU tensors during forward and backward
// (tensor_memory.h) and the step time, plain and with "checkpoint": true on every block.
//
//   bench_checkpointing [--quick]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "transformer_stack.h"


int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  counting();
  const int blocks = quick ? 2 : 6;
  const int64_t batch = quick ? 2 : 8, tokens = quick ? 16 : 256, d = quick ? 32 : 256;
  TransformerStackLoop plain(transformer_stack_spec(blocks, d, 0.1), batch, tokens, d),
      checkpointed(transformer_stack_spec(blocks, d, 0.1, R"(,"checkpoint":true)"), batch, tokens, d);
  std::vector<double> a, b;
  for (int round = 0; round < (quick ? 1 : 7); ++round) {
    a.push_back(time_steps(plain, 2));
    b.push_back(time_steps(checkpointed, 2));
  }
  std::printf("%d transformer blocks (d_model %lld, 8 heads), batch %lld x %lld tokens, AdamW\n", blocks,
              static_cast<long long>(d), static_cast<long long>(batch), static_cast<long long>(tokens));
  std::printf("plain:        peak %8.1f MiB over forward+backward, %8.1f ms/step\n", plain.step_bytes / 1048576.0,
              median(a) / 1000);
  std::printf("checkpointed: peak %8.1f MiB over forward+backward, %8.1f ms/step   memory %.3f, time %.3f\n",
              checkpointed.step_bytes / 1048576.0, median(b) / 1000,
              static_cast<double>(checkpointed.step_bytes) / plain.step_bytes, median(b) / median(a));
  return 0;
}
