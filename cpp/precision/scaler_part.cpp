#include "precision/scaler_part.h"

#include "checkpoint/state_files.h"
#include "common/files.h"

namespace acc {
namespace {

class ScalerPart final : public CheckpointPart {
 public:
  explicit ScalerPart(std::shared_ptr<GradScaler> scaler) : scaler_(std::move(scaler)) {}

  std::string file() const override { return "scaler.json"; }
  void save(const std::string& path) const override {
    scaler_->settle();  // the scale update the last step left for the next backward
    const GradScaler::ScaleRules rules = scaler_->rules();
    write_file(path, nlohmann::json{{"scale", scaler_->current_scale()},
                                    {"growth_tracker", scaler_->growth_tracker()},
                                    {"hysteresis", scaler_->hysteresis_left()},
                                    {"growth_factor", rules.growth_factor},
                                    {"backoff_factor", rules.backoff_factor},
                                    {"growth_interval", rules.growth_interval}}
                         .dump(2));
  }
  StagedLoad load(const std::string& path) const override {
    const nlohmann::json j = read_json(path);
    const double scale = json_field<double>(j, "scale", path);
    const int64_t growth_tracker = json_field_at_least<int64_t>(j, "growth_tracker", path, 0);
    // Written before hysteresis existed: the whole allowance, as a scaler without it has.
    const int64_t hysteresis = j.is_object() && j.contains("hysteresis")
                                   ? json_field_at_least<int64_t>(j, "hysteresis", path, 1)
                                   : scaler_->options().hysteresis;
    // Written before the rules were kept: the options' rules stay (torch restores a saved scaler's).
    std::optional<GradScaler::ScaleRules> rules;
    if (j.is_object() && j.contains("growth_interval"))
      rules = GradScaler::ScaleRules{json_field<double>(j, "growth_factor", path),
                                     json_field<double>(j, "backoff_factor", path),
                                     json_field<int64_t>(j, "growth_interval", path)};
    return staged_scaler_load(scaler_, scale, growth_tracker, hysteresis, rules, path);
  }

 private:
  std::shared_ptr<GradScaler> scaler_;
};

}  // namespace

StagedLoad staged_scaler_load(std::shared_ptr<GradScaler> scaler, double scale, int64_t growth_tracker,
                              int64_t hysteresis, const std::optional<GradScaler::ScaleRules>& rules,
                              const std::string& path) {
  checked_by_file(path, [&] { scaler->check_state(scale, growth_tracker, hysteresis, rules); });
  return {[scaler, scale, growth_tracker, hysteresis, rules] {
            scaler->load_state(scale, growth_tracker, hysteresis, rules);
          },
          {},
          {}};
}

std::unique_ptr<CheckpointPart> scaler_part(std::shared_ptr<GradScaler> scaler) {
  return std::make_unique<ScalerPart>(std::move(scaler));
}

}  // namespace acc
