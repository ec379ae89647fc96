// Schedules over the user's functions: PyTorch's LambdaLR and MultiplicativeLR given one function
// per parameter group (acc_scheduler_create_group_lambda / _group_multiplicative), and CyclicLR with
// a scale_fn (acc_scheduler_create_cyclic), held to the rates and momenta PyTorch gives
// (tests/data/export_schedule_cases.py, "user_schedule_cases"), across a checkpoint, and their
// refusals.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support.h"

using nlohmann::json;

namespace {

// SGD over a linear layer, its bias in a group of its own: rates lrs[0] and lrs[1], one momentum.
struct SgdOfTwoGroups {
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;

  SgdOfTwoGroups(const json& lrs, double momentum) {
    EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":3,"out_features":2}])", &model), ACC_OK);
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
    EXPECT_EQ(acc_options_set_double(o, "lr", lrs[0].get<double>()), ACC_OK);
    EXPECT_EQ(acc_options_set_double(o, "momentum", momentum), ACC_OK);
    EXPECT_EQ(acc_optimizer_create(model, "sgd", o, &opt), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_options_set_double(o, "lr", lrs[1].get<double>()), ACC_OK);
    const char* bias[] = {"0.bias"};
    EXPECT_EQ(acc_optimizer_add_param_group(opt, bias, 1, o), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
  }
  ~SgdOfTwoGroups() {
    acc_optimizer_free(opt);
    acc_model_free(model);
  }
  SgdOfTwoGroups(const SgdOfTwoGroups&) = delete;
  SgdOfTwoGroups& operator=(const SgdOfTwoGroups&) = delete;
};

// The case's functions: group g's factor at step s is group_factors[g][s % size], the scale of x
// (cycle or step) scale[x % size]. Counts the calls; `fail_at` makes that step's call fail.
struct Functions {
  std::vector<std::vector<double>> group_factors;
  std::vector<double> scale;
  int calls = 0;
  int64_t fail_at = -1;
  std::vector<size_t> groups_asked;

  static int group_factor(void* self, size_t group, int64_t step, double* out) {
    auto* f = static_cast<Functions*>(self);
    ++f->calls;
    f->groups_asked.push_back(group);
    if (step == f->fail_at) return acc_callback_set_error("no factor at this step"), 1;
    const std::vector<double>& values = f->group_factors.at(group);
    *out = values[static_cast<size_t>(step) % values.size()];
    return 0;
  }
  static int scale_of(void* self, int64_t x, double* out) {
    auto* f = static_cast<Functions*>(self);
    ++f->calls;
    if (x == f->fail_at) return acc_callback_set_error("no scale here"), 1;
    *out = f->scale[static_cast<size_t>(x) % f->scale.size()];
    return 0;
  }
};

acc_options* scheduler_options(const json& settings) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &o), ACC_OK);
  for (const auto& [key, value] : settings.items())
    EXPECT_EQ(acc_options_set(o, key.c_str(), value.get<std::string>().c_str()), ACC_OK) << key;
  return o;
}

// The case's scheduler over `opt` (with its chain or sequence), or nullptr with the error left.
acc_scheduler* make_user_schedule(acc_optimizer* opt, const json& c, Functions* fns) {
  acc_scheduler* sched = nullptr;
  const std::string kind = c["kind"];
  if (kind == "cyclic") {
    fns->scale = c["scale"].get<std::vector<double>>();
    acc_options* o = scheduler_options(c["options"]);
    const acc_status s = acc_scheduler_create_cyclic(opt, o, &Functions::scale_of, fns, nullptr, &sched);
    acc_options_free(o);
    return s == ACC_OK ? sched : nullptr;
  }
  fns->group_factors = c["group_factors"].get<std::vector<std::vector<double>>>();
  const size_t groups = fns->group_factors.size();
  const acc_status s =
      kind == "lambda"
          ? acc_scheduler_create_group_lambda(opt, groups, &Functions::group_factor, fns, nullptr, &sched)
          : acc_scheduler_create_group_multiplicative(opt, groups, &Functions::group_factor, fns, nullptr, &sched);
  if (s != ACC_OK) return nullptr;
  for (const char* how : {"chain", "then"}) {
    if (!c.contains(how)) continue;
    const json& next = c[how];
    acc_options* o = scheduler_options(next["options"]);
    const std::string name = next["name"];
    EXPECT_EQ(std::string(how) == "chain"
                  ? acc_scheduler_chain(sched, name.c_str(), o)
                  : acc_scheduler_then(sched, next["milestone"].get<int64_t>(), name.c_str(), o),
              ACC_OK)
        << acc_last_error_message();
    acc_options_free(o);
  }
  return sched;
}

