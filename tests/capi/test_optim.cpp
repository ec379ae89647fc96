// Optimizers and learning-rate schedules, checked against their update rules.
#include <cmath>

#include "support.h"

using acc_test::floats;
using acc_test::item;
using acc_test::to_floats;

namespace {

// A model with one weight w = 1 (linear 1->1 without bias); loss(w) = w^2, so dloss/dw = 2w.
struct Scalar {
  acc_model* model = nullptr;
  acc_tensor* x = nullptr;
  acc_tensor* zero = nullptr;
  Scalar() {
    EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":1,"out_features":1,"bias":false}])", &model),
              ACC_OK);
    acc_tensor_list* state = nullptr;
    EXPECT_EQ(acc_tensor_list_create(&state), ACC_OK);
    acc_tensor* one = floats({1.0f}, {1, 1});
    EXPECT_EQ(acc_tensor_list_append(state, "0.weight", one), ACC_OK);
    EXPECT_EQ(acc_model_load_state_dict(model, state, 1), ACC_OK);
    acc_tensor_free(one);
    acc_tensor_list_free(state);
    x = floats({1.0f}, {1, 1});
    zero = floats({0.0f}, {1, 1});
  }
  ~Scalar() {
    acc_model_free(model);
    acc_tensor_free(x);
    acc_tensor_free(zero);
  }
  void backward() {
    acc_tensor* y = nullptr;
    acc_tensor* loss = nullptr;
    ASSERT_EQ(acc_model_forward1(model, x, 0, &y), ACC_OK);
    ASSERT_EQ(acc_loss_mse(y, zero, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    ASSERT_EQ(acc_tensor_backward(loss), ACC_OK);
    acc_tensor_free(y);
    acc_tensor_free(loss);
  }
  float weight() {
    acc_tensor* w = nullptr;
    EXPECT_EQ(acc_model_parameter(model, "0.weight", &w), ACC_OK);
    float v = to_floats(w)[0];
    acc_tensor_free(w);
    return v;
  }
};

acc_options* optimizer_options(std::initializer_list<std::pair<const char*, const char*>> items) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
  for (auto& kv : items) EXPECT_EQ(acc_options_set(o, kv.first, kv.second), ACC_OK) << acc_last_error_message();
  return o;
}

std::vector<float> run_steps(const char* algorithm, std::initializer_list<std::pair<const char*, const char*>> items,
                             int steps) {
  Scalar s;
  acc_options* o = optimizer_options(items);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(s.model, algorithm, o, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  std::vector<float> weights;
  for (int i = 0; i < steps; ++i) {
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    s.backward();
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    weights.push_back(s.weight());
  }
  acc_optimizer_free(opt);
  return weights;
}

// Schedule `name` with its settings `items` over an SGD at `lr`.
std::pair<acc_optimizer*, acc_scheduler*> sgd_schedule(const Scalar& s, const char* name,
                                                       const std::vector<std::pair<const char*, const char*>>& items,
                                                       const char* lr) {
  acc_options* o = optimizer_options({{"lr", lr}});
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(s.model, "sgd", o, &opt), ACC_OK);
  acc_options_free(o);
  acc_options* so = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &so), ACC_OK);
  for (auto& kv : items) EXPECT_EQ(acc_options_set(so, kv.first, kv.second), ACC_OK) << acc_last_error_message();
  acc_scheduler* sched = nullptr;
  EXPECT_EQ(acc_scheduler_create(opt, name, so, &sched), ACC_OK) << acc_last_error_message();
  acc_options_free(so);
  return {opt, sched};
}

double schedule_lr(const char* name, const std::vector<std::pair<const char*, const char*>>& items, int steps,
                   const char* lr = "1.0") {
  Scalar s;
  auto [opt, sched] = sgd_schedule(s, name, items, lr);
  for (int i = 0; i < steps; ++i) EXPECT_EQ(acc_scheduler_step(sched), ACC_OK);
  double last = -1, current = -2;
  int64_t count = -1;
  EXPECT_EQ(acc_scheduler_get_last_lr(sched, 0, &last), ACC_OK);
  EXPECT_EQ(acc_optimizer_get_lr(opt, 0, &current), ACC_OK);
  EXPECT_EQ(acc_scheduler_get_step(sched, &count), ACC_OK);
  EXPECT_EQ(count, steps);
  EXPECT_EQ(last, current);
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  return last;
}

// The rates after 0, 1, ..., steps steps of schedule `name`.
std::vector<double> schedule_rates(const char* name, const std::vector<std::pair<const char*, const char*>>& items,
                                   int steps, const char* lr = "1.0") {
  std::vector<double> out;
  for (int s = 0; s <= steps; ++s) out.push_back(schedule_lr(name, items, s, lr));
  return out;
}

}  // namespace

TEST(Optimizer, SgdFollowsItsUpdateRule) {
  // w1 = 1 - 0.1 * 2 = 0.8; w2 = 0.8 - 0.1 * 1.6 = 0.64
  auto plain = run_steps("sgd", {{"lr", "0.1"}}, 2);
  EXPECT_FLOAT_EQ(plain[0], 0.8f);
  EXPECT_FLOAT_EQ(plain[1], 0.64f);
  // momentum 0.9: buf1 = 2 -> w = 0.8; buf2 = 0.9 * 2 + 1.6 = 3.4 -> w = 0.46
  auto momentum = run_steps("sgd", {{"lr", "0.1"}, {"momentum", "0.9"}}, 2);
  EXPECT_FLOAT_EQ(momentum[1], 0.46f);
  // nesterov: step = g + 0.9 * buf = 2 + 1.8 -> w = 0.62
  auto nesterov = run_steps("sgd", {{"lr", "0.1"}, {"momentum", "0.9"}, {"nesterov", "true"}}, 1);
  EXPECT_FLOAT_EQ(nesterov[0], 0.62f);
  // weight decay 0.5: g = 2 + 0.5 -> w = 0.75
  auto decay = run_steps("sgd", {{"lr", "0.1"}, {"weight_decay", "0.5"}}, 1);
  EXPECT_FLOAT_EQ(decay[0], 0.75f);
}

