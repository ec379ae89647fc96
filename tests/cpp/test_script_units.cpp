// Stage 3's units of TorchScript models (model/script_units.h): one per submodule the forward
// calls, unit 0 for what it reads itself, hooks run around each call and the output unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/script_model.h"
#include "model/spec_model.h"

namespace {

std::shared_ptr<acc::Model> fixture(const std::string& name) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  EXPECT_NE(dir, nullptr);
  return acc::load_torchscript_model(std::string(dir ? dir : "") + "/" + name);
}

using Units = std::vector<std::vector<std::string>>;

acc::UnitPolicy by_size(int64_t min_num_params) {
  acc::UnitPolicy policy;
  policy.kind = acc::UnitPolicy::Kind::Size;
  policy.min_num_params = min_num_params;
  return policy;
}

acc::UnitPolicy classes(std::vector<std::string> names) {
  acc::UnitPolicy policy;
  policy.kind = acc::UnitPolicy::Kind::Classes;
  policy.classes = std::move(names);
  return policy;
}

// Hooks that record "before <unit>" and "after <unit>" and pass the output on.
acc::UnitHooks recording_hooks(std::vector<std::string>& events) {
  return acc::UnitHooks{[&events](size_t unit) { events.push_back("before " + std::to_string(unit)); },
                        [&events](size_t unit, const at::Tensor& output) {
                          events.push_back("after " + std::to_string(unit));
                          return output;
                        }};
}

}  // namespace

TEST(ScriptUnits, EachCalledSubmoduleIsAUnitAndForwardsOwnReadsAreUnitZero) {
  auto model = fixture("stacked.pt");
  const Units expected = {{"pos"},
                          {"embed.weight"},
                          {"blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.0.fc.weight", "blocks.0.fc.bias"},
                          {"blocks.1.norm.weight", "blocks.1.norm.bias", "blocks.1.fc.weight", "blocks.1.fc.bias"},
                          {"blocks.2.norm.weight", "blocks.2.norm.bias", "blocks.2.fc.weight", "blocks.2.fc.bias"},
                          {"head.weight", "head.bias"}};
  EXPECT_EQ(model->parameter_units(), expected);
}

// The hooks run in the forward's order: unit 0 around the whole forward, each submodule's unit
// around its call; what a hook returns is what the rest of the forward uses.
TEST(ScriptUnits, HooksRunAroundEachCallAndTheOutputIsUnchanged) {
  auto model = fixture("stacked.pt");
  const at::Tensor ids = at::tensor({0, 3, 7, 1, 2, 2, 5, 4}, at::kLong).reshape({2, 4});
  const at::Tensor plain = model->forward({ids}).at(0).second;
  std::vector<std::string> events;
  ASSERT_TRUE(model->set_unit_hooks(acc::UnitHooks{
      [&](size_t unit) { events.push_back("before " + std::to_string(unit)); },
      [&](size_t unit, const at::Tensor& output) {
        events.push_back("after " + std::to_string(unit));
        return unit == 2 ? output * 2 : output;  // a hook's result flows on
      }}));
  for (int run = 0; run < 3; ++run) {  // past the executor's profiling runs
    events.clear();
    const at::Tensor marked = model->forward({ids}).at(0).second;
    const std::vector<std::string> expected = {"before 0", "before 1", "after 1", "before 2", "after 2", "before 3",
                                               "after 3",  "before 4", "after 4", "before 5", "after 5", "after 0"};
    EXPECT_EQ(events, expected) << "run " << run;
    EXPECT_FALSE(at::allclose(marked, plain)) << "block 0's doubled output was not used";
  }
  ASSERT_FALSE(model->set_unit_hooks(acc::UnitHooks{}));
  events.clear();
  EXPECT_TRUE(at::equal(model->forward({ids}).at(0).second, plain)) << "uninstalled: the module's own forward";
  EXPECT_TRUE(events.empty());
}

