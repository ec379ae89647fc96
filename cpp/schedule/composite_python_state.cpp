#include "schedule/composite_python_state.h"

#include <algorithm>
#include <cmath>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "common/python_text.h"
#include "schedule/named_schedules.h"

namespace acc {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> pieces;
  size_t begin = 0;
  for (size_t end; (end = text.find(separator, begin)) != std::string::npos; begin = end + 1)
    pieces.push_back(text.substr(begin, end - begin));
  pieces.push_back(text.substr(begin));
  return pieces;
}

// A sequence's part `i` at the sequence's step `step`: SequentialLR made every part (each taking
// its step 0), set them all one step back and stepped the first again; a part counts from 0 at its
// milestone and stops one step before the next.
int64_t part_step(const std::vector<int64_t>& milestones, size_t i, int64_t step) {
  const int64_t start = i == 0 ? 0 : milestones[i - 1];
  if (step < start) return -1;
  if (i < milestones.size() && step >= milestones[i]) return milestones[i] - 1 - start;
  return step - start;
}

std::string listed(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

c10::IValue state_dict(const PythonComposition& c, int64_t step, const PythonPartOf& part_of, size_t& index) {
  using Kind = PythonComposition::Kind;
  if (c.kind == Kind::Schedule) {
    // The schedule's own attributes first, as PyTorch's constructors set them before LRScheduler's.
    PythonPartState part = part_of(index++, step);
    std::vector<std::pair<std::string, c10::IValue>> items = std::move(part.fields.state);
    for (auto& item : python_scheduler_items(c.name, step, part.base_lrs)) items.push_back(std::move(item));
    return python_dict(std::move(items));
  }
  std::vector<c10::IValue> parts;
  for (size_t i = 0; i < c.parts.size(); ++i)
    parts.push_back(
        state_dict(c.parts[i], c.kind == Kind::Sequence ? part_step(c.milestones, i, step) : step, part_of, index));
  if (c.kind == Kind::Chain) return python_dict({{"_schedulers", python_list(std::move(parts))}});
  return python_dict({{"_milestones", python_list(std::vector<c10::IValue>(c.milestones.begin(), c.milestones.end()))},
                      {"last_epoch", step},
                      {"_schedulers", python_list(std::move(parts))}});
}

// The step `node` (`c` in the file) stands at: a chain's is its first part's.
int64_t saved_step(const PythonComposition& c, const PickleNode& node, const TorchSavedFile& file,
                   const std::string& where) {
  if (c.kind != PythonComposition::Kind::Chain)
    return file.integer(file.field(node, "last_epoch", where), where + ".last_epoch");
  const PickleNode& list = file.field(node, "_schedulers", where);
  const auto& parts = file.sequence(list, where + "._schedulers");
  if (parts.empty()) file.refuse(where + "._schedulers", "the chain's schedulers", list);
  return saved_step(c.parts[0], *parts[0], file, where + "._schedulers[0]");
}

void check_saved(const PythonComposition& c, const PickleNode& node, int64_t step, const TorchSavedFile& file,
                 const std::string& where, const std::string& name, const PythonPartOf& part_of, size_t& index) {
  using Kind = PythonComposition::Kind;
  auto mismatch = [&](const std::string& field, const std::string& saved, const std::string& ours) {
    fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': '", field, "' is ", saved,
         ", where this program's '", name, "' schedule has ", ours, " (another sequence or chain, or ",
         "schedules made with other settings)");
  };
  if (c.kind != Kind::Chain) {
    const int64_t saved = file.integer(file.field(node, "last_epoch", where), where + ".last_epoch");
    if (saved != step) mismatch(where + ".last_epoch", std::to_string(saved), std::to_string(step));
  }
  if (c.kind == Kind::Schedule) {
    // Where its cycle stands and how long it is, as this program's schedule gives them there.
    if (const auto differs = python_field_mismatch(part_of(index++, step).fields, node, file, where + "."))
      mismatch(where + "." + differs->key, differs->saved, differs->ours);
    return;
  }
  if (c.kind == Kind::Sequence) {
    std::vector<int64_t> milestones;
    for (const PickleNode* m : file.sequence(file.field(node, "_milestones", where), where + "._milestones"))
      milestones.push_back(file.integer(*m, where + "._milestones"));
    if (milestones != c.milestones) mismatch(where + "._milestones", listed(milestones), listed(c.milestones));
  }
  const auto& parts = file.sequence(file.field(node, "_schedulers", where), where + "._schedulers");
  if (parts.size() != c.parts.size())
    mismatch(where + "._schedulers", std::to_string(parts.size()) + " schedulers", std::to_string(c.parts.size()));
  for (size_t i = 0; i < parts.size(); ++i)
    check_saved(c.parts[i], *parts[i], c.kind == Kind::Sequence ? part_step(c.milestones, i, step) : step, file,
                where + "._schedulers[" + std::to_string(i) + "]", name, part_of, index);
}

}  // namespace

