// PyTorch's ChainedScheduler (acc_scheduler_chain) and MultiplicativeLR
// (acc_scheduler_create_multiplicative), held to the rates PyTorch itself gives
// (tests/data/export_schedule_cases.py), across a checkpoint, and their refusals.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "support.h"

using nlohmann::json;

namespace {

// A linear layer with a bias; the bias gets a parameter group of its own (two groups, two rates),
// under SGD (with a momentum, if given) or another algorithm.
struct TwoGroups {
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;

  TwoGroups(double weight_lr, double bias_lr, const std::string& algorithm = "sgd",
            std::optional<double> momentum = std::nullopt) {
    EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1}])", &model), ACC_OK);
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
    EXPECT_EQ(acc_options_set_double(o, "lr", weight_lr), ACC_OK);
    if (momentum) EXPECT_EQ(acc_options_set_double(o, "momentum", *momentum), ACC_OK);
    EXPECT_EQ(acc_optimizer_create(model, algorithm.c_str(), o, &opt), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_options_set_double(o, "lr", bias_lr), ACC_OK);
    const char* bias[] = {"0.bias"};
    EXPECT_EQ(acc_optimizer_add_param_group(opt, bias, 1, o), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
  }
  ~TwoGroups() {
    acc_optimizer_free(opt);
    acc_model_free(model);
  }
};

acc_options* scheduler_options(const json& settings) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &o), ACC_OK);
  for (const auto& [key, value] : settings.items())
    EXPECT_EQ(acc_options_set(o, key.c_str(), value.get<std::string>().c_str()), ACC_OK) << key;
  return o;
}

// A multiplicative factor that repeats a list: factors[step % size]; counts its calls.
struct Factors {
  std::vector<double> values;
  int calls = 0;
  static int call(void* self, int64_t step, double* factor) {
    auto* f = static_cast<Factors*>(self);
    ++f->calls;
    if (f->values.empty()) return acc_callback_set_error("no factors"), 1;
    *factor = f->values[static_cast<size_t>(step) % f->values.size()];
    return 0;
  }
};

// The case's scheduler over `opt`: a multiplicative one over `factors` or the chain's first
// schedule, then the rest of the chain, then the schedule after its milestone (`then`) if any.
acc_scheduler* make_case_scheduler(acc_optimizer* opt, const json& c, Factors* factors) {
  if (c.contains("earlier")) {  // made first on the optimizer and stepped, then left
    acc_options* o = scheduler_options(c["earlier"]["options"]);
    acc_scheduler* earlier = nullptr;
    EXPECT_EQ(acc_scheduler_create(opt, c["earlier"]["name"].get<std::string>().c_str(), o, &earlier), ACC_OK)
        << acc_last_error_message();
    acc_options_free(o);
    for (int i = 0; i < c["earlier"]["steps"].get<int>(); ++i) EXPECT_EQ(acc_scheduler_step(earlier), ACC_OK);
    acc_scheduler_free(earlier);
  }
  acc_scheduler* sched = nullptr;
  size_t next = 0;
  if (c.contains("factors")) {
    factors->values = c["factors"].get<std::vector<double>>();
    EXPECT_EQ(acc_scheduler_create_multiplicative(opt, &Factors::call, factors, nullptr, &sched), ACC_OK)
        << acc_last_error_message();
  } else {
    acc_options* o = scheduler_options(c["chain"][0]["options"]);
    EXPECT_EQ(acc_scheduler_create(opt, c["chain"][0]["name"].get<std::string>().c_str(), o, &sched), ACC_OK)
        << acc_last_error_message();
    acc_options_free(o);
    next = 1;
  }
  for (; next < c["chain"].size(); ++next) {
    acc_options* o = scheduler_options(c["chain"][next]["options"]);
    EXPECT_EQ(acc_scheduler_chain(sched, c["chain"][next]["name"].get<std::string>().c_str(), o), ACC_OK)
        << acc_last_error_message();
    acc_options_free(o);
  }
  if (c.contains("then")) {
    acc_options* o = scheduler_options(c["then"]["options"]);
    EXPECT_EQ(acc_scheduler_then(sched, c["then"]["milestone"].get<int64_t>(),
                                 c["then"]["name"].get<std::string>().c_str(), o),
              ACC_OK)
        << acc_last_error_message();
    acc_options_free(o);
  }
  return sched;
}

// The rates the case sets by hand after `after` steps ([after, group, lr] entries).
void set_rates_by_hand(acc_optimizer* opt, const json& c, size_t after) {
  for (const json& entry : c.value("set_lr", json::array()))
    if (entry[0].get<size_t>() == after)
      EXPECT_EQ(acc_optimizer_set_lr(opt, entry[1].get<size_t>(), entry[2].get<double>()), ACC_OK);
}