// Stage 3 learns from a call's inputs when its backward is done with its frozen parameters: each
// marked call reports every tensor it takes, after its units' `before`, and they are the very
// tensors it runs on (block 1 takes block 0's output).
TEST(ScriptUnits, EachCallReportsTheTensorsItTakes) {
  auto model = fixture("stacked.pt");
  const at::Tensor ids = at::tensor({0, 3, 7, 1, 2, 2, 5, 4}, at::kLong).reshape({2, 4});
  std::vector<std::string> events;
  std::vector<const c10::TensorImpl*> outputs, inputs;
  ASSERT_TRUE(model->set_unit_hooks(acc::UnitHooks{
      [&](size_t unit) { events.push_back("before " + std::to_string(unit)); },
      [&](size_t unit, const at::Tensor& output) {
        events.push_back("after " + std::to_string(unit));
        outputs.push_back(output.unsafeGetTensorImpl());
        return output;
      },
      [&](const std::vector<size_t>& units, const std::vector<at::Tensor>& tensors) {
        std::string event = "inputs";
        for (size_t unit : units) event += " " + std::to_string(unit);
        events.push_back(event + ": " + std::to_string(tensors.size()));
        for (const auto& t : tensors) inputs.push_back(t.unsafeGetTensorImpl());
      }}));
  for (int run = 0; run < 3; ++run) {  // past the executor's profiling runs
    events.clear();
    outputs.clear();
    inputs.clear();
    model->forward({ids});
    const std::vector<std::string> expected = {
        "before 0", "before 1", "inputs 1: 1", "after 1", "before 2", "inputs 2: 1", "after 2", "before 3",
        "inputs 3: 1", "after 3", "before 4", "inputs 4: 1", "after 4", "before 5", "inputs 5: 1", "after 5", "after 0"};
    EXPECT_EQ(events, expected) << "run " << run;
    ASSERT_EQ(inputs.size(), 5u);
    EXPECT_EQ(inputs[0], ids.unsafeGetTensorImpl()) << "the embedding's call takes the ids";
    EXPECT_EQ(inputs[3], outputs[2]) << "block 1 takes block 0's output";
  }
  model->set_unit_hooks(acc::UnitHooks{});
}

// Hooks that hold each unit's parameters only between its before and after (as stage 3 does: an
// empty tensor outside), so that a read outside its unit fails; every parameter is empty at first.
struct EmptyingHooks {
  std::vector<std::vector<at::Tensor>> params;  // by unit
  std::vector<std::vector<at::Tensor>> values;  // what they hold while gathered
  EmptyingHooks(acc::Model& model, const Units& units) {
    std::map<std::string, at::Tensor> by_name;
    for (const auto& [name, tensor] : model.named_parameters()) by_name[name] = tensor;
    for (const auto& names : units) {
      params.emplace_back();
      values.emplace_back();
      for (const auto& name : names) {
        params.back().push_back(by_name.at(name));
        values.back().push_back(by_name.at(name).detach().clone());
        params.back().back().set_data(at::empty({0}, values.back().back().options()));
      }
    }
  }
  ~EmptyingHooks() {
    for (size_t u = 0; u < params.size(); ++u)
      for (size_t i = 0; i < params[u].size(); ++i) params[u][i].set_data(values[u][i]);
  }
  acc::UnitHooks hooks() {
    return acc::UnitHooks{[this](size_t unit) {
                            for (size_t i = 0; i < params[unit].size(); ++i) params[unit][i].set_data(values[unit][i]);
                          },
                          [this](size_t unit, const at::Tensor& output) {
                            for (auto& p : params[unit]) p.set_data(at::empty({0}, p.options()));
                            return output;
                          }};
  }
};

