#include "optim/bnb_python_group.h"

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "optim/bnb_8bit.h"

namespace acc {
namespace {

// Where each member of a group comes from: one of our keys, or null for a member the class fixes
// at 0 (bitsandbytes' None for t_alpha and t_beta3).
struct GroupLayout {
  std::vector<const char*> betas;
  const char* eps;
  bool two_state;  // Optimizer2State: alpha, t_alpha, t_beta3 follow
  bool ademamix;   // ...and they are ours
};

// As each class passes its arguments to Optimizer1State / Optimizer2State.
GroupLayout layout_of(const std::string& algorithm) {
  const Bnb8bitRule rule = *bitsandbytes_rule(algorithm);
  const bool ademamix = rule == Bnb8bitRule::AdEMAMix;
  GroupLayout layout{{first_beta_key(rule), takes_second_beta(rule) ? "beta2" : nullptr},
                     takes_eps(rule) ? "eps" : nullptr,
                     has_second_state(rule),
                     ademamix};
  if (ademamix) layout.betas.push_back("beta3");
  return layout;
}

c10::IValue member(const nlohmann::json& options, const char* key) {
  return key ? c10::IValue(options.at(key).get<double>()) : c10::IValue(0.0);
}

// t_alpha and t_beta3: ours 0 is bitsandbytes' None.
c10::IValue warmup_steps(const nlohmann::json& options, const char* key) {
  const int64_t steps = options.at(key).get<int64_t>();
  return steps > 0 ? c10::IValue(steps) : c10::IValue();
}

[[noreturn]] void refuse_fixed(const std::string& algorithm, const TorchSavedFile& file, const std::string& at,
                               const char* fixed) {
  fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': '", at,
       "' holds a setting the bitsandbytes optimizer behind ", algorithm, " does not take (it leaves it at ", fixed,
       ")");
}

// A member into `ours`, or a fixed one checked.
void read_member(const std::string& algorithm, const TorchSavedFile& file, const char* key, const PickleNode& value,
                 nlohmann::json& ours, const std::string& at) {
  const double number = file.number(value, at);
  if (key)
    ours[key] = number;
  else if (number != 0.0)
    refuse_fixed(algorithm, file, at, "0");
}

}  // namespace

bool bitsandbytes_algorithm(const std::string& algorithm) { return bitsandbytes_rule(algorithm).has_value(); }

std::vector<std::pair<std::string, c10::IValue>> bitsandbytes_python_group(const std::string& algorithm,
                                                                           const nlohmann::json& options) {
  const GroupLayout layout = layout_of(algorithm);
  std::vector<c10::IValue> betas;
  for (const char* key : layout.betas) betas.push_back(member(options, key));
  std::vector<std::pair<std::string, c10::IValue>> group = {{"lr", options.at("lr").get<double>()},
                                                            {"betas", python_tuple(std::move(betas))},
                                                            {"eps", member(options, layout.eps)},
                                                            {"weight_decay", options.at("weight_decay").get<double>()}};
  if (layout.two_state) {
    group.emplace_back("alpha", layout.ademamix ? member(options, "alpha") : c10::IValue(0.0));
    group.emplace_back("t_alpha", layout.ademamix ? warmup_steps(options, "t_alpha") : c10::IValue());
    group.emplace_back("t_beta3", layout.ademamix ? warmup_steps(options, "t_beta3") : c10::IValue());
  }
  return group;
}

void read_bitsandbytes_group_key(const std::string& algorithm, const TorchSavedFile& file, const std::string& key,
                                 const PickleNode& value, nlohmann::json& ours, const std::string& at) {
  const GroupLayout layout = layout_of(algorithm);
  if (key == "lr" || key == "weight_decay") {
    ours[key] = file.number(value, at);
  } else if (key == "betas") {
    const auto& items = file.sequence(value, at);
    if (items.size() != layout.betas.size())
      fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': '", at, "' holds ", items.size(),
           " betas, where the bitsandbytes optimizer behind ", algorithm, " has ", layout.betas.size(),
           " (saved by another optimizer?)");
    for (size_t i = 0; i < items.size(); ++i)
      read_member(algorithm, file, layout.betas[i], *items[i], ours, concat(at, "[", i, "]"));
  } else if (key == "eps") {
    read_member(algorithm, file, layout.eps, value, ours, at);
  } else if (layout.two_state && key == "alpha") {
    read_member(algorithm, file, layout.ademamix ? "alpha" : nullptr, value, ours, at);
  } else if (layout.two_state && (key == "t_alpha" || key == "t_beta3")) {
    const bool none = value.kind == PickleNode::Kind::None;
    if (!layout.ademamix && !none) refuse_fixed(algorithm, file, at, "None");
    if (layout.ademamix) ours[key] = none ? 0 : file.integer(value, at);
  } else {
    fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': '", at, "' is not a hyper-parameter of the ",
         algorithm, " optimizer (saved from another algorithm?)");
  }
}

}  // namespace acc