TEST(Optimizer, AdamAndAdamWFirstStepIsLrTimesSign) {
  auto adam = run_steps("adam", {{"lr", "0.1"}}, 1);
  EXPECT_NEAR(adam[0], 0.9f, 1e-6);
  // AdamW decays the weight first: 1 * (1 - 0.1 * 0.1) - 0.1 = 0.89
  auto adamw = run_steps("adamw", {{"lr", "0.1"}, {"weight_decay", "0.1"}}, 1);
  EXPECT_NEAR(adamw[0], 0.89f, 1e-6);
  // AdamW's default weight decay is 0.01, as in PyTorch: 1 * (1 - 0.001) - 0.1
  auto adamw_default = run_steps("adamw", {{"lr", "0.1"}}, 1);
  EXPECT_NEAR(adamw_default[0], 0.899f, 1e-6);
}

TEST(Optimizer, ErrorsNameTheOption) {
  Scalar s;
  acc_optimizer* opt = nullptr;
  acc_options* o = optimizer_options({{"momentum", "0.9"}});
  ACC_EXPECT_ERROR(acc_optimizer_create(s.model, "adam", o, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "'momentum' does not apply to the adam optimizer");
  acc_options_free(o);
  ACC_EXPECT_ERROR(acc_optimizer_create(s.model, "lamb", nullptr, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "unknown optimizer 'lamb'");
  o = optimizer_options({{"nesterov", "1"}});
  ACC_EXPECT_ERROR(acc_optimizer_create(s.model, "sgd", o, &opt), ACC_ERR_INVALID_ARGUMENT, "nesterov");
  acc_options_free(o);
  acc_options* sched_opts = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &sched_opts));
  ACC_EXPECT_ERROR(acc_optimizer_create(s.model, "sgd", sched_opts, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "scheduler options, but optimizer options are needed");
  acc_options_free(sched_opts);
  ACC_EXPECT_ERROR(acc_optimizer_create(nullptr, "sgd", nullptr, &opt), ACC_ERR_INVALID_HANDLE, "model is NULL");
  EXPECT_EQ(opt, nullptr);
  // Nothing to train (PyTorch: "optimizer got an empty parameter list"): every parameter frozen, or none.
  ACC_ASSERT_OK(acc_model_set_requires_grad(s.model, "*", 0, nullptr));
  ACC_EXPECT_ERROR(acc_optimizer_create(s.model, "adam", nullptr, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "no trainable parameters");
  acc_model* empty = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"relu"}])", &empty));
  ACC_EXPECT_ERROR(acc_optimizer_create(empty, "sgd", nullptr, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "no trainable parameters");
  acc_model_free(empty);
  EXPECT_EQ(opt, nullptr);
  ACC_ASSERT_OK(acc_model_set_requires_grad(s.model, "*", 1, nullptr));  // nothing holds the set: unfreezing works
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "adam", nullptr, &opt));
  acc_optimizer_free(opt);
}

TEST(Optimizer, ParamGroupsHaveTheirOwnHyperParameters) {
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":2}])", &m));
  acc_options* o = optimizer_options({{"lr", "0.1"}, {"weight_decay", "0.05"}});
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "adamw", o, &opt));
  acc_options* no_decay = optimizer_options({{"weight_decay", "0"}, {"lr", "0.01"}});
  const char* bias[] = {"0.bias"};
  ACC_ASSERT_OK(acc_optimizer_add_param_group(opt, bias, 1, no_decay));
  size_t groups = 0;
  ACC_ASSERT_OK(acc_optimizer_num_param_groups(opt, &groups));
  EXPECT_EQ(groups, 2u);
  double lr = 0;
  ACC_ASSERT_OK(acc_optimizer_get_lr(opt, 0, &lr));
  EXPECT_DOUBLE_EQ(lr, 0.1);
  ACC_ASSERT_OK(acc_optimizer_get_lr(opt, 1, &lr));
  EXPECT_DOUBLE_EQ(lr, 0.01);
  ACC_ASSERT_OK(acc_optimizer_set_lr(opt, 1, 0.02));
  ACC_ASSERT_OK(acc_optimizer_get_lr(opt, 1, &lr));
  EXPECT_DOUBLE_EQ(lr, 0.02);
  ACC_EXPECT_ERROR(acc_optimizer_get_lr(opt, 2, &lr), ACC_ERR_INVALID_ARGUMENT, "group 2 does not exist");
  ACC_EXPECT_ERROR(acc_optimizer_set_lr(opt, 0, -1), ACC_ERR_INVALID_ARGUMENT, "learning rate");
  // param_groups[g][key]: each group's own numbers, Adam's betas by their checkpoint names.
  double value = -1;
  ACC_ASSERT_OK(acc_optimizer_get_hyperparameter(opt, 0, "weight_decay", &value));
  EXPECT_EQ(value, 0.05);
  ACC_ASSERT_OK(acc_optimizer_get_hyperparameter(opt, 1, "weight_decay", &value));
  EXPECT_EQ(value, 0.0);
  ACC_ASSERT_OK(acc_optimizer_get_hyperparameter(opt, 1, "beta2", &value));
  EXPECT_EQ(value, 0.999);
  ACC_ASSERT_OK(acc_optimizer_get_hyperparameter(opt, 1, "lr", &value));
  EXPECT_EQ(value, 0.02);
  ACC_EXPECT_ERROR(acc_optimizer_get_hyperparameter(opt, 0, "momentum", &value), ACC_ERR_INVALID_ARGUMENT,
                   "the adamw optimizer has no 'momentum'");
  ACC_EXPECT_ERROR(acc_optimizer_get_hyperparameter(opt, 0, "amsgrad", &value), ACC_ERR_INVALID_ARGUMENT,
                   "has no 'amsgrad'");
  ACC_EXPECT_ERROR(acc_optimizer_get_hyperparameter(opt, 2, "lr", &value), ACC_ERR_INVALID_ARGUMENT,
                   "group 2 does not exist");
  const char* unknown[] = {"1.weight"};
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, unknown, 1, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "no parameter or buffer named '1.weight'");

  // One step: the bias (lr 0.02, no decay) moves by 0.02 exactly; the weight by lr and decay.
  acc_tensor* before = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "0.bias", &before));
  const auto b0 = to_floats(before);
  acc_tensor* x = floats({1, 1}, {1, 2});
  acc_tensor* y = nullptr;
  acc_tensor* loss = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &y));
  ACC_ASSERT_OK(acc_tensor_sum(y, &loss));  // d loss / d bias = 1
  ACC_ASSERT_OK(acc_tensor_backward(loss));
  ACC_ASSERT_OK(acc_optimizer_step(opt));
  const auto b1 = to_floats(before);  // aliases the parameter
  EXPECT_NEAR(b1[0], b0[0] - 0.02f, 1e-6);
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, bias, 1, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "before the first step");
  for (acc_tensor* t : {before, x, y, loss}) acc_tensor_free(t);
  acc_options_free(o);
  acc_options_free(no_decay);
  acc_optimizer_free(opt);
  acc_model_free(m);
}