bool python_lambda_schedule(const std::string& name) {
  return name != "step" && name != "multistep" && name != "exponential" && name != "cosine_annealing" &&
         name != "linear_lr" && name != "constant_lr" && name != "polynomial_lr" && name != "swa_lr" &&
         name != "cosine_annealing_warm_restarts" && name != kOneCycleSchedule && name != kCyclicSchedule &&
         name != kPlateauSchedule;
}

std::vector<std::pair<std::string, c10::IValue>> python_scheduler_items(const std::string& name, int64_t step,
                                                                        const std::vector<double>& base_lrs) {
  // A sequence's part made and set back before its milestone stands at -1, its step count at 1.
  std::vector<std::pair<std::string, c10::IValue>> items{{"base_lrs", python_floats(base_lrs)},
                                                         {"last_epoch", step},
                                                         {"verbose", false},
                                                         {"_step_count", std::max<int64_t>(1, step + 1)},
                                                         {"_get_lr_called_within_step", false}};
  if (python_lambda_schedule(name))
    items.emplace_back("lr_lambdas", python_list(std::vector<c10::IValue>(base_lrs.size())));
  return items;
}

bool composite_schedule_name(const std::string& name) { return name.find_first_of(",+") != std::string::npos; }

PythonComposition python_composition(const std::string& name) {
  using Kind = PythonComposition::Kind;
  const size_t comma = name.find(','), plus = name.find('+');
  if (comma == std::string::npos && plus == std::string::npos) return {Kind::Schedule, name, {}, {}};
  PythonComposition c;
  if (plus != std::string::npos && (comma == std::string::npos || comma < plus)) {
    c.kind = Kind::Chain;  // "a+b", or "a,b@5+c": a sequence leading the chain
    for (const std::string& part : split(name, '+')) c.parts.push_back(python_composition(part));
    return c;
  }
  c.kind = Kind::Sequence;  // "a,b@5", or "a+b,c@5": a chain leading the sequence
  const std::vector<std::string> pieces = split(name, ',');
  c.parts.push_back(python_composition(pieces[0]));
  for (size_t i = 1; i < pieces.size(); ++i) {
    const size_t at = pieces[i].rfind('@');
    c.parts.push_back(python_composition(pieces[i].substr(0, at)));
    c.milestones.push_back(std::stoll(pieces[i].substr(at + 1)));
  }
  return c;
}

// MultiStepLR's milestones are a handful of steps.
constexpr int64_t kMaxCountedRepeats = 1 << 20;

