#include "parallel/power_sgd_settings.h"

#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/json_input.h"

namespace acc {
namespace {

const char* const kOption = "ddp_comm_state_option";

// A JSON integer in [low, high] (numbers are compared as written: -1 is not taken for 2**64 - 1).
int64_t integer_setting(const nlohmann::json& value, const std::string& key, int64_t low, int64_t high) {
  const bool fits = value.is_number_integer() && (value.is_number_unsigned()
                                                      ? value.get<uint64_t>() <= static_cast<uint64_t>(high)
                                                      : value.get<int64_t>() <= high);
  if (!fits || value.get<int64_t>() < low)
    fail(Status::InvalidArgument, kOption, ": ", key, " must be an integer in [", low, ", ", high, "], got ",
         value.dump());
  return value.get<int64_t>();
}

double number_setting(const nlohmann::json& value, const std::string& key) {
  if (!value.is_number() || !std::isfinite(value.get<double>()))
    fail(Status::InvalidArgument, kOption, ": ", key, " must be a finite number, got ", value.dump());
  return value.get<double>();
}

bool bool_setting(const nlohmann::json& value, const std::string& key) {
  if (!value.is_boolean()) fail(Status::InvalidArgument, kOption, ": ", key, " must be true or false, got ", value.dump());
  return value.get<bool>();
}

}  // namespace

PowerSgdSettings parse_power_sgd_settings(const std::string& json_text) {
  PowerSgdSettings s;
  if (json_text.empty()) return s;
  const nlohmann::json object = parse_json_input(json_text, kOption);
  if (!object.is_object())
    fail(Status::InvalidArgument, kOption, " must be a JSON object of PowerSGDState's arguments, e.g. ",
         "{\"matrix_approximation_rank\": 2, \"start_powerSGD_iter\": 10}");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const auto& [key, value] : object.items()) {
    if (key == "matrix_approximation_rank") s.matrix_approximation_rank = integer_setting(value, key, 1, 1 << 20);
    else if (key == "start_powerSGD_iter") s.start_iter = integer_setting(value, key, 0, kMax);
    else if (key == "min_compression_rate") s.min_compression_rate = number_setting(value, key);
    else if (key == "use_error_feedback") s.use_error_feedback = bool_setting(value, key);
    else if (key == "warm_start") s.warm_start = bool_setting(value, key);
    else if (key == "orthogonalization_epsilon") {
      s.orthogonalization_epsilon = number_setting(value, key);
      if (s.orthogonalization_epsilon < 0)
        fail(Status::InvalidArgument, kOption, ": orthogonalization_epsilon must be >= 0, got ", value.dump());
    } else if (key == "random_seed") s.random_seed = static_cast<uint32_t>(integer_setting(value, key, 0, 0xFFFFFFFF));
    else if (key == "compression_stats_logging_frequency")
      integer_setting(value, key, std::numeric_limits<int64_t>::min(), kMax);  // checked; statistics are not logged
    else if (key == "batch_tensors_with_same_shape") s.batch_tensors_with_same_shape = bool_setting(value, key);
    else
      fail(Status::InvalidArgument, kOption, ": unknown key '", key, "' (matrix_approximation_rank, ",
           "start_powerSGD_iter, min_compression_rate, use_error_feedback, warm_start, orthogonalization_epsilon, ",
           "random_seed, compression_stats_logging_frequency, batch_tensors_with_same_shape)");
  }
  // PyTorch's own check: the Reducer rebuilds its buckets after the first step, which would strand
  // the error and the P/Q memories kept by bucket index.
  if ((s.use_error_feedback || s.warm_start) && s.start_iter <= 1)
    fail(Status::InvalidArgument, kOption, ": start_powerSGD_iter must be > 1 with use_error_feedback or ",
         "warm_start (DDP rebuilds its buckets after the first step), got ", s.start_iter);
  return s;
}

}  // namespace acc
