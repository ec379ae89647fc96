// bitsandbytes' Adam8bit, AdamW8bit and Lion8bit (cpp/optim/bnb_8bit.h): its defaults (Adam: lr
// 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0, or 1e-2 for AdamW8bit; Lion: lr 1e-4, betas
// (0.9, 0.99), weight decay 0; min_8bit_size 4096) and its state's fields by bitsandbytes' names,
// whose dtypes are their own (uint8 codes, float32 maxima and moments) whatever the parameter's.
#include <limits>

#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/bnb_8bit.h"
#include "tensor/blockwise_8bit.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

class Bnb8bitAlgorithm final : public OptimizerAlgorithm {
 public:
  Bnb8bitAlgorithm(std::string name, Bnb8bitRule rule, double default_weight_decay)
      : name_(std::move(name)), rule_(rule), default_weight_decay_(default_weight_decay) {}
  const std::string& name() const override { return name_; }
  const std::set<std::string>& keys() const override {
    static const auto& adam =
        *new std::set<std::string>{"lr", "beta1", "beta2", "eps", "weight_decay", "min_8bit_size"};
    static const auto& lion = *new std::set<std::string>{"lr", "beta1", "beta2", "weight_decay", "min_8bit_size"};
    return rule_ == Bnb8bitRule::Adam ? adam : lion;
  }
  // A block's maximum spans 256 elements and min_8bit_size a whole parameter: slices of
  // parameters (zero_stage 1-3) would quantise otherwise.
  bool elementwise() const override { return false; }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    const bool adam = rule_ == Bnb8bitRule::Adam;
    Bnb8bitOptions options(o.get_double("lr", adam ? 1e-3 : 1e-4));
    options.betas(std::make_tuple(o.get_double("beta1", 0.9), o.get_double("beta2", adam ? 0.999 : 0.99)))
        .eps(adam ? o.get_double("eps", 1e-8) : 0.0)
        .weight_decay(o.get_double("weight_decay", default_weight_decay_))
        .min_8bit_size(o.get_int("min_8bit_size", 4096));
    check_options_json(options_to_json(options), name_);
    return std::make_unique<Bnb8bitOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Bnb8bitOptimizer>(rule_, std::move(groups), static_cast<const Bnb8bitOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const Bnb8bitOptions&>(options);
    json j = {{"lr", o.lr()},
              {"beta1", std::get<0>(o.betas())},
              {"beta2", std::get<1>(o.betas())},
              {"weight_decay", o.weight_decay()},
              {"min_8bit_size", o.min_8bit_size()}};
    if (rule_ == Bnb8bitRule::Adam) j["eps"] = o.eps();
    return j;
  }
  void check_options_json(const json& j, const std::string& where) const override {
    if (rule_ == Bnb8bitRule::Adam) {
      check_adam_hyperparameters(j, where);
    } else {  // as bitsandbytes' Optimizer1State: betas in [0, 1)
      check_learning_rate(j, where);
      check_number(j, "beta1", 0, 1, false, where);
      check_number(j, "beta2", 0, 1, false, where);
      check_number(j, "weight_decay", 0, kInf, true, where);
    }
    check_number(j, "min_8bit_size", 0, kInf, true, where);
    require(j.at("min_8bit_size").is_number_integer(), where, ": min_8bit_size must be a whole number");
  }
  const char* cycled_momentum() const override { return "beta1"; }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    auto& o = static_cast<Bnb8bitOptions&>(options);
    o.betas(std::make_tuple(value, std::get<1>(o.betas())));
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    auto& o = static_cast<Bnb8bitOptions&>(options)
                  .lr(j.at("lr").get<double>())
                  .betas(std::make_tuple(j.at("beta1").get<double>(), j.at("beta2").get<double>()))
                  .weight_decay(j.at("weight_decay").get<double>())
                  .min_8bit_size(j.at("min_8bit_size").get<int64_t>());
    if (rule_ == Bnb8bitRule::Adam) o.eps(j.at("eps").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const Bnb8bitParamState&>(state);
    StateFields f;
    for (const auto& [name, tensor] : {std::pair<const char*, at::Tensor>{"state1", s.state1()},
                                       {"state2", s.state2()},
                                       {"qmap1", s.qmap1()},
                                       {"qmap2", s.qmap2()},
                                       {"absmax1", s.absmax1()},
                                       {"absmax2", s.absmax2()}})
      put(f, name, tensor);
    f["step"] = step_tensor(s.step());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<Bnb8bitParamState>();
    state->step(step_value(f)).state1(f.at("state1")).state2(get(f, "state2"));
    state->qmap1(get(f, "qmap1")).qmap2(get(f, "qmap2")).absmax1(get(f, "absmax1")).absmax2(get(f, "absmax2"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json& group, const at::Tensor& p) const override {
    const bool two = rule_ == Bnb8bitRule::Adam;
    std::map<std::string, std::vector<int64_t>> shapes = {{"state1", p.sizes().vec()}, {"step", {}}};
    if (two) shapes["state2"] = p.sizes().vec();
    if (has_8bit_moments(p.numel(), group.at("min_8bit_size").get<int64_t>())) {
      const int64_t blocks = (p.numel() + kBlockwiseBlock - 1) / kBlockwiseBlock;
      shapes["qmap1"] = {256};
      shapes["absmax1"] = {blocks};
      if (two) {
        shapes["qmap2"] = {256};
        shapes["absmax2"] = {blocks};
      }
    }
    return shapes;
  }
  std::optional<at::ScalarType> field_dtype(const std::string& field, const json& group,
                                            const at::Tensor& p) const override {
    if (field == "state1" || field == "state2")
      return has_8bit_moments(p.numel(), group.at("min_8bit_size").get<int64_t>()) ? at::kByte : at::kFloat;
    return at::kFloat;
  }
  void check_state_field(const std::string& field, const at::Tensor& value, const std::string& where) const override {
    if (value.is_floating_point()) require(value.isfinite().all().item<bool>(), where, " holds inf or NaN");
    if (field == "absmax1" || field == "absmax2")
      require((value >= 0).all().item<bool>(), where, " holds a negative block maximum");
  }

 private:
  std::string name_;
  Bnb8bitRule rule_;
  double default_weight_decay_;
};

}  // namespace

const OptimizerAlgorithm& algorithm_detail::adam_8bit() {
  static const auto& a = *new Bnb8bitAlgorithm("adam_8bit", Bnb8bitRule::Adam, 0.0);
  return a;
}

const OptimizerAlgorithm& algorithm_detail::adamw_8bit() {
  static const auto& a = *new Bnb8bitAlgorithm("adamw_8bit", Bnb8bitRule::Adam, 1e-2);
  return a;
}

const OptimizerAlgorithm& algorithm_detail::lion_8bit() {
  static const auto& a = *new Bnb8bitAlgorithm("lion_8bit", Bnb8bitRule::Lion, 0.0);
  return a;
}

}  // namespace acc