double get_lr(acc_optimizer* opt, size_t group) {
  double lr = -1;
  EXPECT_EQ(acc_optimizer_get_lr(opt, group, &lr), ACC_OK);
  return lr;
}

double last_lr(acc_scheduler* sched, size_t group) {
  double lr = -1;
  EXPECT_EQ(acc_scheduler_get_last_lr(sched, group, &lr), ACC_OK);
  return lr;
}

}  // namespace

// Every case of the fixture (chains of chainable schedules, of transformers' closed forms with
// them, SWALR inside a chain, a MultiplicativeLR alone and leading a chain; rates set by hand
// between steps, which chainable schedules go on from, in chains and sequences too; a chain leading a
// sequence (with PyTorch 2: 1.x cannot run one); schedulers made
// after an earlier one stepped, whose base rates are the groups' initial_lr: found by a hunt, they
// took the rates then), both groups' rates after every step, to the bit, as the python3 torch the
// build found gives them.
TEST(ScheduleChains, ChainsAndMultiplicativeGivePyTorchsRatesToTheBit) {
  std::ifstream in(acc_test::data_dir() + "/schedule_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_schedule_cases fixture";
  const json data = json::parse(in);
  ASSERT_GE(data["cases"].size(), 33u);
  for (const json& c : data["cases"]) {
    SCOPED_TRACE(c.dump());
    TwoGroups net(c["lrs"][0].get<double>(), c["lrs"][1].get<double>());
    Factors factors;
    acc_scheduler* sched = make_case_scheduler(net.opt, c, &factors);
    for (size_t step = 0; step < c["rates"].size(); ++step) {
      if (step > 0) {
        set_rates_by_hand(net.opt, c, step - 1);
        ASSERT_EQ(acc_scheduler_step(sched), ACC_OK) << acc_last_error_message();
      }
      for (size_t g = 0; g < 2; ++g) {
        const double want = std::strtod(c["rates"][step][g].get<std::string>().c_str(), nullptr);
        EXPECT_EQ(last_lr(sched, g), want) << "group " << g << " after " << step << " steps";
        EXPECT_EQ(get_lr(net.opt, g), want) << "group " << g << " after " << step << " steps";
      }
    }
    if (c.contains("factors"))  // as PyTorch calls it: for each group at each step, not for step 0
      EXPECT_EQ(factors.calls, 2 * c["steps"].get<int>());
    acc_scheduler_free(sched);
  }
}

namespace {

// A prepared SGD at lr 1 and 0.5 under constant_lr chained with exponential, or a multiplicative
// schedule chained with linear_lr.
struct ChainRun {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  TwoGroups net{1.0, 0.5};
  Factors factors;
  acc_scheduler* sched = nullptr;

  explicit ChainRun(const json& c) {
    sched = make_case_scheduler(net.opt, c, &factors);
    EXPECT_EQ(acc_prepare(acc, &net.model, &net.opt, nullptr, &sched), ACC_OK) << acc_last_error_message();
  }
  ~ChainRun() {
    acc_scheduler_free(sched);
    acc_accelerator_free(acc);
  }
  std::pair<double, double> step() {
    EXPECT_EQ(acc_scheduler_step(sched), ACC_OK) << acc_last_error_message();
    return {last_lr(sched, 0), last_lr(sched, 1)};
  }
};

const json kConstantThenExponential = json::parse(R"({"chain": [
    {"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "4"}},
    {"name": "exponential", "options": {"gamma": "0.9"}}]})");
const json kMultiplicativeThenLinear = json::parse(R"({"factors": [0.9, 0.8], "chain": [
    {"name": "linear_lr", "options": {"start_factor": "0.5", "total_iters": "3"}}]})");

}  // namespace

