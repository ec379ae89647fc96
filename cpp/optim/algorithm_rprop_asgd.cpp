// Rprop's and ASGD's options and state (cpp/optim/rprop.h, asgd.h), with PyTorch's names and
// defaults. Rprop: lr 1e-2 (every step size's start), etaminus 0.5 and etaplus 1.2 (PyTorch's etas,
// 0 < etaminus < 1 < etaplus), step_size_min 1e-6 and step_size_max 50 (its step_sizes); state step,
// prev, step_size. ASGD: lr 1e-2, lambd 1e-4, alpha 0.75, t0 1e6, no weight decay; state step, eta,
// mu (float32 numbers on the CPU), ax.
#include <limits>

#include <ATen/ATen.h>

#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/asgd.h"
#include "optim/rprop.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

class RpropAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("rprop");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{
        "lr", "etaminus", "etaplus", "step_size_min", "step_size_max", "maximize", "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    RpropOptions options(o.get_double("lr", 1e-2));
    options.etaminus(o.get_double("etaminus", 0.5))
        .etaplus(o.get_double("etaplus", 1.2))
        .step_size_min(o.get_double("step_size_min", 1e-6))
        .step_size_max(o.get_double("step_size_max", 50));
    check_options_json(options_to_json(options), "rprop's options");
    return std::make_unique<RpropOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Rprop>(std::move(groups), static_cast<const RpropOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const RpropOptions&>(options);
    return {{"lr", o.lr()},
            {"etaminus", o.etaminus()},
            {"etaplus", o.etaplus()},
            {"step_size_min", o.step_size_min()},
            {"step_size_max", o.step_size_max()}};
  }
  // PyTorch's check (0 < etaminus < 1 < etaplus), and step sizes a clamp can keep (min <= max).
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where);
    check_number(j, "etaminus", 0, 1, false, where);
    require(j.at("etaminus").get<double>() > 0, where, ": 'etaminus' must be above 0");
    check_number(j, "etaplus", 1, kInf, false, where);
    require(j.at("etaplus").get<double>() > 1, where, ": 'etaplus' must be above 1");
    check_number(j, "step_size_min", 0, kInf, false, where);
    check_number(j, "step_size_max", 0, kInf, false, where);
    require(j.at("step_size_min").get<double>() <= j.at("step_size_max").get<double>(), where,
            ": 'step_size_min' is above 'step_size_max'");
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<RpropOptions&>(options)
        .lr(j.at("lr").get<double>())
        .etaminus(j.at("etaminus").get<double>())
        .etaplus(j.at("etaplus").get<double>())
        .step_size_min(j.at("step_size_min").get<double>())
        .step_size_max(j.at("step_size_max").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const RpropParamState&>(state);
    StateFields f;
    put(f, "prev", s.prev());
    put(f, "step_size", s.step_size());
    f["step"] = step_tensor(s.step());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<RpropParamState>();
    state->prev(f.at("prev")).step_size(f.at("step_size")).step(step_value(f));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return {{"prev", p.sizes().vec()}, {"step_size", p.sizes().vec()}, {"step", {}}};
  }
  // Step sizes are clamped to [step_size_min, step_size_max] at every step, so a saved one is
  // never negative, infinite or NaN.
  void check_state_field(const std::string& field, const at::Tensor& value, const std::string& where) const override {
    if (field == "step_size")
      require(value.isfinite().all().item<bool>() && (value >= 0).all().item<bool>(), where,
              " holds a step size that is negative, infinite or NaN");
  }
};

class AsgdAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("asgd");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k =
        *new std::set<std::string>{"lr", "lambd", "alpha", "t0", "weight_decay", "maximize", "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    AsgdOptions options(o.get_double("lr", 1e-2));
    options.lambd(o.get_double("lambd", 1e-4))
        .alpha(o.get_double("alpha", 0.75))
        .t0(o.get_double("t0", 1e6))
        .weight_decay(o.get_double("weight_decay", 0.0));
    check_options_json(options_to_json(options), "asgd's options");
    return std::make_unique<AsgdOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Asgd>(std::move(groups), static_cast<const AsgdOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AsgdOptions&>(options);
    return {{"lr", o.lr()},
            {"lambd", o.lambd()},
            {"alpha", o.alpha()},
            {"t0", o.t0()},
            {"weight_decay", o.weight_decay()}};
  }
  // PyTorch checks lr and weight_decay; lambd, alpha and t0 are also held to what decays (>= 0).
  void check_options_json(const json& j, const std::string& where) const override {
    for (const char* key : {"lr", "lambd", "alpha", "t0", "weight_decay"}) check_number(j, key, 0, kInf, true, where);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<AsgdOptions&>(options)
        .lr(j.at("lr").get<double>())
        .lambd(j.at("lambd").get<double>())
        .alpha(j.at("alpha").get<double>())
        .t0(j.at("t0").get<double>())
        .weight_decay(j.at("weight_decay").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AsgdParamState&>(state);
    StateFields f;
    put(f, "eta", s.eta());
    put(f, "mu", s.mu());
    put(f, "ax", s.ax());
    f["step"] = step_tensor(s.step());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AsgdParamState>();
    state->eta(f.at("eta").to(at::kCPU, at::kFloat))  // as the rule keeps them
        .mu(f.at("mu").to(at::kCPU, at::kFloat))
        .ax(f.at("ax"))
        .step(step_value(f));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return {{"eta", {}}, {"mu", {}}, {"ax", p.sizes().vec()}, {"step", {}}};
  }
  bool scalar_on_cpu(const std::string& field) const override { return field == "eta" || field == "mu"; }
  void check_state_field(const std::string& field, const at::Tensor& value, const std::string& where) const override {
    if (field == "eta")
      check_scalar_field(value, 0, true, std::numeric_limits<double>::max(), where, "a step size");
    else if (field == "mu")
      check_scalar_field(value, 0, false, 1, where, "an averaging weight");
  }
};

}  // namespace

namespace algorithm_detail {

const OptimizerAlgorithm& rprop() {
  static const auto& a = *new RpropAlgorithm();
  return a;
}

const OptimizerAlgorithm& asgd() {
  static const auto& a = *new AsgdAlgorithm();
  return a;
}

}  // namespace algorithm_detail
}  // namespace acc
