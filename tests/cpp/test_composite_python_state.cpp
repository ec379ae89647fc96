// Sequences and chains in Python's layout: the nesting read from a scheduler's name, and each part's
// step count as PyTorch's SequentialLR and ChainedScheduler leave it (tests/interop resumes such runs
// in PyTorch itself).
#include <gtest/gtest.h>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "optim/optimizer_options.h"
#include "schedule/composite_python_state.h"
#include "schedule/schedule_options.h"
#include "schedule/scheduler_composites.h"
#include "schedule/scheduler_python_state.h"

namespace acc {
namespace {

using Kind = PythonComposition::Kind;

TEST(CompositePythonState, TheNestingComesFromTheName) {
  EXPECT_FALSE(composite_schedule_name("cosine"));
  const PythonComposition sequence = python_composition("linear_lr,cosine_annealing@5,step@9");
  ASSERT_EQ(sequence.kind, Kind::Sequence);
  ASSERT_EQ(sequence.parts.size(), 3u);
  EXPECT_EQ(sequence.parts[1].name, "cosine_annealing");
  EXPECT_EQ(sequence.milestones, (std::vector<int64_t>{5, 9}));

  const PythonComposition chain_first = python_composition("constant_lr+exponential,step@4");
  ASSERT_EQ(chain_first.kind, Kind::Sequence);
  ASSERT_EQ(chain_first.parts[0].kind, Kind::Chain);
  EXPECT_EQ(chain_first.parts[0].parts[1].name, "exponential");
  EXPECT_EQ(chain_first.milestones, (std::vector<int64_t>{4}));

  const PythonComposition sequence_first = python_composition("linear_lr,step@2+exponential");
  ASSERT_EQ(sequence_first.kind, Kind::Chain);
  ASSERT_EQ(sequence_first.parts.size(), 2u);
  EXPECT_EQ(sequence_first.parts[0].kind, Kind::Sequence);
  EXPECT_EQ(sequence_first.parts[0].milestones, (std::vector<int64_t>{2}));
  EXPECT_EQ(sequence_first.parts[1].name, "exponential");
}

// The part step counts torch 1.13 leaves after 0, 3 and 6 steps of SequentialLR([a, b, c], [2, 4])
// (printed from it: a stops at 1, b at 1; a part before its milestone at -1).
TEST(CompositePythonState, EachPartCountsItsOwnSteps) {
  const PythonComposition sequence = python_composition("constant_lr,exponential@2,step@4");
  auto steps_at = [&](int64_t step) {
    const c10::IValue state = python_composition_state_dict(sequence, step,
                                                            [](size_t, int64_t) {
                                                              return PythonPartState{{0.1}, {}};
                                                            },
                                                            {0.05});
    std::vector<int64_t> steps;
    for (const c10::IValue& part : state.toGenericDict().at("_schedulers").toList())
      steps.push_back(part.toGenericDict().at("last_epoch").toInt());
    return steps;
  };
  EXPECT_EQ(steps_at(6), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(steps_at(3), (std::vector<int64_t>{1, 1, -1}));
  EXPECT_EQ(steps_at(0), (std::vector<int64_t>{0, -1, -1}));
}

std::shared_ptr<Optimizer> sgd() {
  Options o(optimizer_option_schema());
  o.set_from_text("lr", "0.1");
  o.set_from_text("momentum", "0.9");
  return std::make_shared<TorchOptimizer>(model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])"),
                                          "sgd", o);
}

Options settings(std::initializer_list<std::pair<const char*, const char*>> items) {
  Options o(scheduler_option_table());
  for (const auto& [key, value] : items) o.set_from_text(key, value);
  return o;
}

c10::impl::GenericDict part(const c10::IValue& state, size_t i) {
  return state.toGenericDict().at("_schedulers").toList().get(i).toGenericDict();
}

// A part whose PyTorch class keeps a state of its own keeps it in the sequence too, at its own step:
// a warm restart's cycle as SequentialLR leaves it (made at its step 0 and set one step back before
// its milestone; restarted by step(0) there).
TEST(CompositePythonState, APartKeepsItsOwnFieldsAtItsOwnStep) {
  auto opt = sgd();
  auto sched = make_scheduler(opt, "constant_lr", settings({{"factor", "0.5"}, {"total_iters", "2"}}));
  sched = schedule_then(sched, 2, "cosine_annealing_warm_restarts", settings({{"T_0", "2"}, {"T_mult", "2"}}));
  auto restarts_at = [&] {
    const auto restarts = part(python_scheduler_state_dict(*sched), 1);
    return std::vector<int64_t>{restarts.at("last_epoch").toInt(), restarts.at("T_cur").toInt(),
                                restarts.at("T_i").toInt()};
  };
  EXPECT_EQ(restarts_at(), (std::vector<int64_t>{-1, 0, 2}));
  for (int step = 0; step < 5; ++step) sched->step();  // 3 steps into the part: its first period of 2 is over
  EXPECT_EQ(restarts_at(), (std::vector<int64_t>{3, 1, 4}));
  EXPECT_FALSE(part(python_scheduler_state_dict(*sched), 0).contains("T_cur"));
}

// A one_cycle in a sequence: its phases, base rates of its own (it rewrites initial_lr: max_lr /
// div_factor) and the keys its constructor writes into the groups.
TEST(CompositePythonState, AOneCyclePartKeepsItsPhasesBaseRatesAndGroupKeys) {
  auto opt = sgd();
  auto sched = make_scheduler(opt, "linear_lr", settings({{"start_factor", "0.5"}, {"total_iters", "2"}}));
  sched = schedule_then(sched, 2, "one_cycle", settings({{"max_lr", "1.0"}, {"total_steps", "10"}}));
  const c10::IValue state = python_scheduler_state_dict(*sched);
  EXPECT_EQ(part(state, 1).at("total_steps").toInt(), 10);
  EXPECT_EQ(part(state, 1).at("base_lrs").toList().get(0).toDouble(), 1.0 / 25);
  EXPECT_EQ(part(state, 0).at("base_lrs").toList().get(0).toDouble(), 0.1);
  const SchedulerGroupKeys keys = python_scheduler_group_keys({sched});
  ASSERT_EQ(keys.size(), 1u);
  auto key = [&](const std::string& name) {
    for (const auto& [k, v] : keys[0])
      if (k == name) return v;
    return -1.0;
  };
  EXPECT_EQ(key("max_lr"), 1.0);
  EXPECT_EQ(key("max_momentum"), 0.95);
}

}  // namespace
}  // namespace acc
