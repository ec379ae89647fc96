// LoRA fine-tuning against full fine-tuning of the same model, interleaved round by round in one
// process: a stack of transformer encoder layers (d_model 256, 8 heads, feed-forward 1024) over
// sequences of 128 tokens, batch 8, AdamW. Full: every parameter trains. LoRA: rank 8 adapters on
// out_proj, linear1 and linear2, the rest frozen. Reported: the bytes of live CPU tensors held
// between steps (weights and optimizer state; tensor_memory.h), their peak during a step,
// and the step time. The same again with the model as TorchScript (saved and loaded back), whose
// linear1 and linear2 add PEFT's branch to their outputs and whose out_proj, read by the attention
// as a weight, computes with its adapted weight. DoRA (use_dora) on the same layers, beside them; PEFT's
// IA3 on the feed-forward layers (linear1's output, linear2's input scaled), LoHa r=8, LoKr r=8
// (PEFT's defaults: w1 whole, w2 a rank-8 product) and VeRA r=256 (PEFT's default) on LoRA's layers,
// OFT (blocks of 32) on linear1 and linear2 (layer spec only: the TorchScript export reads its
// feed-forward weights itself); and, on the layer spec, LoRA on the attention as PEFT's lora.MultiheadAttention adapts
// it (self_attn: q, k, v through the packed in_proj, and out_proj) with linear1 and linear2. As TorchScript, QLoRA too:
// the same adapters over the linear layers quantised to 4 bits (transformers' load_in_4bit: NF4, double quantisation),
// and over LLM.int8 layers (load_in_8bit, training on the CPU: bitsandbytes' dequantised product), against LoRA over
// float32 layers. Then new tokens on a language model of the same stack (vocabulary 32000, head tied to the embedding):
// LoRA beside the whole embedding trained (unfrozen: modules_to_save, what PEFT users did before
// trainable_token_indices, would untie the head in PEFT, and is refused here on a tied weight) against
// LoRA beside 16 of its rows (trainable_token_indices); and without LoRA, the embedding trained alone against 16 rows
// alone (PEFT's TrainableTokensConfig). Then a CNN (a stem and blocks of a 3 x 3 and two 1 x 1 convolutions, 128
// channels, 32 x 32 images, batch 16): full fine-tuning against LoRA and DoRA r=8 on every convolution. Last, given a
// mixture of experts written by export_moe.py (TorchScript, expert weights as 3-D parameters): full fine-tuning against
// LoRA r=8 on the expert weights (target_parameters, PEFT's ParamWrapper), the rest frozen. Between them, one model
// serving several fine-tunes: three named adapters, set_adapter's time between two of the same layers (their tensors
// exchanged in place) and to one of other layers (the layers wired again) against a forward in evaluation.
//
//   bench_lora [--quick] [MOE.pt]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transformer_stack.h"

