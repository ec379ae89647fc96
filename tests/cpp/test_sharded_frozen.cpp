// Stage 3 shards frozen parameters too (FSDP and DeepSpeed's ZeRO-3 do): at rest a process holds
// only its slice of them, and during backward each frozen unit is freed as soon as the calls that
// ran it are done with it (parallel/frozen_release.h), so a model whose base is frozen (LoRA,
// partial fine-tuning) is never whole in any process. Run on a Gloo group of this one process:
// the same engine, collectives of one.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "accelerator/prepared_model.h"
#include "common/name_patterns.h"
#include "common/options.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "parallel/sharded_data_parallel.h"
#include "parallel/sharded_optimizer.h"
#include "group_of_one.h"

namespace {

std::shared_ptr<acc::Model> torchscript_fixture(const std::string& name) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  EXPECT_NE(dir, nullptr) << "ACC_TEST_DATA names the TorchScript fixtures";
  return acc::load_torchscript_model(std::string(dir ? dir : "") + "/" + name);
}

// The frozen parameters (by name) that hold values.
std::vector<std::string> frozen_with_values(const acc::Model& model) {
  std::vector<std::string> names;
  for (const auto& entry : model.named_parameters())
    if (!entry.second.requires_grad() && entry.second.numel() > 0) names.push_back(entry.first);
  return names;
}

struct Case {
  std::shared_ptr<acc::Model> (*build)();
  const char* freeze;
  const char* probe;  // a trainable parameter: when its gradient comes, the frozen units' backward is done
  const char* running;  // the frozen parameters of the probe's own unit, whose backward is running then
  std::vector<at::Tensor> (*batch)();
};

const char* const kChain = R"([{"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},
    {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},
    {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},
    {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},
    {"type":"linear","in_features":6,"out_features":2}])";

// A GPT whose tied head computes with the frozen embedding's weight.
const char* const kTiedGpt = R"([{"type":"embedding","num_embeddings":8,"embedding_dim":8},
    {"type":"transformer_encoder_layer","d_model":8,"nhead":2,"dim_feedforward":12,"dropout":0.0,
     "batch_first":true,"norm_first":true,"causal":true},
    {"type":"transformer_encoder_layer","d_model":8,"nhead":2,"dim_feedforward":12,"dropout":0.0,
     "batch_first":true,"norm_first":true,"causal":true},
    {"type":"layernorm","normalized_shape":8},{"type":"tied_linear","tie_to":0}])";

std::vector<at::Tensor> chain_batch() { return {at::sin(at::arange(24, at::kFloat).reshape({4, 6}))}; }
std::vector<at::Tensor> token_batch() { return {at::remainder(at::arange(20, at::kLong) * 3, 8).reshape({4, 5})}; }

// A trained copy's weights: one step of plain SGD on the sum of squares of the output, sharded
// at stage 3 or not; `held` gets the frozen parameters holding values when `probe`'s gradient came.
std::vector<at::Tensor> train(const Case& c, bool sharded, std::vector<std::string>* held = nullptr,
                              std::vector<std::string>* at_rest = nullptr) {
  at::manual_seed(3);
  auto model = c.build();
  model->set_requires_grad(c.freeze, false);
  std::shared_ptr<acc::ShardedDataParallel> engine;
  if (sharded) {
    acc::ShardingOptions options;
    options.stage = 3;
    engine = std::make_shared<acc::ShardedDataParallel>(model, acc_test::group_of_one(c10::Device(c10::kCPU), acc::Backend::Gloo), options, acc::DataParallelOptions{});
    if (at_rest) *at_rest = frozen_with_values(*model);
  }
  acc::Options sgd(acc::optimizer_option_schema());
  sgd.set("lr", 0.1);
  std::shared_ptr<acc::Optimizer> optimizer = std::make_shared<acc::TorchOptimizer>(model, "sgd", sgd);
  if (engine) optimizer = std::make_shared<acc::ShardedOptimizer>(optimizer, engine);
  acc::PreparedModel prepared(model, c10::kCPU, std::nullopt, engine);
  if (held) {
    // A raw pointer: the hook lives on the model's own parameter, and a shared_ptr would keep it alive.
    acc::Model* raw = model.get();
    model->find_tensor(c.probe).register_hook([held, raw](const at::Tensor&) { *held = frozen_with_values(*raw); });
  }
  for (int step = 0; step < 2; ++step) {
    prepared.forward(c.batch()).at(0).second.pow(2).sum().backward();
    optimizer->step();
    optimizer->zero_grad();
  }
  // Merging while stage 3 holds only slices of the weights is refused, not done on empty ones.
  if (engine && !model->lora().empty()) EXPECT_ANY_THROW(model->merge_lora());
  std::vector<at::Tensor> weights;
  for (const auto& entry : engine ? engine->full_state_dict("the test") : model->state_dict())
    weights.push_back(entry.second.clone());
  return weights;
}

