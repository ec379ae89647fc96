// PyTorch's OneCycleLR and CyclicLR seen from C++: the momentum (or Adam's beta1) they move against
// the rate. The expected values are torch 2.6's for the same settings, compared to the bit.
#include <gtest/gtest.h>

#include <torch/types.h>
#include <torch/utils.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "optim/group_hyperparameters.h"
#include "optim/optimizer.h"
#include "schedule/chainable_schedules.h"
#include "schedule/cyclic_scheduler.h"
#include "schedule/one_cycle_scheduler.h"
#include "schedule/scheduler.h"

namespace {

const char* kSpec = R"([{"type":"linear","in_features":3,"out_features":2}])";

std::shared_ptr<acc::Optimizer> optimizer(const std::string& algorithm,
                                          std::initializer_list<std::pair<const char*, const char*>> items) {
  acc::Options o(acc::optimizer_option_schema());
  for (const auto& kv : items) o.set_from_text(kv.first, kv.second);
  return std::make_shared<acc::TorchOptimizer>(acc::model_from_spec(kSpec), algorithm, o);
}

// (lr, momentum) at steps 0..steps of a Scheduler (OneCycleScheduler or CyclicScheduler).
template <class Scheduler = acc::OneCycleScheduler>
std::vector<std::pair<double, double>> cycle(const std::shared_ptr<acc::Optimizer>& opt, acc::ScheduleOptions options,
                                             int steps, const std::string& key) {
  Scheduler sched(opt, options);
  std::vector<std::pair<double, double>> out;
  for (int s = 0; s <= steps; ++s) {
    if (s) sched.step();
    out.emplace_back(sched.last_lr(0), acc::group_hyperparameter(*opt, 0, key));
    EXPECT_EQ(opt->lr(0), sched.last_lr(0));
  }
  return out;
}

}  // namespace

TEST(OneCycle, CosineCycleMovesSgdsMomentumAgainstTheRate) {
  acc::ScheduleOptions o;
  o.max_lr = std::vector<double>{1.0};
  o.total_steps = 10;
  const auto got = cycle(optimizer("sgd", {{"lr", "0.1"}, {"momentum", "0.9"}}), o, 10, "momentum");
  const std::vector<std::pair<double, double>> want = {
      {0.040000000000000036, 0.95}, {0.52, 0.8999999999999999},
      {1.0, 0.85},                  {0.9504846320134737, 0.854951556604879},
      {0.8117456539497631, 0.8688255099070633}, {0.6112620219362893, 0.8888739533021842},
      {0.38874197806371075, 0.9111260466978157}, {0.18825834605023697, 0.9311744900929366},
      {0.049519367986526286, 0.945048443395121}, {4e-06, 0.95},
      {0.04951936798652623, 0.945048443395121}};
  EXPECT_EQ(got, want);
}

TEST(OneCycle, ThreeLinearPhasesMoveAdamsBeta1) {
  acc::ScheduleOptions o;
  o.max_lr = std::vector<double>{0.5};
  o.total_steps = 13;
  o.pct_start = 0.25;
  o.anneal_strategy = "linear";
  o.three_phase = true;
  o.div_factor = 10.0;
  o.final_div_factor = 100.0;
  const auto got = cycle(optimizer("adam", {{"lr", "0.1"}}), o, 12, "beta1");
  const std::vector<double> lrs = {0.05,   0.25,   0.44999999999999996, 0.35,   0.14999999999999997,
                                   0.046700000000000005, 0.040100000000000004, 0.0335, 0.0269,
                                   0.020300000000000002, 0.013700000000000004, 0.007100000000000002,
                                   0.0005000000000000004};
  const std::vector<double> betas = {0.95, 0.9055555555555556, 0.861111111111111, 0.8833333333333333,
                                     0.9277777777777777, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95};
  ASSERT_EQ(got.size(), lrs.size());
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_EQ(got[s].first, lrs[s]) << "step " << s;
    EXPECT_EQ(got[s].second, betas[s]) << "step " << s;
  }
}

TEST(OneCycle, AnOptimizerWithoutMomentumNeedsCycleMomentumOff) {
  acc::ScheduleOptions o;
  o.max_lr = std::vector<double>{0.1};
  o.total_steps = 5;
  const auto adagrad = optimizer("adagrad", {});
  try {
    acc::OneCycleScheduler sched(adagrad, o);
    ADD_FAILURE() << "adagrad has no momentum to cycle";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("set cycle_momentum false"), std::string::npos) << e.what();
  }
  o.cycle_momentum = false;
  acc::OneCycleScheduler sched(adagrad, o);
  EXPECT_DOUBLE_EQ(sched.last_lr(0), 0.1 / 25.0);  // the cosine annealing at 0 rounds it
}