// LoRA adapters join the unit of their layer's weight: adapters of weights have their adapted
// weights made unit by unit (model/unit_lora.h); adapters of outputs (lora_dropout > 0) run from a
// marker after their layer's call, inside its unit, wherever the layer is (a unit itself, inside a
// block, or in what unit 0 runs), drawing dropout in the unsharded forward's order.
TEST(ScriptUnits, LoraAdaptersJoinTheirLayersUnit) {
  for (double dropout : {0.0, 0.1}) {
    SCOPED_TRACE(dropout);
    acc::LoraConfig config;
    config.target_names = {"blocks.1.fc", "head"};
    config.dropout = dropout;
    auto model = fixture("stacked.pt");
    model->add_lora(config);
    const Units units = model->parameter_units();
    ASSERT_EQ(units.size(), 6u);
    EXPECT_EQ(units[3], (std::vector<std::string>{"blocks.1.norm.weight", "blocks.1.norm.bias", "blocks.1.fc.weight",
                                                  "blocks.1.fc.bias", "blocks.1.fc.lora_A.weight",
                                                  "blocks.1.fc.lora_B.weight"}));
    EXPECT_EQ(units[5], (Units::value_type{"head.weight", "head.bias", "head.lora_A.weight", "head.lora_B.weight"}));
  }

  // Outputs adapted where stage 3 holds only the unit running: the blocks are units, the head is
  // read in unit 0 (the policy wraps only the blocks) and the adapted fc inside block 1.
  const at::Tensor ids = at::tensor({0, 3, 7, 1, 2, 2, 5, 4}, at::kLong).reshape({2, 4});
  for (bool training : {false, true}) {
    SCOPED_TRACE(training);
    acc::LoraConfig config;
    config.target_names = {"body.blocks.1.fc", "head"};
    config.dropout = 0.5;
    config.init = "false";  // B random: the adapters change the output
    auto model = fixture("wrapped.pt");
    model->add_lora(config);
    model->set_unit_policy(classes({"Block"}));
    model->set_training(training);
    const Units units = model->parameter_units();
    ASSERT_EQ(units.size(), 4u);
    EXPECT_EQ(units[0], (Units::value_type{"pos", "embed.weight", "head.weight", "head.bias", "head.lora_A.weight",
                                           "head.lora_B.weight"}));
    EXPECT_EQ(units[2].back(), "body.blocks.1.fc.lora_B.weight");
    at::NoGradGuard no_grad;
    at::manual_seed(7);
    const at::Tensor plain = model->forward({ids}).at(0).second;
    at::Tensor by_units;
    {
      EmptyingHooks emptying(*model, units);
      ASSERT_TRUE(model->set_unit_hooks(emptying.hooks()));
      at::manual_seed(7);
      by_units = model->forward({ids}).at(0).second;
      model->set_unit_hooks(acc::UnitHooks{});
    }
    EXPECT_TRUE(at::equal(by_units, plain)) << (by_units - plain).abs().max().item<float>();
    at::manual_seed(8);
    EXPECT_EQ(at::equal(model->forward({ids}).at(0).second, plain), !training) << "dropout draws in training only";
  }
}

TEST(ScriptUnits, ATupleResultAndCallsItCannotSeeFallBack) {
  // classifier.pt returns (logits, loss): fc1 and fc2 are units; unit 0 (nothing read directly) stays.
  auto classifier = fixture("classifier.pt");
  EXPECT_EQ(classifier->parameter_units(), (Units{{}, {"fc1.weight", "fc1.bias"}, {"fc2.weight", "fc2.bias"}}));
  // helper.pt runs its submodule from a method of its own: one unit, no hooks.
  auto helper = fixture("helper.pt");
  EXPECT_EQ(helper->parameter_units(), (Units{{"fc.weight", "fc.bias"}}));
  EXPECT_FALSE(helper->set_unit_hooks(acc::UnitHooks{[](size_t) {}, [](size_t, const at::Tensor& t) { return t; }}));
}

