// The spec GPT (examples/c/char_lm.c's model: token and learned position embeddings, N pre-norm
// causal transformer blocks, a final layer norm, a head tied to the token embedding) trained with
// AdamW on the same token batches
//   (a) by a plain libtorch C++ loop over torch::nn modules (libtorch's own MultiheadAttention),
//   (b) through the C API: a layer-spec model, acc_prepare'd with its optimizer,
// interleaved round by round in one process. (a) starts from (b)'s weights, copied by name, so
// both train the same model: their losses agree, which the benchmark prints as a check.
//
//   bench_spec_gpt [--quick]
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "accelerate.h"
#include "bench_util.h"

namespace {

struct Sizes {
  int64_t vocab, context, d_model, heads, blocks, batch;
};

std::string gpt_spec(const Sizes& s) {
  const std::string d = std::to_string(s.d_model);
  std::string json = R"([{"type":"embedding","num_embeddings":)" + std::to_string(s.vocab) + R"(,"embedding_dim":)" +
                     d + R"(},{"type":"positional_embedding","num_embeddings":)" + std::to_string(s.context) +
                     R"(,"embedding_dim":)" + d + "}";
  for (int64_t i = 0; i < s.blocks; ++i)
    json += R"(,{"type":"transformer_encoder_layer","d_model":)" + d + R"(,"nhead":)" + std::to_string(s.heads) +
            R"(,"dim_feedforward":)" + std::to_string(4 * s.d_model) +
            R"(,"dropout":0.0,"activation":"gelu","batch_first":true,"norm_first":true,"causal":true})";
  return json + R"(,{"type":"layernorm","normalized_shape":)" + d + R"(},{"type":"tied_linear","tie_to":0}])";
}

// ---- (a) the same GPT in torch::nn modules, named as the spec's layers ("2.self_attn.in_proj_weight") ----

struct PositionsImpl : torch::nn::Module {
  PositionsImpl(int64_t n, int64_t d) { weight = register_parameter("weight", torch::randn({n, d})); }
  at::Tensor weight;
};
TORCH_MODULE(Positions);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const Sizes& s)
      : self_attn(register_module("self_attn", torch::nn::MultiheadAttention(s.d_model, s.heads))),
        linear1(register_module("linear1", torch::nn::Linear(s.d_model, 4 * s.d_model))),
        linear2(register_module("linear2", torch::nn::Linear(4 * s.d_model, s.d_model))),
        norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d_model})))),
        norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d_model})))) {}
  // x [T, B, E], as libtorch's attention takes it; mask [T, T], -inf above the diagonal.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    const at::Tensor h = norm1(x);
    const at::Tensor a = std::get<0>(self_attn->forward(h, h, h, /*key_padding_mask=*/at::Tensor(), /*need_weights=*/false, mask));
    const at::Tensor y = x + a;
    return y + linear2(torch::gelu(linear1(norm2(y))));
  }
  torch::nn::MultiheadAttention self_attn;
  torch::nn::Linear linear1, linear2;
  torch::nn::LayerNorm norm1, norm2;
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  explicit GptImpl(const Sizes& s)
      : tokens(register_module("0", torch::nn::Embedding(s.vocab, s.d_model))),
        positions(register_module("1", Positions(s.context, s.d_model))) {
    for (int64_t i = 0; i < s.blocks; ++i) blocks.push_back(register_module(std::to_string(2 + i), Block(s)));
    norm = register_module(std::to_string(2 + s.blocks), torch::nn::LayerNorm(torch::nn::LayerNormOptions({s.d_model})));
  }
  // ids [B, T] -> logits [B, T, V]
  at::Tensor forward(const at::Tensor& ids) {
    const int64_t t = ids.size(1);
    if (!mask.defined() || mask.size(0) != t) mask = torch::full({t, t}, -INFINITY).triu(1);
    at::Tensor h = (tokens(ids) + positions->weight.narrow(0, 0, t)).transpose(0, 1);
    for (auto& block : blocks) h = block(h, mask);
    return at::linear(norm(h.transpose(0, 1)), tokens->weight);
  }
  torch::nn::Embedding tokens;
  Positions positions;
  std::vector<Block> blocks;
  torch::nn::LayerNorm norm{nullptr};
  at::Tensor mask;
};
TORCH_MODULE(Gpt);

struct Batches {
  std::vector<at::Tensor> inputs, targets;  // [B, T] and [B * T]: the next token of each position
};

Batches make_batches(const Sizes& s, int count) {
  Batches b;
  for (int i = 0; i < count; ++i) {
    const at::Tensor ids = torch::randint(s.vocab, {s.batch, s.context + 1});
    b.inputs.push_back(ids.narrow(1, 0, s.context).contiguous());
    b.targets.push_back(ids.narrow(1, 1, s.context).reshape({-1}).contiguous());
  }
  return b;
}

struct PlainLoop {
  Gpt net;
  std::unique_ptr<torch::optim::AdamW> opt;
  const Batches& data;
  size_t next = 0;
  double loss = 0;

