#include "optim/algorithm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace acc {

const OptimizerAlgorithm& optimizer_algorithm(const std::string& name) {
  using namespace algorithm_detail;
  // Never destroyed, as every algorithm object and its tables (`*new`): a thread still stepping
  // while the program exits reads them after static destructors have run.
  static const auto& all = *new std::vector<const OptimizerAlgorithm*>{&sgd(),
                                                                       &adam(),
                                                                       &adamw(),
                                                                       &rmsprop(),
                                                                       &adagrad(),
                                                                       &lion(),
                                                                       &adafactor(),
                                                                       &radam(),
                                                                       &nadam(),
                                                                       &adamax(),
                                                                       &adadelta(),
                                                                       &rprop(),
                                                                       &asgd(),
                                                                       &adamw_schedule_free(),
                                                                       &sgd_schedule_free(),
                                                                       &lomo(),
                                                                       &adalomo(),
                                                                       &adam_8bit(),
                                                                       &adamw_8bit(),
                                                                       &ademamix_8bit(),
                                                                       &lion_8bit(),
                                                                       &sgd_8bit(),
                                                                       &rmsprop_8bit(),
                                                                       &adagrad_8bit()};
  std::string known;
  for (const auto* a : all) {
    if (a->name() == name) return *a;
    known += (known.empty() ? "" : ", ") + a->name();
  }
  // bitsandbytes' paged optimizers keep their state in CUDA's unified memory, which pages it to
  // the host under pressure; their arithmetic is the unpaged one's.
  const std::string paged = "paged_";
  if (name.rfind(paged, 0) == 0) {
    const std::string unpaged = name.substr(paged.size());
    const bool known = std::any_of(all.begin(), all.end(), [&](const auto* a) { return a->name() == unpaged; });
    fail(Status::Unsupported, "optimizer '", name, "': bitsandbytes' paged optimizers (state in CUDA unified ",
         "memory) are not built; ",
         known ? "'" + unpaged + "' computes the same steps with its state in ordinary memory"
               : std::string("its 8-bit ones are (adamw_8bit, ...), and with a min_8bit_size above every ") +
                     "parameter's size they take bitsandbytes' 32-bit rule");
  }
  fail(Status::InvalidArgument, "unknown optimizer '", name, "' (known: ", known, ")");
}

namespace algorithm_detail {

void check_number(const nlohmann::json& j, const char* key, double min, double max, bool max_inclusive,
                  const std::string& where, bool nullable) {
  require(j.contains(key), where, ": '", key, "' is missing");
  if (nullable && j[key].is_null()) return;
  require(j[key].is_number(), where, ": '", key, "' must be a number", nullable ? " or null" : "");
  const double v = j[key].get<double>();
  require(std::isfinite(v) && v >= min && (max_inclusive ? v <= max : v < max), where, ": '", key, "' is ", v,
          ", outside [", min, ", ", max, max_inclusive ? "]" : ")");
}

void check_flag(const nlohmann::json& j, const char* key, const std::string& where) {
  require(j.contains(key) && j[key].is_boolean(), where, ": '", key, "' must be true or false");
}

void check_learning_rate(const nlohmann::json& j, const std::string& where, bool nullable) {
  check_number(j, "lr", -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), false,
               where, nullable);
}

void check_adam_hyperparameters(const nlohmann::json& j, const std::string& where) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  check_learning_rate(j, where);
  check_number(j, "weight_decay", 0, kInf, true, where);
  check_number(j, "beta1", 0, 1, false, where);
  check_number(j, "beta2", 0, 1, false, where);
  check_number(j, "eps", 0, kInf, true, where);
}

nlohmann::json nullable(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::optional<double> optional_number(const nlohmann::json& j, const char* key) {
  return j.at(key).is_null() ? std::nullopt : std::optional<double>(j.at(key).get<double>());
}

at::Tensor step_tensor(int64_t step) { return at::scalar_tensor(step, at::kLong); }

int64_t step_value(const StateFields& fields) { return fields.at("step").item<int64_t>(); }

void put(StateFields& fields, const char* key, const at::Tensor& t) {
  if (t.defined()) fields[key] = t;
}

at::Tensor get(const StateFields& fields, const char* key) {
  auto it = fields.find(key);
  return it == fields.end() ? at::Tensor() : it->second;
}

void check_scalar_field(const at::Tensor& value, double min, bool min_inclusive, double max, const std::string& where,
                        const char* what) {
  const double v = value.to(at::kDouble).item<double>();
  require((min_inclusive ? v >= min : v > min) && v <= max, where, " is ", v, ", not ", what, " (in ",
          min_inclusive ? "[" : "(", min, ", ", max, "])");
}

}  // namespace algorithm_detail
}  // namespace acc