// A chain (and a multiplicative schedule) resumes where it stood, on either side of a chained
// schedule's change, and its state names its parts: another chain refuses it.
TEST(ScheduleChains, AChainResumesWhereItStoodAndIsKnownByItsParts) {
  for (const json& c : {kConstantThenExponential, kMultiplicativeThenLinear}) {
    SCOPED_TRACE(c.dump());
    const std::string dir = acc_test::temp_path("chain_resume");
    std::filesystem::remove_all(dir);
    ChainRun whole(c);
    {
      ChainRun head(c);
      for (int i = 0; i < 2; ++i) EXPECT_EQ(head.step(), whole.step());
      ACC_ASSERT_OK(acc_save_state(head.acc, dir.c_str(), nullptr));
    }
    const std::string schedule = nlohmann::json::parse(acc_test::read_file(dir + "/scheduler.json"))["schedule"];
    EXPECT_EQ(schedule, c.contains("factors") ? "multiplicative+linear_lr" : "constant_lr+exponential");
    ChainRun tail(c);
    ACC_ASSERT_OK(acc_load_state(tail.acc, dir.c_str(), nullptr));
    std::vector<std::pair<double, double>> resumed, uninterrupted;
    for (int i = 0; i < 5; ++i) {
      resumed.push_back(tail.step());
      uninterrupted.push_back(whole.step());
    }
    EXPECT_EQ(resumed, uninterrupted);
  }
  EXPECT_NE(ChainRun(kConstantThenExponential).step().first, 0.9) << "the chain must hold the constant's factor";

  const std::string dir = acc_test::temp_path("chain_other");
  std::filesystem::remove_all(dir);
  {
    ChainRun saved(kConstantThenExponential);
    ACC_ASSERT_OK(acc_save_state(saved.acc, dir.c_str(), nullptr));
  }
  json reversed = kConstantThenExponential;
  std::swap(reversed["chain"][0], reversed["chain"][1]);
  ChainRun other(reversed);
  ACC_EXPECT_ERROR(acc_load_state(other.acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "saved by a 'constant_lr+exponential' schedule; this scheduler's is 'exponential+constant_lr'");

  // A state at step 2^62 resumes from the rates it saved at once; an older state, without them, would
  // be computed step by step from the chain's start (for years): refused at once, naming the file.
  for (const bool with_rates : {true, false}) {
    SCOPED_TRACE(with_rates ? "saved rates" : "no saved rates");
    nlohmann::json state = nlohmann::json::parse(acc_test::read_file(dir + "/scheduler.json"));
    state["step"] = int64_t{1} << 62;
    if (!with_rates) state.erase("lrs"), state.erase("last_lrs");
    std::ofstream(dir + "/scheduler.json", std::ios::trunc) << state.dump();
    auto manifest = nlohmann::json::parse(acc_test::read_file(dir + "/accelerate_state.json"));
    for (const char* key : {"files", "manifest_crc32c"}) manifest.erase(key);  // as if written so: the change is meant
    std::ofstream(dir + "/accelerate_state.json", std::ios::trunc) << manifest.dump(2);
    ChainRun far(kConstantThenExponential);
    if (with_rates) {
      ACC_ASSERT_OK(acc_load_state(far.acc, dir.c_str(), nullptr));
      int64_t steps = 0;
      ACC_ASSERT_OK(acc_scheduler_get_step(far.sched, &steps));
      EXPECT_EQ(steps, int64_t{1} << 62);
      EXPECT_EQ(get_lr(far.net.opt, 0), state["lrs"][0].get<double>());
      EXPECT_EQ(last_lr(far.sched, 1), state["last_lrs"][1].get<double>());
    } else {
      ACC_EXPECT_ERROR(acc_load_state(far.acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT,
                       "scheduler.json': the 'constant_lr+exponential' schedule is computed step by step");
    }
  }
}

// A rate set by hand between steps is held by the checkpoint: the resumed chain goes on from it,
// as the uninterrupted one does (PyTorch's optimizer state holds group["lr"]).
TEST(ScheduleChains, ARateSetByHandIsResumedFrom) {
  const std::string dir = acc_test::temp_path("chain_by_hand");
  std::filesystem::remove_all(dir);
  ChainRun whole(kConstantThenExponential);
  {
    ChainRun head(kConstantThenExponential);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(head.step(), whole.step());
    for (ChainRun* run : {&head, &whole}) ACC_ASSERT_OK(acc_optimizer_set_lr(run->net.opt, 0, 0.25));
    ACC_ASSERT_OK(acc_save_state(head.acc, dir.c_str(), nullptr));
  }
  ChainRun tail(kConstantThenExponential);
  ACC_ASSERT_OK(acc_load_state(tail.acc, dir.c_str(), nullptr));
  EXPECT_EQ(get_lr(tail.net.opt, 0), 0.25);
  EXPECT_EQ(last_lr(tail.sched, 0), last_lr(whole.sched, 0)) << "the schedule's last rate is its own";
  const auto first = tail.step();
  EXPECT_EQ(first, whole.step());
  EXPECT_EQ(first.first, 0.25 * 0.9) << "the exponential goes on from the rate set by hand";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tail.step(), whole.step());
}

// Annealed to 0, LinearLR's arithmetic ends a few ulp below it (-1.24e-17 here), as PyTorch's does:
// the optimizer steps with that rate, save_state keeps it and load_state takes it back, so a resumed
// run goes on as the uninterrupted one.
TEST(ScheduleChains, ARateAFewUlpBelowZeroTrainsAndResumes) {
  const json c = json::parse(R"({"chain": [
      {"name": "linear_lr", "options": {"start_factor": "0.14", "end_factor": "0", "total_iters": "10"}}]})");
  const std::string dir = acc_test::temp_path("chain_below_zero");
  std::filesystem::remove_all(dir);
  ChainRun whole(c);
  {
    ChainRun head(c);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(head.step(), whole.step());
    EXPECT_LT(last_lr(head.sched, 0), 0.0);
    EXPECT_GT(last_lr(head.sched, 0), -1e-16);
    ACC_ASSERT_OK(acc_optimizer_step(head.net.opt));
    ACC_ASSERT_OK(acc_save_state(head.acc, dir.c_str(), nullptr));
  }
  ChainRun tail(c);
  ACC_ASSERT_OK(acc_load_state(tail.acc, dir.c_str(), nullptr));
  EXPECT_EQ(get_lr(tail.net.opt, 0), get_lr(whole.net.opt, 0));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tail.step(), whole.step());
  // A rate set by hand is still refused below 0, as PyTorch's optimizers refuse one when made.
  ACC_EXPECT_ERROR(acc_optimizer_set_lr(tail.net.opt, 0, -1e-17), ACC_ERR_INVALID_ARGUMENT, "learning rate");
}

