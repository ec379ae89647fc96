// `accelerate to-fsdp2` (config/fsdp2_conversion.h): FSDP1 keys become FSDP2's as Accelerate's
// command converts them, and the result reads as FSDP2 (the strategy from reshard_after_forward).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config_file.h"
#include "config/fsdp2_conversion.h"

namespace {

acc::ClusterConfig fsdp1(const std::string& strategy, const std::string& extra = "") {
  return acc::parse_config_text("distributed_type: FSDP\nnum_processes: 2\nuse_cpu: true\nfsdp_config:\n"
                                "  fsdp_sharding_strategy: " + strategy + "\n" + extra,
                                "fsdp1.yaml");
}

bool mentions(const std::vector<std::string>& notes, const std::string& what) {
  for (const auto& note : notes)
    if (note.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(ToFsdp2, KeysAreRenamedDroppedOrKept) {
  std::vector<std::string> notes;
  const auto c = acc::convert_to_fsdp2(
      fsdp1("FULL_SHARD", "  fsdp_backward_prefetch: BACKWARD_PRE\n  fsdp_forward_prefetch: false\n"
                          "  fsdp_sync_module_states: true\n  fsdp_use_orig_params: true\n"
                          "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
                          "  fsdp_offload_params: false\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                          "  fsdp_transformer_layer_cls_to_wrap: Block\n  fsdp_activation_checkpointing: false\n"),
      "fsdp1.yaml", notes);
  const std::string yaml = acc::config_to_yaml(c);
  for (const char* kept : {"fsdp_version: 2", "fsdp_reshard_after_forward: true", "fsdp_cpu_ram_efficient_loading: true",
                           "fsdp_state_dict_type: SHARDED_STATE_DICT", "fsdp_offload_params: false",
                           "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP", "fsdp_transformer_layer_cls_to_wrap: Block",
                           "fsdp_activation_checkpointing: false"})
    EXPECT_NE(yaml.find(kept), std::string::npos) << kept << " in\n" << yaml;
  for (const char* gone : {"fsdp_sharding_strategy", "fsdp_backward_prefetch", "fsdp_forward_prefetch",
                           "fsdp_sync_module_states", "fsdp_use_orig_params"}) {
    EXPECT_EQ(yaml.find(gone), std::string::npos) << gone << " in\n" << yaml;
    if (std::string(gone) != "fsdp_sharding_strategy") EXPECT_TRUE(mentions(notes, gone)) << gone;
  }
  EXPECT_EQ(c.sharding_env.at("FSDP_VERSION"), "2");
  EXPECT_EQ(c.sharding_env.at("FSDP_RESHARD_AFTER_FORWARD"), "true");
  EXPECT_EQ(c.sharding_env.at("FSDP_STATE_DICT_TYPE"), "SHARDED_STATE_DICT");
  EXPECT_EQ(c.distributed_type, "FSDP");
  EXPECT_EQ(c.num_processes, 2) << "the rest of the file stays";
}

TEST(ToFsdp2, EachStrategyMapsAsAccelerateMapsIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"FULL_SHARD", "true"},  {"SHARD_GRAD_OP", "false"}, {"HYBRID_SHARD", "true"},
      {"HYBRID_SHARD_ZERO2", "false"}, {"NO_SHARD", "false"}, {"1", "true"}, {"2", "false"}};
  for (const auto& [strategy, reshard] : cases) {
    std::vector<std::string> notes;
    const auto c = acc::convert_to_fsdp2(fsdp1(strategy), "fsdp1.yaml", notes);
    EXPECT_EQ(c.sharding_env.at("FSDP_RESHARD_AFTER_FORWARD"), reshard) << strategy;
  }
}

TEST(ToFsdp2, NothingToConvertLeavesTheConfigAsItWas) {
  std::vector<std::string> notes;
  const auto ddp = acc::parse_config_text("distributed_type: MULTI_CPU\nnum_processes: 2\n", "ddp.yaml");
  EXPECT_EQ(acc::config_to_yaml(acc::convert_to_fsdp2(ddp, "ddp.yaml", notes)), acc::config_to_yaml(ddp));
  EXPECT_TRUE(mentions(notes, "no FSDP config"));
  notes.clear();
  const auto v2 = acc::parse_config_text(
      "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n",
      "v2.yaml");
  EXPECT_EQ(acc::config_to_yaml(acc::convert_to_fsdp2(v2, "v2.yaml", notes)), acc::config_to_yaml(v2));
  EXPECT_TRUE(mentions(notes, "already says fsdp_version 2"));
}