// triangular2 halves each cycle's height; the optimizer's own rate (0.5) is replaced by base_lr.
TEST(Cyclic, Triangular2MovesSgdsMomentumAgainstTheRate) {
  acc::ScheduleOptions o;
  o.base_lr = std::vector<double>{0.01};
  o.max_lr = std::vector<double>{0.1};
  o.step_size_up = 3;
  o.step_size_down = 2;
  o.mode = "triangular2";
  const auto got = cycle<acc::CyclicScheduler>(optimizer("sgd", {{"lr", "0.5"}, {"momentum", "0.9"}}), o, 12,
                                                   "momentum");
  const std::vector<std::pair<double, double>> want = {
      {0.01, 0.9},
      {0.039999999999999994, 0.8666666666666667},
      {0.06999999999999999, 0.8333333333333334},
      {0.09999999999999999, 0.8},
      {0.055, 0.8500000000000001},
      {0.01, 0.9},
      {0.025000000000000015, 0.8833333333333333},
      {0.039999999999999994, 0.8666666666666667},
      {0.055, 0.8500000000000001},
      {0.03250000000000002, 0.875},
      {0.01, 0.9},
      {0.01750000000000001, 0.8916666666666667},
      {0.024999999999999998, 0.8833333333333334}};
  EXPECT_EQ(got, want);
}

// exp_range scales each step's height by gamma ** step; Adam's beta1 is the momentum it moves.
TEST(Cyclic, ExpRangeMovesAdamsBeta1) {
  acc::ScheduleOptions o;
  o.base_lr = std::vector<double>{0.001};
  o.max_lr = std::vector<double>{0.01};
  o.step_size_up = 2;
  o.mode = "exp_range";
  o.gamma = 0.9;
  o.base_momentum = std::vector<double>{0.85};
  o.max_momentum = std::vector<double>{0.95};
  const auto got = cycle<acc::CyclicScheduler>(optimizer("adam", {{"lr", "0.1"}}), o, 8, "beta1");
  const std::vector<std::pair<double, double>> want = {
      {0.001, 0.95},
      {0.005050000000000001, 0.9049999999999999},
      {0.008290000000000002, 0.869},
      {0.004280500000000001, 0.91355},
      {0.001, 0.95},
      {0.0036572050000000006, 0.9204755},
      {0.005782969000000001, 0.8968558999999999},
      {0.0031523360500000006, 0.926085155},
      {0.001, 0.95}};
  EXPECT_EQ(got, want);
}

// A momentum out of the optimizer's range, or an optimizer without one, is refused before any
// group's rate or momentum changes.
TEST(Cyclic, ARefusedScheduleChangesNothing) {
  const auto adam = optimizer("adam", {{"lr", "0.5"}, {"beta1", "0.7"}});
  acc::ScheduleOptions o;
  o.base_lr = std::vector<double>{0.01};
  o.max_lr = std::vector<double>{0.1};
  o.max_momentum = std::vector<double>{1.0};  // Adam's beta1 is below 1
  EXPECT_THROW(acc::CyclicScheduler(adam, o), std::exception);
  EXPECT_EQ(adam->lr(0), 0.5);
  EXPECT_EQ(acc::group_hyperparameter(*adam, 0, "beta1"), 0.7);
  o.max_momentum.reset();
  try {
    acc::CyclicScheduler sched(optimizer("adagrad", {}), o);
    ADD_FAILURE() << "adagrad has no momentum to cycle";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the cyclic schedule cycles the momentum"), std::string::npos) << e.what();
  }
}