TEST(Lifetimes, ChildrenKeepTheirParentsAlive) {
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1}])", &m));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "sgd", nullptr, &opt));
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "constant", nullptr, &sched));
  acc_tensor* w = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "0.weight", &w));
  acc_model_free(m);
  acc_optimizer_free(opt);
  ACC_ASSERT_OK(acc_scheduler_step(sched));  // still works: the scheduler holds both
  EXPECT_EQ(to_floats(w).size(), 2u);
  acc_scheduler_free(sched);
  acc_tensor_free(w);
}

TEST(Scheduler, TransformersFormulas) {
  // lr 1.0, 10 warmup steps, 100 training steps.
  auto warm = std::initializer_list<std::pair<const char*, const char*>>{{"num_warmup_steps", "10"},
                                                                         {"num_training_steps", "100"}};
  EXPECT_DOUBLE_EQ(schedule_lr("constant", {}, 50), 1.0);
  EXPECT_DOUBLE_EQ(schedule_lr("constant_with_warmup", warm, 0), 0.0);
  EXPECT_DOUBLE_EQ(schedule_lr("constant_with_warmup", warm, 5), 0.5);
  EXPECT_DOUBLE_EQ(schedule_lr("constant_with_warmup", warm, 50), 1.0);
  EXPECT_DOUBLE_EQ(schedule_lr("linear", warm, 5), 0.5);
  EXPECT_DOUBLE_EQ(schedule_lr("linear", warm, 10), 1.0);
  EXPECT_DOUBLE_EQ(schedule_lr("linear", warm, 55), 0.5);
  EXPECT_DOUBLE_EQ(schedule_lr("linear", warm, 100), 0.0);
  EXPECT_DOUBLE_EQ(schedule_lr("linear", warm, 120), 0.0);
  EXPECT_NEAR(schedule_lr("cosine", warm, 55), 0.5, 1e-12);
  EXPECT_NEAR(schedule_lr("cosine", warm, 100), 0.0, 1e-12);
  EXPECT_NEAR(schedule_lr("cosine", {{"num_warmup_steps", "0"}, {"num_training_steps", "100"}, {"num_cycles", "1"}},
                          50),
              0.0, 1e-12);
  // polynomial, power 2, lr_end 0.1: halfway (1 - 0.1) * 0.25 + 0.1 = 0.325; past the end lr_end.
  auto poly = std::initializer_list<std::pair<const char*, const char*>>{
      {"num_warmup_steps", "0"}, {"num_training_steps", "100"}, {"power", "2"}, {"lr_end", "0.1"}};
  EXPECT_NEAR(schedule_lr("polynomial", poly, 50), 0.325, 1e-12);
  EXPECT_NEAR(schedule_lr("polynomial", poly, 150), 0.1, 1e-12);
  EXPECT_NEAR(schedule_lr("step", {{"step_size", "10"}, {"gamma", "0.5"}}, 25), 0.25, 1e-12);
}

// The rest of transformers' get_scheduler() names. The expected rates are what transformers'
// lambdas give (evaluated in Python, printed with repr): compared to the bit.
TEST(Scheduler, TheOtherTransformersSchedulesGiveItsRatesToTheBit) {
  // Owned by each case: an initializer_list member would point into the braced list's temporary
  // array, gone once `cases` is made.
  using Settings = std::vector<std::pair<const char*, const char*>>;
  struct Case {
    const char* name;
    Settings settings;
    const char* lr;
    std::vector<std::pair<int, double>> expected;  // (steps, learning rate)
  };
  const std::vector<Case> cases = {
      {"cosine_with_restarts",
       {{"num_warmup_steps", "10"}, {"num_training_steps", "100"}, {"num_cycles", "3"}},
       "1.0",
       {{5, 0.5}, {25, 0.5}, {40, 1.0}, {70, 1.0}, {99, 0.0027390523158632996}, {100, 0.0}, {120, 0.0}}},
      {"inverse_sqrt", {{"num_warmup_steps", "10"}}, "1.0", {{5, 0.5}, {10, 1.0}, {37, 0.5198752449100363}}},
      {"inverse_sqrt", {}, "1.0", {{12345, 0.6689748956828852}}},  // no warm-up: a timescale of 10000
      {"inverse_sqrt", {{"num_warmup_steps", "3"}, {"timescale", "7"}}, "1.0", {{50, 0.3600411499115478}}},
      {"cosine_with_min_lr",
       {{"num_warmup_steps", "10"}, {"num_training_steps", "100"}, {"min_lr", "0.05"}},
       "0.5",
       {{37, 0.40725168176580645}, {100, 0.05}, {130, 0.16249999999999992}}},
      {"cosine_warmup_with_min_lr",
       {{"num_warmup_steps", "10"}, {"num_training_steps", "100"}, {"min_lr_rate", "0.2"}},
       "1.0",
       {{0, 0.1}, {9, 1.0}, {10, 0.9997563308076385}, {55, 0.5860402013189998}, {99, 0.2}}},
      {"cosine_warmup_with_min_lr",
       {{"num_warmup_steps", "10"}, {"num_training_steps", "100"}, {"min_lr_rate", "0.2"}, {"warmup_lr_rate", "0.3"}},
       "1.0",
       {{0, 0.3}, {4, 0.6111111111111112}}},
      {"warmup_stable_decay",
       {{"num_warmup_steps", "10"},
        {"num_training_steps", "100"},
        {"num_decay_steps", "20"},
        {"warmup_type", "1-sqrt"},
        {"min_lr_ratio", "0.1"}},
       "1.0",
       {{3, 0.247005976119332}, {50, 1.0}, {85, 0.8681980515339464}, {100, 0.1}, {150, 0.1}}},
      {"warmup_stable_decay",
       {{"num_warmup_steps", "10"},
        {"num_stable_steps", "5"},
        {"num_decay_steps", "20"},
        {"warmup_type", "cosine"},
        {"decay_type", "linear"}},
       "1.0",
       {{4, 0.3454915028125263}, {12, 1.0}, {20, 0.75}}},
      {"warmup_stable_decay",
       {{"num_warmup_steps", "10"}, {"num_training_steps", "40"}, {"num_decay_steps", "20"}, {"decay_type", "1-sqrt"}},
       "1.0",
       {{7, 0.7}, {25, 0.5}}},
  };
  for (const Case& c : cases)
    for (const auto& [steps, lr] : c.expected)
      EXPECT_EQ(schedule_lr(c.name, c.settings, steps, c.lr), lr) << c.name << " after " << steps << " steps";
}

