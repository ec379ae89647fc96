// Adagrad: torch::optim's options and state, stepped as Python steps it (optim/python_rules.h). As in
// PyTorch, every parameter has its accumulator from the start, filled with the optimizer's
// initial_accumulator_value (torch's constructor's: a group's own changes nothing).
#include <torch/optim/adagrad.h>

#include <limits>

#include "optim/algorithm.h"
#include "optim/fused_rules.h"
#include "optim/python_rules.h"

namespace acc {
namespace {

using nlohmann::json;
using torch::optim::AdagradOptions;
using torch::optim::AdagradParamState;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

class Adagrad final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("adagrad");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr",  "lr_decay", "weight_decay", "initial_accumulator_value",
                                                      "eps", "fused",    "maximize",     "foreach"};
    return k;
  }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    AdagradOptions a(o.get_double("lr", 1e-2));
    a.lr_decay(o.get_double("lr_decay", 0.0))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .initial_accumulator_value(o.get_double("initial_accumulator_value", 0.0))
        .eps(o.get_double("eps", 1e-10));
    return std::make_unique<AdagradOptions>(a);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<PythonAdagrad>(std::move(groups), static_cast<const AdagradOptions&>(d));
  }
  std::unique_ptr<torch::optim::Optimizer> make_fused_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                                const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<FusedAdagrad>(std::move(groups), static_cast<const AdagradOptions&>(d));
  }
  std::unique_ptr<torch::optim::OptimizerParamState> initial_state(
      const at::Tensor& param, const torch::optim::OptimizerOptions& group) const override {
    auto state = std::make_unique<AdagradParamState>();
    state->step(0);
    state->sum(at::full_like(param.detach(), static_cast<const AdagradOptions&>(group).initial_accumulator_value(),
                             at::MemoryFormat::Preserve));
    return state;
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AdagradOptions&>(options);
    return {{"lr", o.lr()},
            {"lr_decay", o.lr_decay()},
            {"weight_decay", o.weight_decay()},
            {"initial_accumulator_value", o.initial_accumulator_value()},
            {"eps", o.eps()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    for (const char* key : {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"})
      check_number(j, key, 0, kInf, true, where);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<AdagradOptions&>(options)
        .lr(j.at("lr").get<double>())
        .lr_decay(j.at("lr_decay").get<double>())
        .weight_decay(j.at("weight_decay").get<double>())
        .initial_accumulator_value(j.at("initial_accumulator_value").get<double>())
        .eps(j.at("eps").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AdagradParamState&>(state);
    StateFields f;
    f["step"] = step_tensor(s.step());
    put(f, "sum", s.sum());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AdagradParamState>();
    state->step(step_value(f));
    state->sum(f.at("sum"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    return {{"step", {}}, {"sum", p.sizes().vec()}};
  }
};

}  // namespace

const OptimizerAlgorithm& algorithm_detail::adagrad() {
  static const auto& a = *new Adagrad();
  return a;
}

}  // namespace acc
