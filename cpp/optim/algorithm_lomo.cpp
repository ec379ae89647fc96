// LOMO's and AdaLomo's options and state (cpp/optim/lomo.h), with lomo_optim's names and defaults:
// lr 1e-3, no clipping, no weight decay; AdaLomo's loss_scale 1024, eps (1e-30, 1e-3),
// clip_threshold 1 and decay_rate -0.8. AdaLomo's count of fused backward passes (step_num) is
// saved with its group; its state is the factored second moment, named as Adafactor's.
#include <limits>

#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/lomo.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::optional<double> optional_option(const Options& o, const char* key) {
  return o.has(key) ? std::optional<double>(o.get_double(key)) : std::nullopt;
}

// What both take: a rate, weight decay and the two clipping bounds (each above 0 where set:
// lomo_optim refuses clip_grad_norm <= 0 and ignores a clip_grad_value <= 0, which is refused here).
void check_shared(const json& j, const std::string& where) {
  check_learning_rate(j, where);
  check_number(j, "weight_decay", 0, kInf, true, where);
  check_number(j, "clip_grad_norm", 0, kInf, false, where, true);
  check_number(j, "clip_grad_value", 0, kInf, false, where, true);
  for (const char* key : {"clip_grad_norm", "clip_grad_value"})
    require(j[key].is_null() || j[key].get<double>() > 0, where, ": '", key, "' must be above 0");
}

class LomoAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("lomo");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr", "clip_grad_norm", "clip_grad_value", "weight_decay"};
    return k;
  }
  bool elementwise() const override { return false; }  // it updates inside backward, never a slice
  bool stateless() const override { return true; }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    LomoOptions options;
    options.lr(o.get_double("lr", 1e-3))
        .clip_grad_norm(optional_option(o, "clip_grad_norm"))
        .clip_grad_value(optional_option(o, "clip_grad_value"))
        .weight_decay(o.get_double("weight_decay", 0.0));
    check_options_json(options_to_json(options), name() + "'s options");
    return std::make_unique<LomoOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Lomo>(std::move(groups), static_cast<const LomoOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const LomoOptions&>(options);
    return {{"lr", o.lr()},
            {"clip_grad_norm", nullable(o.clip_grad_norm())},
            {"clip_grad_value", nullable(o.clip_grad_value())},
            {"weight_decay", o.weight_decay()}};
  }
  void check_options_json(const json& j, const std::string& where) const override { check_shared(j, where); }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<LomoOptions&>(options)
        .lr(j.at("lr").get<double>())
        .clip_grad_norm(optional_number(j, "clip_grad_norm"))
        .clip_grad_value(optional_number(j, "clip_grad_value"))
        .weight_decay(j.at("weight_decay").get<double>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState&) const override { return {}; }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields&) const override {
    fail(Status::InvalidArgument, "lomo keeps no state for a parameter");
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor&) const override { return {}; }
};

class AdaLomoAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("adalomo");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr",
                                                      "loss_scale",
                                                      "eps1",
                                                      "eps2",
                                                      "clip_threshold",
                                                      "decay_rate",
                                                      "clip_grad_norm",
                                                      "clip_grad_value",
                                                      "weight_decay"};
    return k;
  }
  bool elementwise() const override { return false; }
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    AdaLomoOptions options;
    options.lr(o.get_double("lr", 1e-3))
        .loss_scale(o.get_double("loss_scale", 1024.0))
        .eps(std::make_tuple(o.get_double("eps1", 1e-30), o.get_double("eps2", 1e-3)))
        .clip_threshold(o.get_double("clip_threshold", 1.0))
        .decay_rate(o.get_double("decay_rate", -0.8))
        .clip_grad_norm(optional_option(o, "clip_grad_norm"))
        .clip_grad_value(optional_option(o, "clip_grad_value"))
        .weight_decay(o.get_double("weight_decay", 0.0));
    check_options_json(options_to_json(options), name() + "'s options");
    return std::make_unique<AdaLomoOptions>(options);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<AdaLomo>(std::move(groups), static_cast<const AdaLomoOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AdaLomoOptions&>(options);
    return {{"lr", o.lr()},
            {"loss_scale", o.loss_scale()},
            {"eps1", std::get<0>(o.eps())},
            {"eps2", std::get<1>(o.eps())},
            {"clip_threshold", o.clip_threshold()},
            {"decay_rate", o.decay_rate()},
            {"clip_grad_norm", nullable(o.clip_grad_norm())},
            {"clip_grad_value", nullable(o.clip_grad_value())},
            {"weight_decay", o.weight_decay()},
            {"step_num", o.step_num()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_shared(j, where);
    check_number(j, "loss_scale", 0, kInf, false, where);
    check_number(j, "eps1", 0, kInf, false, where);
    check_number(j, "eps2", 0, kInf, false, where);
    check_number(j, "clip_threshold", 0, kInf, false, where);
    require(j["clip_threshold"].get<double>() > 0, where, ": 'clip_threshold' must be above 0 (updates are divided ",
            "by their RMS over it)");
    check_number(j, "decay_rate", -kInf, 0, true, where);
    require(j.contains("step_num") && j["step_num"].is_number_integer() && j["step_num"].get<int64_t>() >= 0, where,
            ": 'step_num' must be an integer >= 0");
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<AdaLomoOptions&>(options)
        .lr(j.at("lr").get<double>())
        .loss_scale(j.at("loss_scale").get<double>())
        .eps(std::make_tuple(j.at("eps1").get<double>(), j.at("eps2").get<double>()))
        .clip_threshold(j.at("clip_threshold").get<double>())
        .decay_rate(j.at("decay_rate").get<double>())
        .clip_grad_norm(optional_number(j, "clip_grad_norm"))
        .clip_grad_value(optional_number(j, "clip_grad_value"))
        .weight_decay(j.at("weight_decay").get<double>())
        .step_num(j.at("step_num").get<int64_t>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AdaLomoParamState&>(state);
    StateFields f;
    put(f, "exp_avg_sq_row", s.exp_avg_sq_row());
    put(f, "exp_avg_sq_col", s.exp_avg_sq_col());
    put(f, "exp_avg_sq", s.exp_avg_sq());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AdaLomoParamState>();
    state->exp_avg_sq_row(get(f, "exp_avg_sq_row"))
        .exp_avg_sq_col(get(f, "exp_avg_sq_col"))
        .exp_avg_sq(get(f, "exp_avg_sq"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json&, const at::Tensor& p) const override {
    const auto sizes = p.sizes().vec();
    if (p.dim() < 2) return {{"exp_avg_sq", sizes}};
    auto row = sizes, col = sizes;
    row.pop_back();
    col.erase(col.end() - 2);
    return {{"exp_avg_sq_row", row}, {"exp_avg_sq_col", col}};
  }
  at::ScalarType state_dtype(const at::Tensor&) const override { return at::kFloat; }
};

}  // namespace

const OptimizerAlgorithm& algorithm_detail::lomo() {
  static const auto& a = *new LomoAlgorithm();
  return a;
}

const OptimizerAlgorithm& algorithm_detail::adalomo() {
  static const auto& a = *new AdaLomoAlgorithm();
  return a;
}

}  // namespace acc