// SWALR's swa_lr may be one rate per parameter group (the rates are the fixture's); a list of
// another length is refused, naming the count.
TEST(ScheduleChains, SwaLrTakesOneRatePerGroup) {
  TwoGroups net(0.3, 0.1);
  acc_scheduler* sched = nullptr;
  acc_options* three = scheduler_options(json{{"swa_lr", "0.05,0.2,0.1"}});
  ACC_EXPECT_ERROR(acc_scheduler_create(net.opt, "swa_lr", three, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "swa_lr has 3 values, one per parameter group, but the optimizer has 2 groups");
  acc_options* two = scheduler_options(json{{"swa_lr", "0.05,0.2"}, {"anneal_epochs", "0"}});
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "swa_lr", two, &sched));
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  EXPECT_EQ(get_lr(net.opt, 0), 0.05);  // annealed at once: each group at its own rate
  EXPECT_EQ(get_lr(net.opt, 1), 0.2);
  acc_scheduler_free(sched);
  acc_options_free(three);
  acc_options_free(two);
}

// What a chain cannot be, each refused without a change: a refused call leaves every rate and the
// schedule as they were.
TEST(ScheduleChains, WhatCannotBeChainedIsRefusedAndChangesNothing) {
  TwoGroups net(0.1, 0.2);
  acc_scheduler* sched = nullptr;
  acc_options* gamma = scheduler_options(json{{"gamma", "0.5"}});
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "exponential", gamma, &sched));
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "reduce_lr_on_plateau", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "ChainedScheduler steps without a metric");
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "no_such", nullptr), ACC_ERR_INVALID_ARGUMENT, "unknown schedule");
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "step", nullptr), ACC_ERR_INVALID_ARGUMENT, "needs the option 'step_size'");
  EXPECT_EQ(get_lr(net.opt, 0), 0.1);
  ACC_ASSERT_OK(acc_scheduler_chain(sched, "constant_lr", nullptr));
  EXPECT_EQ(get_lr(net.opt, 1), 0.2 * (1.0 / 3)) << "the chained schedule's step 0 applies at once";
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "step", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'step_size'");
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "exponential", gamma), ACC_ERR_INVALID_ARGUMENT,
                   "a chain is made before the first step; the scheduler has taken 1");
  EXPECT_EQ(last_lr(sched, 0), 0.1 * (1.0 / 3) * 0.5);
  acc_scheduler_free(sched);

  // A sequence leads a chain; the chain then leads no sequence (nested ones are not built).
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "linear_lr", nullptr, &sched));
  ACC_ASSERT_OK(acc_scheduler_then(sched, 2, "exponential", gamma));
  ACC_ASSERT_OK(acc_scheduler_chain(sched, "exponential", gamma));
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 4, "exponential", gamma), ACC_ERR_UNSUPPORTED, "cannot lead a sequence");
  acc_scheduler_free(sched);

  // Prepared, it is whole: as Accelerate prepares a ChainedScheduler made beforehand.
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "exponential", gamma, &sched));
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, &net.opt, nullptr, &sched));
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "constant_lr", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "a chain of schedules is made before acc_prepare");
  acc_scheduler_free(sched);
  acc_accelerator_free(acc);
  acc_options_free(gamma);
}

