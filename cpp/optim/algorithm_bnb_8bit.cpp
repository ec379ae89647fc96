// bitsandbytes' 8-bit optimizers (cpp/optim/bnb_8bit.h) with their classes' defaults and checks,
// and their state's fields by bitsandbytes' names, whose dtypes are their own (uint8 codes, float32
// maxima and moments) whatever the parameter's. Options take PyTorch's names where bitsandbytes
// packs them into its betas: SGD8bit's momentum and RMSprop8bit's alpha are beta1.
#include <limits>
#include <optional>

#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/bnb_8bit.h"
#include "tensor/blockwise_8bit.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

// One class's defaults: lr unset where the class has none (SGD8bit's is a required argument).
struct Bnb8bitDefaults {
  std::optional<double> lr;
  double beta1, beta2, eps, weight_decay;
};

class Bnb8bitAlgorithm final : public OptimizerAlgorithm {
 public:
  Bnb8bitAlgorithm(std::string name, std::string python_class, Bnb8bitRule rule, Bnb8bitDefaults defaults)
      : name_(std::move(name)), python_class_(std::move(python_class)), rule_(rule), defaults_(defaults) {}
  const std::string& name() const override { return name_; }
  const std::set<std::string>& keys() const override {
    static const auto& adam =
        *new std::set<std::string>{"lr", "beta1", "beta2", "eps", "weight_decay", "min_8bit_size"};
    static const auto& ademamix = *new std::set<std::string>{
        "lr", "beta1", "beta2", "beta3", "alpha", "t_alpha", "t_beta3", "eps", "weight_decay", "min_8bit_size"};
    static const auto& lion = *new std::set<std::string>{"lr", "beta1", "beta2", "weight_decay", "min_8bit_size"};
    static const auto& momentum = *new std::set<std::string>{"lr", "momentum", "weight_decay", "min_8bit_size"};
    static const auto& rmsprop = *new std::set<std::string>{"lr", "alpha", "eps", "weight_decay", "min_8bit_size"};
    static const auto& adagrad = *new std::set<std::string>{"lr", "eps", "weight_decay", "min_8bit_size"};
    switch (rule_) {
      case Bnb8bitRule::Adam:
        return adam;
      case Bnb8bitRule::AdEMAMix:
        return ademamix;
      case Bnb8bitRule::Lion:
        return lion;
      case Bnb8bitRule::Momentum:
        return momentum;
      case Bnb8bitRule::RMSprop:
        return rmsprop;
      case Bnb8bitRule::Adagrad:
        break;
    }
    return adagrad;
  }
  // A block's maximum spans 256 elements and min_8bit_size a whole parameter: slices of
  // parameters (zero_stage 1-3) would quantise otherwise.
  bool elementwise() const override { return false; }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    require(defaults_.lr || o.has("lr"), name_, ": lr is needed (", python_class_, " has no default)");
    Bnb8bitOptions options(o.get_double("lr", defaults_.lr.value_or(0)));
    options.eps(o.get_double("eps", defaults_.eps)).weight_decay(o.get_double("weight_decay", defaults_.weight_decay));
    options.min_8bit_size(o.get_int("min_8bit_size", 4096));
    double beta1 = o.get_double("beta1", defaults_.beta1);
    if (rule_ == Bnb8bitRule::Momentum) {
      beta1 = o.get_double("momentum", 0.0);
      if (beta1 == 0)
        fail(Status::Unsupported, name_, ": ", python_class_,
             " needs a momentum above 0 (SGD without momentum is not built there; use sgd)");
    } else if (rule_ == Bnb8bitRule::RMSprop) {
      beta1 = o.get_double("alpha", defaults_.beta1);
      if (beta1 == 0) fail(Status::Unsupported, name_, ": ", python_class_, " does not take alpha 0");
    }
    options.betas(std::make_tuple(beta1, o.get_double("beta2", defaults_.beta2)));
    if (rule_ == Bnb8bitRule::AdEMAMix)
      options.beta3(o.get_double("beta3", 0.9999))
          .alpha(o.get_double("alpha", 5.0))
          .t_alpha(o.get_int("t_alpha", 0))
          .t_beta3(o.get_int("t_beta3", 0));
    check_options_json(options_to_json(options), name_);
    return std::make_unique<Bnb8bitOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Bnb8bitOptimizer>(rule_, std::move(groups), static_cast<const Bnb8bitOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const Bnb8bitOptions&>(options);
    json j = {{"lr", o.lr()}, {"weight_decay", o.weight_decay()}, {"min_8bit_size", o.min_8bit_size()}};
    const char* beta1 = beta1_key();
    if (beta1) j[beta1] = std::get<0>(o.betas());
    if (takes("beta2")) j["beta2"] = std::get<1>(o.betas());
    if (takes("eps")) j["eps"] = o.eps();
    if (rule_ == Bnb8bitRule::AdEMAMix) {
      j["beta3"] = o.beta3();
      j["alpha"] = o.alpha();
      j["t_alpha"] = o.t_alpha();
      j["t_beta3"] = o.t_beta3();
    }
    return j;
  }
  // bitsandbytes' ranges: betas in [0, 1), lr, eps and weight decay not negative.
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where);
    check_number(j, "weight_decay", 0, kInf, true, where);
    if (takes("eps")) check_number(j, "eps", 0, kInf, true, where);
    for (const char* beta : {"beta1", "beta2", "beta3", "momentum"})
      if (takes(beta)) check_number(j, beta, 0, 1, false, where);
    if (rule_ == Bnb8bitRule::RMSprop) check_number(j, "alpha", 0, 1, false, where);
    // What the classes refuse when made (a loaded group too: Adagrad8bit's betas are zeros).
    if (const char* first = beta1_key(); first && (rule_ == Bnb8bitRule::Momentum || rule_ == Bnb8bitRule::RMSprop))
      require(j.at(first).get<double>() > 0, where, ": '", first, "' is 0, which ", python_class_, " does not take");
    check_whole(j, "min_8bit_size", where);
    if (rule_ == Bnb8bitRule::AdEMAMix) {
      check_number(j, "alpha", 0, kInf, true, where);
      check_whole(j, "t_alpha", where);
      check_whole(j, "t_beta3", where);
      // Its warm-up of beta3 takes the logarithms of beta1 and beta3 (Python's math domain error).
      require(
          j.at("t_beta3").get<int64_t>() == 0 || (j.at("beta1").get<double>() > 0 && j.at("beta3").get<double>() > 0),
          where, ": t_beta3 needs beta1 and beta3 above 0");
    }
  }
  const char* cycled_momentum() const override { return beta1_key(); }
  void set_cycled_momentum(torch::optim::OptimizerOptions& options, double value) const override {
    auto& o = static_cast<Bnb8bitOptions&>(options);
    o.betas(std::make_tuple(value, std::get<1>(o.betas())));
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    auto& o = static_cast<Bnb8bitOptions&>(options)
                  .lr(j.at("lr").get<double>())
                  .weight_decay(j.at("weight_decay").get<double>())
                  .min_8bit_size(j.at("min_8bit_size").get<int64_t>());
    const char* beta1 = beta1_key();
    o.betas(
        std::make_tuple(beta1 ? j.at(beta1).get<double>() : 0.0, takes("beta2") ? j.at("beta2").get<double>() : 0.0));
    o.eps(takes("eps") ? j.at("eps").get<double>() : 0.0);
    if (rule_ == Bnb8bitRule::AdEMAMix)
      o.beta3(j.at("beta3").get<double>())
          .alpha(j.at("alpha").get<double>())
          .t_alpha(j.at("t_alpha").get<int64_t>())
          .t_beta3(j.at("t_beta3").get<int64_t>());
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
    auto shapes =
        state_field_shapes(rule_, p.sizes(), has_8bit_moments(p.numel(), group.at("min_8bit_size").get<int64_t>()));
    shapes["step"] = {};
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
    // The codes are bitsandbytes' dynamic maps, which the step quantises to whatever the state holds.
    if (field == "qmap1" || field == "qmap2")
      require(at::equal(value.cpu(), dynamic_code_tensor(field == "qmap1", at::kCPU)), where, " is not bitsandbytes' ",
              field == "qmap1" ? "signed" : "unsigned", " dynamic code");
    // Float32 moments of squares: Adam's and AdEMAMix's second, RMSprop's and Adagrad's only.
    const bool squares =
        field == "state2" || (field == "state1" && (rule_ == Bnb8bitRule::RMSprop || rule_ == Bnb8bitRule::Adagrad));
    if (squares && value.is_floating_point())
      require((value >= 0).all().item<bool>(), where, " holds a negative mean of squares");
  }

 private:
  bool takes(const char* key) const { return keys().count(key) > 0; }
  const char* beta1_key() const { return first_beta_key(rule_); }
  static void check_whole(const json& j, const char* key, const std::string& where) {
    check_number(j, key, 0, kInf, true, where);
    require(j.at(key).is_number_integer(), where, ": ", key, " must be a whole number");
  }

  std::string name_;
  std::string python_class_;
  Bnb8bitRule rule_;
  Bnb8bitDefaults defaults_;

 public:
  Bnb8bitRule rule() const { return rule_; }
};