namespace {

// A loop's held and peak bytes and its median step time; with a baseline, the ratios to it. `name`
// is padded to `width`.
void report(const char* name, const TransformerStackLoop& loop, const std::vector<double>& times,
            const TransformerStackLoop* base = nullptr, const std::vector<double>* base_times = nullptr,
            int width = 17) {
  std::printf("%-*s held %7.1f MiB, peak %7.1f MiB, %8.1f ms/step", width, name, loop.held_bytes / 1048576.0,
              (loop.held_bytes + loop.step_bytes) / 1048576.0, median(times) / 1000);
  if (base)
    std::printf("   held %.3f, peak %.3f, time %.3f", static_cast<double>(loop.held_bytes) / base->held_bytes,
                static_cast<double>(loop.held_bytes + loop.step_bytes) / (base->held_bytes + base->step_bytes),
                median(times) / median(*base_times));
  std::printf("\n");
}

// Adds r=8 adapters named `name` (null: acc_model_add_lora's "default") on `targets`.
void add_adapter(acc_model* model, const char* name, const char* targets) {
  acc_options* o = nullptr;
  OK(acc_options_create(ACC_OPTIONS_LORA, &o));
  OK(acc_options_set_int(o, "r", 8));
  OK(acc_options_set(o, "init_lora_weights", "false"));
  OK(name ? acc_model_add_lora_named(model, name, targets, o, nullptr)
          : acc_model_add_lora(model, targets, o, nullptr));
  acc_options_free(o);
}

// The stack in evaluation with three named adapters: "default" and "second" on out_proj, linear1
// and linear2 (switched in place), "other" on linear1 alone (switched by wiring the layers again).
// Microseconds per forward without gradients, and per switch of each kind, interleaved by round.
void bench_switching(const std::string& json, int64_t batch, int64_t tokens, int64_t d, bool torchscript, bool quick) {
  acc_model* model = nullptr;
  OK(acc_set_seed(1));
  OK(acc_model_from_spec(json.c_str(), &model));
  if (torchscript) model = as_torchscript(model);
  add_adapter(model, nullptr, "out_proj,linear1,linear2");
  add_adapter(model, "second", "out_proj,linear1,linear2");
  add_adapter(model, "other", "linear1");
  OK(acc_model_set_training(model, 0));
  acc_tensor *x = nullptr, *y = nullptr;
  transformer_stack_batch(batch, tokens, d, &x, &y);
  auto forward = [&] {
    acc_tensor* out = nullptr;
    OK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &out));
    acc_tensor_free(out);
  };
  bool second = false;
  auto same_layers = [&] { OK(acc_model_set_adapter(model, (second = !second) ? "second" : "default")); };
  bool other = false;
  auto rewired = [&] { OK(acc_model_set_adapter(model, (other = !other) ? "other" : "default")); };
  for (int i = 0; i < 3; ++i) forward(), same_layers(), same_layers(), rewired(), rewired();  // warm up
  const int rounds = quick ? 1 : 7;
  std::vector<double> f, s, w;
  for (int r = 0; r < rounds; ++r) {
    f.push_back(time_calls(forward, 4));
    s.push_back(time_calls(same_layers, 20));
    w.push_back(time_calls(rewired, 4));
  }
  std::printf(
      "%s, 3 adapters r=8, evaluation: forward %.1f us; set_adapter between adapters of the same layers "
      "%.1f us (%.1e of a forward), of other layers %.1f us (%.1e)\n",
      torchscript ? "as TorchScript" : "layer spec", median(f), median(s), median(s) / median(f), median(w),
      median(w) / median(f));
  acc_tensor_free(x);
  acc_tensor_free(y);
  acc_model_free(model);
}

// PEFT's adapter_names: a batch whose samples are split among three adapters of the feed-forward
// layers (whose inputs' rows are the batch's samples), in one forward, against a forward with one.
void bench_mixed_batch(const std::string& json, int64_t batch, int64_t tokens, int64_t d, bool quick) {
  acc_model* model = nullptr;
  OK(acc_set_seed(1));
  OK(acc_model_from_spec(json.c_str(), &model));
  for (const char* name : {static_cast<const char*>(nullptr), "second", "third"})
    add_adapter(model, name, "linear1,linear2");
  OK(acc_model_set_training(model, 0));
  acc_tensor *x = nullptr, *y = nullptr;
  transformer_stack_batch(batch, tokens, d, &x, &y);
  std::vector<const char*> names;
  for (int64_t i = 0; i < batch; ++i) names.push_back(i % 3 == 0 ? "default" : i % 3 == 1 ? "second" : "third");
  auto forward = [&] {
    acc_tensor* out = nullptr;
    OK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &out));
    acc_tensor_free(out);
  };
  auto mixed = [&] {
    acc_tensor_list* out = nullptr;
    OK(acc_model_forward_adapters(model, &x, 1, names.data(), names.size(), ACC_FORWARD_NO_GRAD, &out));
    acc_tensor_list_free(out);
  };
  for (int i = 0; i < 3; ++i) forward(), mixed();  // warm up
  std::vector<double> f, m;
  for (int r = 0; r < (quick ? 1 : 7); ++r) {
    f.push_back(time_calls(forward, 4));
    m.push_back(time_calls(mixed, 4));
  }
  std::printf(
      "layer spec, 3 adapters r=8 on linear1,linear2, evaluation: forward with one %.1f us; a batch mixing "
      "the 3 (adapter_names) %.1f us (%.2fx)\n",
      median(f), median(m), median(m) / median(f));
  acc_tensor_free(x);
  acc_tensor_free(y);
  acc_model_free(model);
}

}  // namespace