  PlainLoop(const Sizes& s, const Batches& batches) : net(s), data(batches) {
    opt = std::make_unique<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  }
  void step() {
    const size_t k = next++ % data.inputs.size();
    const at::Tensor logits = net->forward(data.inputs[k]);
    const at::Tensor l = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), data.targets[k]);
    l.backward();
    opt->step();
    for (auto& p : net->parameters()) p.mutable_grad().reset();  // to none, as the C API's zero_grad
    loss = l.item<double>();
  }
};

// ---- (b) the C API ----

acc_tensor* from_host(const at::Tensor& t) {
  acc_tensor* out = nullptr;
  OK(acc_tensor_from_host(t.data_ptr(), t.nbytes(), t.sizes().data(), static_cast<size_t>(t.dim()), ACC_DTYPE_INT64,
                          &out));
  return out;
}

struct CapiLoop {
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  std::vector<acc_tensor*> inputs, targets;
  int64_t vocab;
  size_t next = 0;
  double loss = 0;

  CapiLoop(const Sizes& s, const Batches& batches) : vocab(s.vocab) {
    OK(acc_accelerator_create(nullptr, &acc));
    OK(acc_model_from_spec(gpt_spec(s).c_str(), &model));
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o));
    OK(acc_options_set_double(o, "lr", 1e-3));
    OK(acc_options_set_double(o, "weight_decay", 0.01));
    OK(acc_optimizer_create(model, "adamw", o, &opt));
    acc_options_free(o);
    OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
    for (size_t i = 0; i < batches.inputs.size(); ++i) {
      inputs.push_back(from_host(batches.inputs[i]));
      targets.push_back(from_host(batches.targets[i]));
    }
  }
  ~CapiLoop() {
    for (auto* t : inputs) acc_tensor_free(t);
    for (auto* t : targets) acc_tensor_free(t);
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
  // Copies this model's weights into `net`, whose parameters have the same names.
  void copy_weights_to(torch::nn::Module& net) const {
    torch::NoGradGuard no_grad;
    for (auto& p : net.named_parameters()) {
      acc_tensor* t = nullptr;
      OK(acc_model_parameter(model, p.key().c_str(), &t));
      OK(acc_tensor_to_host(t, p.value().data_ptr(), p.value().nbytes()));
      acc_tensor_free(t);
    }
  }
  void step() {
    const size_t k = next++ % inputs.size();
    const int64_t flat[] = {-1, vocab};
    acc_tensor *logits = nullptr, *flat_logits = nullptr, *l = nullptr;
    OK(acc_model_forward1(model, inputs[k], ACC_FORWARD_DEFAULT, &logits));
    OK(acc_tensor_reshape(logits, flat, 2, &flat_logits));
    OK(acc_loss_cross_entropy(flat_logits, targets[k], ACC_REDUCTION_MEAN, 0.0, &l));
    OK(acc_backward(acc, l));
    OK(acc_optimizer_step(opt));
    OK(acc_optimizer_zero_grad(opt));
    OK(acc_tensor_item(l, &loss));
    for (acc_tensor* t : {logits, flat_logits, l}) acc_tensor_free(t);
  }
};

// Times both loops on one shape; false when they did not train the same model.
bool compare(const char* name, const Sizes& s, int rounds, int steps) {
  OK(acc_set_seed(0));
  const Batches batches = make_batches(s, 4);
  CapiLoop capi(s, batches);
  PlainLoop plain(s, batches);
  capi.copy_weights_to(*plain.net);
  plain.step();  // warm up both
  capi.step();
  std::vector<double> a, b;
  for (int r = 0; r < rounds; ++r) {  // interleaved rounds, so drift hits both alike
    a.push_back(time_steps(plain, steps));
    b.push_back(time_steps(capi, steps));
  }
  std::printf("%s: vocab %lld, context %lld, d_model %lld, %lld heads, %lld blocks, batch %lld; %d rounds x %d steps\n",
              name, static_cast<long long>(s.vocab), static_cast<long long>(s.context),
              static_cast<long long>(s.d_model), static_cast<long long>(s.heads), static_cast<long long>(s.blocks),
              static_cast<long long>(s.batch), rounds, steps);
  std::printf("  (a) plain libtorch %10.1f us/step   (b) C API, spec model %10.1f us/step   (b)/(a) %.3f\n", median(a),
              median(b), median(b) / median(a));
  std::printf("  last loss (a) %.6f, (b) %.6f\n", plain.loss, capi.loss);
  if (std::fabs(plain.loss - capi.loss) <= 1e-3 * std::fabs(plain.loss)) return true;
  std::fprintf(stderr, "%s: the two loops diverged: they do not train the same model\n", name);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  std::printf("spec GPT benchmark (%s, %d intra-op threads)\n", acc_build_info(), at::get_num_threads());
  bool same = compare("tiny", {32, 16, 32, 2, 2, 2}, quick ? 1 : 15, quick ? 2 : 50);
  if (!quick) {
    same = compare("char_lm.c's model", {80, 64, 64, 4, 2, 8}, 11, 10) && same;
    same = compare("larger", {256, 128, 128, 4, 4, 8}, 15, 3) && same;
  }
  return same ? 0 : 1;
}