// max_lr, base_lr, the momenta and ReduceLROnPlateau's min_lr given one per parameter group (as text
// "0.5,0.05"), over two groups: each group's rate and momentum after every step are those the
// python3 torch the build found gives for the same lists (tests/data/export_schedule_cases.py), to
// the bit.
TEST(CyclingSchedulers, PerGroupSettingsGivePyTorchsRatesAndMomentaToTheBit) {
  const char* dir = std::getenv("ACC_TEST_DATA");
  std::ifstream in(std::string(dir ? dir : "") + "/schedule_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_schedule_cases fixture";
  const auto data = nlohmann::json::parse(in);
  ASSERT_EQ(data["per_group_cases"].size(), 5u);
  const auto number = [](const nlohmann::json& hex) { return std::strtod(hex.get<std::string>().c_str(), nullptr); };
  for (const auto& c : data["per_group_cases"]) {
    SCOPED_TRACE(c.dump());
    const std::string algorithm = c["optimizer"], name = c["scheduler"]["name"];
    auto opt = c.contains("momentum") ? optimizer(algorithm, {{"lr", "0.1"}, {"momentum", "0.9"}})
                                      : optimizer(algorithm, {{"lr", "0.1"}});
    ASSERT_TRUE(!c.contains("momentum") || c["momentum"].get<double>() == 0.9);
    acc::Options group(acc::optimizer_option_schema());
    group.set("lr", c["lrs"][1].get<double>());
    opt->add_param_group({"0.bias"}, group);
    opt->set_lr(0, c["lrs"][0].get<double>());
    acc::Options settings(acc::scheduler_option_table());
    for (const auto& [key, value] : c["scheduler"]["options"].items()) settings.set_from_text(key, value);
    auto sched = acc::make_scheduler(opt, name, settings);
    const std::string key = algorithm == "sgd" ? "momentum" : "beta1";
    for (size_t step = 0; step < c["points"].size(); ++step) {
      if (step > 0 && c.contains("metrics")) sched->step_with_metric(c["metrics"][step - 1].get<double>());
      else if (step > 0) sched->step();
      for (size_t g = 0; g < 2; ++g) {
        const auto& want = c["points"][step][g];
        EXPECT_EQ(opt->lr(g), number(want[0])) << "group " << g << " after " << step << " steps";
        if (name != acc::kPlateauSchedule)
          EXPECT_EQ(acc::group_hyperparameter(*opt, g, key), number(want[1])) << "group " << g << " after " << step;
      }
    }
  }
}

// A list of another length than the groups is refused, naming the key; a schedule whose setting is
// one number takes no list.
TEST(CyclingSchedulers, AListOfAnotherLengthThanTheGroupsIsRefused) {
  auto opt = optimizer("sgd", {{"lr", "0.1"}, {"momentum", "0.9"}});
  acc::ScheduleOptions o;
  o.max_lr = std::vector<double>{0.1, 0.2};
  o.total_steps = 10;
  try {
    acc::OneCycleScheduler sched(opt, o);
    FAIL() << "two max_lr for one group were taken";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_lr has 2 values, one per parameter group, but the optimizer has 1"),
              std::string::npos)
        << e.what();
  }
  acc::Options settings(acc::scheduler_option_table());
  settings.set_from_text("min_lr", "0.1,0.2");
  settings.set_from_text("num_training_steps", "10");
  try {
    (void)acc::make_scheduler(opt, "cosine_with_min_lr", settings);
    FAIL() << "a list was taken for cosine_with_min_lr's min_lr";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("min_lr is one number, got 2"), std::string::npos) << e.what();
  }
  for (const char* bad : {"0.1,", "0.1,,0.2", "0.1;0.2", "0x1,2", "nan,1", "-1,0.5", "1e999"}) {
    try {
      settings.set_from_text("max_lr", bad);
      ADD_FAILURE() << "max_lr took '" << bad << "'";
    } catch (const acc::Error& e) {
      EXPECT_EQ(e.status(), acc::Status::InvalidArgument) << bad;
    }
  }
  settings.set_from_text("max_lr", " 0.1 , 0.2");
  EXPECT_EQ(acc::scheduler_option_table().read(settings).max_lr, (std::vector<double>{0.1, 0.2}));
}

// CosineAnnealingWarmRestarts with equal periods (T_mult 1) places a step in its period at once:
// a run resumed at step 10^15 (or stepped that far) costs no more than one at step 10.
TEST(CosineAnnealingWarmRestarts, EqualPeriodsPlaceAnyStepAtOnce) {
  const acc::Schedule equal = acc::cosine_annealing_warm_restarts(3, 1, 0.0);
  const int64_t far = 1'000'000'000'000'000;  // 1 past a multiple of 3
  EXPECT_EQ(equal.closed_form(1.0, far), equal.closed_form(1.0, 1));
  EXPECT_EQ(equal.closed_form(1.0, far - 1), 1.0);  // a restart
  const acc::Schedule growing = acc::cosine_annealing_warm_restarts(1, 2, 0.0);
  EXPECT_EQ(growing.closed_form(1.0, (int64_t{1} << 50) - 1), 1.0);  // periods 1, 2, 4, ...: a restart there
}