TEST(Scheduler, ASettingTheScheduleDoesNotUseOrLacksIsAnError) {
  Scalar s;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  auto create = [&](const char* name, std::initializer_list<std::pair<const char*, const char*>> items) {
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &o), ACC_OK);
    for (auto& kv : items) EXPECT_EQ(acc_options_set(o, kv.first, kv.second), ACC_OK) << acc_last_error_message();
    acc_scheduler* sched = nullptr;
    const acc_status status = acc_scheduler_create(opt, name, o, &sched);
    acc_options_free(o);
    acc_scheduler_free(sched);
    return status;
  };
  // Every schedule takes the two general keys, as get_scheduler() passes them to all.
  EXPECT_EQ(create("constant", {{"num_warmup_steps", "3"}, {"num_training_steps", "9"}}), ACC_OK)
      << acc_last_error_message();
  ACC_EXPECT_ERROR(create("linear", {{"num_training_steps", "9"}, {"gamma", "0.5"}}), ACC_ERR_INVALID_ARGUMENT,
                   "the linear schedule does not take the option 'gamma'");
  ACC_EXPECT_ERROR(create("cosine_with_min_lr", {{"num_training_steps", "9"}}), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'min_lr' or 'min_lr_rate'");
  ACC_EXPECT_ERROR(create("cosine_with_min_lr", {{"num_training_steps", "9"}, {"min_lr", "0.1"}, {"min_lr_rate", "0.1"}}),
                   ACC_ERR_INVALID_ARGUMENT, "one of 'min_lr' and 'min_lr_rate', not both");
  ACC_EXPECT_ERROR(create("warmup_stable_decay", {{"num_training_steps", "9"}}), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'num_decay_steps'");
  ACC_EXPECT_ERROR(create("warmup_stable_decay", {{"num_decay_steps", "9"}}), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'num_stable_steps' or 'num_training_steps'");
  ACC_EXPECT_ERROR(create("warmup_stable_decay", {{"num_warmup_steps", "5"}, {"num_training_steps", "9"},
                                                  {"num_decay_steps", "5"}}),
                   ACC_ERR_INVALID_ARGUMENT, "smaller than num_warmup_steps + num_decay_steps (10)");
  ACC_EXPECT_ERROR(create("reduce_on_everything", {}), ACC_ERR_INVALID_ARGUMENT, "warmup_stable_decay, step");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_EXPECT_ERROR(acc_options_set(o, "decay_type", "exponential"), ACC_ERR_INVALID_ARGUMENT, "decay_type");
  acc_options_free(o);
  acc_optimizer_free(opt);
}

namespace {

// The learning rate after each metric of a reduce_lr_on_plateau scheduler over SGD at lr 1.0.
std::vector<double> plateau_lrs(std::initializer_list<std::pair<const char*, const char*>> items,
                                const std::vector<double>& metrics) {
  Scalar s;
  auto [opt, sched] = sgd_schedule(s, "reduce_lr_on_plateau", items, "1.0");
  std::vector<double> lrs;
  for (double metric : metrics) {
    EXPECT_EQ(acc_scheduler_step_metric(sched, metric), ACC_OK) << acc_last_error_message();
    double lr = -1;
    EXPECT_EQ(acc_scheduler_get_last_lr(sched, 0, &lr), ACC_OK);
    lrs.push_back(lr);
  }
  int64_t steps = -1;
  EXPECT_EQ(acc_scheduler_get_step(sched, &steps), ACC_OK);
  EXPECT_EQ(steps, static_cast<int64_t>(metrics.size()));
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  return lrs;
}

}  // namespace

// The expected rates are PyTorch's ReduceLROnPlateau's (torch 2.6) for the same settings and metrics:
// relative threshold, cooldown, the min_lr floor and a NaN metric; then mode max with an absolute
// threshold and an eps that stops the last reduction.
TEST(Scheduler, ReduceLrOnPlateauLowersTheRateAsPyTorchs) {
  const double nan = std::nan("");
  EXPECT_EQ(plateau_lrs({{"patience", "2"}, {"cooldown", "1"}, {"factor", "0.5"}, {"min_lr", "0.2"}, {"threshold", "0.1"}},
                        {10, 9.5, 9.2, 9.0, 8.0, 8.5, 8.4, 8.3, 8.2, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, nan, 1.0}),
            (std::vector<double>{1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2,
                                 0.2}));
  EXPECT_EQ(plateau_lrs({{"mode", "max"}, {"threshold_mode", "abs"}, {"threshold", "0.5"}, {"patience", "0"},
                         {"factor", "0.3"}, {"eps", "0.05"}},
                        {1, 1.2, 2, 2.4, 2.6, 3.2, 3.0, 3.1}),
            (std::vector<double>{1.0, 0.3, 0.3, 0.09, 0.09, 0.09, 0.027, 0.027}));
}

TEST(Scheduler, AMetricGoesOnlyToAPlateauScheduler) {
  Scalar s;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  acc_scheduler *plateau = nullptr, *constant = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "reduce_lr_on_plateau", nullptr, &plateau));
  ACC_ASSERT_OK(acc_scheduler_create(opt, "constant", nullptr, &constant));
  ACC_EXPECT_ERROR(acc_scheduler_step(plateau), ACC_ERR_INVALID_ARGUMENT, "acc_scheduler_step_metric");
  ACC_EXPECT_ERROR(acc_scheduler_step_metric(constant, 1.0), ACC_ERR_INVALID_ARGUMENT,
                   "only a reduce_lr_on_plateau scheduler steps with a metric");
  ACC_EXPECT_ERROR(acc_scheduler_step_metric(nullptr, 1.0), ACC_ERR_INVALID_HANDLE, "sched");
  int64_t steps = -1;
  ACC_ASSERT_OK(acc_scheduler_get_step(plateau, &steps));
  EXPECT_EQ(steps, 0);
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_ASSERT_OK(acc_options_set_double(o, "factor", 1.0));
  acc_scheduler* bad = nullptr;
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "reduce_lr_on_plateau", o, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "factor must be < 1");
  EXPECT_EQ(bad, nullptr);
  ACC_EXPECT_ERROR(acc_options_set(o, "mode", "lowest"), ACC_ERR_INVALID_ARGUMENT, "mode");
  acc_options_free(o);
  acc_scheduler_free(plateau);
  acc_scheduler_free(constant);
  acc_optimizer_free(opt);
}

