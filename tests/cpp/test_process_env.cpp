// Detection of rank, world and rendezvous address from the launchers' environments.
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "common/error.h"
#include "state/port_probe.h"
#include "state/process_env.h"

namespace {

acc::ProcessEnv detect(const std::map<std::string, std::string>& vars) {
  return acc::detect_process_env([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

}  // namespace

TEST(ProcessEnv, NothingSetIsOneProcess) {
  auto p = detect({});
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_FALSE(p.distributed());
  EXPECT_EQ(p.master_addr, "127.0.0.1");
  EXPECT_EQ(p.master_port, 29500);
}

TEST(ProcessEnv, Torchrun) {
  auto p = detect({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.local_world_size, 2);
  EXPECT_EQ(p.master_addr, "10.0.0.1");
  EXPECT_EQ(p.master_port, 1234);
  EXPECT_TRUE(p.distributed());
  EXPECT_FALSE(p.agent_store_prefix) << "process 0 hosts the store";
}

// torchrun and accelerate-launch host the store themselves (TORCHELASTIC_USE_AGENT_STORE=True, as
// PyTorch reads it: exactly "True"); each attempt's keys have their own prefix, as in PyTorch.
TEST(ProcessEnv, AgentStore) {
  auto p = detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                   {"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(p.agent_store_prefix);
  EXPECT_EQ(*p.agent_store_prefix, "/worker/attempt_2");
  for (const char* other : {"False", "true", "1", ""})
    EXPECT_FALSE(detect({{"TORCHELASTIC_USE_AGENT_STORE", other}, {"TORCHELASTIC_RESTART_COUNT", "0"}}).agent_store_prefix)
        << other;
}

TEST(ProcessEnv, OpenMpiMpichAndMvapich) {
  auto ompi = detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(ompi.rank, 1);
  EXPECT_EQ(ompi.local_rank, 1);
  EXPECT_EQ(ompi.world_size, 2);
  auto pmi = detect({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "3"}});
  EXPECT_EQ(pmi.rank, 2);
  EXPECT_EQ(pmi.world_size, 3);
  auto mv2 = detect({{"MV2_COMM_WORLD_RANK", "1"}, {"MV2_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(mv2.rank, 1);
  EXPECT_EQ(mv2.local_world_size, 2);  // defaults to the world: one machine
  // torchrun's variables come first, as in Accelerate.
  EXPECT_EQ(detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}).rank, 0);
}

TEST(ProcessEnv, SlurmTakesTheMasterFromTheNodeList) {
  auto p = detect({{"SLURM_PROCID", "5"},
                   {"SLURM_STEP_NUM_TASKS", "8"},
                   {"SLURM_NTASKS", "16"},
                   {"SLURM_LOCALID", "1"},
                   {"SLURM_STEP_TASKS_PER_NODE", "2(x4)"},
                   {"SLURM_JOB_NODELIST", "gpu[07-10],cpu1"}});
  EXPECT_EQ(p.rank, 5);
  EXPECT_EQ(p.world_size, 8);  // the srun step's tasks, not the allocation's
  EXPECT_EQ(p.local_world_size, 2);
  EXPECT_EQ(p.master_addr, "gpu07");
  // A batch script (no srun step) is one process, whatever the allocation holds.
  auto batch = detect({{"SLURM_PROCID", "0"},
                       {"SLURM_NTASKS", "8"},
                       {"SLURM_LOCALID", "0"},
                       {"SLURM_NTASKS_PER_NODE", "2"},
                       {"SLURM_JOB_NODELIST", "gpu[07-10]"}});
  EXPECT_FALSE(batch.distributed());
  EXPECT_EQ(batch.local_world_size, 1);
  EXPECT_EQ(acc::first_slurm_host("a1,b2"), "a1");
  EXPECT_EQ(acc::first_slurm_host("node[3,5]"), "node3");
  EXPECT_EQ(acc::first_slurm_host("single"), "single");
}

TEST(ProcessEnv, InconsistentValuesAreNamed) {
  auto message = [](const std::map<std::string, std::string>& vars) {
    try {
      detect(vars);
    } catch (const acc::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"RANK", "two"}}).find("RANK='two'"), std::string::npos);
  EXPECT_NE(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("rank 2 is outside"), std::string::npos);
  EXPECT_NE(message({{"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}}).find("needs MASTER_ADDR"), std::string::npos);
  EXPECT_NE(message({{"MASTER_PORT", "70000"}, {"WORLD_SIZE", "2"}}).find("not a TCP port"), std::string::npos);
  // Set but empty: Accelerate's int("") raises; taken as unset, a process of a larger job ran alone.
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"})
    EXPECT_NE(message({{name, ""}, {"WORLD_SIZE", "2"}, {"RANK", "1"}}).find(std::string(name) + " is set but empty"),
              std::string::npos)
        << name;
  // Past what c10d's int takes (before: clamped to INT64_MAX, or wrapped in Gloo), or with a sign or space.
  for (const char* size : {"99999999999999999999", "4294967296", "2147483648", "+2", " 2"})
    EXPECT_NE(message({{"WORLD_SIZE", size}}).find("is not an integer from 0 to 2147483647"), std::string::npos)
        << size;
  EXPECT_NE(message({{"RANK", "+0"}}).find("RANK='+0'"), std::string::npos);
  EXPECT_NE(message({{"TORCHELASTIC_USE_AGENT_STORE", "True"}}).find("needs TORCHELASTIC_RESTART_COUNT"),
            std::string::npos);
}

TEST(ProcessEnv, AsAccelerateReadsThem) {
  // A negative number is unset (Accelerate's get_int_from_env): the next variable, or the default.
  auto p = detect({{"LOCAL_RANK", "-1"}, {"RANK", "-1"}, {"PMI_RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(p.local_rank, 0);
  EXPECT_EQ(p.rank, 1);
  // One process reads no port: a leftover or odd MASTER_PORT does not stop it.
  for (const char* port : {"0", "abc", "70000", ""}) EXPECT_EQ(detect({{"MASTER_PORT", port}}).world_size, 1) << port;
  EXPECT_EQ(detect({{"MASTER_PORT", ""}, {"WORLD_SIZE", "2"}}).master_port, 29500);  // empty is unset there
}

TEST(PortProbe, SaysWhyNothingWasReached) {
  // A MASTER_ADDR that does not resolve was reported as "nothing accepted a connection there".
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::milliseconds(300); };
  std::string why;
  EXPECT_FALSE(acc::wait_until_accepting("no-such-host.invalid", 29500, soon(), why));
  EXPECT_NE(why.find("the host name 'no-such-host.invalid' does not resolve ("), std::string::npos) << why;
  EXPECT_FALSE(acc::wait_until_accepting("127.0.0.1", 1, soon(), why));  // port 1: nothing listens
  EXPECT_EQ(why, "nothing accepted a connection there");
}
