// Sequences and chains in Python's layout: the nesting read from a scheduler's name, and each part's
// step count as PyTorch's SequentialLR and ChainedScheduler leave it (tests/interop resumes such runs
// in PyTorch itself).
#include <gtest/gtest.h>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "schedule/composite_python_state.h"

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
    const c10::IValue state = python_composition_state_dict(sequence, step, {0.1}, {0.05});
    std::vector<int64_t> steps;
    for (const c10::IValue& part : state.toGenericDict().at("_schedulers").toList())
      steps.push_back(part.toGenericDict().at("last_epoch").toInt());
    return steps;
  };
  EXPECT_EQ(steps_at(6), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(steps_at(3), (std::vector<int64_t>{1, 1, -1}));
  EXPECT_EQ(steps_at(0), (std::vector<int64_t>{0, -1, -1}));
}

TEST(CompositePythonState, PartsWithStateOfTheirOwnAreRefusedByName) {
  try {
    require_python_composition_layout(python_composition("linear_lr,one_cycle@3"), "linear_lr,one_cycle@3", "save");
    FAIL() << "a one_cycle part was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'one_cycle' schedule in 'linear_lr,one_cycle@3'"), std::string::npos);
  }
  EXPECT_NO_THROW(require_python_composition_layout(python_composition("constant_lr+exponential,linear@5"),
                                                    "constant_lr+exponential,linear@5", "save"));
}

}  // namespace
}  // namespace acc
