// LoRA fine-tuning against full fine-tuning of the same model, interleaved round by round in one
// process: a stack of transformer encoder layers (d_model 256, 8 heads, feed-forward 1024) over
// sequences of 128 tokens, batch 8, AdamW. Full: every parameter trains. LoRA: rank 8 adapters on
// out_proj, linear1 and linear2, the rest frozen. Reported: the bytes of live CPU tensors held
// between steps (weights, gradients, optimizer state; tensor_memory.h), their peak during a step,
// and the step time.
//
//   bench_lora [--quick]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tensor_memory.h"

namespace {

std::string spec(int blocks, int64_t d) {
  std::string json = "[";
  for (int i = 0; i < blocks; ++i)
    json += R"({"type":"transformer_encoder_layer","d_model":)" + std::to_string(d) + R"(,"nhead":8,"dim_feedforward":)" +
            std::to_string(4 * d) + R"(,"dropout":0.0,"batch_first":true,"norm_first":true},)";
  return json + R"({"type":"linear","in_features":)" + std::to_string(d) + R"(,"out_features":1}])";
}

struct Loop {
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *y = nullptr;
  int64_t held_bytes = 0;  // live after a step: weights, optimizer state
  int64_t peak_bytes = 0;  // the most live during a step

  Loop(const std::string& json, bool lora, int64_t batch, int64_t tokens, int64_t d) {
    const int64_t before = counting()->live();
    OK(acc_set_seed(1));
    OK(acc_model_from_spec(json.c_str(), &model));
    if (lora) {
      acc_options* o = nullptr;
      OK(acc_options_create(ACC_OPTIONS_LORA, &o));
      OK(acc_options_set_int(o, "r", 8));
      OK(acc_options_set_double(o, "lora_alpha", 16));
      OK(acc_model_add_lora(model, "out_proj,linear1,linear2", o, nullptr));
      acc_options_free(o);
    }
    OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
    std::vector<float> xs(static_cast<size_t>(batch * tokens * d), 0.1f), ys(static_cast<size_t>(batch * tokens), 0.5f);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
    const int64_t xdims[] = {batch, tokens, d}, ydims[] = {batch, tokens, 1};
    OK(acc_tensor_from_host(xs.data(), xs.size() * sizeof(float), xdims, 3, ACC_DTYPE_FLOAT32, &x));
    OK(acc_tensor_from_host(ys.data(), ys.size() * sizeof(float), ydims, 3, ACC_DTYPE_FLOAT32, &y));
    step();  // optimizer state exists from the first step on
    held_bytes = counting()->live() - before;
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
    OK(acc_optimizer_step(opt));
    peak_bytes = std::max(peak_bytes, counting()->peak() - before + held_bytes);
    OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  counting();
  const int blocks = quick ? 2 : 4;
  const int64_t batch = quick ? 2 : 8, tokens = quick ? 16 : 128, d = quick ? 32 : 256;
  const std::string json = spec(blocks, d);
  Loop full(json, false, batch, tokens, d), lora(json, true, batch, tokens, d);
  std::vector<double> a, b;
  for (int round = 0; round < (quick ? 1 : 7); ++round) {
    a.push_back(time_steps(full, 2));
    b.push_back(time_steps(lora, 2));
  }
  std::printf("%d transformer blocks (d_model %lld, 8 heads), batch %lld x %lld tokens, AdamW\n", blocks,
              static_cast<long long>(d), static_cast<long long>(batch), static_cast<long long>(tokens));
  std::printf("full fine-tuning: held %7.1f MiB, peak %7.1f MiB, %8.1f ms/step\n", full.held_bytes / 1048576.0,
              full.peak_bytes / 1048576.0, median(a) / 1000);
  std::printf("LoRA r=8:         held %7.1f MiB, peak %7.1f MiB, %8.1f ms/step   held %.3f, peak %.3f, time %.3f\n",
              lora.held_bytes / 1048576.0, lora.peak_bytes / 1048576.0, median(b) / 1000,
              static_cast<double>(lora.held_bytes) / full.held_bytes,
              static_cast<double>(lora.peak_bytes) / full.peak_bytes, median(b) / median(a));
  return 0;
}
