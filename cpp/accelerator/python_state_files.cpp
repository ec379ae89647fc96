// Option python_state_files: save_state also writes, beside the library's own files, those Python
// Accelerate's save_state writes and its load_state reads (optimizer.bin, scheduler.bin, scaler.pt,
// random_states_<rank>.pkl, in torch.save's format; model.safetensors is the library's own), so that
// a Python program that prepares the same model, optimizer and scheduler resumes the run.
#include "accelerator/accelerator.h"
#include "checkpoint/python_random_states.h"
#include "checkpoint/python_state_part.h"
#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "optim/optimizer_python_state.h"
#include "precision/grad_scaler.h"
#include "schedule/scheduler_python_state.h"

namespace acc {

void Accelerator::check_python_state_files() const {
  for (const auto& optimizer : live_optimizers()) require_python_optimizer_layout(*optimizer->unwrap());
  for (const auto& scheduler : live_schedulers()) require_python_scheduler_layout(*scheduler);
}

CheckpointParts Accelerator::python_state_parts() const {
  CheckpointParts parts;
  const auto optimizers = live_optimizers();
  for (size_t i = 0; i < optimizers.size(); ++i)
    parts.push_back(
        python_state_part(indexed_name("optimizer", i, ".bin"), false,
                          [optimizer = optimizers[i]->unwrap()] { return python_optimizer_state_dict(*optimizer); }));
  const auto schedulers = live_schedulers();
  for (size_t i = 0; i < schedulers.size(); ++i)
    parts.push_back(python_state_part(indexed_name("scheduler", i, ".bin"), false,
                                      [scheduler = schedulers[i]] { return python_scheduler_state_dict(*scheduler); }));
  if (scaler_)
    parts.push_back(python_state_part("scaler.pt", false, [scaler = scaler_] {
      scaler->settle();
      const GradScaler::ScaleRules rules = scaler->rules();
      return python_dict({{"scale", scaler->current_scale()},
                          {"growth_factor", rules.growth_factor},
                          {"backoff_factor", rules.backoff_factor},
                          {"growth_interval", rules.growth_interval},
                          {"_growth_tracker", scaler->growth_tracker()}});
    }));
  parts.push_back(python_state_part("random_states_" + std::to_string(process_index()) + ".pkl", true,
                                    [step = step()] { return python_random_states(step); }));
  return parts;
}

}  // namespace acc