const OptimizerAlgorithm& make(const char* name, const char* python_class, Bnb8bitRule rule, Bnb8bitDefaults defaults) {
  return *new Bnb8bitAlgorithm(name, python_class, rule, defaults);
}

}  // namespace

std::optional<Bnb8bitRule> bitsandbytes_rule(const std::string& algorithm) {
  using namespace algorithm_detail;
  for (const OptimizerAlgorithm* a :
       {&adam_8bit(), &adamw_8bit(), &ademamix_8bit(), &lion_8bit(), &sgd_8bit(), &rmsprop_8bit(), &adagrad_8bit()})
    if (a->name() == algorithm) return static_cast<const Bnb8bitAlgorithm*>(a)->rule();
  return std::nullopt;
}

const OptimizerAlgorithm& algorithm_detail::adam_8bit() {
  static const auto& a = make("adam_8bit", "Adam8bit", Bnb8bitRule::Adam, {1e-3, 0.9, 0.999, 1e-8, 0.0});
  return a;
}

const OptimizerAlgorithm& algorithm_detail::adamw_8bit() {
  static const auto& a = make("adamw_8bit", "AdamW8bit", Bnb8bitRule::Adam, {1e-3, 0.9, 0.999, 1e-8, 1e-2});
  return a;
}

const OptimizerAlgorithm& algorithm_detail::ademamix_8bit() {
  static const auto& a = make("ademamix_8bit", "AdEMAMix8bit", Bnb8bitRule::AdEMAMix, {1e-3, 0.9, 0.999, 1e-8, 1e-2});
  return a;
}

const OptimizerAlgorithm& algorithm_detail::lion_8bit() {
  static const auto& a = make("lion_8bit", "Lion8bit", Bnb8bitRule::Lion, {1e-4, 0.9, 0.99, 0.0, 0.0});
  return a;
}

const OptimizerAlgorithm& algorithm_detail::sgd_8bit() {
  static const auto& a = make("sgd_8bit", "SGD8bit", Bnb8bitRule::Momentum, {std::nullopt, 0.0, 0.0, 0.0, 0.0});
  return a;
}

const OptimizerAlgorithm& algorithm_detail::rmsprop_8bit() {
  static const auto& a = make("rmsprop_8bit", "RMSprop8bit", Bnb8bitRule::RMSprop, {1e-2, 0.99, 0.0, 1e-8, 0.0});
  return a;
}

const OptimizerAlgorithm& algorithm_detail::adagrad_8bit() {
  static const auto& a = make("adagrad_8bit", "Adagrad8bit", Bnb8bitRule::Adagrad, {1e-2, 0.0, 0.0, 1e-10, 0.0});
  return a;
}

}  // namespace acc
