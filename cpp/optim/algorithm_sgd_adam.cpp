// SGD, Adam and AdamW with PyTorch's defaults (AdamW decays weights by 1e-2): torch::optim's options
// and state; SGD's C++ rule, and Adam's stepped as Python steps it (optim/python_rules.h).
#include <torch/optim/sgd.h>

#include <limits>

#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/fused_rules.h"
#include "optim/python_rules.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

class Sgd final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("sgd");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr",       "weight_decay", "momentum", "dampening",
                                                      "nesterov", "fused",        "maximize", "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    torch::optim::SGDOptions sgd(o.get_double("lr", 1e-3));
    sgd.momentum(o.get_double("momentum", 0.0))
        .dampening(o.get_double("dampening", 0.0))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .nesterov(o.get_bool("nesterov", false));
    require(!sgd.nesterov() || (sgd.momentum() > 0 && sgd.dampening() == 0),
            "nesterov momentum requires momentum > 0 and dampening = 0");
    return std::make_unique<torch::optim::SGDOptions>(sgd);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<torch::optim::SGD>(std::move(groups), static_cast<const torch::optim::SGDOptions&>(d));
  }
  std::unique_ptr<torch::optim::Optimizer> make_fused_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                                const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<FusedSgd>(std::move(groups), static_cast<const torch::optim::SGDOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(options);
    return {{"lr", o.lr()},
            {"momentum", o.momentum()},
            {"dampening", o.dampening()},
            {"weight_decay", o.weight_decay()},
            {"nesterov", o.nesterov()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where);
    check_number(j, "weight_decay", 0, kInf, true, where);
    check_number(j, "momentum", 0, kInf, true, where);
    check_number(j, "dampening", -kInf, kInf, true, where);
    check_flag(j, "nesterov", where);
  }
  const char* cycled_momentum() const override { return "momentum"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    static_cast<torch::optim::SGDOptions&>(options).momentum(value);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<torch::optim::SGDOptions&>(options)
        .lr(j.at("lr").get<double>())
        .momentum(j.at("momentum").get<double>())
        .dampening(j.at("dampening").get<double>())
        .weight_decay(j.at("weight_decay").get<double>())
        .nesterov(j.at("nesterov").get<bool>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    StateFields f;
    put(f, "momentum_buffer", static_cast<const torch::optim::SGDParamState&>(state).momentum_buffer());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(f.at("momentum_buffer"));
    return state;
  }
  // SGD keeps state only with momentum: its buffer.
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return {{"momentum_buffer", p.sizes().vec()}};
  }
};

// Adam and AdamW share their options and state but for the class names.
template <class AdamOptions, class AdamState, class AdamOptimizer, class FusedOptimizer>
class AdamFamily final : public OptimizerAlgorithm {
 public:
  AdamFamily(std::string name, double default_weight_decay)
      : name_(std::move(name)), default_weight_decay_(default_weight_decay) {}
  const std::string& name() const override { return name_; }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr",      "weight_decay", "beta1",    "beta2",  "eps",
                                                      "amsgrad", "fused",        "maximize", "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    const auto betas = std::make_tuple(o.get_double("beta1", 0.9), o.get_double("beta2", 0.999));
    require(std::get<0>(betas) < 1.0 && std::get<1>(betas) < 1.0, "beta1 and beta2 must be below 1");
    AdamOptions adam(o.get_double("lr", 1e-3));
    adam.betas(betas)
        .eps(o.get_double("eps", 1e-8))
        .weight_decay(o.get_double("weight_decay", default_weight_decay_))
        .amsgrad(o.get_bool("amsgrad", false));
    return std::make_unique<AdamOptions>(adam);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<AdamOptimizer>(std::move(groups), static_cast<const AdamOptions&>(d));
  }
  std::unique_ptr<torch::optim::Optimizer> make_fused_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                                const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<FusedOptimizer>(std::move(groups), static_cast<const AdamOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AdamOptions&>(options);
    return {{"lr", o.lr()},   {"beta1", std::get<0>(o.betas())},  {"beta2", std::get<1>(o.betas())},
            {"eps", o.eps()}, {"weight_decay", o.weight_decay()}, {"amsgrad", o.amsgrad()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_adam_hyperparameters(j, where);
    check_flag(j, "amsgrad", where);
  }
  const char* cycled_momentum() const override { return "beta1"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    auto& o = static_cast<AdamOptions&>(options);
    o.betas(std::make_tuple(value, std::get<1>(o.betas())));
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<AdamOptions&>(options)
        .lr(j.at("lr").get<double>())
        .betas(std::make_tuple(j.at("beta1").get<double>(), j.at("beta2").get<double>()))
        .eps(j.at("eps").get<double>())
        .weight_decay(j.at("weight_decay").get<double>())
        .amsgrad(j.at("amsgrad").get<bool>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AdamState&>(state);
    StateFields f;
    put(f, "exp_avg", s.exp_avg());
    put(f, "exp_avg_sq", s.exp_avg_sq());
    put(f, "max_exp_avg_sq", s.max_exp_avg_sq());
    f["step"] = step_tensor(s.step());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AdamState>();
    state->exp_avg(f.at("exp_avg")).exp_avg_sq(f.at("exp_avg_sq")).step(step_value(f));
    state->max_exp_avg_sq(get(f, "max_exp_avg_sq"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json& group, const at::Tensor& p) const override {
    std::map<std::string, std::vector<int64_t>> shapes = {
        {"exp_avg", p.sizes().vec()}, {"exp_avg_sq", p.sizes().vec()}, {"step", {}}};
    if (group.at("amsgrad").get<bool>()) shapes["max_exp_avg_sq"] = p.sizes().vec();
    return shapes;
  }

 private:
  std::string name_;
  double default_weight_decay_;
};

}  // namespace

namespace algorithm_detail {

const OptimizerAlgorithm& sgd() {
  static const auto& a = *new Sgd();
  return a;
}

const OptimizerAlgorithm& adam() {
  static const auto& a =
      *new AdamFamily<torch::optim::AdamOptions, torch::optim::AdamParamState, PythonAdam, FusedAdam>("adam", 0.0);
  return a;
}

const OptimizerAlgorithm& adamw() {
  static const auto& a =
      *new AdamFamily<torch::optim::AdamWOptions, torch::optim::AdamWParamState, PythonAdamW, FusedAdamW>("adamw",
                                                                                                          1e-2);
  return a;
}

}  // namespace algorithm_detail
}  // namespace acc
