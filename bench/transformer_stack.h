// What bench_checkpointing, bench_lora and bench_lomo share: a stack of transformer encoder layers
// over a [batch, tokens, d_model] input with a linear head, trained on an MSE loss through the C API
// (AdamW, or another optimizer prepared by an accelerator), with the bytes of live tensors measured
// around each step (tensor_memory.h); or the same stack as a language model (an embedding and a
// head tied to it) trained on the next token; or a stack of convolutions on images.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tensor_memory.h"

// `blocks` pre-norm encoder layers (8 heads, feed-forward 4 x d) and a linear head to 1; `extra` is
// added to each layer's JSON object (e.g. R"(,"checkpoint":true)").
inline std::string transformer_stack_spec(int blocks, int64_t d, double dropout, const std::string& extra = "") {
  std::string json = "[";
  for (int i = 0; i < blocks; ++i)
    json += R"({"type":"transformer_encoder_layer","d_model":)" + std::to_string(d) + R"(,"nhead":8,"dim_feedforward":)" +
            std::to_string(4 * d) + R"(,"dropout":)" + std::to_string(dropout) +
            R"(,"batch_first":true,"norm_first":true)" + extra + "},";
  return json + R"({"type":"linear","in_features":)" + std::to_string(d) + R"(,"out_features":1}])";
}

// The stack as a language model over `vocab` tokens: layer 0 the embedding, a final norm, the head
// tied to the embedding (GPT-2's).
inline std::string transformer_lm_spec(int blocks, int64_t d, int64_t vocab) {
  std::string stack = transformer_stack_spec(blocks, d, 0.0);
  stack = stack.substr(0, stack.rfind(R"({"type":"linear")"));  // the blocks, without the head
  return R"([{"type":"embedding","num_embeddings":)" + std::to_string(vocab) + R"(,"embedding_dim":)" +
         std::to_string(d) + "}," + stack.substr(1) + R"({"type":"layernorm","normalized_shape":)" + std::to_string(d) +
         R"(},{"type":"tied_linear","tie_to":0}])";
}

// Token ids [batch, tokens] below `vocab` (a fixed pattern) and their next tokens [batch * tokens].
inline void transformer_lm_batch(int64_t batch, int64_t tokens, int64_t vocab, acc_tensor** x, acc_tensor** y) {
  std::vector<int64_t> ids(static_cast<size_t>(batch * tokens)), next(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>((i * 7919) % static_cast<size_t>(vocab));
    next[i] = static_cast<int64_t>((i * 7919 + 13) % static_cast<size_t>(vocab));
  }
  const int64_t xdims[] = {batch, tokens}, ydims[] = {batch * tokens};
  OK(acc_tensor_from_host(ids.data(), ids.size() * sizeof(int64_t), xdims, 2, ACC_DTYPE_INT64, x));
  OK(acc_tensor_from_host(next.data(), next.size() * sizeof(int64_t), ydims, 1, ACC_DTYPE_INT64, y));
}

// The stack's input [batch, tokens, d] (a fixed pattern in [-0.5, 0.5)) and target [batch, tokens, 1].
inline void transformer_stack_batch(int64_t batch, int64_t tokens, int64_t d, acc_tensor** x, acc_tensor** y) {
  std::vector<float> xs(static_cast<size_t>(batch * tokens * d)), ys(static_cast<size_t>(batch * tokens), 0.5f);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  const int64_t xdims[] = {batch, tokens, d}, ydims[] = {batch, tokens, 1};
  OK(acc_tensor_from_host(xs.data(), xs.size() * sizeof(float), xdims, 3, ACC_DTYPE_FLOAT32, x));
  OK(acc_tensor_from_host(ys.data(), ys.size() * sizeof(float), ydims, 3, ACC_DTYPE_FLOAT32, y));
}

// Images [batch, sizes...] (a fixed pattern in [-0.5, 0.5)) and targets [batch, 1].
inline void image_batch(int64_t batch, const std::vector<int64_t>& sizes, acc_tensor** x, acc_tensor** y) {
  std::vector<int64_t> xdims = {batch};
  xdims.insert(xdims.end(), sizes.begin(), sizes.end());
  int64_t n = 1;
  for (int64_t v : xdims) n *= v;
  std::vector<float> xs(static_cast<size_t>(n)), ys(static_cast<size_t>(batch), 0.5f);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  const int64_t ydims[] = {batch, 1};
  OK(acc_tensor_from_host(xs.data(), xs.size() * sizeof(float), xdims.data(), xdims.size(), ACC_DTYPE_FLOAT32, x));
  OK(acc_tensor_from_host(ys.data(), ys.size() * sizeof(float), ydims, 2, ACC_DTYPE_FLOAT32, y));
}

// How a loop trains: AdamW unprepared (backward, then the step after the measured part), or
// `algorithm` at rate `lr`, prepared by an accelerator of the loop's own, whose backward and step are
// both measured (a LOMO optimizer's update is inside its backward: acc_backward_lr).
struct StackTraining {
  const char* algorithm = "adamw";
  const char* lr = nullptr;  // null: the algorithm's default
  bool prepared = false;
  bool torchscript = false;  // the spec model saved as TorchScript and loaded back (script_model.h)
  const char* script = nullptr;  // set: this TorchScript file is the model (the spec is not used)
  int64_t vocab = 0;         // > 0: the model is transformer_lm_spec's over this many tokens, trained on the next one
  // Non-empty: the model takes images [batch, channels, height, width] of these sizes (conv_stack_spec's)
  // and gives [batch, 1], trained on an MSE loss.
  std::vector<int64_t> image;
  // PEFT's AdaLoRA loop (the model has AdaLoRA adapters): the loss regularized
  // (acc_model_adalora_loss) and each step ended by update_and_allocate.
  bool adalora = false;
};