int main(int argc, char** argv) {
  const BenchArgs args = bench_args(argc, argv, "MOE.pt");
  const bool quick = args.quick;
  counting();
  const int blocks = quick ? 2 : 4;
  const int64_t batch = quick ? 2 : 8, tokens = quick ? 16 : 128, d = quick ? 32 : 256;
  const std::string json = transformer_stack_spec(blocks, d, 0.0);
  auto adapters = [](bool dora, const char* targets = "out_proj,linear1,linear2") {
    return [dora, targets](acc_model* model) {
      acc_options* o = nullptr;
      OK(acc_options_create(ACC_OPTIONS_LORA, &o));
      OK(acc_options_set_int(o, "r", 8));
      OK(acc_options_set_double(o, "lora_alpha", 16));
      OK(acc_options_set_bool(o, "use_dora", dora));
      OK(acc_model_add_lora(model, targets, o, nullptr));
      acc_options_free(o);
    };
  };
  // PEFT's IA3 on the feed-forward layers: linear1's output and linear2's input (a feedforward module).
  auto ia3 = [](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_IA3, &o));
    OK(acc_options_set(o, "feedforward_modules", "linear2"));
    OK(acc_model_add_ia3(model, "linear1,linear2", o, nullptr));
    acc_options_free(o);
  };
  // PEFT's LoHa r=8 on the same three layers as LoRA.
  auto loha = [](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_LOHA, &o));
    OK(acc_options_set_int(o, "r", 8));
    OK(acc_model_add_loha(model, "out_proj,linear1,linear2", o, nullptr));
    acc_options_free(o);
  };
  // PEFT's LoKr with its defaults (r=8) on the same three layers.
  auto lokr = [](acc_model* model) { OK(acc_model_add_lokr(model, "out_proj,linear1,linear2", nullptr, nullptr)); };
  // PEFT's VeRA with its defaults (r=256, shared projections) on the same three layers.
  auto vera = [](acc_model* model) { OK(acc_model_add_vera(model, "out_proj,linear1,linear2", nullptr, nullptr)); };
  // PEFT's OFT with its defaults (blocks of 32) on the feed-forward layers (the attention's out_proj
  // takes no input adapter).
  auto oft = [](acc_model* model) { OK(acc_model_add_oft(model, "linear1,linear2", nullptr, nullptr)); };
  // PEFT's BOFT with its defaults (blocks of 4, one factor) on the feed-forward layers, as OFT.
  auto boft = [](acc_model* model) { OK(acc_model_add_boft(model, "linear1,linear2", nullptr, nullptr)); };
  // PEFT's HRA with its defaults (r=8, the Householder product) on the feed-forward layers, as OFT.
  auto hra = [](acc_model* model) { OK(acc_model_add_hra(model, "linear1,linear2", nullptr, nullptr)); };
  // PEFT's FourierFT with its defaults (1000 spectrum entries, scaling 150) on the same three layers as LoRA.
  auto fourierft = [](acc_model* model) {
    OK(acc_model_add_fourierft(model, "out_proj,linear1,linear2", nullptr, nullptr));
  };
  // PEFT's MiSS with its defaults (r=64, the shard shared by the input's blocks) on the same three
  // layers as LoRA, and its "bat" variant (the weight's 64 x 64 blocks times their shard).
  auto miss = [](acc_model* model) { OK(acc_model_add_miss(model, "out_proj,linear1,linear2", nullptr, nullptr)); };
  // (r at most d_model: "bat"'s blocks must divide every side, which the smoke run's d_model 32 is)
  auto miss_bat = [d](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_MISS, &o));
    OK(acc_options_set_string(o, "init_weights", "bat"));
    OK(acc_options_set_int(o, "r", std::min<int64_t>(64, d)));
    OK(acc_model_add_miss(model, "out_proj,linear1,linear2", o, nullptr));
    acc_options_free(o);
  };
  // PEFT's C3A with its default blocks of 256 on the same three layers as LoRA (d_model 256; the
  // smoke run's d_model, where smaller).
  auto c3a = [d](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_C3A, &o));
    OK(acc_options_set_int(o, "block_size", std::min<int64_t>(256, d)));
    OK(acc_model_add_c3a(model, "out_proj,linear1,linear2", o, nullptr));
    acc_options_free(o);
  };
  // PEFT's SHiRA with its default r=32 (r (in + out) entries of each weight) on the same three layers
  // as LoRA (the smoke run's d_model 32 holds fewer: r at most d_model / 4 there).
  auto shira = [d](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_SHIRA, &o));
    OK(acc_options_set_int(o, "r", std::min<int64_t>(32, d / 4)));
    OK(acc_model_add_shira(model, "out_proj,linear1,linear2", o, nullptr));
    acc_options_free(o);
  };
  // PEFT's RandLoRA with its defaults (r=32, randlora_alpha 640, Kaiming bases) on the same three
  // layers as LoRA.
  auto randlora = [](acc_model* model) {
    OK(acc_model_add_randlora(model, "out_proj,linear1,linear2", nullptr, nullptr));
  };
  // PEFT's DeLoRA with its defaults (r=8, delora_lambda 15) on the same three layers as LoRA.
  auto delora = [](acc_model* model) { OK(acc_model_add_delora(model, "out_proj,linear1,linear2", nullptr, nullptr)); };
  // PEFT's GraLoRA with its defaults (r=32, 2 x 2 blocks, alpha 64) on the same three layers as LoRA.
  auto gralora = [](acc_model* model) {
    OK(acc_model_add_gralora(model, "out_proj,linear1,linear2", nullptr, nullptr));
  };
  // PEFT's HiRA with its defaults (r=32, Kaiming A, zero B) on the same three layers as LoRA.
  auto hira = [](acc_model* model) { OK(acc_model_add_hira(model, "out_proj,linear1,linear2", nullptr, nullptr)); };
  // PEFT's PVeRA with its defaults (r=256, pvera_A of 2 r rows, samples in training) on the same layers.
  auto pvera = [](acc_model* model) { OK(acc_model_add_pvera(model, "out_proj,linear1,linear2", nullptr, nullptr)); };
  // PEFT's RoAd with its defaults (road_1, groups of 64) on the same three layers as LoRA (the smoke
  // run's d_model, where smaller).
  auto road = [d](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_ROAD, &o));
    OK(acc_options_set_int(o, "group_size", std::min<int64_t>(64, d)));
    OK(acc_model_add_road(model, "out_proj,linear1,linear2", o, nullptr));
    acc_options_free(o);
  };
  // PEFT's AdaLoRA with its defaults (init_r 12 pruned towards target_r 8) on the same three layers as
  // LoRA, pruning at every step of a long schedule: the regularization and the allocator measured.
  auto adalora = [](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_ADALORA, &o));
    OK(acc_options_set_int(o, "total_step", 100000));
    OK(acc_model_add_adalora(model, "out_proj,linear1,linear2", o, nullptr));
    acc_options_free(o);
  };
  std::printf("%d transformer blocks (d_model %lld, 8 heads), batch %lld x %lld tokens, AdamW\n", blocks,
              static_cast<long long>(d), static_cast<long long>(batch), static_cast<long long>(tokens));
  for (bool torchscript : {false, true}) {
    StackTraining training;
    training.torchscript = torchscript;
    TransformerStackLoop full(json, batch, tokens, d, {}, training),
        lora(json, batch, tokens, d, adapters(false), training), dora(json, batch, tokens, d, adapters(true), training);
    // PEFT's methods beyond LoRA, each timed round by round beside full fine-tuning (on the layer spec:
    // the TorchScript export's forward reads its feed-forward layers' weights itself, which IA3's,
    // OFT's and BOFT's input adapters cannot reach).
    struct MethodLoop {
      const char* label;
      std::unique_ptr<TransformerStackLoop> loop;
      std::vector<double> times;
    };
    std::vector<MethodLoop> methods;
    if (!torchscript) {
      StackTraining pruned = training;
      pruned.adalora = true;
      auto add = [&](const char* label, const std::function<void(acc_model*)>& setup, const StackTraining& how) {
        methods.push_back({label, std::make_unique<TransformerStackLoop>(json, batch, tokens, d, setup, how), {}});
      };
      add("IA3 (ffn):", ia3, training);
      add("LoHa r=8:", loha, training);
      add("LoKr r=8:", lokr, training);
      add("VeRA r=256:", vera, training);
      add("OFT (ffn):", oft, training);
      add("AdaLoRA r=12:", adalora, pruned);
      add("BOFT (ffn):", boft, training);
      add("HRA r=8 (ffn):", hra, training);
      add("FourierFT n=1000:", fourierft, training);
      add("MiSS r=64:", miss, training);
      add("MiSS bat r=64:", miss_bat, training);
      add("C3A b=256:", c3a, training);
      add("SHiRA r=32:", shira, training);
      add("RandLoRA r=32:", randlora, training);
      add("DeLoRA r=8:", delora, training);
      add("RoAd road_1:", road, training);
      add("GraLoRA r=32:", gralora, training);
      add("HiRA r=32:", hira, training);
      add("PVeRA r=256:", pvera, training);
    }
    for (int i = 0; i < 3; ++i) {  // TorchScript profiles its first runs
      full.step(), lora.step(), dora.step();
      for (MethodLoop& method : methods) method.loop->step();
    }
    std::vector<double> a, b, c;
    for (int round = 0; round < (quick ? 1 : 7); ++round) {
      a.push_back(time_steps(full, 2));
      b.push_back(time_steps(lora, 2));
      c.push_back(time_steps(dora, 2));
      for (MethodLoop& method : methods) method.times.push_back(time_steps(*method.loop, 2));
    }
    std::printf("%s\n", torchscript ? "as TorchScript:" : "layer spec:");
    report("full fine-tuning:", full, a);
    report("LoRA r=8:", lora, b, &full, &a);
    report("DoRA r=8:", dora, c, &full, &a);
    for (const MethodLoop& method : methods) report(method.label, *method.loop, method.times, &full, &a);
    std::printf("DoRA / LoRA: peak %.3f, time %.3f\n",
                static_cast<double>(dora.held_bytes + dora.step_bytes) / (lora.held_bytes + lora.step_bytes),
                median(c) / median(b));
    if (torchscript) {
      // QLoRA: the same adapters over 4-bit layers (NF4, double quantisation; out_proj, whose weight
      // the attention reads, left as it is); and over LLM.int8 layers (load_in_8bit).
      auto quantised = [&](const char* config) {
        return [&adapters, config](acc_model* model) {
          OK(acc_model_quantize(model, config, nullptr));
          adapters(false)(model);
        };
      };
      TransformerStackLoop qlora(json, batch, tokens, d,
                                 quantised(R"({"load_in_4bit": true, "bnb_4bit_quant_type": "nf4",
                                    "bnb_4bit_use_double_quant": true, "llm_int8_skip_modules": ["out_proj"]})"),
                                 training),
          int8(json, batch, tokens, d, quantised(R"({"load_in_8bit": true, "llm_int8_skip_modules": ["out_proj"]})"),
               training);
      for (int i = 0; i < 3; ++i) lora.step(), qlora.step(), int8.step();
      std::vector<double> l, q, e;
      for (int round = 0; round < (quick ? 1 : 7); ++round) {
        l.push_back(time_steps(lora, 2));
        q.push_back(time_steps(qlora, 2));
        e.push_back(time_steps(int8, 2));
      }
      report("LoRA r=8:", lora, l, nullptr, nullptr, 26);
      report("QLoRA r=8 (NF4 layers):", qlora, q, &lora, &l, 26);
      report("LoRA r=8 on int8 layers:", int8, e, &lora, &l, 26);
      continue;
    }
    // The attention adapted too: q, k and v through in_proj, as PEFT's lora.MultiheadAttention.
    TransformerStackLoop attention(json, batch, tokens, d, adapters(false, "self_attn,linear1,linear2"), training);
    for (int i = 0; i < 3; ++i) lora.step(), attention.step();
    std::vector<double> l, t;
    for (int round = 0; round < (quick ? 1 : 7); ++round) {
      l.push_back(time_steps(lora, 2));
      t.push_back(time_steps(attention, 2));
    }
    report("LoRA r=8:", lora, l, nullptr, nullptr, 26);
    report("LoRA r=8 + attention:", attention, t, nullptr, nullptr, 26);
    std::printf("with the attention / without: held %.3f, peak %.3f, time %.3f\n",
                static_cast<double>(attention.held_bytes) / lora.held_bytes,
                static_cast<double>(attention.held_bytes + attention.step_bytes) / (lora.held_bytes + lora.step_bytes),
                median(t) / median(l));
  }
  // New tokens: the embedding trained whole against 16 of its rows.
  const int64_t vocab = quick ? 512 : 32000;
  const std::string lm = transformer_lm_spec(blocks, d, vocab);
  auto with_embedding = [](const char* setting, const char* value) {
    return [setting, value](acc_model* model) {
      acc_options* o = nullptr;
      OK(acc_options_create(ACC_OPTIONS_LORA, &o));
      OK(acc_options_set_int(o, "r", 8));
      OK(acc_options_set_double(o, "lora_alpha", 16));
      OK(acc_options_set(o, setting, value));
      OK(acc_model_add_lora(model, "linear1,linear2", o, nullptr));
      acc_options_free(o);
    };
  };
  std::string rows;
  for (int64_t i = 0; i < 16; ++i) rows += (i ? "," : "") + std::to_string(vocab - 16 + i);
  StackTraining lm_training;
  lm_training.vocab = vocab;
  // A baseline and a variant of the language model, timed round by round in turn; prints both and
  // the variant's ratios to the baseline.
  auto compare = [&](const char* base_name, const std::function<void(acc_model*)>& base_setup, const char* name,
                     const std::function<void(acc_model*)>& setup) {
    TransformerStackLoop base(lm, batch, tokens, d, base_setup, lm_training),
        other(lm, batch, tokens, d, setup, lm_training);
    std::vector<double> b, o;
    for (int round = 0; round < (quick ? 1 : 7); ++round) {
      b.push_back(time_steps(base, 2));
      o.push_back(time_steps(other, 2));
    }
    report(base_name, base, b, nullptr, nullptr, 38);
    report(name, other, o, &base, &b, 38);
  };
  std::printf("language model, vocabulary %lld, head tied; LoRA r=8 on linear1, linear2 and:\n",
              static_cast<long long>(vocab));
  // (modules_to_save on the tied embedding is refused: PEFT trains a copy, untying the head)
  auto unfrozen_embedding = [](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_LORA, &o));
    OK(acc_options_set_int(o, "r", 8));
    OK(acc_options_set_double(o, "lora_alpha", 16));
    OK(acc_model_add_lora(model, "linear1,linear2", o, nullptr));
    acc_options_free(o);
    size_t count = 0;
    OK(acc_model_set_requires_grad(model, "0.weight", 1, &count));
  };
  compare("the embedding whole (unfrozen):", unfrozen_embedding,
          "16 rows (trainable_token_indices):", with_embedding("trainable_token_indices", rows.c_str()));
  // New tokens without LoRA: the embedding trained whole, alone, against 16 of its rows alone (PEFT's
  // TrainableTokensConfig).
  auto embedding_alone = [](acc_model* model) {
    size_t count = 0;
    OK(acc_model_set_requires_grad(model, "*", 0, &count));
    OK(acc_model_set_requires_grad(model, "0.weight", 1, &count));
  };
  auto rows_alone = [&rows](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_TRAINABLE_TOKENS, &o));
    OK(acc_options_set(o, "token_indices", rows.c_str()));
    OK(acc_model_add_trainable_tokens(model, nullptr, o, nullptr));
    acc_options_free(o);
  };
  std::printf("the same language model without LoRA:\n");
  compare("the embedding alone, whole:", embedding_alone, "16 rows alone (TrainableTokens):", rows_alone);

  // Convolutions: full fine-tuning against LoRA and DoRA r=8 on each of them.
  const int64_t channels = quick ? 16 : 128, size = quick ? 8 : 32, images = quick ? 2 : 16;
  std::string convolutions;
  const std::string cnn = conv_stack_spec(quick ? 1 : 4, channels, size, &convolutions);
  auto conv_adapters = [&convolutions](bool dora) {
    return [dora, &convolutions](acc_model* model) {
      acc_options* o = nullptr;
      OK(acc_options_create(ACC_OPTIONS_LORA, &o));
      OK(acc_options_set_int(o, "r", 8));
      OK(acc_options_set_double(o, "lora_alpha", 16));
      OK(acc_options_set_bool(o, "use_dora", dora));
      OK(acc_model_add_lora(model, convolutions.c_str(), o, nullptr));
      acc_options_free(o);
    };
  };
  StackTraining image_training;
  image_training.image = {3, size, size};
  {
    TransformerStackLoop full(cnn, images, 0, 0, {}, image_training),
        lora(cnn, images, 0, 0, conv_adapters(false), image_training),
        dora(cnn, images, 0, 0, conv_adapters(true), image_training);
    std::vector<double> a, b, c;
    for (int round = 0; round < (quick ? 1 : 7); ++round) {
      a.push_back(time_steps(full, 2));
      b.push_back(time_steps(lora, 2));
      c.push_back(time_steps(dora, 2));
    }
    std::printf("CNN (%lld channels, %lld x %lld images, batch %lld), adapters on every convolution:\n",
                static_cast<long long>(channels), static_cast<long long>(size), static_cast<long long>(size),
                static_cast<long long>(images));
    report("full fine-tuning:", full, a);
    report("LoRA r=8:", lora, b, &full, &a);
    report("DoRA r=8:", dora, c, &full, &a);
  }

  // One model serving several fine-tunes: switching the active adapter against a forward.
  for (bool torchscript : {false, true}) bench_switching(json, batch, tokens, d, torchscript, quick);
  // (As TorchScript, nn.TransformerEncoderLayer's forward reads linear1's and linear2's weights itself
  // for its fast path: they compute with adapted weights, which a batch cannot mix.)
  bench_mixed_batch(json, batch, tokens, d, quick);

  // A mixture of experts: its expert weights adapted themselves (target_parameters).
  if (!args.operand) return 0;
  StackTraining moe_training;
  moe_training.script = args.operand;
  auto expert_adapters = [](acc_model* model) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_LORA, &o));
    OK(acc_options_set_int(o, "r", 8));
    OK(acc_options_set_double(o, "lora_alpha", 16));
    OK(acc_options_set(o, "target_parameters", "gate_up_proj,down_proj"));
    OK(acc_model_add_lora(model, "", o, nullptr));
    acc_options_free(o);
  };
  const int64_t moe_d = quick ? 32 : 256;
  TransformerStackLoop full(json, batch, tokens, moe_d, {}, moe_training),
      lora(json, batch, tokens, moe_d, expert_adapters, moe_training);
  for (int i = 0; i < 2; ++i) full.step(), lora.step();  // TorchScript profiles its first runs
  std::vector<double> a, b;
  for (int round = 0; round < (quick ? 1 : 7); ++round) {
    a.push_back(time_steps(full, 2));
    b.push_back(time_steps(lora, 2));
  }
  std::printf("mixture of experts (%s, d %lld), batch %lld x %lld tokens:\n", args.operand,
              static_cast<long long>(moe_d), static_cast<long long>(batch), static_cast<long long>(tokens));
  report("full fine-tuning:", full, a, nullptr, nullptr, 29);
  report("LoRA r=8 on the experts:", lora, b, &full, &a, 29);
  return 0;
}
