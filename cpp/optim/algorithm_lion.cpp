// Lion's options and state (cpp/optim/lion.h); defaults as in the paper's reference code: lr 1e-4,
// betas (0.9, 0.99), no weight decay. The state is the momentum alone, "exp_avg".
#include <limits>

#include "optim/algorithm.h"
#include "optim/lion.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

class LionAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("lion");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr", "beta1", "beta2", "weight_decay"};
    return k;
  }
  // Betas may be 1 (a momentum that never forgets), as in the reference code.
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    LionOptions lion(o.get_double("lr", 1e-4));
    lion.betas(std::make_tuple(o.get_double("beta1", 0.9), o.get_double("beta2", 0.99)))
        .weight_decay(o.get_double("weight_decay", 0.0));
    return std::make_unique<LionOptions>(lion);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Lion>(std::move(groups), static_cast<const LionOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const LionOptions&>(options);
    return {{"lr", o.lr()},
            {"beta1", std::get<0>(o.betas())},
            {"beta2", std::get<1>(o.betas())},
            {"weight_decay", o.weight_decay()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where);
    check_number(j, "beta1", 0, 1, true, where);
    check_number(j, "beta2", 0, 1, true, where);
    check_number(j, "weight_decay", 0, kInf, true, where);
  }
  const char* cycled_momentum() const override { return "beta1"; }  // lion-pytorch's Lion has betas
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    auto& o = static_cast<LionOptions&>(options);
    o.betas(std::make_tuple(value, std::get<1>(o.betas())));
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<LionOptions&>(options)
        .lr(j.at("lr").get<double>())
        .betas(std::make_tuple(j.at("beta1").get<double>(), j.at("beta2").get<double>()))
        .weight_decay(j.at("weight_decay").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    StateFields f;
    put(f, "exp_avg", static_cast<const LionParamState&>(state).exp_avg());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<LionParamState>();
    state->exp_avg(f.at("exp_avg"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return {{"exp_avg", p.sizes().vec()}};
  }
};

}  // namespace

const OptimizerAlgorithm& algorithm_detail::lion() {
  static const auto& a = *new LionAlgorithm();
  return a;
}

}  // namespace acc
