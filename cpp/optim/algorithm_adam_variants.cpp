// RAdam's and NAdam's options and state (cpp/optim/adam_variants.h), with PyTorch's names and
// defaults: lr 1e-3 (RAdam) or 2e-3 (NAdam), betas (0.9, 0.999), eps 1e-8, no weight decay,
// decoupled_weight_decay false, NAdam's momentum_decay 4e-3. The state is PyTorch's: step,
// exp_avg, exp_avg_sq, and NAdam's mu_product.
#include <limits>

#include "common/error.h"
#include "optim/adam_variants.h"
#include "optim/algorithm.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

template <class VariantOptions, class VariantOptimizer>
class AdamVariant final : public OptimizerAlgorithm {
 public:
  static constexpr bool kNAdam = std::is_same_v<VariantOptions, NAdamOptions>;

  explicit AdamVariant(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>([] {
      std::set<std::string> keys = {"lr",  "weight_decay", "beta1",   "beta2",
                                     "eps", "maximize",     "decoupled_weight_decay", "foreach"};
      if (kNAdam) keys.insert("momentum_decay");
      return keys;
    }());
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    VariantOptions options(o.get_double("lr", VariantOptions().lr()));
    options.betas(std::make_tuple(o.get_double("beta1", 0.9), o.get_double("beta2", 0.999)))
        .eps(o.get_double("eps", 1e-8))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .decoupled_weight_decay(o.get_bool("decoupled_weight_decay", false));
    if constexpr (kNAdam) options.momentum_decay(o.get_double("momentum_decay", 4e-3));
    check_options_json(options_to_json(options), name_ + "'s options");
    return std::make_unique<VariantOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<VariantOptimizer>(std::move(groups), static_cast<const VariantOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const VariantOptions&>(options);
    json j = {{"lr", o.lr()},
              {"beta1", std::get<0>(o.betas())},
              {"beta2", std::get<1>(o.betas())},
              {"eps", o.eps()},
              {"weight_decay", o.weight_decay()},
              {"decoupled_weight_decay", o.decoupled_weight_decay()}};
    if constexpr (kNAdam) j["momentum_decay"] = o.momentum_decay();
    return j;
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_adam_hyperparameters(j, where);
    check_flag(j, "decoupled_weight_decay", where);
    if (kNAdam) check_number(j, "momentum_decay", 0, kInf, true, where);
  }
  const char* cycled_momentum() const override { return "beta1"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    auto& o = static_cast<VariantOptions&>(options);
    o.betas(std::make_tuple(value, std::get<1>(o.betas())));
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    auto& o = static_cast<VariantOptions&>(options);
    o.lr(j.at("lr").get<double>())
        .betas(std::make_tuple(j.at("beta1").get<double>(), j.at("beta2").get<double>()))
        .eps(j.at("eps").get<double>())
        .weight_decay(j.at("weight_decay").get<double>())
        .decoupled_weight_decay(j.at("decoupled_weight_decay").get<bool>());
    if constexpr (kNAdam) o.momentum_decay(j.at("momentum_decay").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AdamVariantParamState&>(state);
    StateFields f;
    put(f, "exp_avg", s.exp_avg());
    put(f, "exp_avg_sq", s.exp_avg_sq());
    if (kNAdam) put(f, "mu_product", s.mu_product());
    f["step"] = step_tensor(s.step());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AdamVariantParamState>();
    state->exp_avg(f.at("exp_avg")).exp_avg_sq(f.at("exp_avg_sq")).step(step_value(f));
    if (kNAdam) state->mu_product(f.at("mu_product").to(at::kCPU, at::kFloat));  // as the rule keeps it
    return state;
  }
  bool scalar_on_cpu(const std::string& field) const override { return kNAdam && field == "mu_product"; }
  // NAdam's product of momentum coefficients in [0, 1): in (0, 1].
  void check_state_field(const std::string& field, const at::Tensor& value, const std::string& where) const override {
    if (kNAdam && field == "mu_product")
      check_scalar_field(value, 0, false, 1, where, "a product of momentum coefficients");
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    std::map<std::string, std::vector<int64_t>> shapes = {
        {"exp_avg", p.sizes().vec()}, {"exp_avg_sq", p.sizes().vec()}, {"step", {}}};
    if (kNAdam) shapes["mu_product"] = {};
    return shapes;
  }

 private:
  std::string name_;
};

}  // namespace

namespace algorithm_detail {

const OptimizerAlgorithm& radam() {
  static const auto& a = *new AdamVariant<RAdamOptions, RAdam>("radam");
  return a;
}

const OptimizerAlgorithm& nadam() {
  static const auto& a = *new AdamVariant<NAdamOptions, NAdam>("nadam");
  return a;
}

}  // namespace algorithm_detail
}  // namespace acc