// stacked.pt with LoRA adapters (r 2, PEFT's initialisation) on its blocks' and head's linear layers:
// every other parameter frozen.
std::shared_ptr<acc::Model> stacked_with_lora(double dropout) {
  auto model = torchscript_fixture("stacked.pt");
  acc::LoraConfig config;
  config.target_names = {"blocks.0.fc", "blocks.1.fc", "blocks.2.fc", "head"};
  config.r = 2;
  config.alpha = 4;
  config.dropout = dropout;
  model->add_lora(config);
  return model;
}

const std::vector<std::pair<std::string, Case>>& cases() {
  static const std::vector<std::pair<std::string, Case>> all = {
      // The frozen layers' inputs need gradients (the first layer trains).
      {"chain, middle frozen", {[] { return acc::model_from_spec(kChain); }, "2.*,4.*,6.*", "0.weight", "", chain_batch}},
      // The transformer layers' weights are frozen, their norms train, and nothing before them
      // does: the frozen weights are needed for the norms' gradients alone. The embedding is
      // frozen and the head computes with it.
      {"GPT, frozen embedding and attention",
       {[] { return acc::model_from_spec(kTiedGpt); }, "0.*,*.self_attn.*,*.linear*", "1.norm1.weight", "1.*",
        token_batch}},
      // A TorchScript model's blocks (units by submodule call), frozen between a trained embedding
      // and head.
      {"TorchScript, frozen blocks",
       {[] { return torchscript_fixture("stacked.pt"); }, "blocks.0.*,blocks.1.*", "embed.weight", "", token_batch}},
      // LoRA on a TorchScript model: the adapted weights are made unit by unit (model/unit_lora.h),
      // their memory freed after each unit's forward and made again for its backward. The
      // position table, read by the forward itself, is gathered throughout.
      {"TorchScript with LoRA",
       {[] { return stacked_with_lora(0); }, "pos", "blocks.0.fc.lora_A.weight", "pos,blocks.0.*", token_batch}},
      // With dropout the adapters add to their layers' outputs, from markers inside the units
      // (model/script_lora.h), drawing dropout as the unsharded forward does.
      {"TorchScript with LoRA dropout",
       {[] { return stacked_with_lora(0.25); }, "pos", "blocks.0.fc.lora_A.weight", "pos,blocks.0.*", token_batch}},
  };
  return all;
}

}  // namespace

TEST(ShardedFrozen, FrozenParametersAreShardedAndFreedDuringBackward) {
  for (const auto& [name, c] : cases()) {
    SCOPED_TRACE(name);
    std::vector<std::string> held, at_rest;
    const auto sharded = train(c, true, &held, &at_rest);
    EXPECT_TRUE(at_rest.empty()) << "a frozen parameter is whole at rest: " << at_rest.front();
    // Every frozen unit whose calls' backward is done is gone again (the tied GPT's embedding too,
    // once the head's backward is), not kept to the backward's end.
    const auto running = *c.running ? std::make_unique<acc::NamePatterns>(c.running) : nullptr;
    for (const auto& name : held)
      EXPECT_TRUE(running && running->matches(name)) << "still gathered when '" << c.probe << "' got its gradient: " << name;
    if (*c.running) EXPECT_FALSE(held.empty()) << "the probe's own unit is gathered while its backward runs";
    const auto plain = train(c, false);
    ASSERT_EQ(sharded.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::equal(sharded[i], plain[i])) << "tensor " << i;
  }
}

// Under gradient accumulation the calls of each micro-batch are done with their frozen units in
// their own backward; a forward whose backward never comes (an evaluation with gradients) leaves
// the next backward keeping its frozen units to the end (never freed early), then all is as before.
TEST(ShardedFrozen, AForwardWithoutItsBackwardNeverFreesTooEarly) {
  const Case& c = cases()[0].second;
  at::manual_seed(3);
  auto model = c.build();
  model->set_requires_grad(c.freeze, false);
  acc::ShardingOptions options;
  options.stage = 3;
  auto engine = std::make_shared<acc::ShardedDataParallel>(model, acc_test::group_of_one(c10::Device(c10::kCPU), acc::Backend::Gloo), options, acc::DataParallelOptions{});
  acc::PreparedModel prepared(model, c10::kCPU, std::nullopt, engine);
  std::vector<std::string> held;
  acc::Model* raw = model.get();  // not the shared_ptr: the hook lives on the model's own parameter
  model->find_tensor(c.probe).register_hook([&held, raw](const at::Tensor&) { held = frozen_with_values(*raw); });
  const at::Tensor first = prepared.forward(c.batch()).at(0).second.pow(2).sum();
  const at::Tensor second = prepared.forward(c.batch()).at(0).second.pow(2).sum();  // before first's backward
  first.backward();
  const size_t frozen = 6;  // the weights and biases of 3 frozen layers
  EXPECT_EQ(held.size(), frozen) << "a backward while another forward awaits its own keeps the frozen units";
  second.backward();
  EXPECT_EQ(held.size(), frozen);
  EXPECT_TRUE(frozen_with_values(*model).empty()) << "the backward's end frees everything";
  prepared.forward(c.batch()).at(0).second.pow(2).sum().backward();
  EXPECT_TRUE(held.empty()) << "a forward followed by its backward frees early again";
}
