// Values as Python prints them: the files Python's trackers write (MLflow's file store, DVCLive's
// tables, PyYAML's floats) hold `repr` or `str()` of what Accelerate handed them, and readers compare
// those texts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace acc {

// repr(float): the shortest text that reads back as the same double, in fixed notation for
// exponents from -5 to 15 ("0.0001", "1e-05", "100.0", "1e+16"), and "nan", "inf", "-inf".
std::string python_float_repr(double value);

// str(v) of the value Python's json.loads makes of `value`: a string as it is, True/False/None,
// ints, floats as python_float_repr, lists and dicts as Python prints them (strings inside quoted
// as repr quotes them).
std::string python_str(const nlohmann::json& value);

}  // namespace acc