// A sequence of 100,000 schedules and a chain of 1000 cost no stack depth (each is kept flat, not as
// a rule wrapping the one before), and a chain longer than that is refused.
TEST(ScheduleChains, LongSequencesAndChainsStayFlat) {
  TwoGroups net(0.1, 0.2);
  acc_scheduler* sched = nullptr;
  acc_options* gamma = scheduler_options(json{{"gamma", "0.5"}});
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "exponential", gamma, &sched));
  for (int64_t m = 1; m <= 100000; ++m) ACC_ASSERT_OK(acc_scheduler_then(sched, 2 * m, "exponential", gamma));
  for (int i = 0; i < 5; ++i) ACC_ASSERT_OK(acc_scheduler_step(sched));
  EXPECT_EQ(last_lr(sched, 0), 0.05) << "step 5 is the second step of the schedule from milestone 4";
  acc_scheduler_free(sched);

  TwoGroups fresh(0.1, 0.2);
  ACC_ASSERT_OK(acc_scheduler_create(fresh.opt, "exponential", gamma, &sched));
  acc_options* one = scheduler_options(json{{"gamma", "1"}});
  for (int i = 1; i < 1000; ++i) ACC_ASSERT_OK(acc_scheduler_chain(sched, "exponential", one));
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "exponential", one), ACC_ERR_INVALID_ARGUMENT,
                   "a chain holds at most 1000 schedules");
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  EXPECT_EQ(last_lr(sched, 1), 0.1);
  acc_scheduler_free(sched);
  acc_options_free(one);
  acc_options_free(gamma);
}

// A multiplicative factor that fails, or is negative or not finite, fails the step with its
// message and leaves the rates where they were; the factor is not asked for step 0.
TEST(ScheduleChains, AFailingMultiplicativeFactorFailsTheStepAndChangesNothing) {
  TwoGroups net(0.1, 0.2);
  acc_scheduler* sched = nullptr;
  ACC_EXPECT_ERROR(acc_scheduler_create_multiplicative(net.opt, nullptr, nullptr, nullptr, &sched),
                   ACC_ERR_INVALID_ARGUMENT, "factor is NULL");
  Factors factors;
  factors.values = {0.5, -1.0};
  ACC_ASSERT_OK(acc_scheduler_create_multiplicative(net.opt, &Factors::call, &factors, nullptr, &sched));
  EXPECT_EQ(factors.calls, 0);
  EXPECT_EQ(get_lr(net.opt, 1), 0.2);
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "factor at step 1 is -1");
  EXPECT_EQ(get_lr(net.opt, 0), 0.1);
  factors.values = {0.5};
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  EXPECT_EQ(get_lr(net.opt, 0), 0.05);
  factors.values.clear();
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_IO, "no factors");
  EXPECT_EQ(get_lr(net.opt, 1), 0.1);
  int64_t steps = -1;
  ACC_ASSERT_OK(acc_scheduler_get_step(sched, &steps));
  EXPECT_EQ(steps, 1);
  acc_scheduler_free(sched);
}

// An option's text (acc_options_get) reads back as the value set, every digit of it: a per-group
// list set as text, and a number that six digits would round.
TEST(ScheduleChains, PerGroupListsAndNumbersReadBackExactly) {
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_ASSERT_OK(acc_options_set(o, "max_lr", "0.0012345678901, 0.1"));
  char* text = nullptr;
  ACC_ASSERT_OK(acc_options_get(o, "max_lr", &text));
  EXPECT_STREQ(text, "0.0012345678901,0.1");
  acc_string_free(text);
  ACC_ASSERT_OK(acc_options_set_double(o, "max_lr", 0.0012345678901));
  ACC_ASSERT_OK(acc_options_get(o, "max_lr", &text));
  EXPECT_STREQ(text, "0.0012345678901");
  acc_string_free(text);
  ACC_ASSERT_OK(acc_options_set_double(o, "eta_min", 1e-4));
  ACC_ASSERT_OK(acc_options_get(o, "eta_min", &text));
  EXPECT_STREQ(text, "0.0001");
  acc_string_free(text);
  ACC_EXPECT_ERROR(acc_options_set(o, "max_lr", "0.1,x"), ACC_ERR_INVALID_ARGUMENT,
                   "option 'max_lr' takes a number, or numbers separated by commas, got '0.1,x'");
  ACC_EXPECT_ERROR(acc_options_set_bool(o, "max_lr", 1), ACC_ERR_INVALID_ARGUMENT, "option 'max_lr' takes a number");
  acc_options_free(o);
}

namespace {

// TwoGroups under a case's optimizer (SGD with its momentum, or AdamW), and the hyper-parameter the
// cycling schedules move.
struct CyclingNet : TwoGroups {
  const char* momentum_key;

