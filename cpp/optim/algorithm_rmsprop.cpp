// RMSprop: torch::optim's options and state, stepped as Python steps it (optim/python_rules.h).
#include <torch/optim/rmsprop.h>

#include <limits>

#include "optim/algorithm.h"
#include "optim/python_rules.h"

namespace acc {
namespace {

using nlohmann::json;
using torch::optim::RMSpropOptions;
using torch::optim::RMSpropParamState;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

class RmsProp final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("rmsprop");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k =
        *new std::set<std::string>{"lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize", "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    RMSpropOptions r(o.get_double("lr", 1e-2));
    r.alpha(o.get_double("alpha", 0.99))
        .eps(o.get_double("eps", 1e-8))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .momentum(o.get_double("momentum", 0.0))
        .centered(o.get_bool("centered", false));
    return std::make_unique<RMSpropOptions>(r);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<PythonRmsProp>(std::move(groups), static_cast<const RMSpropOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const RMSpropOptions&>(options);
    return {{"lr", o.lr()},
            {"alpha", o.alpha()},
            {"eps", o.eps()},
            {"weight_decay", o.weight_decay()},
            {"momentum", o.momentum()},
            {"centered", o.centered()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where);
    check_number(j, "alpha", 0, kInf, true, where);
    check_number(j, "eps", 0, kInf, true, where);
    check_number(j, "weight_decay", 0, kInf, true, where);
    check_number(j, "momentum", 0, kInf, true, where);
    check_flag(j, "centered", where);
  }
  const char* cycled_momentum() const override { return "momentum"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    static_cast<RMSpropOptions&>(options).momentum(value);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<RMSpropOptions&>(options)
        .lr(j.at("lr").get<double>())
        .alpha(j.at("alpha").get<double>())
        .eps(j.at("eps").get<double>())
        .weight_decay(j.at("weight_decay").get<double>())
        .momentum(j.at("momentum").get<double>())
        .centered(j.at("centered").get<bool>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const RMSpropParamState&>(state);
    StateFields f;
    f["step"] = step_tensor(s.step());
    put(f, "square_avg", s.square_avg());
    put(f, "momentum_buffer", s.momentum_buffer());
    put(f, "grad_avg", s.grad_avg());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<RMSpropParamState>();
    state->step(step_value(f));
    state->square_avg(f.at("square_avg"));
    state->momentum_buffer(get(f, "momentum_buffer"));
    state->grad_avg(get(f, "grad_avg"));
    return state;
  }
  // As PyTorch: a momentum buffer with momentum > 0, the gradient's average when centered.
  std::map<std::string, std::vector<int64_t>> state_shapes(const json& group, const at::Tensor& p) const override {
    std::map<std::string, std::vector<int64_t>> shapes = {{"step", {}}, {"square_avg", p.sizes().vec()}};
    if (group.at("momentum").get<double>() > 0) shapes["momentum_buffer"] = p.sizes().vec();
    if (group.at("centered").get<bool>()) shapes["grad_avg"] = p.sizes().vec();
    return shapes;
  }
};

}  // namespace

const OptimizerAlgorithm& algorithm_detail::rmsprop() {
  static const auto& a = *new RmsProp();
  return a;
}

}  // namespace acc