std::optional<PythonFieldMismatch> python_field_mismatch(const PythonSchedulerFields& fields, const PickleNode& node,
                                                         const TorchSavedFile& file, const std::string& where) {
  // Numbers compare as doubles (Python's int 3 and float 3.0 are one setting) and exactly: the
  // program's and Python's settings are the same literals.
  const auto numbers = [&](const c10::IValue& value) {
    std::vector<double> out;
    if (value.isInt()) out.push_back(static_cast<double>(value.toInt()));
    if (value.isDouble()) out.push_back(value.toDouble());
    if (value.isList())
      for (const c10::IValue& item : value.toListRef()) out.push_back(item.isInt() ? item.toInt() : item.toDouble());
    return out;
  };
  const auto printed = [](const std::vector<double>& values, const c10::IValue& as) {
    const bool integer = as.isInt();  // (as the setting is: an int, a float, a list of floats)
    std::string text = as.isList() ? "[" : "";
    for (size_t i = 0; i < values.size(); ++i)
      text += (i ? ", " : "") + (integer && std::nearbyint(values[i]) == values[i]
                                     ? std::to_string(static_cast<int64_t>(values[i]))
                                     : python_float_repr(values[i]));
    return text + (as.isList() ? "]" : "");
  };
  for (const auto& [key, value] : fields.state) {
    const PickleNode* saved = node.find(key);
    if (!saved) continue;
    if (value.isString()) {
      const std::string& in_file = file.text(*saved, where + key);
      if (in_file != value.toStringRef())
        return PythonFieldMismatch{key, "'" + in_file + "'", "'" + value.toStringRef() + "'"};
      continue;
    }
    if (!value.isInt() && !value.isDouble() && !value.isList()) continue;
    // Numbers only: a list of other things (OneCycleLR's _schedule_phases, dicts of the group keys
    // each phase runs between, as torch 2.x pickles it) says nothing a number here would not.
    if (value.isList()) {
      const c10::List<c10::IValue> items = value.toList();
      if (std::any_of(items.begin(), items.end(), [](const c10::IValue& item) {
            const c10::IValue v = item;
            return !v.isInt() && !v.isDouble();
          }))
        continue;
    }
    std::vector<double> in_file;
    if (value.isList())
      for (const PickleNode* item : file.sequence(*saved, where + key))
        in_file.push_back(file.number(*item, where + key));
    else
      in_file.push_back(file.number(*saved, where + key));
    const std::vector<double> ours = numbers(value);
    if (in_file != ours) return PythonFieldMismatch{key, printed(in_file, value), printed(ours, value)};
  }
  for (const auto& [key, steps] : fields.counted) {
    const PickleNode* saved = node.find(key);
    if (!saved) continue;
    // collections.Counter({step: repeats}), as pickle writes it: a call of Counter with one dict.
    const std::string at = where + key;
    if (!saved->is_call_of("collections.Counter") || saved->items[1]->items.size() != 1 ||
        saved->items[1]->items[0]->kind != PickleNode::Kind::Dict)
      file.refuse(at, "a collections.Counter", *saved);
    std::vector<int64_t> in_file;
    const auto& counts = saved->items[1]->items[0]->items;
    for (size_t i = 0; i + 1 < counts.size(); i += 2) {
      const int64_t repeats = file.integer(*counts[i + 1], at);
      // (a file claiming a step a billion times is refused, not expanded)
      if (repeats < 0 || repeats > kMaxCountedRepeats ||
          static_cast<int64_t>(in_file.size()) + repeats > kMaxCountedRepeats)
        file.refuse(
            at,
            "a collections.Counter of steps repeated at most " + std::to_string(kMaxCountedRepeats) + " times in all",
            *counts[i + 1]);
      in_file.insert(in_file.end(), static_cast<size_t>(repeats), file.integer(*counts[i], at));
    }
    std::vector<int64_t> ours = steps;
    std::sort(in_file.begin(), in_file.end());
    std::sort(ours.begin(), ours.end());
    if (in_file != ours) return PythonFieldMismatch{key, listed(in_file), listed(ours)};
  }
  return std::nullopt;
}

size_t python_schedule_count(const std::string& name) {
  return 1 + static_cast<size_t>(std::count_if(name.begin(), name.end(), [](char c) { return c == ',' || c == '+'; }));
}

c10::IValue python_composition_state_dict(const PythonComposition& composition, int64_t step,
                                          const PythonPartOf& part_of, const std::vector<double>& last_lrs) {
  size_t index = 0;
  c10::IValue state = state_dict(composition, step, part_of, index);
  state.toGenericDict().insert("_last_lr", python_floats(last_lrs));
  return state;
}

PythonCompositionPosition python_composition_position(const PythonComposition& composition, const std::string& name,
                                                      const PythonPartOf& part_of, const TorchSavedFile& file) {
  const PickleNode& root = file.root();
  PythonCompositionPosition position;
  position.step = saved_step(composition, root, file, "the state dict");
  size_t index = 0;
  check_saved(composition, root, position.step, file, "the state dict", name, part_of, index);
  // The first schedule's base rates (every part's are the groups' initial_lr).
  const PythonComposition* c = &composition;
  const PickleNode* node = &root;
  std::string where = "the state dict";
  while (c->kind != PythonComposition::Kind::Schedule) {
    node = file.sequence(file.field(*node, "_schedulers", where), where + "._schedulers").at(0);
    c = &c->parts[0];
    where += "._schedulers[0]";
  }
  if (const PickleNode* base = node->find("base_lrs"))
    for (const PickleNode* item : file.sequence(*base, where + ".base_lrs"))
      position.base_lrs.push_back(file.number(*item, where + ".base_lrs"));
  return position;
}

}  // namespace acc