  explicit CyclingNet(const json& c)
      : TwoGroups(c["lrs"][0].get<double>(), c["lrs"][1].get<double>(), c.value("optimizer", "sgd"),
                  c.contains("momentum") ? std::optional<double>(c["momentum"].get<double>()) : std::nullopt),
        momentum_key(c.value("optimizer", "sgd") == "adamw" ? "beta1" : "momentum") {}
  double momentum(size_t group) const {
    double m = -1;
    EXPECT_EQ(acc_optimizer_get_hyperparameter(opt, group, momentum_key, &m), ACC_OK) << acc_last_error_message();
    return m;
  }
  // Each group's rate and momentum.
  std::vector<std::pair<double, double>> point() const {
    return {{get_lr(opt, 0), momentum(0)}, {get_lr(opt, 1), momentum(1)}};
  }
};

// The case's parts made in order on `opt`: the first, then each as the sequence's next at its
// milestone or as the chain's next (after an earlier scheduler, if the case has one).
acc_scheduler* make_cycling_case(acc_optimizer* opt, const json& c) {
  if (c.contains("earlier")) {
    acc_options* o = scheduler_options(c["earlier"]["options"]);
    acc_scheduler* earlier = nullptr;
    EXPECT_EQ(acc_scheduler_create(opt, c["earlier"]["name"].get<std::string>().c_str(), o, &earlier), ACC_OK);
    acc_options_free(o);
    for (int i = 0; i < c["earlier"]["steps"].get<int>(); ++i) EXPECT_EQ(acc_scheduler_step(earlier), ACC_OK);
    acc_scheduler_free(earlier);
  }
  acc_scheduler* sched = nullptr;
  const json& parts = c["parts"];
  for (size_t i = 0; i < parts.size(); ++i) {
    acc_options* o = scheduler_options(parts[i]["options"]);
    const std::string name = parts[i]["name"];
    if (i == 0)
      EXPECT_EQ(acc_scheduler_create(opt, name.c_str(), o, &sched), ACC_OK) << acc_last_error_message();
    else if (c["kind"] == "chain" || (c["kind"] == "chain_then" && i == 1) || (c["kind"] == "then_chain" && i > 1))
      EXPECT_EQ(acc_scheduler_chain(sched, name.c_str(), o), ACC_OK) << acc_last_error_message();
    else  // a sequence's part (after two chained parts that lead it, or before the chained ones)
      EXPECT_EQ(acc_scheduler_then(sched, c["milestones"][i - (c["kind"] == "chain_then" ? 2 : 1)].get<int64_t>(),
                                   name.c_str(), o),
                ACC_OK)
          << acc_last_error_message();
    acc_options_free(o);
  }
  return sched;
}

const json kOneCycleThenConstant = json::parse(R"({"kind": "sequence", "lrs": [0.1, 0.05], "momentum": 0.9,
    "milestones": [6], "parts": [{"name": "one_cycle", "options": {"max_lr": "0.5", "total_steps": "6"}},
                                 {"name": "constant_lr", "options": {"factor": "0.5", "total_iters": "2"}}]})");
const json kExponentialWithOneCycle = json::parse(R"({"kind": "chain", "lrs": [0.1, 0.05], "momentum": 0.9,
    "parts": [{"name": "exponential", "options": {"gamma": "0.9"}},
              {"name": "one_cycle", "options": {"max_lr": "0.5", "total_steps": "8"}}]})");

// A prepared case, stepped one step at a time.
struct CyclingRun {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  CyclingNet net;
  acc_scheduler* sched = nullptr;

  explicit CyclingRun(const json& c) : net(c) {
    sched = make_cycling_case(net.opt, c);
    EXPECT_EQ(acc_prepare(acc, &net.model, &net.opt, nullptr, &sched), ACC_OK) << acc_last_error_message();
  }
  ~CyclingRun() {
    acc_scheduler_free(sched);
    acc_accelerator_free(acc);
  }
  std::vector<std::pair<double, double>> step() {
    EXPECT_EQ(acc_scheduler_step(sched), ACC_OK) << acc_last_error_message();
    return net.point();
  }
};

}  // namespace

