// Stage 3's units of TorchScript models (model/script_units.h): one per submodule the forward
// calls, unit 0 for what it reads itself, hooks run around each call and the output unchanged.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/script_model.h"

namespace {

std::shared_ptr<acc::Model> fixture(const std::string& name) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  EXPECT_NE(dir, nullptr);
  return acc::load_torchscript_model(std::string(dir ? dir : "") + "/" + name);
}

using Units = std::vector<std::vector<std::string>>;

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
  model->set_unit_classes({"Block"});
  EXPECT_EQ(model->parameter_units(),
            (Units{{"pos", "embed.weight", "head.weight", "head.bias"}, block(0), block(1), block(2)}));
  const at::Tensor ids = at::tensor({0, 3, 7, 1, 2, 2, 5, 4}, at::kLong).reshape({2, 4});
  const at::Tensor plain = model->forward({ids}).at(0).second;
  std::vector<std::string> events;
  ASSERT_TRUE(model->set_unit_hooks(recording_hooks(events)));
  EXPECT_TRUE(at::equal(model->forward({ids}).at(0).second, plain));
  EXPECT_EQ(events, (std::vector<std::string>{"before 0", "before 1", "after 1", "before 2", "after 2", "before 3",
                                              "after 3", "after 0"}));
  EXPECT_THROW(model->set_unit_classes({"Body"}), acc::Error) << "the units are in use";
  ASSERT_FALSE(model->set_unit_hooks(acc::UnitHooks{}));
  model->set_unit_classes({"NoSuchClass"});
  EXPECT_EQ(model->parameter_units().size(), 1u) << "no module of the classes: one unit";
}
