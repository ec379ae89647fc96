// Adamax's and Adadelta's options and state (cpp/optim/adamax.h, adadelta.h), with PyTorch's names,
// defaults and ranges. Adamax: lr 2e-3, betas (0.9, 0.999), eps 1e-8, no weight decay; state step,
// exp_avg, exp_inf. Adadelta: lr 1, rho 0.9 (in [0, 1]), eps 1e-6, no weight decay; state step,
// square_avg, acc_delta.
#include <limits>

#include "optim/adadelta.h"
#include "optim/adamax.h"
#include "optim/algorithm.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

class AdamaxAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("adamax");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k =
        *new std::set<std::string>{"lr", "weight_decay", "beta1", "beta2", "eps", "maximize", "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    AdamaxOptions options(o.get_double("lr", 2e-3));
    options.betas(std::make_tuple(o.get_double("beta1", 0.9), o.get_double("beta2", 0.999)))
        .eps(o.get_double("eps", 1e-8))
        .weight_decay(o.get_double("weight_decay", 0.0));
    check_options_json(options_to_json(options), "adamax's options");
    return std::make_unique<AdamaxOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Adamax>(std::move(groups), static_cast<const AdamaxOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AdamaxOptions&>(options);
    return {{"lr", o.lr()},
            {"beta1", std::get<0>(o.betas())},
            {"beta2", std::get<1>(o.betas())},
            {"eps", o.eps()},
            {"weight_decay", o.weight_decay()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_adam_hyperparameters(j, where);
  }
  const char* cycled_momentum() const override { return "beta1"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    auto& o = static_cast<AdamaxOptions&>(options);
    o.betas(std::make_tuple(value, std::get<1>(o.betas())));
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<AdamaxOptions&>(options)
        .lr(j.at("lr").get<double>())
        .betas(std::make_tuple(j.at("beta1").get<double>(), j.at("beta2").get<double>()))
        .eps(j.at("eps").get<double>())
        .weight_decay(j.at("weight_decay").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AdamaxParamState&>(state);
    StateFields f;
    put(f, "exp_avg", s.exp_avg());
    put(f, "exp_inf", s.exp_inf());
    f["step"] = step_tensor(s.step());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AdamaxParamState>();
    state->exp_avg(f.at("exp_avg")).exp_inf(f.at("exp_inf")).step(step_value(f));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return {{"exp_avg", p.sizes().vec()}, {"exp_inf", p.sizes().vec()}, {"step", {}}};
  }
};

class AdadeltaAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("adadelta");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr", "rho", "eps", "weight_decay", "maximize", "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    AdadeltaOptions options(o.get_double("lr", 1.0));
    options.rho(o.get_double("rho", 0.9)).eps(o.get_double("eps", 1e-6)).weight_decay(o.get_double("weight_decay", 0.0));
    check_options_json(options_to_json(options), "adadelta's options");
    return std::make_unique<AdadeltaOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Adadelta>(std::move(groups), static_cast<const AdadeltaOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AdadeltaOptions&>(options);
    return {{"lr", o.lr()}, {"rho", o.rho()}, {"eps", o.eps()}, {"weight_decay", o.weight_decay()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where);
    check_number(j, "rho", 0, 1, true, where);
    check_number(j, "eps", 0, kInf, true, where);
    check_number(j, "weight_decay", 0, kInf, true, where);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<AdadeltaOptions&>(options)
        .lr(j.at("lr").get<double>())
        .rho(j.at("rho").get<double>())
        .eps(j.at("eps").get<double>())
        .weight_decay(j.at("weight_decay").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AdadeltaParamState&>(state);
    StateFields f;
    put(f, "square_avg", s.square_avg());
    put(f, "acc_delta", s.acc_delta());
    f["step"] = step_tensor(s.step());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AdadeltaParamState>();
    state->square_avg(f.at("square_avg")).acc_delta(f.at("acc_delta")).step(step_value(f));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return {{"square_avg", p.sizes().vec()}, {"acc_delta", p.sizes().vec()}, {"step", {}}};
  }
};

}  // namespace

namespace algorithm_detail {

const OptimizerAlgorithm& adamax() {
  static const auto& a = *new AdamaxAlgorithm();
  return a;
}

const OptimizerAlgorithm& adadelta() {
  static const auto& a = *new AdadeltaAlgorithm();
  return a;
}

}  // namespace algorithm_detail
}  // namespace acc
