// Schedule-free AdamW and SGD's options and state (cpp/optim/schedule_free.h), with the
// `schedulefree` package's names and defaults: AdamW lr 0.0025, betas (0.9, 0.999), eps 1e-8,
// inner_momentum 0; SGD lr 1.0, momentum 0.9; both no weight decay, warmup_steps 0, r 0,
// weight_lr_power 2. A group's progress (k, weight_sum, lr_max, scheduled_lr, train_mode) is saved
// with its hyper-parameters, as the package's param_groups hold it. The state is z, and AdamW's
// exp_avg_sq (and exp_avg with inner_momentum).
#include <limits>

#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/schedule_free.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

ScheduleFreeAveraging averaging_from(const Options& o) {
  ScheduleFreeAveraging a;
  a.warmup_steps = o.get_int("warmup_steps", 0);
  a.r = o.get_double("r", 0.0);
  a.weight_lr_power = o.get_double("weight_lr_power", 2.0);
  return a;
}

void put_progress(json& j, const ScheduleFreeAveraging& a, const ScheduleFreeProgress& p) {
  j["warmup_steps"] = a.warmup_steps;
  j["r"] = a.r;
  j["weight_lr_power"] = a.weight_lr_power;
  j["k"] = p.k;
  j["weight_sum"] = p.weight_sum;
  j["lr_max"] = p.lr_max;
  j["scheduled_lr"] = p.scheduled_lr;
  j["train_mode"] = p.train_mode;
}

void check_integer(const json& j, const char* key, const std::string& where) {
  require(j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() >= 0, where, ": '", key,
          "' must be an integer >= 0");
}

void check_progress(const json& j, const std::string& where) {
  check_integer(j, "warmup_steps", where);
  check_number(j, "r", -kInf, kInf, false, where);
  check_number(j, "weight_lr_power", -kInf, kInf, false, where);
  check_integer(j, "k", where);
  check_number(j, "weight_sum", 0, kInf, false, where);
  check_number(j, "lr_max", -kInf, kInf, false, where);
  check_number(j, "scheduled_lr", -kInf, kInf, false, where);
  check_flag(j, "train_mode", where);
}

void get_progress(const json& j, ScheduleFreeAveraging& a, ScheduleFreeProgress& p) {
  a.warmup_steps = j.at("warmup_steps").get<int64_t>();
  a.r = j.at("r").get<double>();
  a.weight_lr_power = j.at("weight_lr_power").get<double>();
  p.k = j.at("k").get<int64_t>();
  p.weight_sum = j.at("weight_sum").get<double>();
  p.lr_max = j.at("lr_max").get<double>();
  p.scheduled_lr = j.at("scheduled_lr").get<double>();
  p.train_mode = j.at("train_mode").get<bool>();
}

// Each field shaped as the parameter.
std::map<std::string, std::vector<int64_t>> shapes(std::initializer_list<const char*> fields, const at::Tensor& p) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const char* f : fields) out[f] = p.sizes().vec();
  return out;
}

class AdamWScheduleFreeAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("adamw_schedule_free");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{
        "lr", "beta1", "beta2", "eps", "weight_decay", "warmup_steps", "r", "weight_lr_power", "inner_momentum"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    AdamWScheduleFreeOptions options(o.get_double("lr", 0.0025));
    options.betas(std::make_tuple(o.get_double("beta1", 0.9), o.get_double("beta2", 0.999)))
        .eps(o.get_double("eps", 1e-8))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .inner_momentum(o.get_double("inner_momentum", 0.0))
        .averaging(averaging_from(o));
    check_options_json(options_to_json(options), name() + "'s options");
    return std::make_unique<AdamWScheduleFreeOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<AdamWScheduleFree>(std::move(groups), static_cast<const AdamWScheduleFreeOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AdamWScheduleFreeOptions&>(options);
    json j = {{"lr", o.lr()},   {"beta1", std::get<0>(o.betas())},  {"beta2", std::get<1>(o.betas())},
              {"eps", o.eps()}, {"weight_decay", o.weight_decay()}, {"inner_momentum", o.inner_momentum()}};
    put_progress(j, o.averaging(), o.progress());
    return j;
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_adam_hyperparameters(j, where);
    // eval() divides by beta1 (x = y + (z - y)(1 - 1/beta1)): also where a schedule or a checkpoint sets it.
    require(j["beta1"].get<double>() > 0, where, ": 'beta1' must be > 0: eval() divides by it");
    check_number(j, "inner_momentum", 0, 1, false, where);
    check_progress(j, where);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    auto& o = static_cast<AdamWScheduleFreeOptions&>(options);
    o.lr(j.at("lr").get<double>())
        .betas(std::make_tuple(j.at("beta1").get<double>(), j.at("beta2").get<double>()))
        .eps(j.at("eps").get<double>())
        .weight_decay(j.at("weight_decay").get<double>())
        .inner_momentum(j.at("inner_momentum").get<double>());
    get_progress(j, o.averaging(), o.progress());
  }
  const char* cycled_momentum() const override { return "beta1"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    auto& o = static_cast<AdamWScheduleFreeOptions&>(options);
    o.betas(std::make_tuple(value, std::get<1>(o.betas())));
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const ScheduleFreeParamState&>(state);
    StateFields f;
    put(f, "z", s.z());
    put(f, "exp_avg_sq", s.exp_avg_sq());
    put(f, "exp_avg", s.exp_avg());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<ScheduleFreeParamState>();
    state->z(f.at("z"));
    state->exp_avg_sq(f.at("exp_avg_sq"));
    state->exp_avg(get(f, "exp_avg"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json& group, const at::Tensor& p) const override {
    if (group.at("inner_momentum").get<double>() != 0) return shapes({"z", "exp_avg_sq", "exp_avg"}, p);
    return shapes({"z", "exp_avg_sq"}, p);
  }
};

class SGDScheduleFreeAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("sgd_schedule_free");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k =
        *new std::set<std::string>{"lr", "momentum", "weight_decay", "warmup_steps", "r", "weight_lr_power"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    SGDScheduleFreeOptions options(o.get_double("lr", 1.0));
    options.momentum(o.get_double("momentum", 0.9))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .averaging(averaging_from(o));
    // momentum in (0, 1), as the package checks (lr >= 0 is every optimizer's option bound).
    check_options_json(options_to_json(options), name() + "'s options");
    return std::make_unique<SGDScheduleFreeOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<SGDScheduleFree>(std::move(groups), static_cast<const SGDScheduleFreeOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const SGDScheduleFreeOptions&>(options);
    json j = {{"lr", o.lr()}, {"momentum", o.momentum()}, {"weight_decay", o.weight_decay()}};
    put_progress(j, o.averaging(), o.progress());
    return j;
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where);
    check_number(j, "weight_decay", 0, kInf, true, where);
    check_number(j, "momentum", 0, 1, false, where);
    require(j["momentum"].get<double>() > 0, where, ": 'momentum' must be in (0, 1), as schedulefree requires");
    check_progress(j, where);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    auto& o = static_cast<SGDScheduleFreeOptions&>(options);
    o.lr(j.at("lr").get<double>())
        .momentum(j.at("momentum").get<double>())
        .weight_decay(j.at("weight_decay").get<double>());
    get_progress(j, o.averaging(), o.progress());
  }
  const char* cycled_momentum() const override { return "momentum"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    static_cast<SGDScheduleFreeOptions&>(options).momentum(value);
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    StateFields f;
    put(f, "z", static_cast<const ScheduleFreeParamState&>(state).z());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<ScheduleFreeParamState>();
    state->z(f.at("z"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return shapes({"z"}, p);
  }
};

}  // namespace

const OptimizerAlgorithm& algorithm_detail::adamw_schedule_free() {
  static const auto& a = *new AdamWScheduleFreeAlgorithm();
  return a;
}

const OptimizerAlgorithm& algorithm_detail::sgd_schedule_free() {
  static const auto& a = *new SGDScheduleFreeAlgorithm();
  return a;
}

}  // namespace acc
