// Python Accelerate's checkpoint files, both ways. With option python_state_files, save_state also
// writes, beside the library's own files, those Python Accelerate's save_state writes and its
// load_state reads (optimizer.bin, scheduler.bin, scaler.pt, random_states_<rank>.pkl, in
// torch.save's format; model.safetensors is the library's own), so that a Python program that
// prepares the same model, optimizer and scheduler resumes the run. And load_state reads a folder
// Python Accelerate wrote, so that a C program resumes a Python run.
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>

#include "accelerator/accelerated_scheduler.h"
#include "accelerator/accelerator.h"
#include "checkpoint/python_random_states.h"
#include "checkpoint/python_state_part.h"
#include "checkpoint/rng_part.h"
#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "model/weights_part.h"
#include "optim/optimizer_python_state.h"
#include "precision/grad_scaler.h"
#include "precision/scaler_part.h"
#include "schedule/scheduler_part.h"
#include "schedule/scheduler_python_state.h"

namespace acc {
namespace {

// How many files in `dir` have a name `pattern` matches: the number of objects of a kind saved.
size_t count_files(const std::string& dir, const char* pattern) {
  const std::regex name(pattern);
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (std::regex_match(entry.path().filename().string(), name)) ++count;
  return count;
}

// How many models' weights `dir` holds: indices i with model[_i].safetensors or pytorch_model[_i].bin
// (Accelerate loads the first where a folder saved into twice holds both).
size_t count_saved_models(const std::string& dir) {
  const std::regex name(R"((model(_([1-9]\d*))?\.safetensors)|(pytorch_model(_([1-9]\d*))?\.bin))");
  std::set<std::string> indices;
  std::smatch match;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, match, name)) indices.insert(match[1].matched ? match[3].str() : match[6].str());
  }
  return indices.size();
}

// The optimizer a prepared scheduler was made on, unwrapped.
std::shared_ptr<Optimizer> scheduled_optimizer(const std::shared_ptr<Scheduler>& prepared) {
  std::shared_ptr<Optimizer> optimizer =
      std::static_pointer_cast<AcceleratedScheduler>(prepared)->unwrap()->optimizer();
  if (auto wrapper = std::dynamic_pointer_cast<AcceleratedOptimizer>(optimizer)) return wrapper->unwrap();
  return optimizer;
}

StagedLoad staged_random_states_load(const TorchSavedFile& file, std::shared_ptr<GradientState> gradient_state) {
  const PythonRandomStates states = read_python_random_states(file);
  StagedLoad generators = restore_generator_states(states.generators, file.path());
  // As Accelerate's load_state: the accelerator's step comes with the random states.
  return {[set_generators = generators.apply, gradient_state, step = states.step] {
            set_generators();
            gradient_state->set_step(step);
          },
          {},
          {}};
}

}  // namespace

void Accelerator::check_python_state_files(const std::string& context) const {
  for (const auto& optimizer : live_optimizers()) require_python_optimizer_layout(*optimizer->unwrap(), context);
  for (const auto& scheduler : live_schedulers()) require_python_scheduler_layout(*scheduler);
}

CheckpointParts Accelerator::python_state_parts() const {
  CheckpointParts parts;
  const auto optimizers = live_optimizers();
  const auto schedulers = live_schedulers();
  for (size_t i = 0; i < optimizers.size(); ++i) {
    auto optimizer = optimizers[i]->unwrap();
    std::vector<std::shared_ptr<Scheduler>> its_schedulers;  // their Python counterparts wrote into its groups
    for (const auto& scheduler : schedulers)
      if (scheduled_optimizer(scheduler) == optimizer) its_schedulers.push_back(scheduler);
    parts.push_back(python_state_part(
        indexed_name("optimizer", i, ".bin"), false,
        [optimizer, its_schedulers] {
          return python_optimizer_state_dict(*optimizer, python_scheduler_group_keys(its_schedulers));
        },
        [optimizer](const TorchSavedFile& file) {
          const OptimizerSnapshot snapshot = python_optimizer_snapshot(*optimizer, file);
          return StagedLoad{
              prepare_optimizer_restore(*optimizer, snapshot, "checkpoint file '" + file.path() + "'"), {}, {}};
        }));
  }
  for (size_t i = 0; i < schedulers.size(); ++i)
    parts.push_back(python_state_part(
        indexed_name("scheduler", i, ".bin"), false,
        [scheduler = schedulers[i]] { return python_scheduler_state_dict(*scheduler); },
        [scheduler = schedulers[i]](const TorchSavedFile& file) {
          return staged_scheduler_load(scheduler, python_scheduler_state(*scheduler, file), file.path());
        }));
  if (fp16_without_scaler())  // Accelerate's disabled GradScaler: an empty state_dict(), nothing read
    parts.push_back(python_state_part(
        "scaler.pt", false, [] { return python_dict({}); },
        [](const TorchSavedFile&) {
          return StagedLoad{[] {}, {}, {}};
        }));
  if (scaler_)
    parts.push_back(python_state_part(
        "scaler.pt", false,
        [scaler = scaler_] {
          scaler->settle();
          const GradScaler::ScaleRules rules = scaler->rules();
          return python_dict({{"scale", scaler->current_scale()},
                              {"growth_factor", rules.growth_factor},
                              {"backoff_factor", rules.backoff_factor},
                              {"growth_interval", rules.growth_interval},
                              {"_growth_tracker", scaler->growth_tracker()}});
        },
        [scaler = scaler_](const TorchSavedFile& file) {
          const PickleNode& root = file.root();
          const GradScaler::ScaleRules rules{
              file.number(file.field(root, "growth_factor", "the state"), "growth_factor"),
              file.number(file.field(root, "backoff_factor", "the state"), "backoff_factor"),
              file.integer(file.field(root, "growth_interval", "the state"), "growth_interval")};
          // torch's GradScaler has no hysteresis: the whole allowance, as a scaler without it.
          return staged_scaler_load(scaler, file.number(file.field(root, "scale", "the state"), "scale"),
                                    file.integer(file.field(root, "_growth_tracker", "the state"), "_growth_tracker"),
                                    scaler->options().hysteresis, rules, file.path());
        }));
  parts.push_back(python_state_part(
      "random_states_" + std::to_string(process_index()) + ".pkl", true,
      [step = step()] { return python_random_states(step); },
      [gradient_state = gradient_state_](const TorchSavedFile& file) {
        return staged_random_states_load(file, gradient_state);
      }));
  return parts;
}