// Sequences and chains with one_cycle and cyclic, at every place (leading, after schedules with a
// rule, after a sequence of them, with other parts after), on SGD's momentum and AdamW's beta1:
// both groups' rate and momentum after every step, to the bit, as PyTorch's SequentialLR and
// ChainedScheduler give them (tests/data/export_schedule_cases.py). Among them: a one_cycle made
// after a warm-up writes the initial_lr the warm-up starts from, and the parts made after it take
// it as their base; and a cyclic made after another scheduler starts from that one's initial_lr
// (PyTorch's constructor steps before it sets its base rates; found by a hunt: it started at base_lr).
TEST(ScheduleChains, SequencesAndChainsWithCyclingSchedulesGivePyTorchsRatesAndMomenta) {
  std::ifstream in(acc_test::data_dir() + "/schedule_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_schedule_cases fixture";
  const json data = json::parse(in);
  ASSERT_GE(data["cycling_cases"].size(), 13u);  // 14 from PyTorch 2, where a chain may lead a sequence
  for (const json& c : data["cycling_cases"]) {
    SCOPED_TRACE(c.dump());
    CyclingNet net(c);
    acc_scheduler* sched = make_cycling_case(net.opt, c);
    ASSERT_NE(sched, nullptr);
    for (size_t step = 0; step < c["points"].size(); ++step) {
      if (step > 0) ASSERT_EQ(acc_scheduler_step(sched), ACC_OK) << acc_last_error_message();
      for (size_t g = 0; g < 2; ++g) {
        const auto want = [&](int i) {
          return std::strtod(c["points"][step][g][i].get<std::string>().c_str(), nullptr);
        };
        EXPECT_EQ(get_lr(net.opt, g), want(0)) << "group " << g << " after " << step << " steps";
        EXPECT_EQ(last_lr(sched, g), want(0)) << "group " << g << " after " << step << " steps";
        EXPECT_EQ(net.momentum(g), want(1)) << "group " << g << "'s momentum after " << step << " steps";
      }
    }
    acc_scheduler_free(sched);
  }
}

// A sequence with a one_cycle resumes where it stood, inside the one_cycle and past its milestone,
// and so does a chain with one; the state names the parts.
TEST(ScheduleChains, SequencesAndChainsWithCyclingSchedulesResumeWhereTheyStood) {
  for (const json& c : {kOneCycleThenConstant, kExponentialWithOneCycle}) {
    for (const int saved_at : {3, 7}) {
      SCOPED_TRACE(c.dump() + " saved after " + std::to_string(saved_at));
      const std::string dir = acc_test::temp_path("cycling_resume");
      std::filesystem::remove_all(dir);
      CyclingRun whole(c);
      {
        CyclingRun head(c);
        for (int i = 0; i < saved_at; ++i) EXPECT_EQ(head.step(), whole.step());
        ACC_ASSERT_OK(acc_save_state(head.acc, dir.c_str(), nullptr));
      }
      const std::string schedule = json::parse(acc_test::read_file(dir + "/scheduler.json"))["schedule"];
      EXPECT_EQ(schedule, c["kind"] == "chain" ? "exponential+one_cycle" : "one_cycle,constant_lr@6");
      CyclingRun tail(c);
      ACC_ASSERT_OK(acc_load_state(tail.acc, dir.c_str(), nullptr));
      EXPECT_EQ(tail.net.point(), whole.net.point());
      for (int i = saved_at; i < 8; ++i) EXPECT_EQ(tail.step(), whole.step()) << "step " << i + 1;
    }
  }

  // A state the schedule cannot be at, or without its rates, is refused naming the file, and
  // changes nothing (written as if meant: the manifest's checksums dropped).
  const std::string dir = acc_test::temp_path("cycling_refused");
  std::filesystem::remove_all(dir);
  {
    CyclingRun saved(kExponentialWithOneCycle);
    saved.step();
    ACC_ASSERT_OK(acc_save_state(saved.acc, dir.c_str(), nullptr));
  }
  const json good = json::parse(acc_test::read_file(dir + "/scheduler.json"));
  struct Mutation {
    std::function<void(json&)> mutate;
    acc_status status;
    const char* message;
  };
  const std::vector<Mutation> mutations = {
      {[](json& s) { s["step"] = 9; }, ACC_ERR_INVALID_ARGUMENT, "past its total_steps of 8"},
      {[](json& s) { s["step"] = -1; }, ACC_ERR_IO, "'step' must be >= 0"},
      {[](json& s) { s.erase("lrs"); }, ACC_ERR_INVALID_ARGUMENT, "resumes from saved rates"},
      {[](json& s) { s["lrs"] = json::array({0.1}); }, ACC_ERR_INVALID_ARGUMENT,
       "1 parameter groups, but the optimizer has 2"},
      {[](json& s) { s["schedule"] = "exponential+cyclic"; }, ACC_ERR_INVALID_ARGUMENT,
       "saved by a 'exponential+cyclic' schedule"},
  };
  for (const auto& [mutate, status, message] : mutations) {
    SCOPED_TRACE(message);
    json state = good;
    mutate(state);
    std::ofstream(dir + "/scheduler.json", std::ios::trunc) << state.dump();
    auto manifest = json::parse(acc_test::read_file(dir + "/accelerate_state.json"));
    for (const char* key : {"files", "manifest_crc32c"}) manifest.erase(key);
    std::ofstream(dir + "/accelerate_state.json", std::ios::trunc) << manifest.dump(2);
    CyclingRun fresh(kExponentialWithOneCycle);
    const auto before = fresh.net.point();
    ACC_EXPECT_ERROR(acc_load_state(fresh.acc, dir.c_str(), nullptr), status, message);
    EXPECT_NE(std::string(acc_last_error_message()).find("scheduler.json"), std::string::npos);
    EXPECT_EQ(fresh.net.point(), before);
  }
}

// What PyTorch's parts would change in each other, and what is not built, is refused; a refused
// part, and a step past a one_cycle's end, change nothing (rates, momenta, the step count).
TEST(ScheduleChains, WhatCannotJoinACyclingSequenceIsRefusedAndChangesNothing) {
  const json sgd = json::parse(R"({"lrs": [0.1, 0.05], "momentum": 0.9})");
  CyclingNet net(sgd);
  acc_options* cycle = scheduler_options(json{{"max_lr", "0.5"}, {"total_steps", "3"}});
  acc_options* cyclic = scheduler_options(json{{"base_lr", "0.01"}, {"max_lr", "0.1"}, {"step_size_up", "2"}});
  acc_options* flat_cyclic = scheduler_options(
      json{{"base_lr", "0.01"}, {"max_lr", "0.1"}, {"step_size_up", "2"}, {"cycle_momentum", "false"}});
  acc_options* gamma = scheduler_options(json{{"gamma", "0.5"}});
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "one_cycle", cycle, &sched));
  const auto made = net.point();
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "one_cycle", cycle), ACC_ERR_UNSUPPORTED,
                   "holds one one_cycle schedule");
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "cyclic", cyclic), ACC_ERR_UNSUPPORTED,
                   "cannot follow a one_cycle schedule that cycles it");
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "reduce_lr_on_plateau", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "step without a metric");
  acc_options* swa = scheduler_options(json{{"swa_lr", "0.05"}});
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "swa_lr", swa), ACC_ERR_UNSUPPORTED, "swa_lr can only lead a sequence");
  acc_options* no_base = scheduler_options(json{{"max_lr", "0.1"}, {"cycle_momentum", "false"}});
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "cyclic", no_base), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'base_lr'");
  EXPECT_EQ(net.point(), made) << "a refused part changes no rate and no momentum";
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 0, "cyclic", flat_cyclic), ACC_ERR_INVALID_ARGUMENT,
                   "milestones must grow from 1");
  ACC_ASSERT_OK(acc_scheduler_then(sched, 3, "cyclic", flat_cyclic));
  EXPECT_EQ(net.point(), made) << "the sequence starts its first part again";
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "exponential", gamma), ACC_ERR_INVALID_ARGUMENT,
                   "milestones must grow from 1, got 3 after 3");
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "exponential", gamma), ACC_ERR_UNSUPPORTED, "cannot be chained");
  acc_scheduler_free(sched);

  // Past its total_steps inside a chain, a one_cycle fails the step, and every part stays where it was.
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "exponential", gamma, &sched));
  ACC_ASSERT_OK(acc_scheduler_chain(sched, "one_cycle", cycle));
  for (int i = 0; i < 3; ++i) ACC_ASSERT_OK(acc_scheduler_step(sched));
  const auto at_end = net.point();
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "past its total_steps of 3");
  EXPECT_EQ(net.point(), at_end);
  int64_t steps = -1;
  ACC_ASSERT_OK(acc_scheduler_get_step(sched, &steps));
  EXPECT_EQ(steps, 3);
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 5, "exponential", gamma), ACC_ERR_UNSUPPORTED,
                   "cannot lead a sequence (with 'exponential') here");
  acc_scheduler_free(sched);

  // A sequence with a one_cycle leads no chain (one of rules does).
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "one_cycle", cycle, &sched));
  ACC_ASSERT_OK(acc_scheduler_then(sched, 3, "linear_lr", nullptr));
  ACC_EXPECT_ERROR(acc_scheduler_chain(sched, "exponential", gamma), ACC_ERR_UNSUPPORTED,
                   "a sequence with a one_cycle or cyclic is not built into a chain");
  acc_scheduler_free(sched);

  // Prepared, it is whole.
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  ACC_ASSERT_OK(acc_scheduler_create(net.opt, "one_cycle", cycle, &sched));
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, &net.opt, nullptr, &sched));
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 2, "exponential", gamma), ACC_ERR_INVALID_ARGUMENT,
                   "a sequence of schedules is made before acc_prepare");
  acc_scheduler_free(sched);
  acc_accelerator_free(acc);
  for (acc_options* o : {cycle, cyclic, flat_cyclic, gamma, swa, no_base}) acc_options_free(o);
}