// Prepared, a plateau scheduler gets the metric as Accelerate's AcceleratedScheduler passes it on:
// not inside an accumulation window, and a wrong kind of step is refused there too.
TEST(Scheduler, APreparedPlateauSchedulerStepsOnlyWhenTheOptimizerDoes) {
  Scalar s;
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}, {"gradient_accumulation_steps", "2"}});
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "reduce_lr_on_plateau", nullptr, &sched));
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, &opt, nullptr, &sched));
  int64_t steps = -1;
  for (int micro = 1; micro <= 4; ++micro) {
    ACC_ASSERT_OK(acc_accumulate_begin(acc));
    ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "acc_scheduler_step_metric");
    ACC_ASSERT_OK(acc_scheduler_step_metric(sched, 1.0));
    ACC_ASSERT_OK(acc_accumulate_end(acc));
    ACC_ASSERT_OK(acc_scheduler_get_step(sched, &steps));
    EXPECT_EQ(steps, micro / 2) << "after micro-step " << micro;
  }
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  acc_accelerator_free(acc);
}

// PyTorch's OneCycleLR (torch 2.6's rates for the same settings, to the bit): epochs *
// steps_per_epoch steps, the optimizer's own lr ignored, and a step past the end refused.
TEST(Scheduler, OneCycleGivesPyTorchsRatesAndEndsAtTotalSteps) {
  const std::vector<double> want = {0.008000000000000007, 0.10400000000000001, 0.2, 0.19009692640269477,
                                    0.1623491307899526,   0.12225240438725786, 0.07774839561274215,
                                    0.0376516692100474,   0.009903873597305258, 8e-07, 0.009903873597305247};
  auto settings = std::initializer_list<std::pair<const char*, const char*>>{
      {"max_lr", "0.2"}, {"epochs", "2"}, {"steps_per_epoch", "5"}, {"cycle_momentum", "false"}};
  for (int steps = 0; steps <= 10; ++steps)
    EXPECT_EQ(schedule_lr("one_cycle", settings, steps, "0.1"), want[steps]) << "after " << steps << " steps";

  Scalar s;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  acc_scheduler* sched = nullptr;
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "one_cycle", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'total_steps', or 'epochs' and 'steps_per_epoch'");
  ACC_ASSERT_OK(acc_options_set(o, "total_steps", "2"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "one_cycle", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'max_lr'");
  ACC_ASSERT_OK(acc_options_set(o, "max_lr", "0.5"));
  ACC_ASSERT_OK(acc_options_set(o, "pct_start", "0.5"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "one_cycle", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "first phase is empty");
  // pct_start 1 empties the last phase: the schedule runs until the step where PyTorch divides by
  // zero, which is refused before anything changes.
  ACC_ASSERT_OK(acc_options_set(o, "pct_start", "1.0"));
  ACC_ASSERT_OK(acc_scheduler_create(opt, "one_cycle", o, &sched));
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  double at_1 = 0, still = -1;
  ACC_ASSERT_OK(acc_scheduler_get_last_lr(sched, 0, &at_1));
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "last phase is empty");
  ACC_ASSERT_OK(acc_scheduler_get_last_lr(sched, 0, &still));
  EXPECT_EQ(still, at_1);
  acc_scheduler_free(sched);
  sched = nullptr;
  ACC_ASSERT_OK(acc_options_set(o, "pct_start", "0.3"));
  ACC_ASSERT_OK(acc_scheduler_create(opt, "one_cycle", o, &sched));
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  ACC_ASSERT_OK(acc_scheduler_step(sched));
  double before = 0, after = -1;
  ACC_ASSERT_OK(acc_scheduler_get_last_lr(sched, 0, &before));
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, "stepped 3 times, past its total_steps of 2");
  ACC_ASSERT_OK(acc_scheduler_get_last_lr(sched, 0, &after));
  EXPECT_EQ(after, before);
  acc_scheduler_free(sched);
  acc_options_free(o);
  acc_optimizer_free(opt);
}

// Prepared, OneCycleLR stops at total_steps, as Accelerate's AcceleratedScheduler does for a
// schedule with total_steps (it steps only while _step_count <= total_steps).
TEST(Scheduler, APreparedOneCycleStopsAtItsTotalSteps) {
  Scalar s;
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_ASSERT_OK(acc_options_set(o, "total_steps", "4"));
  ACC_ASSERT_OK(acc_options_set(o, "max_lr", "0.5"));
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "one_cycle", o, &sched));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, &opt, nullptr, &sched));
  for (int i = 0; i < 7; ++i) ACC_ASSERT_OK(acc_scheduler_step(sched));  // 3 calls past the end
  int64_t steps = -1;
  ACC_ASSERT_OK(acc_scheduler_get_step(sched, &steps));
  EXPECT_EQ(steps, 4);
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  acc_accelerator_free(acc);
}