void Accelerator::check_python_checkpoint(const std::string& dir, const CheckpointModels& models_left,
                                          bool& other_process_count) const {
  const std::string what = "'" + dir + "' (a checkpoint of Python Accelerate's)";
  if (!custom_states_.empty())
    fail(Status::Unsupported, what,
         ": objects registered for checkpointing are not loaded from it (its "
         "custom_checkpoint_<i>.pkl hold Python objects)");
  for (const auto& model : live_models())
    if (model->sharded())
      fail(Status::Unsupported, what,
           ": a model prepared with sharded data parallelism is not loaded from it "
           "(Accelerate's FSDP and DeepSpeed checkpoints have layouts of their own)");
  check_python_state_files(what);
  const std::vector<std::tuple<const char*, size_t, size_t>> counts = {
      {"models' weights (model.safetensors or pytorch_model.bin, model_1.safetensors ...)", count_saved_models(dir),
       models_left.size()},
      {"optimizers (optimizer.bin, optimizer_1.bin ...)", count_files(dir, R"(optimizer(_[1-9]\d*)?\.bin)"),
       live_optimizers().size()},
      {"schedulers (scheduler.bin, scheduler_1.bin ...)", count_files(dir, R"(scheduler(_[1-9]\d*)?\.bin)"),
       live_schedulers().size()}};
  for (const auto& [kind, saved, live] : counts)
    if (saved != live)
      fail(Status::InvalidArgument, what, " holds ", saved, " ", kind, ", and this accelerator has ", live,
           " prepared");
  const bool saved_scaler = std::filesystem::exists(dir + "/scaler.pt");
  if (scaler_ && !saved_scaler)
    fail(Status::InvalidArgument, what, " has no GradScaler state (scaler.pt), and this accelerator uses ",
         "mixed_precision ", config_.mixed_precision);
  if (saved_scaler && !scaler_ && !fp16_without_scaler()) warn_scaler_not_read(what);
  if (!live_loaders().empty() && count_files(dir, R"((sampler|dl_state_dict)(_[1-9]\d*)?\.bin)") > 0 &&
      is_main_process())
    std::fprintf(stderr,
                 "accelerate: %s holds the states of Python's data loaders (sampler.bin, dl_state_dict.bin), "
                 "which are not read: the prepared data loaders stay where they are\n",
                 what.c_str());
  const size_t saved_processes = count_files(dir, R"(random_states_(0|[1-9]\d*)\.pkl)");
  if (saved_processes != static_cast<size_t>(num_processes())) {
    other_process_count = true;
    if (is_main_process())
      std::fprintf(stderr,
                   "accelerate: loading %s, saved by %zu processes, on %lld: weights, optimizer, scheduler "
                   "and scaler states are restored; random states and the step are not\n",
                   what.c_str(), saved_processes, static_cast<long long>(num_processes()));
  }
}

CheckpointParts Accelerator::python_weights_parts(const CheckpointModels& models, const std::string& dir) const {
  CheckpointParts parts;
  for (size_t file = 0; file < models.size(); ++file) {
    const CheckpointModels::Entry& entry = models.at(file);
    const auto model = std::static_pointer_cast<PreparedModel>(entry.model)->unwrap();
    const bool pickled = !std::filesystem::exists(dir + "/" + indexed_name("model", file, ".safetensors")) &&
                         std::filesystem::exists(dir + "/" + indexed_name("pytorch_model", file, ".bin"));
    parts.push_back(pickled ? pickled_weights_part(file, entry.index, model) : weights_part(file, entry.index, model));
  }
  return parts;
}

}  // namespace acc