double hex(const json& text) { return std::strtod(text.get<std::string>().c_str(), nullptr); }

// Group g's rate and momentum now, as the fixture records them.
std::pair<double, double> point(acc_optimizer* opt, size_t group) {
  double lr = -1, momentum = -1;
  EXPECT_EQ(acc_optimizer_get_lr(opt, group, &lr), ACC_OK);
  EXPECT_EQ(acc_optimizer_get_hyperparameter(opt, group, "momentum", &momentum), ACC_OK) << acc_last_error_message();
  return {lr, momentum};
}

json fixture_cases() {
  std::ifstream in(acc_test::data_dir() + "/schedule_cases.json");
  EXPECT_TRUE(in.good()) << "run the export_pytorch_schedule_cases fixture";
  return in.good() ? json::parse(in)["user_schedule_cases"] : json::array();
}

}  // namespace

// Every case, both groups' rates (and the momentum CyclicLR moves) after every step, to the bit.
TEST(UserSchedules, GroupFunctionsAndScaleFunctionsGivePyTorchsRatesToTheBit) {
  const json cases = fixture_cases();
  ASSERT_GE(cases.size(), 8u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.dump());
    SgdOfTwoGroups net(c["lrs"], c.value("momentum", 0.0));
    Functions fns;
    acc_scheduler* sched = make_user_schedule(net.opt, c, &fns);
    ASSERT_NE(sched, nullptr) << acc_last_error_message();
    for (size_t step = 0; step < c["points"].size(); ++step) {
      if (step > 0) ASSERT_EQ(acc_scheduler_step(sched), ACC_OK) << acc_last_error_message();
      for (size_t g = 0; g < 2; ++g) {
        const auto [lr, momentum] = point(net.opt, g);
        EXPECT_EQ(lr, hex(c["points"][step][g][0])) << "group " << g << " after " << step << " steps";
        EXPECT_EQ(momentum, hex(c["points"][step][g][1])) << "group " << g << " after " << step << " steps";
      }
    }
    if (c["kind"] != "cyclic" && !c.contains("then")) {
      // As PyTorch calls them: each group's own, in group order, at every step (LambdaLR at step 0 too).
      const int steps = c["steps"].get<int>() + (c["kind"] == "lambda" ? 1 : 0);
      EXPECT_EQ(fns.calls, 2 * steps);
      for (size_t i = 0; i < fns.groups_asked.size(); ++i) EXPECT_EQ(fns.groups_asked[i], i % 2) << "call " << i;
    }
    acc_scheduler_free(sched);
  }
}

namespace {

// The case prepared on its own accelerator, for a checkpoint.
struct PreparedCase {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  SgdOfTwoGroups net;
  Functions fns;
  acc_scheduler* sched = nullptr;

  explicit PreparedCase(const json& c) : net(c["lrs"], c.value("momentum", 0.0)) {
    sched = make_user_schedule(net.opt, c, &fns);
    EXPECT_NE(sched, nullptr) << acc_last_error_message();
    EXPECT_EQ(acc_prepare(acc, &net.model, &net.opt, nullptr, &sched), ACC_OK) << acc_last_error_message();
  }
  ~PreparedCase() {
    acc_scheduler_free(sched);
    acc_accelerator_free(acc);
  }
  std::vector<double> step() {
    EXPECT_EQ(acc_scheduler_step(sched), ACC_OK) << acc_last_error_message();
    const auto a = point(net.opt, 0), b = point(net.opt, 1);
    return {a.first, a.second, b.first, b.second};
  }
};

}  // namespace

// A resume sets each group's rate (and momentum) where the uninterrupted run has it, asking the
// functions again for the saved step.
TEST(UserSchedules, AResumeContinuesWhereTheScheduleStood) {
  for (const json& c : fixture_cases()) {
    SCOPED_TRACE(c.dump());
    const std::string dir = acc_test::temp_path("user_schedule_resume");
    std::filesystem::remove_all(dir);
    PreparedCase whole(c);
    {
      PreparedCase head(c);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(head.step(), whole.step());
      ACC_ASSERT_OK(acc_save_state(head.acc, dir.c_str(), nullptr));
    }
    PreparedCase tail(c);
    ACC_ASSERT_OK(acc_load_state(tail.acc, dir.c_str(), nullptr));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(tail.step(), whole.step()) << "step " << 5 + i;
  }
}

