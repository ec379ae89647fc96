// Who this process is in a job, read from the environment of the launcher that started it:
// torchrun / accelerate-launch (RANK, WORLD_SIZE, LOCAL_RANK, ...), MPI (Open MPI's OMPI_COMM_WORLD_*,
// MPICH/Intel's PMI_* and MPI_LOCAL*, MVAPICH's MV2_COMM_WORLD_*) or SLURM's srun (SLURM_PROCID, ...;
// only in a task of an srun step, which SLURM_STEP_NUM_TASKS marks).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace acc {

struct ProcessEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Set when the launcher hosts the rendezvous store (torchrun's and accelerate-launch's agent store,
  // TORCHELASTIC_USE_AGENT_STORE=True): every process, 0 included, connects to it at
  // MASTER_ADDR:MASTER_PORT and keys its rendezvous under this prefix,
  // "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as PyTorch's env:// rendezvous does.
  std::optional<std::string> agent_store_prefix;
  bool distributed() const { return world_size > 1; }
};

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// For each field, the first variable set in Accelerate's order (torchrun's, then PMI, Open MPI,
// MVAPICH), then SLURM's. Values that are not integers >= 0, a rank outside the world, or a
// multi-node job without MASTER_ADDR (nor a SLURM node list to take it from) are errors naming the
// variable; so is an agent store without TORCHELASTIC_RESTART_COUNT.
ProcessEnv detect_process_env(const EnvLookup& env);
ProcessEnv detect_process_env();  // from this process's environment

// The first host of a SLURM node list: "node[01-04,07],gpu5" -> "node01".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace acc