// PyTorch's chainable schedulers, each step's rate from the one before (torch 2.6's rates for the
// same settings, to the bit): MultiStepLR with a repeated milestone, ExponentialLR, and
// CosineAnnealingLR past T_max, where it rises again through its restart branch.
TEST(Scheduler, PyTorchsChainableSchedulersGiveItsRatesToTheBit) {
  EXPECT_EQ(schedule_rates("multistep", {{"milestones", "2, 5,5"}, {"gamma", "0.5"}}, 7),
            (std::vector<double>{1.0, 1.0, 0.5, 0.5, 0.5, 0.125, 0.125, 0.125}));
  EXPECT_EQ(schedule_rates("exponential", {{"gamma", "0.9"}}, 6),
            (std::vector<double>{1.0, 0.9, 0.81, 0.7290000000000001, 0.6561000000000001, 0.5904900000000002,
                                 0.5314410000000002}));
  EXPECT_EQ(schedule_rates("cosine_annealing", {{"T_max", "4"}, {"eta_min", "0.1"}}, 13),
            (std::vector<double>{1.0, 0.8681980515339464, 0.55, 0.23180194846605368, 0.1, 0.2318019484660536, 0.55,
                                 0.8681980515339467, 1.0000000000000004, 0.8681980515339468, 0.5500000000000004,
                                 0.2318019484660541, 0.1, 0.2318019484660536}));
  EXPECT_EQ(schedule_rates("step", {{"step_size", "3"}}, 10),
            (std::vector<double>{1.0, 1.0, 1.0, 0.1, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002,
                                 0.010000000000000002, 0.0010000000000000002, 0.0010000000000000002}));

  Scalar s;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  acc_scheduler* sched = nullptr;
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "exponential", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'gamma'");
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "cosine_annealing", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'T_max'");
  ACC_ASSERT_OK(acc_options_set(o, "milestones", "3,x"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "multistep", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "milestones must be steps >= 0 separated by commas, got '3,x'");
  ACC_ASSERT_OK(acc_options_set(o, "milestones", "-1"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "multistep", o, &sched), ACC_ERR_INVALID_ARGUMENT, "got '-1'");
  acc_options_free(o);
  acc_optimizer_free(opt);
}

// PyTorch's ConstantLR, LinearLR and PolynomialLR (chainable: each step's rate from the one
// before, from a first step that already scales the base rate) and CosineAnnealingWarmRestarts,
// with torch 2.6's rates for the same settings, to the bit; CyclicLR replaces the optimizer's rate.
TEST(Scheduler, PyTorchsWarmUpDecayAndRestartSchedulersGiveItsRatesToTheBit) {
  const double third = 0.03333333333333333;
  EXPECT_EQ(schedule_rates("constant_lr", {{"total_iters", "4"}}, 7, "0.1"),
            (std::vector<double>{third, third, third, third, 0.1, 0.1, 0.1, 0.1}));
  EXPECT_EQ(schedule_rates("constant_lr", {{"factor", "0.3"}, {"total_iters", "2"}}, 4, "0.7"),
            (std::vector<double>{0.21, 0.21, 0.7, 0.7, 0.7}));
  EXPECT_EQ(schedule_rates("linear_lr", {{"start_factor", "0.25"}, {"end_factor", "0.9"}, {"total_iters", "5"}}, 8, "0.1"),
            (std::vector<double>{0.025, 0.038000000000000006, 0.051000000000000004, 0.064, 0.077, 0.09, 0.09, 0.09,
                                 0.09}));
  EXPECT_EQ(schedule_rates("linear_lr", {}, 7, "0.3"),
            (std::vector<double>{0.09999999999999999, 0.14, 0.18000000000000002, 0.22000000000000006,
                                 0.26000000000000006, 0.30000000000000004, 0.30000000000000004,
                                 0.30000000000000004}));
  EXPECT_EQ(schedule_rates("polynomial_lr", {{"total_iters", "6"}, {"power", "2"}}, 8, "0.1"),
            (std::vector<double>{0.1, 0.06944444444444446, 0.04444444444444447, 0.02500000000000001,
                                 0.011111111111111117, 0.0027777777777777775, 0.0, 0.0, 0.0}));
  EXPECT_EQ(schedule_rates("cosine_annealing_warm_restarts", {{"T_0", "3"}, {"T_mult", "2"}, {"eta_min", "0.01"}}, 12, "0.1"),
            (std::vector<double>{0.1, 0.0775, 0.032500000000000015, 0.1, 0.09397114317029975, 0.0775,
                                 0.05500000000000001, 0.032500000000000015, 0.01602885682970026, 0.1,
                                 0.09846666218300808, 0.09397114317029975, 0.08681980515339464}));
  // SWALR, with torch.optim.swa_utils' default of 10 steps, a line, and at once.
  EXPECT_EQ(schedule_rates("swa_lr", {{"swa_lr", "0.05"}, {"anneal_epochs", "3"}}, 6, "0.1"),
            (std::vector<double>{0.1, 0.08750000000000001, 0.06250000000000001, 0.05, 0.05, 0.05, 0.05}));
  EXPECT_EQ(schedule_rates("swa_lr", {{"swa_lr", "0.05"}, {"anneal_epochs", "4"}, {"anneal_strategy", "linear"}}, 6,
                           "0.3"),
            (std::vector<double>{0.3, 0.2375, 0.175, 0.1125, 0.05, 0.05, 0.05}));
  EXPECT_EQ(schedule_rates("swa_lr", {{"swa_lr", "0.02"}, {"anneal_epochs", "0"}}, 3, "0.1"),
            (std::vector<double>{0.02, 0.02, 0.02, 0.02}));
  EXPECT_EQ(schedule_rates("swa_lr", {{"swa_lr", "0.2"}}, 11, "0.1"),
            (std::vector<double>{0.1, 0.10244717418524234, 0.10954915028125264, 0.12061073738537637,
                                 0.13454915028125264, 0.15, 0.16545084971874738, 0.17938926261462365,
                                 0.1904508497187474, 0.1975528258147577, 0.2, 0.2}));
  EXPECT_EQ(schedule_rates("cyclic", {{"base_lr", "0.1"}, {"max_lr", "1"}, {"step_size_up", "4"}, {"cycle_momentum", "false"}},
                  9, "0.5"),
            (std::vector<double>{0.1, 0.325, 0.55, 0.775, 1.0, 0.775, 0.55, 0.325, 0.1, 0.325}));

  Scalar s;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  acc_scheduler* sched = nullptr;
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "cosine_annealing_warm_restarts", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'T_0'");
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "swa_lr", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'swa_lr'");
  ACC_ASSERT_OK(acc_options_set(o, "factor", "0"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "constant_lr", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "factor must be in (0, 1], got 0");
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "linear_lr", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "does not take the option 'factor'");
  acc_options_free(o);
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_ASSERT_OK(acc_options_set(o, "start_factor", "0"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "linear_lr", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "start_factor must be in (0, 1], got 0");
  acc_options_free(o);
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_ASSERT_OK(acc_options_set(o, "base_lr", "0.1"));
  ACC_ASSERT_OK(acc_options_set(o, "max_lr", "1"));
  ACC_ASSERT_OK(acc_options_set(o, "mode", "min"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "cyclic", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "mode is 'triangular', 'triangular2' or 'exp_range', got 'min'");
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "reduce_lr_on_plateau", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "does not take the option 'base_lr'");
  acc_options_free(o);
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_ASSERT_OK(acc_options_set(o, "mode", "triangular"));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "reduce_lr_on_plateau", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "mode is 'min' or 'max', got 'triangular'");
  acc_options_free(o);
  double lr = -1;
  ACC_ASSERT_OK(acc_optimizer_get_lr(opt, 0, &lr));
  EXPECT_EQ(lr, 1e-3) << "a refused schedule leaves the rate as it was";
  acc_optimizer_free(opt);
}

namespace {

using Settings = std::initializer_list<std::pair<const char*, const char*>>;

acc_options* scheduler_options(Settings settings) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &o), ACC_OK);
  for (const auto& kv : settings) EXPECT_EQ(acc_options_set(o, kv.first, kv.second), ACC_OK) << kv.first;
  return o;
}

