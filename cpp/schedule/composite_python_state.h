// Schedulers' states in Python's layout: what every PyTorch scheduler keeps, and sequences and chains
// of schedules. PyTorch's SequentialLR and ChainedScheduler keep each part's own state dict in
// `_schedulers` (a chain leading a sequence is a ChainedScheduler inside a SequentialLR; a sequence
// leading a chain the other way round), and their load_state_dict hands each part its own. The parts
// are read from the scheduler's name, which lists them ("linear_lr,cosine_annealing@5": a sequence;
// "constant_lr+exponential": a chain; "a+b,c@5" and "a,b@5+c" the two nestings).
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/torch_load.h"
#include "schedule/scheduler.h"

namespace acc {

struct PythonComposition {
  enum class Kind { Schedule, Sequence, Chain };
  Kind kind = Kind::Schedule;
  std::string name;                      // a schedule's
  std::vector<PythonComposition> parts;  // a sequence's or chain's
  std::vector<int64_t> milestones;       // a sequence's: where each part after the first takes over
};

// Whether PyTorch makes schedule `name` as a LambdaLR or MultiplicativeLR, whose state dict holds one
// entry per group for its functions (None for a plain function): transformers' schedules and a
// user's factors.
bool python_lambda_schedule(const std::string& name);

// What every PyTorch scheduler of schedule `name` keeps at `step` (LRScheduler's attributes, and a
// LambdaLR's lr_lambdas), but its last rates.
std::vector<std::pair<std::string, c10::IValue>> python_scheduler_items(const std::string& name, int64_t step,
                                                                        const std::vector<double>& base_lrs);

// Whether `name` is a sequence's or chain's, and its parts; how many schedules it names.
bool composite_schedule_name(const std::string& name);
PythonComposition python_composition(const std::string& name);
size_t python_schedule_count(const std::string& name);

// Each schedule of a composition by its index in the name's order, `steps_in` steps into it, as
// PyTorch keeps it (Scheduler::python_part).
using PythonPartOf = std::function<PythonPartState(size_t index, int64_t steps_in)>;

// Where `node` (a schedule's state in `file`) holds one of the `fields` this program's schedule gives
// (its settings, where its cycle stands, how long it is: numbers, texts, lists of numbers; and
// counted_fields, MultiStepLR's milestones) with another value: the key and both values as Python
// prints them. `where` prefixes the key in a refusal of the file's value.
struct PythonFieldMismatch {
  std::string key, saved, ours;
};
std::optional<PythonFieldMismatch> python_field_mismatch(const PythonSchedulerFields& fields, const PickleNode& node,
                                                         const TorchSavedFile& file, const std::string& where);

// The state dict of the composition at `step`: each part's step count as PyTorch's would be
// (a sequence's later parts at -1 before their milestone, each earlier one where it stopped), its
// base rates and fields of its own (a cycle's position, a one-cycle's phases), and the rates the
// whole set last. A part's own last rates are left out: PyTorch sets them anew at the part's next
// step, before anything reads them.
c10::IValue python_composition_state_dict(const PythonComposition& composition, int64_t step,
                                          const PythonPartOf& part_of, const std::vector<double>& last_lrs);

// The reverse: the step the file's composition stands at, each part's step count checked against
// that (and a sequence's milestones against this composition's), and each part's integer fields
// (T_cur, T_i, total_steps, ...) against what `part_of` gives there: a mismatch is refused naming
// the field and the program's schedule (`name`). `base_lrs` are the first schedule's (empty: not saved).
struct PythonCompositionPosition {
  int64_t step = 0;
  std::vector<double> base_lrs;
};
PythonCompositionPosition python_composition_position(const PythonComposition& composition, const std::string& name,
                                                      const PythonPartOf& part_of, const TorchSavedFile& file);

}  // namespace acc
