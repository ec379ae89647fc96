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

#include "bench_util.h"
#include "tensor_memory.h"

namespace {

std::string spec(int blocks, bool checkpoint, int64_t d) {
  std::string json = "[";
  for (int i = 0; i < blocks; ++i) {
    if (i) json += ",";
    json += R"({"type":"transformer_encoder_layer","d_model":)" + std::to_string(d) +
            R"(,"nhead":8,"dim_feedforward":)" + std::to_string(4 * d) + R"(,"dropout":0.1,"batch_first":true,
              "norm_first":true)" + (checkpoint ? R"(,"checkpoint":true)" : "") + "}";
  }
  return json + R"(,{"type":"linear","in_features":)" + std::to_string(d) + R"(,"out_features":1}])";
}

struct Loop {
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *y = nullptr;
  int64_t peak_bytes = 0;

  Loop(const std::string& json, int64_t batch, int64_t tokens, int64_t d) {
    OK(acc_set_seed(1));
    OK(acc_model_from_spec(json.c_str(), &model));
    OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
    std::vector<float> xs(static_cast<size_t>(batch * tokens * d), 0.1f), ys(static_cast<size_t>(batch * tokens), 0.5f);
    const int64_t xdims[] = {batch, tokens, d}, ydims[] = {batch, tokens, 1};
    OK(acc_tensor_from_host(xs.data(), xs.size() * sizeof(float), xdims, 3, ACC_DTYPE_FLOAT32, &x));
    OK(acc_tensor_from_host(ys.data(), ys.size() * sizeof(float), ydims, 3, ACC_DTYPE_FLOAT32, &y));
  }
  ~Loop() {
    acc_tensor_free(x);
    acc_tensor_free(y);
    acc_optimizer_free(opt);
    acc_model_free(model);
  }
  void step() {
    const int64_t before = counting()->live();
    counting()->reset_peak();
    acc_tensor *out = nullptr, *loss = nullptr;
    OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &out));
    OK(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss));
    OK(acc_tensor_backward(loss));
    peak_bytes = std::max(peak_bytes, counting()->peak() - before);
    OK(acc_optimizer_step(opt));
    OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  counting();
  const int blocks = quick ? 2 : 6;
  const int64_t batch = quick ? 2 : 8, tokens = quick ? 16 : 256, d = quick ? 32 : 256;
  Loop plain(spec(blocks, false, d), batch, tokens, d), checkpointed(spec(blocks, true, d), batch, tokens, d);
  plain.step();
  checkpointed.step();
  std::vector<double> a, b;
  for (int round = 0; round < (quick ? 1 : 7); ++round) {
    a.push_back(time_steps(plain, 2));
    b.push_back(time_steps(checkpointed, 2));
  }
  std::printf("%d transformer blocks (d_model %lld, 8 heads), batch %lld x %lld tokens, AdamW\n", blocks,
              static_cast<long long>(d), static_cast<long long>(batch), static_cast<long long>(tokens));
  std::printf("plain:        peak %8.1f MiB over forward+backward, %8.1f ms/step\n", plain.peak_bytes / 1048576.0,
              median(a) / 1000);
  std::printf("checkpointed: peak %8.1f MiB over forward+backward, %8.1f ms/step   memory %.3f, time %.3f\n",
              checkpointed.peak_bytes / 1048576.0, median(b) / 1000,
              static_cast<double>(checkpointed.peak_bytes) / plain.peak_bytes, median(b) / median(a));
  return 0;
}
