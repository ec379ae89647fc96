// What the trainable-token tests share: export_lora_cases.py's TokNet (an embedding, a linear layer
// and a head tied to the embedding) as TorchScript and as a layer spec, its batches, and the three
// AdamW steps of next-token loss its cases record.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "lora_support.h"
#include "support.h"
#include "twin_support.h"

namespace tokens_test {

using json = nlohmann::json;
using lora_test::outputs_on;

inline std::vector<float> values(const json& t) { return t["values"].get<std::vector<float>>(); }

// The exported model, computing with PyTorch's eager arithmetic (libtorch 2.x's profiling executor
// would otherwise optimise the graph after its first runs, and round otherwise than eager PyTorch).
inline acc_model* tokens_model() {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/tokens_model.pt").c_str(), &m), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(acc_model_set_graph_optimization(m, 0), ACC_OK);
  return m;
}

// The TorchScript model's network as a layer spec: "0" the embedding, "1" fc, "3" the tied head.
inline constexpr const char* kTokenSpec = R"([{"type":"embedding","num_embeddings":10,"embedding_dim":6%s},
  {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},
  {"type":"tied_linear","tie_to":0,"bias":false%s}])";

// The spec model with the TorchScript model's weights (checkpointed layers where `checkpoint`).
inline acc_model* spec_twin(bool checkpoint) {
  const char* flag = checkpoint ? R"(,"checkpoint":true)" : "";
  char spec[512];
  std::snprintf(spec, sizeof spec, kTokenSpec, flag, flag);
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(spec, &m), ACC_OK) << acc_last_error_message();
  acc_model* script = tokens_model();
  twin_test::copy_renamed(script, m, {{"embed.weight", "0.weight"}, {"fc.weight", "1.weight"}, {"fc.bias", "1.bias"}});
  acc_model_free(script);
  return m;
}

inline acc_tensor* batch_ids(const json& c, int step, int part) {
  return acc_test::longs(c["batches"][step][part].get<std::vector<int64_t>>(), {3, 4});
}

// The logits on step 0's ids, without gradients.
inline std::vector<float> logits(acc_model* m, const json& c) { return outputs_on(m, batch_ids(c, 0, 0)); }

// The case's three AdamW steps of next-token loss; returns the losses.
inline std::vector<double> train(acc_model* m, const json& c) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "lr", c["lr"]), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(m, "adamw", o, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  std::vector<double> losses;
  for (int step = 0; step < 3 && opt; ++step) {
    acc_tensor *ids = batch_ids(c, step, 0), *targets = nullptr, *out = nullptr, *flat = nullptr, *loss = nullptr;
    const int64_t flat_dims[] = {-1, 10}, target_dims[] = {-1};
    acc_tensor* t = batch_ids(c, step, 1);
    EXPECT_EQ(acc_tensor_reshape(t, target_dims, 1, &targets), ACC_OK);
    EXPECT_EQ(acc_model_forward1(m, ids, 0, &out), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_tensor_reshape(out, flat_dims, 2, &flat), ACC_OK);
    EXPECT_EQ(acc_loss_cross_entropy(flat, targets, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK);
    double value = 0;
    EXPECT_EQ(acc_tensor_item(loss, &value), ACC_OK);
    losses.push_back(value);
    EXPECT_EQ(acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    for (acc_tensor* x : {ids, t, targets, out, flat, loss}) acc_tensor_free(x);
  }
  acc_optimizer_free(opt);
  return losses;
}

inline std::vector<double> as_doubles(const json& losses) {
  std::vector<double> out;
  for (const auto& loss : losses) out.push_back(static_cast<float>(loss.get<double>()));
  return out;
}

// Names and roles: the TorchScript model's ("embed", "fc") or the spec model's ("0", "1").
struct Names {
  std::string embed, fc;
};

// Runs `check(model, names)` on the TorchScript model and on its spec twin, plain and checkpointed.
template <typename Check>
void for_each_twin(Check check) {
  {
    SCOPED_TRACE("TorchScript");
    acc_model* m = tokens_model();
    check(m, Names{"embed", "fc"});
    acc_model_free(m);
  }
  for (bool checkpoint : {false, true}) {
    SCOPED_TRACE(checkpoint ? "layer spec, checkpointed" : "layer spec");
    acc_model* m = spec_twin(checkpoint);
    check(m, Names{"0", "1"});
    acc_model_free(m);
  }
}

}  // namespace tokens_test