// A tied head (GPT-2's) holds the embedding's weight: its call gathers the embedding's unit again.
TEST(ScriptUnits, ATiedHeadGathersTheUnitOfTheWeightItShares) {
  auto model = fixture("tied.pt");
  EXPECT_EQ(model->parameter_units(), (Units{{}, {"embed.weight"}, {}}));
  std::vector<std::string> events;
  ASSERT_TRUE(model->set_unit_hooks(recording_hooks(events)));
  (void)model->forward({at::tensor({1, 2, 3}, at::kLong)});
  EXPECT_EQ(events, (std::vector<std::string>{"before 0", "before 1", "after 1", "before 1", "after 1", "after 0"}));
}

// FSDP's transformer_layer_cls_to_wrap: the blocks one level down become the units, wherever the
// forward calls them; everything else (the embedding, the head) joins unit 0.
TEST(ScriptUnits, ClassesToWrapReachNestedModules) {
  auto model = fixture("wrapped.pt");
  const auto block = [](int i) {
    const std::string p = "body.blocks." + std::to_string(i) + ".";
    return std::vector<std::string>{p + "norm.weight", p + "norm.bias", p + "fc.weight", p + "fc.bias"};
  };
  EXPECT_EQ(model->parameter_units().size(), 4u) << "by default: pos, embed, body, head";
  model->set_unit_policy(classes({"Block"}));
  EXPECT_EQ(model->parameter_units(),
            (Units{{"pos", "embed.weight", "head.weight", "head.bias"}, block(0), block(1), block(2)}));
  const at::Tensor ids = at::tensor({0, 3, 7, 1, 2, 2, 5, 4}, at::kLong).reshape({2, 4});
  const at::Tensor plain = model->forward({ids}).at(0).second;
  std::vector<std::string> events;
  ASSERT_TRUE(model->set_unit_hooks(recording_hooks(events)));
  EXPECT_TRUE(at::equal(model->forward({ids}).at(0).second, plain));
  EXPECT_EQ(events, (std::vector<std::string>{"before 0", "before 1", "after 1", "before 2", "after 2", "before 3",
                                              "after 3", "after 0"}));
  EXPECT_THROW(model->set_unit_policy(classes({"Body"})), acc::Error) << "the units are in use";
  ASSERT_FALSE(model->set_unit_hooks(acc::UnitHooks{}));
  try {  // as Accelerate: a class the model lacks is an error, not one silent unit
    model->set_unit_policy(classes({"Block", "NoSuchClass"}));
    ADD_FAILURE() << "a class the model lacks was accepted";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'NoSuchClass' (its classes: Block, Body, Embedding, LayerNorm, Linear, ModuleList, Wrapped)"), std::string::npos)
        << e.what();
  }
  model->set_unit_policy(classes({"Wrapped"}));  // the root's class: Accelerate finds it, and the root is one unit
  EXPECT_EQ(model->parameter_units().size(), 1u);
}

// FSDP's SIZE_BASED_WRAP: the modules torch's own size_based_auto_wrap_policy wraps, recorded by
// export_models.py for each threshold (nested ones, a MultiheadAttention never entered, a
// ModuleList never wrapped).
TEST(ScriptUnits, SizePolicyWrapsWhatTorchWraps) {
  const std::string dir = std::getenv("ACC_TEST_DATA") ? std::getenv("ACC_TEST_DATA") : "";
  std::ifstream in(dir + "/sized_wraps.json");
  ASSERT_TRUE(in) << "sized_wraps.json";
  const auto torch_wraps = nlohmann::json::parse(in);
  const torch::jit::Module module = torch::jit::load(dir + "/sized.pt");
  ASSERT_GE(torch_wraps.size(), 4u);
  for (const auto& [threshold, paths] : torch_wraps.items()) {
    const auto ours = acc::wrapped_module_paths(module, by_size(std::stoll(threshold)));
    EXPECT_EQ(ours, paths.get<std::set<std::string>>()) << "min_num_params " << threshold;
  }
}

