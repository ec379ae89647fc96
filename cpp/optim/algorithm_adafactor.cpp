// Adafactor's options and state (cpp/optim/adafactor.h), with transformers' defaults and checks: lr
// and relative_step=true exclude each other, warmup_init needs relative_step. Its state is named as
// in transformers: step, exp_avg_sq_row and exp_avg_sq_col (or exp_avg_sq), exp_avg, RMS.
#include <limits>

#include "common/error.h"
#include "optim/adafactor.h"
#include "optim/algorithm.h"

namespace acc {
namespace {

using nlohmann::json;
using namespace algorithm_detail;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The rules between options, for new options and saved ones alike.
void check_combination(bool has_lr, bool relative_step, bool warmup_init, double clip_threshold,
                       const std::string& where) {
  const std::string prefix = where.empty() ? "adafactor" : where + ": adafactor";
  require(!(has_lr && relative_step), prefix,
          ": lr cannot be combined with relative_step=true (set relative_step to false to use lr)");
  require(has_lr || relative_step, prefix, ": relative_step=false needs lr");
  require(!warmup_init || relative_step, prefix, ": warmup_init=true needs relative_step=true");
  require(clip_threshold > 0, prefix, ": clip_threshold must be above 0, got ", clip_threshold);
}

class AdafactorAlgorithm final : public OptimizerAlgorithm {
 public:
  const std::string& name() const override {
    static const std::string& n = *new std::string("adafactor");
    return n;
  }
  const std::set<std::string>& keys() const override {
    static const auto& k = *new std::set<std::string>{"lr",
                                                      "eps1",
                                                      "eps2",
                                                      "clip_threshold",
                                                      "decay_rate",
                                                      "beta1",
                                                      "weight_decay",
                                                      "scale_parameter",
                                                      "relative_step",
                                                      "warmup_init"};
    return k;
  }
  // Factored moments per matrix and the RMS of each whole parameter: a slice of a parameter cannot
  // be updated alone.
  bool elementwise() const override { return false; }

  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& o) const override {
    AdafactorOptions a;
    if (o.has("lr")) a.lr(o.get_double("lr"));
    if (o.has("beta1")) a.beta1(o.get_double("beta1"));
    a.eps(std::make_tuple(o.get_double("eps1", 1e-30), o.get_double("eps2", 1e-3)))
        .clip_threshold(o.get_double("clip_threshold", 1.0))
        .decay_rate(o.get_double("decay_rate", -0.8))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .scale_parameter(o.get_bool("scale_parameter", true))
        .relative_step(o.get_bool("relative_step", true))
        .warmup_init(o.get_bool("warmup_init", false));
    require(!a.beta1() || *a.beta1() < 1.0, "adafactor: beta1 must be below 1");
    check_combination(a.lr().has_value(), a.relative_step(), a.warmup_init(), a.clip_threshold(), "");
    return std::make_unique<AdafactorOptions>(a);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                          const torch::optim::OptimizerOptions& d) const override {
    return std::make_unique<Adafactor>(std::move(groups), static_cast<const AdafactorOptions&>(d));
  }
  json options_to_json(const torch::optim::OptimizerOptions& options) const override {
    const auto& o = static_cast<const AdafactorOptions&>(options);
    return {{"lr", nullable(o.lr())},
            {"eps1", std::get<0>(o.eps())},
            {"eps2", std::get<1>(o.eps())},
            {"clip_threshold", o.clip_threshold()},
            {"decay_rate", o.decay_rate()},
            {"beta1", nullable(o.beta1())},
            {"weight_decay", o.weight_decay()},
            {"scale_parameter", o.scale_parameter()},
            {"relative_step", o.relative_step()},
            {"warmup_init", o.warmup_init()}};
  }
  void check_options_json(const json& j, const std::string& where) const override {
    check_learning_rate(j, where, true);
    check_number(j, "eps1", 0, kInf, true, where);
    check_number(j, "eps2", 0, kInf, true, where);
    check_number(j, "clip_threshold", 0, kInf, true, where);
    check_number(j, "decay_rate", -kInf, 0, true, where);
    check_number(j, "beta1", 0, 1, false, where, true);
    check_number(j, "weight_decay", 0, kInf, true, where);
    for (const char* flag : {"scale_parameter", "relative_step", "warmup_init"}) check_flag(j, flag, where);
    check_combination(!j["lr"].is_null(), j["relative_step"].get<bool>(), j["warmup_init"].get<bool>(),
                      j["clip_threshold"].get<double>(), where);
  }
  void set_options_from_json(torch::optim::OptimizerOptions& options, const json& j) const override {
    static_cast<AdafactorOptions&>(options)
        .lr(optional_number(j, "lr"))
        .eps(std::make_tuple(j.at("eps1").get<double>(), j.at("eps2").get<double>()))
        .clip_threshold(j.at("clip_threshold").get<double>())
        .decay_rate(j.at("decay_rate").get<double>())
        .beta1(optional_number(j, "beta1"))
        .weight_decay(j.at("weight_decay").get<double>())
        .scale_parameter(j.at("scale_parameter").get<bool>())
        .relative_step(j.at("relative_step").get<bool>())
        .warmup_init(j.at("warmup_init").get<bool>());
  }
  StateFields state_fields(const torch::optim::OptimizerParamState& state) const override {
    const auto& s = static_cast<const AdafactorParamState&>(state);
    StateFields f;
    f["step"] = step_tensor(s.step());
    put(f, "exp_avg", s.exp_avg());
    put(f, "exp_avg_sq_row", s.exp_avg_sq_row());
    put(f, "exp_avg_sq_col", s.exp_avg_sq_col());
    put(f, "exp_avg_sq", s.exp_avg_sq());
    put(f, "RMS", s.rms());
    return f;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& f) const override {
    auto state = std::make_unique<AdafactorParamState>();
    state->step(step_value(f));
    state->exp_avg(get(f, "exp_avg"))
        .exp_avg_sq_row(get(f, "exp_avg_sq_row"))
        .exp_avg_sq_col(get(f, "exp_avg_sq_col"))
        .exp_avg_sq(get(f, "exp_avg_sq"))
        .rms(get(f, "RMS"));
    return state;
  }
  std::map<std::string, std::vector<int64_t>> state_shapes(const json& group, const at::Tensor& p) const override {
    const auto sizes = p.sizes().vec();
    std::map<std::string, std::vector<int64_t>> shapes = {{"step", {}}, {"RMS", {}}};
    if (!group.at("beta1").is_null()) shapes["exp_avg"] = sizes;
    if (p.dim() >= 2) {
      auto row = sizes, col = sizes;
      row.pop_back();
      col.erase(col.end() - 2);
      shapes["exp_avg_sq_row"] = row;
      shapes["exp_avg_sq_col"] = col;
    } else {
      shapes["exp_avg_sq"] = sizes;
    }
    return shapes;
  }
  at::ScalarType state_dtype(const at::Tensor& p) const override {
    return p.scalar_type() == at::kHalf || p.scalar_type() == at::kBFloat16 ? at::kFloat : p.scalar_type();
  }
};

}  // namespace

const OptimizerAlgorithm& algorithm_detail::adafactor() {
  static const auto& a = *new AdafactorAlgorithm();
  return a;
}

}  // namespace acc