// What the user's functions are refused for, each without a change.
TEST(UserSchedules, WrongCountsFailingFunctionsAndIgnoredKeysAreRefused) {
  SgdOfTwoGroups net(json{0.1, 0.05}, 0.9);
  Functions fns;
  fns.group_factors = {{0.5}, {0.25}};
  acc_scheduler* sched = nullptr;
  // PyTorch: "Expected 2 lr_lambdas, but got 3".
  ACC_EXPECT_ERROR(acc_scheduler_create_group_lambda(net.opt, 3, &Functions::group_factor, &fns, nullptr, &sched),
                   ACC_ERR_INVALID_ARGUMENT, "expected 2 lambdas (one per parameter group), but got 3");
  ACC_EXPECT_ERROR(acc_scheduler_create_group_multiplicative(net.opt, 2, nullptr, nullptr, nullptr, &sched),
                   ACC_ERR_INVALID_ARGUMENT, "factor is NULL");
  EXPECT_EQ(point(net.opt, 0).first, 0.1);

  // A failing factor names its group and step, and the step changes nothing.
  fns.fail_at = 2;
  ACC_ASSERT_OK(acc_scheduler_create_group_multiplicative(net.opt, 2, &Functions::group_factor, &fns, nullptr, &sched));
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_IO, "factor of parameter group 0 at step 2");
  EXPECT_EQ(point(net.opt, 0).first, 0.05);
  EXPECT_EQ(point(net.opt, 1).first, 0.0125);
  int64_t step = -1;
  ACC_ASSERT_OK(acc_scheduler_get_step(sched, &step));
  EXPECT_EQ(step, 1);
  acc_scheduler_free(sched);
  sched = nullptr;

  // CyclicLR: mode and gamma are the function's to replace, scale_mode needs a function, the scale
  // must be finite, and a momentum it moves out of range is refused before any change.
  const json base = {{"base_lr", "0.01"}, {"max_lr", "0.1"}, {"step_size_up", "2"}};
  fns.scale = {1.0};
  fns.fail_at = -1;
  for (const auto& [key, value] : {std::pair<const char*, const char*>{"mode", "triangular2"}, {"gamma", "0.9"}}) {
    json settings = base;
    settings[key] = value;
    acc_options* o = scheduler_options(settings);
    ACC_EXPECT_ERROR(acc_scheduler_create_cyclic(net.opt, o, &Functions::scale_of, &fns, nullptr, &sched),
                     ACC_ERR_INVALID_ARGUMENT, "with a scale function does not take 'mode' or 'gamma'");
    acc_options_free(o);
  }
  {
    json settings = base;
    settings["scale_mode"] = "iterations";
    acc_options* o = scheduler_options(settings);
    ACC_EXPECT_ERROR(acc_scheduler_create(net.opt, "cyclic", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                     "takes 'scale_mode' only with a scale function");
    acc_options_free(o);
  }
  EXPECT_EQ(point(net.opt, 0), std::make_pair(0.05, 0.9));  // still the last schedule's
  acc_options* o = scheduler_options(base);
  fns.scale = {1.0, 1.0, NAN};
  ACC_ASSERT_OK(acc_scheduler_create_cyclic(net.opt, o, &Functions::scale_of, &fns, nullptr, &sched));
  for (int i = 0; i < 3; ++i) ACC_ASSERT_OK(acc_scheduler_step(sched));  // cycle 1 and 2
  const auto before = point(net.opt, 0);
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "scale function at cycle 2 gave nan");
  EXPECT_EQ(point(net.opt, 0), before);
  acc_scheduler_free(sched);
  sched = nullptr;
  // A negative scale, as a LambdaLR's negative factor, would take the rate below 0 (here 0.01 - 0.045).
  // Step 0's rate is set when the scheduler is made: that is where it is refused.
  fns.scale = {-1.0};
  const auto unscheduled = point(net.opt, 0);
  ACC_EXPECT_ERROR(acc_scheduler_create_cyclic(net.opt, o, &Functions::scale_of, &fns, nullptr, &sched),
                   ACC_ERR_INVALID_ARGUMENT, "scale function at cycle 1 gave -1 (it must be finite and >= 0)");
  EXPECT_EQ(point(net.opt, 0), unscheduled);
  fns.scale = {20.0};  // step 1's momentum: 0.9 - (0.9 - 0.8) * 0.5 * 20 < 0
  ACC_ASSERT_OK(acc_scheduler_create_cyclic(net.opt, o, &Functions::scale_of, &fns, nullptr, &sched));
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "momentum");
  // Step 0's as made: PyTorch's CyclicLR made after another scheduler starts from its initial_lr.
  EXPECT_EQ(point(net.opt, 0), std::make_pair(0.1, 0.9));
  acc_scheduler_free(sched);
  acc_options_free(o);
}