// min_num_params 1000 wraps each block and, inside it, the MLP's two linear layers (FSDP's nested
// units): a block's unit holds its norm and attention, and is gathered around the whole block.
TEST(ScriptUnits, NestedUnitsHoldWhatTheirDescendantsDoNot) {
  auto model = fixture("sized.pt");
  const at::Tensor ids = at::tensor({0, 3, 7, 1, 2, 2, 5, 4}, at::kLong).reshape({2, 4});
  const at::Tensor plain = model->forward({ids}).at(0).second;
  model->set_unit_policy(by_size(1000));
  Units expected = {{"embed.weight", "head.weight", "head.bias"}};
  for (int b = 0; b < 3; ++b) {
    const std::string p = "blocks." + std::to_string(b) + ".";
    expected.push_back({p + "norm.weight", p + "norm.bias", p + "attn.in_proj_weight", p + "attn.in_proj_bias",
                        p + "attn.out_proj.weight", p + "attn.out_proj.bias"});
    expected.push_back({p + "mlp.0.weight", p + "mlp.0.bias"});
    expected.push_back({p + "mlp.2.weight", p + "mlp.2.bias"});
  }
  EXPECT_EQ(model->parameter_units(), expected);
  std::vector<std::string> events;
  ASSERT_TRUE(model->set_unit_hooks(recording_hooks(events)));
  for (int run = 0; run < 3; ++run) {  // past the executor's profiling runs
    events.clear();
    EXPECT_TRUE(at::allclose(model->forward({ids}).at(0).second, plain, 1e-6, 1e-6)) << "run " << run;
    std::vector<std::string> order = {"before 0"};
    for (int b = 0; b < 3; ++b) {
      const std::string u = std::to_string(3 * b + 1), l0 = std::to_string(3 * b + 2), l2 = std::to_string(3 * b + 3);
      order.insert(order.end(), {"before " + u, "before " + l0, "after " + l0, "before " + l2, "after " + l2, "after " + u});
    }
    order.push_back("after 0");
    EXPECT_EQ(events, order) << "run " << run;
  }
  ASSERT_FALSE(model->set_unit_hooks(acc::UnitHooks{}));
}

// Larger thresholds: the MLPs alone (a block's norm and attention join unit 0), the blocks, then
// nothing (one unit, as NO_WRAP).
TEST(ScriptUnits, SizePolicyThresholdsAndNoWrap) {
  auto model = fixture("sized.pt");
  model->set_unit_policy(by_size(2000));
  auto units = model->parameter_units();
  ASSERT_EQ(units.size(), 4u);
  EXPECT_NE(std::find(units[0].begin(), units[0].end(), "blocks.1.attn.in_proj_weight"), units[0].end());
  EXPECT_EQ(units[2], (std::vector<std::string>{"blocks.1.mlp.0.weight", "blocks.1.mlp.0.bias", "blocks.1.mlp.2.weight",
                                                "blocks.1.mlp.2.bias"}));
  model->set_unit_policy(by_size(3000));
  units = model->parameter_units();
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[0], (std::vector<std::string>{"embed.weight", "head.weight", "head.bias"}));
  EXPECT_EQ(units[3].size(), 10u) << "block 2 whole";
  model->set_unit_policy(by_size(12000));
  EXPECT_EQ(model->parameter_units().size(), 1u);
  acc::UnitPolicy whole;
  whole.kind = acc::UnitPolicy::Kind::Whole;
  model->set_unit_policy(whole);
  EXPECT_EQ(model->parameter_units().size(), 1u);
  std::vector<std::string> events;
  EXPECT_FALSE(model->set_unit_hooks(recording_hooks(events)));
  EXPECT_THROW(model->set_unit_policy(by_size(0)), acc::Error);
}