// Appends schedule `name` from `milestone` on.
void then(acc_scheduler* sched, int64_t milestone, const char* name, Settings settings) {
  acc_options* o = scheduler_options(settings);
  EXPECT_EQ(acc_scheduler_then(sched, milestone, name, o), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
}

// The rates of steps 0..steps, each also the optimizer's.
std::vector<double> sequence_rates(acc_optimizer* opt, acc_scheduler* sched, int steps) {
  std::vector<double> out;
  for (int s = 0; s <= steps; ++s) {
    if (s) EXPECT_EQ(acc_scheduler_step(sched), ACC_OK) << acc_last_error_message();
    double last = -1, current = -2;
    EXPECT_EQ(acc_scheduler_get_last_lr(sched, 0, &last), ACC_OK);
    EXPECT_EQ(acc_optimizer_get_lr(opt, 0, &current), ACC_OK);
    EXPECT_EQ(last, current);
    out.push_back(last);
  }
  return out;
}

}  // namespace

// PyTorch's SequentialLR (torch 2.6's rates for the same schedulers, to the bit): each later
// schedule starts at its milestone from the base rate, with its closed form's step 0 (a cosine
// with eta_min, a ConstantLR with total_iters 0), and a user lambda can lead.
TEST(Scheduler, ASequenceGivesPyTorchsSequentialLrRatesToTheBit) {
  {
    Scalar s;
    auto [opt, sched] = sgd_schedule(s, "linear_lr", {{"start_factor", "0.25"}, {"total_iters", "3"}}, "0.1");
    then(sched, 3, "cosine_annealing", {{"T_max", "4"}, {"eta_min", "0.01"}});
    EXPECT_EQ(sequence_rates(opt, sched, 10),
              (std::vector<double>{0.025, 0.05, 0.07500000000000001, 0.1, 0.08681980515339464, 0.05500000000000001,
                                   0.023180194846605363, 0.01, 0.023180194846605363, 0.05500000000000002,
                                   0.08681980515339469}));
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
  }
  {
    Scalar s;
    auto [opt, sched] = sgd_schedule(s, "constant_lr", {{"factor", "0.5"}, {"total_iters", "2"}}, "0.3");
    then(sched, 2, "exponential", {{"gamma", "0.9"}});
    then(sched, 5, "step", {{"step_size", "2"}, {"gamma", "0.5"}});
    EXPECT_EQ(sequence_rates(opt, sched, 9),
              (std::vector<double>{0.15, 0.15, 0.3, 0.27, 0.24300000000000002, 0.3, 0.3, 0.15, 0.15, 0.075}));
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
  }
  {
    Scalar s;
    auto [opt, sched] = sgd_schedule(s, "exponential", {{"gamma", "0.8"}}, "0.7");
    then(sched, 2, "constant_lr", {{"factor", "0.3"}, {"total_iters", "0"}});
    EXPECT_EQ(sequence_rates(opt, sched, 4), (std::vector<double>{0.7, 0.5599999999999999, 0.7, 0.7, 0.7}));
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
  }
  {
    Scalar s;
    acc_optimizer* opt = nullptr;
    acc_options* o = optimizer_options({{"lr", "0.1"}});
    ASSERT_EQ(acc_optimizer_create(s.model, "sgd", o, &opt), ACC_OK);
    acc_options_free(o);
    acc_scheduler* sched = nullptr;
    auto third = [](void*, int64_t step, double* factor) {
      *factor = static_cast<double>(step + 1) / 3;
      return 0;
    };
    ASSERT_EQ(acc_scheduler_create_lambda(opt, third, nullptr, nullptr, &sched), ACC_OK);
    then(sched, 2, "cosine_annealing_warm_restarts", {{"T_0", "2"}, {"T_mult", "2"}, {"eta_min", "0.001"}});
    EXPECT_EQ(sequence_rates(opt, sched, 8),
              (std::vector<double>{0.03333333333333333, 0.06666666666666667, 0.1, 0.0505, 0.1, 0.0855017856687341,
                                   0.0505, 0.0154982143312659, 0.1}));
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
  }
}

