#include "state/process_env.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "common/error.h"

namespace acc {
namespace {

// `value` of variable `name` as a whole number within what c10d takes (an int).
int64_t parse_count(const std::string& name, const std::string& value) {
  // SLURM writes per-node task counts as "2(x3)": the count before the parenthesis.
  const std::string digits = value.substr(0, value.find('('));
  errno = 0;
  const long long parsed = std::strtoll(digits.c_str(), nullptr, 10);
  // Digits only (no sign or space).
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE ||
      parsed > std::numeric_limits<int32_t>::max())
    fail(Status::InvalidArgument, "environment variable ", name, "='", value, "' is not an integer from 0 to ",
         std::numeric_limits<int32_t>::max());
  return parsed;
}

// The first of `names` that is set, as Accelerate's get_int_from_env reads them: a negative number
// counts as unset (torchrun's -1 for "none"), and an empty value is refused (Python's int("")
// raises; taking it as unset would make a process of a larger job run alone).
std::optional<int64_t> first_int(const EnvLookup& env, const std::vector<const char*>& names) {
  for (const char* name : names) {
    auto value = env(name);
    if (!value) continue;
    if (value->empty())
      fail(Status::InvalidArgument, "environment variable ", name, " is set but empty: unset it or give a number");
    if ((*value)[0] == '-' && value->size() > 1 && value->find_first_not_of("0123456789", 1) == std::string::npos)
      continue;
    return parse_count(name, *value);
  }
  return std::nullopt;
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  const auto bracket = nodelist.find('[');
  const auto comma = nodelist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return nodelist.substr(0, comma);
  const std::string prefix = nodelist.substr(0, bracket);
  const auto stop = nodelist.find_first_of(",-]", bracket + 1);
  return prefix + nodelist.substr(bracket + 1, stop - bracket - 1);
}

ProcessEnv detect_process_env(const EnvLookup& all) {
  // SLURM's task variables count inside an srun step only (SLURM_STEP_NUM_TASKS is srun's): a batch
  // script's one process sees the allocation's SLURM_NTASKS and SLURM_PROCID=0, and must not wait
  // for peers that never start.
  const bool srun_task = all("SLURM_STEP_NUM_TASKS").has_value();
  const EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
    if (!srun_task && name.rfind("SLURM_", 0) == 0 && name != "SLURM_JOB_NODELIST") return std::nullopt;
    return all(name);
  };
  ProcessEnv p;
  p.rank = first_int(env, {"RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"})
               .value_or(0);
  p.world_size =
      first_int(env, {"WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"})
          .value_or(1);
  p.local_rank = first_int(env, {"LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
                     .value_or(0);
  p.local_world_size =
      first_int(env, {"LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE",
                      "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"})
          .value_or(p.world_size);
  require(p.world_size >= 1, "the world size must be at least 1, got ", p.world_size);
  require(p.rank < p.world_size, "rank ", p.rank, " is outside a world of ", p.world_size, " processes");
  require(p.local_world_size >= 1 && p.local_world_size <= p.world_size, "the local world size ",
          p.local_world_size, " does not fit a world of ", p.world_size);
  require(p.local_rank < p.local_world_size, "local rank ", p.local_rank, " is outside a node of ",
          p.local_world_size, " processes");
  // One process makes no group and reads no port (nor does Accelerate); empty is unset, as there.
  if (auto port = env("MASTER_PORT"); port && !port->empty() && p.world_size > 1) {
    const int64_t number = parse_count("MASTER_PORT", *port);
    require(number > 0 && number < 65536, "MASTER_PORT=", number, " is not a TCP port");
    p.master_port = static_cast<int>(number);
  }
  if (auto addr = env("MASTER_ADDR"); addr && !addr->empty()) {
    p.master_addr = *addr;
  } else if (auto nodes = env("SLURM_JOB_NODELIST"); nodes && !nodes->empty()) {
    p.master_addr = first_slurm_host(*nodes);
  } else if (p.local_world_size != p.world_size) {
    fail(Status::InvalidArgument, "a job over several machines needs MASTER_ADDR (the address of rank 0's machine)");
  }
  // PyTorch takes exactly "True" (str(True)); anything else leaves process 0 hosting the store.
  if (env("TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True")) {
    auto attempt = first_int(env, {"TORCHELASTIC_RESTART_COUNT"});
    require(attempt.has_value(), "TORCHELASTIC_USE_AGENT_STORE=True needs TORCHELASTIC_RESTART_COUNT (the launcher's ",
            "attempt, which names the rendezvous keys)");
    p.agent_store_prefix = "/worker/attempt_" + std::to_string(*attempt);
  }
  return p;
}

ProcessEnv detect_process_env() {
  return detect_process_env([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace acc