// A layer-spec model under a size policy: its layers are the leaves; those that reach
// min_num_params are units, the others form unit 0, gathered around the whole forward.
TEST(SpecUnits, SizePolicyMakesUnitsOfLargeLayers) {
  auto model = acc::model_from_spec(R"([{"type":"embedding","num_embeddings":8,"embedding_dim":16},
    {"type":"linear","in_features":16,"out_features":64},{"type":"gelu"},
    {"type":"linear","in_features":64,"out_features":16},{"type":"linear","in_features":16,"out_features":8}])");
  const at::Tensor ids = at::tensor({0, 3, 7, 1}, at::kLong);
  const at::Tensor plain = model->forward({ids}).at(0).second;
  model->set_unit_policy(by_size(1000));
  EXPECT_EQ(model->parameter_units(),
            (Units{{"0.weight", "4.weight", "4.bias"}, {"1.weight", "1.bias"}, {"3.weight", "3.bias"}}));
  std::vector<std::string> events;
  ASSERT_TRUE(model->set_unit_hooks(recording_hooks(events)));
  EXPECT_TRUE(at::equal(model->forward({ids}).at(0).second, plain));
  EXPECT_EQ(events, (std::vector<std::string>{"before 0", "before 1", "after 1", "before 2", "after 2", "after 0"}));
  model->set_unit_policy(by_size(5000));
  EXPECT_EQ(model->parameter_units().size(), 1u) << "no layer is large enough";
  EXPECT_FALSE(model->set_unit_hooks(recording_hooks(events)));
  // Class names are layer types: the linear layers are units, the embedding joins unit 0.
  model->set_unit_policy(classes({"linear"}));
  EXPECT_EQ(model->parameter_units(),
            (Units{{"0.weight"}, {"1.weight", "1.bias"}, {"3.weight", "3.bias"}, {"4.weight", "4.bias"}}));
  EXPECT_THROW(model->set_unit_policy(classes({"LlamaDecoderLayer"})), acc::Error);
}

// FSDP's activation_checkpointing on a layer-spec model: the layers the wrap policy makes units
// are recomputed in backward; a TorchScript model cannot re-run its modules from outside.
TEST(ActivationCheckpointing, TheWrapPolicysLayersAreCheckpointed) {
  const char* const spec = R"([{"type":"linear","in_features":4,"out_features":8},{"type":"tanh"},
      {"type":"layernorm","normalized_shape":8},{"type":"linear","in_features":8,"out_features":2}])";
  auto checkpointed = [&](const acc::UnitPolicy& policy) {
    auto model = acc::model_from_spec(spec);
    auto& layers = dynamic_cast<acc::SpecModel&>(*model);
    const size_t count = model->checkpoint_activations(policy);
    std::vector<bool> flags;
    for (size_t i = 0; i < 4; ++i) flags.push_back(layers.checkpoints_layer(i));
    EXPECT_EQ(count, static_cast<size_t>(std::count(flags.begin(), flags.end(), true)));
    return flags;
  };
  EXPECT_EQ(checkpointed(acc::UnitPolicy{}), (std::vector<bool>{true, false, true, true})) << "layers with parameters";
  acc::UnitPolicy classes;
  classes.kind = acc::UnitPolicy::Kind::Classes;
  classes.classes = {"linear"};
  EXPECT_EQ(checkpointed(classes), (std::vector<bool>{true, false, false, true}));
  acc::UnitPolicy whole;
  whole.kind = acc::UnitPolicy::Kind::Whole;
  EXPECT_EQ(checkpointed(whole), (std::vector<bool>{true, true, true, true})) << "no policy: every module";
  EXPECT_EQ(checkpointed(by_size(20)), (std::vector<bool>{true, false, false, false})) << "40, 16 and 18 parameters";
  classes.classes = {"conv2d"};
  EXPECT_THROW(checkpointed(classes), acc::Error) << "a class the model lacks";

  try {
    fixture("classifier.pt")->checkpoint_activations(acc::UnitPolicy{});
    ADD_FAILURE() << "a TorchScript model was checkpointed";
  } catch (const acc::Error& e) {
    EXPECT_EQ(e.status(), acc::Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("fsdp_activation_checkpointing"), std::string::npos) << e.what();
  }
}