// `blocks` convolution blocks of `channels` channels (a 3 x 3 convolution, a 1 x 1 one to 2 x the
// channels and one back, ReLUs) after a 3 x 3 stem from 3 channels, averaged over `size` x `size`
// pixels into a linear head to 1; also the names of its convolutions.
inline std::string conv_stack_spec(int blocks, int64_t channels, int64_t size, std::string* convolutions) {
  const std::string c = std::to_string(channels), c2 = std::to_string(2 * channels);
  std::string json = R"([{"type":"conv2d","in_channels":3,"out_channels":)" + c + R"(,"kernel_size":3,"padding":1},)";
  *convolutions = "0";
  int layer = 1;
  for (int i = 0; i < blocks; ++i) {
    json += R"({"type":"relu"},{"type":"conv2d","in_channels":)" + c + R"(,"out_channels":)" + c +
            R"(,"kernel_size":3,"padding":1},{"type":"relu"},{"type":"conv2d","in_channels":)" + c +
            R"(,"out_channels":)" + c2 + R"(,"kernel_size":1},{"type":"relu"},{"type":"conv2d","in_channels":)" + c2 +
            R"(,"out_channels":)" + c + R"(,"kernel_size":1},)";
    for (int k : {1, 3, 5}) *convolutions += "," + std::to_string(layer + k);
    layer += 6;
  }
  return json + R"({"type":"avgpool2d","kernel_size":)" + std::to_string(size) +
         R"(},{"type":"flatten"},{"type":"linear","in_features":)" + c + R"(,"out_features":1}])";
}

// `model` saved as TorchScript and loaded back (script_model.h computes it); frees `model`.
inline acc_model* as_torchscript(acc_model* model) {
  const std::string path = "/tmp/bench_stack_" + std::to_string(getpid()) + ".pt";
  OK(acc_model_save_torchscript(model, path.c_str()));
  acc_model_free(model);
  acc_model* loaded = nullptr;
  OK(acc_model_load_torchscript(path.c_str(), &loaded));
  std::remove(path.c_str());
  return loaded;
}

struct TransformerStackLoop {
  acc_accelerator* acc = nullptr;  // only when prepared
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *y = nullptr;
  bool fused = false;      // a LOMO optimizer: the update happens inside backward
  int64_t vocab = 0;       // a language model's: cross-entropy on the next token
  int64_t held_bytes = 0;  // live between steps: weights, optimizer state (after a first step)
  int64_t step_bytes = 0;  // the most live during a step's measured part beyond the held bytes
  bool adalora = false;    // StackTraining::adalora
  int64_t steps = 0;       // taken so far (AdaLoRA's global step)

  // `adapt` may change the model before its optimizer is made (freeze, add adapters).
  TransformerStackLoop(const std::string& json, int64_t batch, int64_t tokens, int64_t d,
                       const std::function<void(acc_model*)>& adapt = {}, const StackTraining& training = {})
      : fused(std::string(training.algorithm).find("lomo") != std::string::npos) {
    const int64_t before = counting()->live();
    if (training.prepared) OK(acc_accelerator_create(nullptr, &acc));
    OK(acc_set_seed(1));
    if (training.script)
      OK(acc_model_load_torchscript(training.script, &model));
    else
      OK(acc_model_from_spec(json.c_str(), &model));
    if (training.torchscript && !training.script) model = as_torchscript(model);
    if (adapt) adapt(model);
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o));
    if (training.lr) OK(acc_options_set(o, "lr", training.lr));
    OK(acc_optimizer_create(model, training.algorithm, o, &opt));
    acc_options_free(o);
    if (acc) OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
    if (!training.image.empty())
      image_batch(batch, training.image, &x, &y);
    else if (training.vocab > 0)
      transformer_lm_batch(batch, tokens, training.vocab, &x, &y);
    else
      transformer_stack_batch(batch, tokens, d, &x, &y);
    vocab = training.vocab;
    adalora = training.adalora;
    step();  // optimizer state exists from the first step on
    held_bytes = counting()->live() - before;
    step_bytes = 0;
  }
  ~TransformerStackLoop() {
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
    if (vocab > 0) {
      acc_tensor* logits = nullptr;
      const int64_t dims[] = {-1, vocab};
      OK(acc_tensor_reshape(out, dims, 2, &logits));
      OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
      acc_tensor_free(logits);
    } else {
      OK(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss));
    }
    if (adalora) {
      acc_tensor* regularized = nullptr;
      OK(acc_model_adalora_loss(model, loss, &regularized));
      acc_tensor_free(loss);
      loss = regularized;
    }
    if (!acc) {
      OK(acc_tensor_backward(loss));
      step_bytes = std::max(step_bytes, counting()->peak() - before);
      OK(acc_optimizer_step(opt));
      if (adalora) OK(acc_model_adalora_update_and_allocate(model, steps));
    } else {
      if (fused) {
        OK(acc_backward_lr(acc, loss, 1e-4));
      } else {
        OK(acc_backward(acc, loss));
        OK(acc_optimizer_step(opt));
      }
      step_bytes = std::max(step_bytes, counting()->peak() - before);
    }
    OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(out);
    acc_tensor_free(loss);
    ++steps;
  }
};