// A sequence is made before its first step and before acc_prepare, with growing milestones; each refusal changes
// nothing, and a saved sequence loads only into the same.
TEST(Scheduler, ASequenceIsCheckedAndRefusalsChangeNothing) {
  Scalar s;
  auto [opt, sched] = sgd_schedule(s, "linear_lr", {}, "0.3");
  acc_options* o = scheduler_options({{"T_max", "4"}});
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 0, "cosine_annealing", o), ACC_ERR_INVALID_ARGUMENT,
                   "milestones must grow from 1, got 0");
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "reduce_lr_on_plateau", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "does not take a reduce_lr_on_plateau");
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "one_cycle", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "the one_cycle schedule needs the option 'total_steps'");
  acc_options* swa = scheduler_options({{"swa_lr", "0.05"}});
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "swa_lr", swa), ACC_ERR_UNSUPPORTED, "swa_lr can only lead a sequence");
  acc_options_free(swa);
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "cosine_annealing", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'T_max'");
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, "linear_lr", o), ACC_ERR_INVALID_ARGUMENT,
                   "does not take the option 'T_max'");
  ACC_EXPECT_ERROR(acc_scheduler_then(nullptr, 3, "linear_lr", nullptr), ACC_ERR_INVALID_HANDLE, "sched");
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 3, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "name");
  // Nothing was added: the rates are linear_lr's alone.
  const std::vector<double> alone = sequence_rates(opt, sched, 7);
  EXPECT_EQ(alone.back(), 0.30000000000000004);
  ACC_EXPECT_ERROR(acc_scheduler_then(sched, 9, "cosine_annealing", o), ACC_ERR_INVALID_ARGUMENT,
                   "before the first step");
  acc_scheduler_free(sched);

  acc_scheduler* plateau = nullptr;
  ASSERT_EQ(acc_scheduler_create(opt, "reduce_lr_on_plateau", nullptr, &plateau), ACC_OK);
  ACC_EXPECT_ERROR(acc_scheduler_then(plateau, 3, "cosine_annealing", o), ACC_ERR_INVALID_ARGUMENT,
                   "cannot start a sequence");
  acc_scheduler_free(plateau);
  acc_options* cyclic = scheduler_options({{"base_lr", "0.1"}, {"max_lr", "1"}});
  acc_scheduler* cycling = nullptr;
  ASSERT_EQ(acc_scheduler_create(opt, "cyclic", cyclic, &cycling), ACC_OK);
  ACC_EXPECT_ERROR(acc_scheduler_then(cycling, 3, "cosine_annealing", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'T_max'");
  ACC_ASSERT_OK(acc_scheduler_then(cycling, 3, "cosine_annealing", o));  // a scheduler of its own leads one too
  acc_scheduler_free(cycling);
  acc_options_free(cyclic);

  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  acc_scheduler* prepared = nullptr;
  ASSERT_EQ(acc_scheduler_create(opt, "linear_lr", nullptr, &prepared), ACC_OK);
  ACC_ASSERT_OK(acc_prepare(acc, nullptr, &opt, nullptr, &prepared));
  ACC_EXPECT_ERROR(acc_scheduler_then(prepared, 3, "cosine_annealing", o), ACC_ERR_INVALID_ARGUMENT,
                   "before acc_prepare");
  acc_scheduler_free(prepared);
  acc_options_free(o);
  acc_optimizer_free(opt);
  acc_accelerator_free(acc);
}

// PyTorch's StepLR multiplies the learning rate by gamma at each decay: after four decays of 0.1
// from 0.1 that is 1.0000000000000004e-05, where 0.1 * 0.1 ** 4 is 1.0000000000000003e-05 (found by
// the side-by-side run with Python Accelerate).
TEST(Scheduler, StepDecaysAsPyTorchsStepLrMultiplies) {
  const double lr = schedule_lr("step", {{"step_size", "10"}, {"gamma", "0.1"}}, 40, "0.1");
  EXPECT_EQ(lr, (((0.1 * 0.1) * 0.1) * 0.1) * 0.1);
  EXPECT_NE(lr, 0.1 * std::pow(0.1, 4)) << "the two roundings must differ for this test to mean anything";
}

// A parameter group added after the scheduler was made: the schedule keeps a rate per group it was
// made over, so its step, a metric's step, a later part and a load are refused, naming the counts,
// and leave every rate as it was (PyTorch's OneCycleLR fails on the new group's missing keys, its
// LambdaLR leaves the group unscheduled).
TEST(Scheduler, AGroupAddedAfterTheSchedulerWasMadeIsRefused) {
  struct Case {
    const char* name;
    Settings settings;
    const char* then_name;  // a sequence's later part, or none
  };
  const Case cases[] = {{"linear", {{"num_training_steps", "10"}}, nullptr},
                        {"one_cycle", {{"max_lr", "0.5"}, {"total_steps", "10"}}, nullptr},
                        {"cyclic", {{"base_lr", "0.01"}, {"max_lr", "0.1"}}, nullptr},
                        {"reduce_lr_on_plateau", {}, nullptr},
                        {"one_cycle", {{"max_lr", "0.5"}, {"total_steps", "10"}}, "constant_lr"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + (c.then_name ? " then " + std::string(c.then_name) : ""));
    acc_model* model = nullptr;
    ASSERT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1}])", &model), ACC_OK);
    acc_optimizer* opt = nullptr;
    ASSERT_EQ(acc_optimizer_create(model, "sgd", nullptr, &opt), ACC_OK);
    acc_options* o = scheduler_options(c.settings);
    acc_scheduler* sched = nullptr;
    ASSERT_EQ(acc_scheduler_create(opt, c.name, o, &sched), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    if (c.then_name) then(sched, 3, c.then_name, {});
    ASSERT_EQ(acc_optimizer_add_param_group_matching(opt, "*.bias", nullptr, nullptr), ACC_OK);
    double before = 0, after = 0;
    ASSERT_EQ(acc_optimizer_get_lr(opt, 0, &before), ACC_OK);
    const char* refusal = "the optimizer has 2 parameter groups, and the";
    if (std::string(c.name) == "reduce_lr_on_plateau")
      ACC_EXPECT_ERROR(acc_scheduler_step_metric(sched, 1.0), ACC_ERR_INVALID_ARGUMENT, refusal);
    else
      ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_ARGUMENT, refusal);
    if (!c.then_name && std::string(c.name) == "linear")
      ACC_EXPECT_ERROR(acc_scheduler_then(sched, 5, "constant_lr", nullptr), ACC_ERR_INVALID_ARGUMENT, refusal);
    ASSERT_EQ(acc_optimizer_get_lr(opt, 0, &after), ACC_OK);
    EXPECT_EQ(after, before);
    int64_t step = -1;
    ASSERT_EQ(acc_scheduler_get_step(sched, &step), ACC_OK);
    EXPECT_EQ(step, 0);
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
    acc_model_free(model);
  }
}

TEST(Scheduler, ErrorsNameWhatIsMissing) {
  Scalar s;
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(s.model, "sgd", nullptr, &opt));
  acc_scheduler* sched = nullptr;
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "linear", nullptr, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "needs the option 'num_training_steps'");
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "cyclical", nullptr, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "unknown schedule 'cyclical'");
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "cyclic", nullptr, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "the cyclic schedule needs the option 'base_lr'");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "num_training_steps", 10));
  ACC_ASSERT_OK(acc_options_set_double(o, "lr_end", 1.0));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "polynomial", o, &sched), ACC_ERR_INVALID_ARGUMENT, "lr_end");
  // No decay steps: transformers divides by zero at num_training_steps, mid-run; refused when made.
  ACC_ASSERT_OK(acc_options_set_double(o, "lr_end", 0.0));
  ACC_ASSERT_OK(acc_options_set_int(o, "num_warmup_steps", 10));
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "polynomial", o, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "num_training_steps - num_warmup_steps steps, which is 0 here (both are 10)");
  acc_options_free(o);
  double lr = 0;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "constant", nullptr, &sched));
  ACC_EXPECT_ERROR(acc_scheduler_get_last_lr(sched, 3, &lr), ACC_ERR_INVALID_ARGUMENT, "group 3");
  acc_scheduler_free(sched);
  ACC_EXPECT_ERROR(acc_scheduler_step(sched), ACC_ERR_INVALID_HANDLE, "acc_scheduler");
  acc_optimizer_free(opt);
}
