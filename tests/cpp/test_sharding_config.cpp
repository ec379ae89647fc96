// Accelerate's FSDP and DeepSpeed settings (config file sections, launcher flags, the launcher's
// variables) as this runtime's sharding options; what it cannot honour is refused naming the key.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "accelerator/config.h"
#include "common/error.h"
#include "config/config_file.h"
#include "config/sharding_config.h"
#include "launch/launch_flags.h"
#include "launch/launcher.h"
#include "parallel/ignored_modules.h"

namespace {

const char* const kVariables[] = {"ACCELERATE_USE_FSDP",
                                  "FSDP_SHARDING_STRATEGY",
                                  "FSDP_OFFLOAD_PARAMS",
                                  "FSDP_STATE_DICT_TYPE",
                                  "FSDP_AUTO_WRAP_POLICY",
                                  "FSDP_VERSION",
                                  "FSDP_RESHARD_AFTER_FORWARD",
                                  "FSDP_TRANSFORMER_CLS_TO_WRAP",
                                  "ACCELERATE_USE_DEEPSPEED",
                                  "ACCELERATE_DEEPSPEED_ZERO_STAGE",
                                  "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE",
                                  "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE",
                                  "ACCELERATE_DEEPSPEED_CONFIG_FILE",
                                  "FSDP_MIN_NUM_PARAMS",
                                  "ACCELERATE_GRADIENT_CLIPPING",
                                  "ACCELERATE_MIXED_PRECISION",
                                  "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
                                  "ACCELERATE_CONFIG_FILE",
                                  "FSDP_CPU_RAM_EFFICIENT_LOADING",
                                  "ACCELERATE_DEEPSPEED_ZERO3_INIT",
                                  "RANK",
                                  "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL",
                                  "FSDP_ACTIVATION_CHECKPOINTING",
                                  "FSDP_IGNORED_MODULES",
                                  "FSDP_SYNC_MODULE_STATES",
                                  "FSDP_USE_ORIG_PARAMS",
                                  "FSDP_FORWARD_PREFETCH",
                                  "FSDP_BACKWARD_PREFETCH",
                                  "WORLD_SIZE",
                                  "ACCELERATE_USE_MEGATRON_LM",
                                  "ACCELERATE_USE_PARALLELISM_CONFIG",
                                  "PARALLELISM_CONFIG_DP_REPLICATE_SIZE",
                                  "PARALLELISM_CONFIG_TP_SIZE",
                                  "PARALLELISM_CONFIG_DP_SHARD_SIZE",
                                  "PARALLELISM_CONFIG_CP_SIZE",
                                  "PARALLELISM_CONFIG_SP_SIZE",
                                  "HF_HOME"};

// Each test starts with none of the variables (and no config file to find).
class Sharding : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
    setenv("HF_HOME", "/nonexistent/acc_sharding_test", 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  static acc::AcceleratorConfig resolve(const std::vector<std::pair<std::string, std::string>>& options = {}) {
    acc::Options o(acc::accelerator_option_table());
    for (const auto& [key, value] : options) o.set_from_text(key, value);
    return acc::resolve_accelerator_config(o);
  }
  // What `accelerate launch --use_deepspeed --zero_stage 3 --<key> true` gives the processes as `variable`.
  static std::string stage3_launcher_flag(const std::string& key, const std::string& variable) {
    acc::LaunchFlags flags;
    flags.use_deepspeed = true;
    flags.deepspeed["zero_stage"] = "3";
    flags.deepspeed[key] = "true";
    return acc::resolve_launch_config(flags, std::nullopt, std::nullopt, {"train"}).sharding_env.at(variable);
  }
  static std::pair<acc::Status, std::string> failure(const std::function<void()>& f) {
    try {
      f();
    } catch (const acc::Error& e) {
      return {e.status(), e.what()};
    }
    return {acc::Status::Ok, "no error"};
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_F(Sharding, FsdpVariablesChooseTheStage) {
  setenv("ACCELERATE_USE_FSDP", "true", 1);
  EXPECT_EQ(resolve().sharding.stage, 3) << "FULL_SHARD is FSDP's default";
  setenv("FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP", 1);
  EXPECT_EQ(resolve().sharding.stage, 2);
  setenv("FSDP_SHARDING_STRATEGY", "shard_grad_op", 1);  // in any case, as Accelerate upper-cases it
  EXPECT_EQ(resolve().sharding.stage, 2);
  setenv("FSDP_SHARDING_STRATEGY", "3", 1);  // older Accelerate writes the enum's number
  EXPECT_EQ(resolve().sharding.stage, 0);
  setenv("FSDP_SHARDING_STRATEGY", "FULL_SHARD", 1);
  setenv("FSDP_OFFLOAD_PARAMS", "true", 1);
  setenv("FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT", 1);
  const auto c = resolve();
  EXPECT_EQ(c.sharding.stage, 3);
  EXPECT_TRUE(c.sharding.offload_params);
  EXPECT_TRUE(c.sharding.offload_optimizer);
  EXPECT_EQ(c.sharding.state_dict_type, "SHARDED_STATE_DICT");
  EXPECT_EQ(c.sharding_kind, "FSDP");
  EXPECT_EQ(c.sharding.transformer_cls_to_wrap, "");
  setenv("FSDP_TRANSFORMER_CLS_TO_WRAP", "GPT2Block,Block", 1);
  EXPECT_EQ(resolve().sharding.transformer_cls_to_wrap, "GPT2Block,Block");
  EXPECT_EQ(resolve({{"transformer_cls_to_wrap", "Layer"}}).sharding.transformer_cls_to_wrap, "Layer");
  // FSDP2 says it with reshard_after_forward.
  setenv("FSDP_VERSION", "2", 1);
  setenv("FSDP_RESHARD_AFTER_FORWARD", "false", 1);
  EXPECT_EQ(resolve().sharding.stage, 2);
  // An option the program set wins.
  EXPECT_EQ(resolve({{"zero_stage", "1"}}).sharding.stage, 1);
  // Without a state dict type FSDP2 saves shards, FSDP1 a consolidated state (Accelerate's defaults).
  unsetenv("FSDP_STATE_DICT_TYPE");
  EXPECT_EQ(resolve().sharding.state_dict_type, "SHARDED_STATE_DICT");
  setenv("FSDP_VERSION", "1", 1);
  EXPECT_EQ(resolve().sharding.state_dict_type, "FULL_STATE_DICT");
  setenv("FSDP_VERSION", "2", 1);
  setenv("FSDP_STATE_DICT_TYPE", "FULL_STATE_DICT", 1);
  EXPECT_EQ(resolve().sharding.state_dict_type, "FULL_STATE_DICT");
  // A version that is neither is named (Accelerate's int() fails on it), not taken as 1.
  setenv("FSDP_VERSION", "abc", 1);
  auto [version_status, version_message] = failure([] { resolve(); });
  EXPECT_EQ(version_status, acc::Status::InvalidArgument);
  EXPECT_NE(version_message.find("FSDP_VERSION='abc' must be 1 or 2"), std::string::npos) << version_message;
  // Both kinds asked for: DeepSpeed, as Accelerate's state checks it first.
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  EXPECT_EQ(resolve().sharding_kind, "DEEPSPEED");
  unsetenv("ACCELERATE_USE_DEEPSPEED");
  // Hybrid strategies shard within each machine: FULL_SHARD's or SHARD_GRAD_OP's stage.
  unsetenv("FSDP_VERSION");
  unsetenv("FSDP_RESHARD_AFTER_FORWARD");
  EXPECT_FALSE(resolve().sharding.hybrid);
  for (const auto& [strategy, stage] : std::vector<std::pair<std::string, int64_t>>{
           {"HYBRID_SHARD", 3}, {"4", 3}, {"HYBRID_SHARD_ZERO2", 2}, {"_HYBRID_SHARD_ZERO2", 2}, {"5", 2}}) {
    setenv("FSDP_SHARDING_STRATEGY", strategy.c_str(), 1);
    const auto hybrid = resolve();
    EXPECT_EQ(hybrid.sharding.stage, stage) << strategy;
    EXPECT_TRUE(hybrid.sharding.hybrid) << strategy;
  }
  EXPECT_FALSE(resolve({{"hybrid_shard", "false"}}).sharding.hybrid) << "the program's option wins";
  EXPECT_FALSE(resolve({{"zero_stage", "0"}}).sharding.hybrid) << "the program's zero_stage 0 is DDP";
  unsetenv("ACCELERATE_USE_FSDP");
  unsetenv("FSDP_SHARDING_STRATEGY");
  auto [status, message] = failure([] { resolve({{"hybrid_shard", "true"}}); });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("needs zero_stage 1, 2 or 3"), std::string::npos) << message;
}

// DeepSpeed's gradient_clipping reaches its processes as Accelerate's launcher passes it ("auto":
// none); a value that is not a norm is an error naming the variable.
TEST_F(Sharding, GradientClippingComesFromItsVariable) {
  EXPECT_EQ(resolve().gradient_clipping, 0.0);
  setenv("ACCELERATE_GRADIENT_CLIPPING", "auto", 1);
  EXPECT_EQ(resolve().gradient_clipping, 0.0);
  setenv("ACCELERATE_GRADIENT_CLIPPING", "1.5", 1);
  EXPECT_EQ(resolve().gradient_clipping, 1.5);
  EXPECT_EQ(resolve({{"gradient_clipping", "0"}}).gradient_clipping, 0.0) << "the program's option wins";
  setenv("ACCELERATE_GRADIENT_CLIPPING", "much", 1);
  auto [status, message] = failure([] { resolve(); });
  EXPECT_NE(message.find("ACCELERATE_GRADIENT_CLIPPING"), std::string::npos) << message;
  unsetenv("ACCELERATE_GRADIENT_CLIPPING");
  std::tie(status, message) = failure([] {
    acc::parse_config_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  gradient_clipping: -2\n", "neg.yaml");
  });
  EXPECT_NE(message.find("gradient_clipping must be a number >= 0"), std::string::npos) << message;
}

// DeepSpeed's JSON config (deepspeed_config_file): its ZeRO section chooses the stage and offload,
// its accumulation, clipping and bf16/fp16 sections the rest; "auto" leaves Accelerate's values.
TEST_F(Sharding, ADeepSpeedJsonConfigIsRead) {
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/acc_ds_" +
                           std::to_string(getpid()) + ".json";
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  write(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
            "overlap_comm": true},
            "gradient_accumulation_steps": 4, "gradient_clipping": 1.5, "bf16": {"enabled": true},
            "train_micro_batch_size_per_gpu": "auto", "steps_per_print": 10})");
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", path.c_str(), 1);
  auto c = resolve();
  EXPECT_EQ(c.sharding.stage, 3);
  EXPECT_TRUE(c.sharding.offload_optimizer);
  EXPECT_FALSE(c.sharding.offload_params);
  EXPECT_EQ(c.gradient_accumulation_steps, 4);
  EXPECT_EQ(c.gradient_clipping, 1.5);
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_EQ(resolve({{"gradient_accumulation_steps", "2"}}).gradient_accumulation_steps, 2) << "the program's wins";
  setenv("ACCELERATE_MIXED_PRECISION", "fp16", 1);
  auto [status, message] = failure([] { resolve(); });
  EXPECT_NE(message.find("contradicts the DeepSpeed config's bf16.enabled"), std::string::npos) << message;
  unsetenv("ACCELERATE_MIXED_PRECISION");
  // The launcher's --gradient_accumulation_steps (or the config file's) must agree with the file.
  setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "8", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_NE(message.find("gradient_accumulation_steps 8 (from ACCELERATE_* variables or the config file) contradicts "
                         "the DeepSpeed config's 4"),
            std::string::npos)
      << message;
  setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4", 1);
  EXPECT_EQ(resolve().gradient_accumulation_steps, 4);
  unsetenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS");

  write(R"({"zero_optimization": {"stage": 2}, "bf16": {"enabled": false}})");
  setenv("ACCELERATE_MIXED_PRECISION", "bf16", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_NE(message.find("contradicts the DeepSpeed config's bf16.enabled false"), std::string::npos) << message;
  unsetenv("ACCELERATE_MIXED_PRECISION");

  write(R"({"zero_optimization": {"stage": "auto"}, "fp16": {"enabled": true, "initial_scale_power": 12,
            "loss_scale_window": 500, "hysteresis": 3, "consecutive_hysteresis": true, "min_loss_scale": 0.5,
            "fp16_master_weights_and_grads": false}})");
  c = resolve();
  EXPECT_EQ(c.sharding.stage, 2) << "auto: DeepSpeedPlugin's default";
  EXPECT_EQ(c.mixed_precision, "fp16");
  EXPECT_EQ(c.scaler.init_scale, 4096.0);
  EXPECT_EQ(c.scaler.growth_interval, 500);
  EXPECT_EQ(c.scaler.hysteresis, 3);
  EXPECT_TRUE(c.scaler.consecutive_hysteresis);
  EXPECT_EQ(c.scaler.min_scale, 0.5);
  EXPECT_EQ(resolve({{"scaler_hysteresis", "1"}}).scaler.hysteresis, 1) << "the program's wins";

  // The launcher reads it too: errors at launch, the tuning keys reported, the path passed on.
  const auto launch = acc::parse_config_text(
      "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: " + path + "\n",
      "ds.yaml");
  EXPECT_EQ(launch.sharding_env.at("ACCELERATE_DEEPSPEED_CONFIG_FILE"), path);
  bool reported = false;
  for (const auto& w : launch.warnings)
    reported = reported || w.find("fp16.fp16_master_weights_and_grads is ignored") != std::string::npos;
  EXPECT_TRUE(reported);
  std::tie(status, message) = failure([&] {
    acc::parse_config_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 1\n"
                           "  deepspeed_config_file: " + path + "\n",
                           "both.yaml");
  });
  EXPECT_NE(message.find("zero_stage is set beside deepspeed_config_file"), std::string::npos) << message;

  // Unset in the file: DeepSpeed's own defaults (window 1000, hysteresis 2, minimum 1), not GradScaler's.
  write(R"({"zero_optimization": {"stage": 1}, "fp16": {"enabled": "auto"}})");
  setenv("ACCELERATE_MIXED_PRECISION", "fp16", 1);
  c = resolve();
  EXPECT_EQ(c.scaler.init_scale, 65536.0);
  EXPECT_EQ(c.scaler.growth_interval, 1000);
  EXPECT_EQ(c.scaler.hysteresis, 2);
  EXPECT_FALSE(c.scaler.consecutive_hysteresis);
  EXPECT_EQ(c.scaler.min_scale, 1.0);
  unsetenv("ACCELERATE_MIXED_PRECISION");

  // What it cannot honour, each named.
  const std::vector<std::tuple<std::string, acc::Status, std::string>> refused = {
      {R"({"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW"}})", acc::Status::Unsupported,
       "optimizer is not supported"},
      {R"({"zero_optimization": {"stage": 2}, "fp16": {"enabled": true, "loss_scale": 128}})", acc::Status::Unsupported,
       "fp16.loss_scale"},
      {R"({"zero_optimization": {"stage": 4}})", acc::Status::InvalidArgument, "zero_optimization.stage"},
      {R"({"zero_optimization": {"stage": 2}, "fp16": {"hysteresis": 0}})", acc::Status::InvalidArgument, "fp16.hysteresis"},
      {R"({"zero_optimization": {"stage": 2}, "fp16": {"min_loss_scale": -1}})", acc::Status::InvalidArgument,
       "fp16.min_loss_scale"},
      {R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "nvme"}}})", acc::Status::Unsupported, "NVMe"},
      {R"({"gradient_clipping": 1.0})", acc::Status::InvalidArgument, "zero_optimization is missing"},
      {R"({"zero_optimization": )", acc::Status::Io, path}};
  for (const auto& [text, expected, says] : refused) {
    write(text);
    std::tie(status, message) = failure([] { resolve(); });
    EXPECT_EQ(status, expected) << text << ": " << message;
    EXPECT_NE(message.find(says), std::string::npos) << message;
    EXPECT_NE(message.find("ACCELERATE_DEEPSPEED_CONFIG_FILE"), std::string::npos) << message;
  }
  std::remove(path.c_str());
}

// Offloading needs a sharded optimizer: the launcher's stage 0 with offload is refused, and the
// program's zero_stage 0 turns the launcher's offload off with its sharding.
TEST_F(Sharding, OffloadWithoutAStageIsRefused) {
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "0", 1);
  setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu", 1);
  auto [status, message] = failure([] { resolve(); });
  EXPECT_NE(message.find("need zero_stage 1, 2 or 3"), std::string::npos) << message;
  setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2", 1);
  EXPECT_FALSE(resolve({{"zero_stage", "0"}}).sharding.offload_optimizer);
  std::tie(status, message) = failure([] { resolve({{"zero_stage", "0"}, {"offload_params", "true"}}); });
  EXPECT_NE(message.find("need zero_stage 1, 2 or 3"), std::string::npos) << message;
}

TEST_F(Sharding, DeepSpeedVariablesChooseTheStage) {
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  EXPECT_EQ(resolve().sharding.stage, 2) << "DeepSpeedPlugin's default";
  setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3", 1);
  setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu", 1);
  const auto c = resolve();
  EXPECT_EQ(c.sharding.stage, 3);
  EXPECT_TRUE(c.sharding.offload_optimizer);
  EXPECT_FALSE(c.sharding.offload_params);
  EXPECT_EQ(c.sharding_kind, "DEEPSPEED");
  // fp16 under DeepSpeed is DeepSpeed's loss scaler; under FSDP (and DDP) torch's GradScaler.
  EXPECT_EQ(c.scaler.hysteresis, 1) << "bf16 or no mixed precision: no loss scaler";
  const auto fp16 = resolve({{"mixed_precision", "fp16"}});
  EXPECT_EQ(fp16.scaler.growth_interval, 1000);
  EXPECT_EQ(fp16.scaler.hysteresis, 2);
  EXPECT_EQ(fp16.scaler.min_scale, 1.0);
  EXPECT_EQ(resolve({{"mixed_precision", "fp16"}, {"scaler_growth_interval", "2000"}}).scaler.growth_interval, 2000);
  unsetenv("ACCELERATE_USE_DEEPSPEED");
  setenv("ACCELERATE_USE_FSDP", "true", 1);
  const auto fsdp = resolve({{"mixed_precision", "fp16"}});
  EXPECT_EQ(fsdp.scaler.growth_interval, 2000);
  EXPECT_EQ(fsdp.scaler.hysteresis, 1);
  EXPECT_EQ(fsdp.scaler.min_scale, 0.0);
}

TEST_F(Sharding, WhatCannotBeHonouredIsRefusedNamingIt) {
  setenv("ACCELERATE_USE_FSDP", "true", 1);
  setenv("FSDP_SHARDING_STRATEGY", "HALF_SHARD", 1);
  auto [status, message] = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("FSDP_SHARDING_STRATEGY"), std::string::npos) << message;
  setenv("FSDP_SHARDING_STRATEGY", "FULL_SHARD", 1);
  setenv("FSDP_STATE_DICT_TYPE", "LOCAL_STATE_DICT", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::Unsupported);
  unsetenv("FSDP_STATE_DICT_TYPE");
  setenv("FSDP_AUTO_WRAP_POLICY", "LAMBDA_WRAP", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("FSDP_AUTO_WRAP_POLICY"), std::string::npos) << message;
  setenv("FSDP_AUTO_WRAP_POLICY", "SIZE_BASED_WRAP", 1);
  setenv("FSDP_MIN_NUM_PARAMS", "-5", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_NE(message.find("FSDP_MIN_NUM_PARAMS='-5'"), std::string::npos) << message;
  unsetenv("FSDP_MIN_NUM_PARAMS");
  unsetenv("FSDP_AUTO_WRAP_POLICY");
  // Variables tuning torch's FSDP machinery: no counterpart here, but a typo is named (was ignored).
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, const char*>>{{"FSDP_SYNC_MODULE_STATES", "maybe"},
                                                        {"FSDP_USE_ORIG_PARAMS", "2"},
                                                        {"FSDP_FORWARD_PREFETCH", "yes please"},
                                                        {"FSDP_BACKWARD_PREFETCH", "BACKWARDS_PRE"}}) {
    setenv(name, value, 1);
    std::tie(status, message) = failure([] { resolve(); });
    EXPECT_EQ(status, acc::Status::InvalidArgument) << name;
    EXPECT_NE(message.find(std::string(name) + "='" + value + "'"), std::string::npos) << message;
    unsetenv(name);
  }
  setenv("FSDP_BACKWARD_PREFETCH", "backward_post", 1);  // any case, as Accelerate upper-cases it
  setenv("FSDP_SYNC_MODULE_STATES", "true", 1);
  EXPECT_EQ(resolve().sharding.stage, 3);
  unsetenv("FSDP_BACKWARD_PREFETCH");
  unsetenv("FSDP_SYNC_MODULE_STATES");
  unsetenv("ACCELERATE_USE_FSDP");
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  setenv("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "nvme", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::Unsupported);
  EXPECT_NE(message.find("NVMe"), std::string::npos) << message;
  unsetenv("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE");
  setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", "/nonexistent/ds.json", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::Io);
  EXPECT_NE(message.find("ACCELERATE_DEEPSPEED_CONFIG_FILE"), std::string::npos) << message;
}

// fsdp_auto_wrap_policy as Accelerate reads it: any case; SIZE_BASED_WRAP with fsdp_min_num_params.
TEST_F(Sharding, WrapPoliciesReachTheOptions) {
  setenv("ACCELERATE_USE_FSDP", "true", 1);
  setenv("FSDP_AUTO_WRAP_POLICY", "size_based_wrap", 1);
  setenv("FSDP_MIN_NUM_PARAMS", "100000000", 1);
  auto c = resolve();
  EXPECT_EQ(c.sharding.auto_wrap_policy, std::optional<std::string>("SIZE_BASED_WRAP"));
  EXPECT_EQ(c.sharding.min_num_params, 100000000);
  c = resolve({{"auto_wrap_policy", "NO_WRAP"}, {"min_num_params", "7"}});
  EXPECT_EQ(c.sharding.auto_wrap_policy, std::optional<std::string>("NO_WRAP")) << "the program's options win";
  EXPECT_EQ(c.sharding.min_num_params, 7);
  unsetenv("FSDP_AUTO_WRAP_POLICY");
  unsetenv("FSDP_MIN_NUM_PARAMS");
  EXPECT_FALSE(resolve().sharding.auto_wrap_policy.has_value());

  const auto file = acc::parse_config_text(R"(distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: SIZE_BASED_WRAP
  fsdp_min_num_params: 1000
num_processes: 2
)", "size.yaml");
  EXPECT_EQ(file.sharding_env.at("FSDP_AUTO_WRAP_POLICY"), "SIZE_BASED_WRAP");
  EXPECT_EQ(file.sharding_env.at("FSDP_MIN_NUM_PARAMS"), "1000");
  // Without fsdp_min_num_params, 1e8 as Accelerate's launcher passes it (its flag's default): the
  // policy wraps modules of that size, not the whole model as one unit.
  const auto unsized = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\nnum_processes: 2\n", "u.yaml");
  EXPECT_EQ(unsized.sharding_env.at("FSDP_MIN_NUM_PARAMS"), "100000000");
  acc::LaunchFlags flags;
  flags.use_fsdp = true;
  flags.fsdp["fsdp_auto_wrap_policy"] = "SIZE_BASED_WRAP";
  EXPECT_EQ(acc::resolve_launch_config(flags, std::nullopt, std::nullopt, {"train"}).sharding_env.at("FSDP_MIN_NUM_PARAMS"),
            "100000000");
  auto [status, message] = failure([] {
    acc::parse_config_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_min_num_params: 1e8\n", "bad.yaml");
  });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("fsdp_min_num_params = 1e8"), std::string::npos) << message;
}

TEST_F(Sharding, ConfigFileSectionsBecomeTheLaunchersVariables) {
  const auto fsdp = acc::parse_config_text(R"(compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_sharding_strategy: SHARD_GRAD_OP
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_transformer_layer_cls_to_wrap: Block
num_processes: 2
use_cpu: true
)", "fsdp.yaml");
  EXPECT_EQ(fsdp.sharding_env.at("FSDP_TRANSFORMER_CLS_TO_WRAP"), "Block");
  EXPECT_EQ(fsdp.sharding_env.at("ACCELERATE_USE_FSDP"), "true");
  EXPECT_EQ(fsdp.sharding_env.at("FSDP_SHARDING_STRATEGY"), "SHARD_GRAD_OP");
  EXPECT_EQ(fsdp.sharding_env.at("FSDP_STATE_DICT_TYPE"), "FULL_STATE_DICT");
  bool warned = false;
  for (const auto& w : fsdp.warnings) warned = warned || w.find("fsdp_backward_prefetch is ignored") != std::string::npos;
  EXPECT_TRUE(warned) << "tuning keys without a counterpart are reported";

  const auto ds = acc::parse_config_text(R"(distributed_type: DEEPSPEED
deepspeed_config:
  zero_stage: 1
  offload_optimizer_device: cpu
  gradient_accumulation_steps: 4
  gradient_clipping: 1.0
num_processes: 2
)", "ds.yaml");
  EXPECT_EQ(ds.sharding_env.at("ACCELERATE_DEEPSPEED_ZERO_STAGE"), "1");
  EXPECT_EQ(ds.sharding_env.at("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"), "cpu");
  EXPECT_EQ(ds.sharding_env.at("ACCELERATE_GRADIENT_ACCUMULATION_STEPS"), "4");
  EXPECT_EQ(ds.sharding_env.at("ACCELERATE_GRADIENT_CLIPPING"), "1.0");

  const auto hybrid = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\nnum_processes: 2\n", "hybrid.yaml");
  EXPECT_EQ(hybrid.sharding_env.at("FSDP_SHARDING_STRATEGY"), "HYBRID_SHARD");
  auto [status, message] = failure([] {
    acc::parse_config_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: HALF_SHARD\nnum_processes: 2\n",
                           "half.yaml");
  });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("half.yaml: fsdp_config: fsdp_sharding_strategy = HALF_SHARD"), std::string::npos)
      << message;
  // A section of the other kind asks for nothing here.
  const auto ddp = acc::parse_config_text("distributed_type: MULTI_CPU\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n"
                                          "num_processes: 2\n", "ddp.yaml");
  EXPECT_TRUE(ddp.sharding_env.empty());
}

// Found by a hunt: values Accelerate takes were refused (a state dict type as a number or in lower
// case), values it refuses were ignored (a backward prefetch it has no name for, forward prefetch
// under FSDP2, RAM-efficient loading without syncing the modules), and DeepSpeed's deprecated
// cpu_offload was ignored though DeepSpeed honours it.
TEST_F(Sharding, ConfigValuesAreTakenAndRefusedAsAccelerateAndDeepSpeedTakeThem) {
  auto fsdp = [](const std::string& lines) {
    return acc::parse_config_text("distributed_type: FSDP\nfsdp_config:\n" + lines + "num_processes: 2\n", "f.yaml");
  };
  EXPECT_EQ(fsdp("  fsdp_state_dict_type: 3\n").sharding_env.at("FSDP_STATE_DICT_TYPE"), "SHARDED_STATE_DICT");
  EXPECT_EQ(fsdp("  fsdp_state_dict_type: full_state_dict\n").sharding_env.at("FSDP_STATE_DICT_TYPE"),
            "FULL_STATE_DICT");
  for (const auto& [lines, needle] : std::vector<std::pair<std::string, std::string>>{
           {"  fsdp_backward_prefetch: SIDEWAYS\n", "must be BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH"},
           {"  fsdp_version: 2\n  fsdp_forward_prefetch: true\n", "forward_prefetch is not implemented in FSDP2"},
           {"  fsdp_cpu_ram_efficient_loading: true\n  fsdp_sync_module_states: false\n",
            "fsdp_cpu_ram_efficient_loading true needs fsdp_sync_module_states true"}}) {
    auto [status, message] = failure([&, lines = lines] { fsdp(lines); });
    EXPECT_EQ(status, acc::Status::InvalidArgument) << lines;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
  EXPECT_NO_THROW(fsdp("  fsdp_backward_prefetch: backward_post\n"));

  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/acc_ds_old_" +
                           std::to_string(getpid()) + ".json";
  std::ofstream(path, std::ios::trunc) << R"({"zero_optimization": {"stage": 2, "cpu_offload": true}})";
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", path.c_str(), 1);
  EXPECT_TRUE(resolve().sharding.offload_optimizer);
  std::ofstream(path, std::ios::trunc)
      << R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}})";
  auto [status, message] = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::Unsupported);
  EXPECT_NE(message.find("offload_optimizer.ratio 0.3: a partial offload is not built"), std::string::npos) << message;
  std::remove(path.c_str());
}

// fsdp_cpu_ram_efficient_loading and zero3_init_flag (under zero stage 3) reach the processes as
// Accelerate's variables, which make models built outside the main process placeholders.
TEST_F(Sharding, OnlyTheMainProcessLoadsWhereTheConfigAsks) {
  const auto fsdp = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_cpu_ram_efficient_loading: true\n"
      "  fsdp_activation_checkpointing: true\nnum_processes: 2\n", "fsdp.yaml");
  EXPECT_EQ(fsdp.sharding_env.at("FSDP_CPU_RAM_EFFICIENT_LOADING"), "true");
  EXPECT_EQ(fsdp.sharding_env.at("FSDP_ACTIVATION_CHECKPOINTING"), "true");
  for (const auto& [name, value] : fsdp.sharding_env) setenv(name.c_str(), value.c_str(), 1);
  EXPECT_TRUE(resolve().sharding.activation_checkpointing) << "the launcher's variable reaches the option";
  EXPECT_FALSE(resolve({{"activation_checkpointing", "false"}}).sharding.activation_checkpointing) << "the program wins";
  unsetenv("ACCELERATE_USE_FSDP");
  unsetenv("FSDP_CPU_RAM_EFFICIENT_LOADING");
  unsetenv("FSDP_ACTIVATION_CHECKPOINTING");
  for (const auto& w : fsdp.warnings) EXPECT_EQ(w.find("cpu_ram_efficient_loading"), std::string::npos) << w;
  const auto ds = acc::parse_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero3_init_flag: true\nnum_processes: 2\n",
      "ds.yaml");
  EXPECT_EQ(ds.sharding_env.at("ACCELERATE_DEEPSPEED_ZERO3_INIT"), "true");
  // Without the key, Accelerate's launcher passes its flag's default: true.
  const auto plain_fsdp = acc::parse_config_text("distributed_type: FSDP\nnum_processes: 2\n", "plain.yaml");
  EXPECT_EQ(plain_fsdp.sharding_env.at("FSDP_CPU_RAM_EFFICIENT_LOADING"), "true");
  EXPECT_EQ(failure([] {
              acc::parse_config_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_cpu_ram_efficient_loading: maybe\n"
                                     "num_processes: 2\n", "bad.yaml");
            }).first,
            acc::Status::InvalidArgument);
  EXPECT_EQ(stage3_launcher_flag("zero3_init_flag", "ACCELERATE_DEEPSPEED_ZERO3_INIT"), "true");

  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "1", 1);
  EXPECT_FALSE(acc::builds_placeholder_weights()) << "nothing asks for it";
  setenv("ACCELERATE_USE_FSDP", "true", 1);
  setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "true", 1);
  EXPECT_TRUE(acc::builds_placeholder_weights());
  setenv("RANK", "0", 1);
  EXPECT_FALSE(acc::builds_placeholder_weights()) << "the main process builds the weights";
  setenv("RANK", "1", 1);
  setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "false", 1);
  EXPECT_FALSE(acc::builds_placeholder_weights());
  unsetenv("ACCELERATE_USE_FSDP");
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  setenv("ACCELERATE_DEEPSPEED_ZERO3_INIT", "true", 1);
  setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2", 1);
  EXPECT_FALSE(acc::builds_placeholder_weights()) << "zero.Init belongs to stage 3";
  setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3", 1);
  EXPECT_TRUE(acc::builds_placeholder_weights());
  // Unset at stage 3: on, as Accelerate's DeepSpeedPlugin takes it (the config's is_zero3()).
  unsetenv("ACCELERATE_DEEPSPEED_ZERO3_INIT");
  EXPECT_TRUE(acc::builds_placeholder_weights());
  setenv("ACCELERATE_DEEPSPEED_ZERO3_INIT", "false", 1);
  EXPECT_FALSE(acc::builds_placeholder_weights());
  setenv("ACCELERATE_DEEPSPEED_ZERO3_INIT", "true", 1);
  // A malformed variable does not stop a model being built (whole); the accelerator refuses it.
  setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "three", 1);
  EXPECT_FALSE(acc::builds_placeholder_weights());
  EXPECT_EQ(failure([] { resolve(); }).first, acc::Status::InvalidArgument);
}

TEST_F(Sharding, LauncherFlagsOverrideTheFileKeyByKey) {
  const auto file = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_state_dict_type: "
      "SHARDED_STATE_DICT\nnum_processes: 2\n",
      "fsdp.yaml");
  acc::LaunchFlags flags;
  flags.fsdp["fsdp_sharding_strategy"] = "SHARD_GRAD_OP";
  const auto c = acc::resolve_launch_config(flags, file, std::string("fsdp.yaml"), {"train"});
  EXPECT_EQ(c.sharding_env.at("FSDP_SHARDING_STRATEGY"), "SHARD_GRAD_OP");
  EXPECT_EQ(c.sharding_env.at("FSDP_STATE_DICT_TYPE"), "SHARDED_STATE_DICT") << "the file's other keys stay";

  acc::LaunchFlags deepspeed;
  deepspeed.use_deepspeed = true;
  deepspeed.deepspeed["zero_stage"] = "3";
  const auto d = acc::resolve_launch_config(deepspeed, std::nullopt, std::nullopt, {"train"});
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_USE_DEEPSPEED"), "true");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_DEEPSPEED_ZERO_STAGE"), "3");
  EXPECT_EQ(d.sharding_env.count("ACCELERATE_USE_FSDP"), 0u);

  acc::LaunchFlags stray;
  stray.deepspeed["zero_stage"] = "2";  // without --use_deepspeed or a DeepSpeed file
  EXPECT_NE(failure([&] { acc::resolve_launch_config(stray, std::nullopt, std::nullopt, {"train"}); }).second.find(
                "need --use_deepspeed"),
            std::string::npos);
  // An FSDP2 file and a strategy flag (or the other way round) make no FSDP config: the flag was
  // passed on and ignored by the processes.
  const auto fsdp2 = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: true\nnum_processes: 2\n",
      "fsdp2.yaml");
  acc::LaunchFlags strategy;
  strategy.fsdp["fsdp_sharding_strategy"] = "NO_SHARD";
  EXPECT_NE(failure([&] { acc::resolve_launch_config(strategy, fsdp2, std::string("fsdp2.yaml"), {"train"}); })
                .second.find("accelerate launch flags and the config file: fsdp_version 2 takes "
                             "fsdp_reshard_after_forward, not fsdp_sharding_strategy"),
            std::string::npos);
  const auto fsdp1 = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\nnum_processes: 2\n",
      "fsdp1.yaml");
  acc::LaunchFlags version;
  version.fsdp["fsdp_version"] = "2";
  EXPECT_NE(failure([&] {
              acc::resolve_launch_config(version, fsdp1, std::string("fsdp1.yaml"), {"train"});
            }).second.find("--fsdp_version 2 differs from the config file's fsdp_version 1"),
            std::string::npos);
  acc::LaunchFlags reshard;
  reshard.fsdp["fsdp_reshard_after_forward"] = "false";
  EXPECT_EQ(acc::resolve_launch_config(reshard, fsdp2, std::string("fsdp2.yaml"), {"train"})
                .sharding_env.at("FSDP_RESHARD_AFTER_FORWARD"),
            "false");
}

// Found by a hunt against Accelerate 1.15's files: its questionnaire writes FSDP1's strategy in
// fsdp_reshard_after_forward, and a strategy flag over such a file was refused as naming two
// strategies where Accelerate's flag wins; its MoE key was "unknown"; a multi-machine DeepSpeed
// launcher could not be named by its flag; and a file without mixed_precision (beside a DeepSpeed
// JSON config, which Accelerate's launcher then refuses it with) got one written back.
TEST_F(Sharding, FilesAsAccelerateWritesThemTakeItsFlagsAndKeepWhatTheyLack) {
  const auto file = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 1\n  fsdp_reshard_after_forward: FULL_SHARD\n"
      "num_processes: 2\n",
      "fsdp1.yaml");
  acc::LaunchFlags flags;
  flags.fsdp["fsdp_sharding_strategy"] = "SHARD_GRAD_OP";
  EXPECT_EQ(acc::resolve_launch_config(flags, file, std::string("fsdp1.yaml"), {"train"})
                .sharding_env.at("FSDP_SHARDING_STRATEGY"),
            "SHARD_GRAD_OP");
  const auto moe = acc::parse_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  deepspeed_moe_layer_cls_names: Expert\n"
      "num_processes: 2\n",
      "moe.yaml");
  ASSERT_EQ(moe.warnings.size(), 1u);
  EXPECT_NE(moe.warnings[0].find("deepspeed_moe_layer_cls_names is ignored (no counterpart here)"), std::string::npos)
      << moe.warnings[0];
  acc::LaunchFlags pdsh;
  pdsh.use_deepspeed = true;
  pdsh.num_machines = 2;
  pdsh.num_processes = 4;
  pdsh.deepspeed["deepspeed_multinode_launcher"] = "pdsh";
  EXPECT_NE(failure([&] {
              acc::resolve_launch_config(pdsh, std::nullopt, std::nullopt, {"train"});
            }).second.find("--deepspeed_multinode_launcher pdsh on 2 machines is not supported"),
            std::string::npos);
  pdsh.deepspeed["deepspeed_multinode_launcher"] = "standard";
  EXPECT_NO_THROW(acc::resolve_launch_config(pdsh, std::nullopt, std::nullopt, {"train"}));
  // Accelerate's None is not written back as "no"; a value the file had is.
  const std::string json = testing::TempDir() + "/ds_config.json";
  std::ofstream(json) << R"({"zero_optimization": {"stage": 2}})";
  const auto ds = acc::parse_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: " + json + "\nnum_processes: 2\n",
      "ds.yaml");
  EXPECT_EQ(acc::config_to_yaml(ds).find("mixed_precision"), std::string::npos) << acc::config_to_yaml(ds);
  const auto said =
      acc::parse_config_text("distributed_type: MULTI_CPU\nmixed_precision: 'no'\nnum_processes: 2\n", "said.yaml");
  EXPECT_NE(acc::config_to_yaml(said).find("mixed_precision: 'no'"), std::string::npos) << acc::config_to_yaml(said);
}

// A flag leaves the file's other settings as they are, defaults included (found by a hunt: any FSDP
// flag put ram-efficient loading and min_num_params back to the flags' defaults); a DeepSpeed JSON
// file named by its flag beside the file's settings is refused as the two in one file are; without
// a file, --use_fsdp passes every variable Accelerate's launcher passes, its flags' defaults.
TEST_F(Sharding, AFlagKeepsTheFilesOtherSettingsAndEveryVariableIsPassed) {
  const auto file = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_cpu_ram_efficient_loading: false\n  fsdp_min_num_params: 1000\n"
      "num_processes: 2\n",
      "fsdp.yaml");
  acc::LaunchFlags offload;
  offload.fsdp["fsdp_offload_params"] = "true";
  const auto env = acc::resolve_launch_config(offload, file, std::string("fsdp.yaml"), {"train"}).sharding_env;
  EXPECT_EQ(env.at("FSDP_OFFLOAD_PARAMS"), "true");
  EXPECT_EQ(env.at("FSDP_CPU_RAM_EFFICIENT_LOADING"), "false");
  EXPECT_EQ(env.at("FSDP_MIN_NUM_PARAMS"), "1000");

  acc::LaunchFlags use_fsdp;
  use_fsdp.use_fsdp = true;
  const auto defaults = acc::resolve_launch_config(use_fsdp, std::nullopt, std::nullopt, {"train"}).sharding_env;
  const std::map<std::string, std::string> accelerates = {{"ACCELERATE_USE_FSDP", "true"},
                                                          {"FSDP_VERSION", "1"},
                                                          {"FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                                                          {"FSDP_RESHARD_AFTER_FORWARD", "true"},
                                                          {"FSDP_OFFLOAD_PARAMS", "false"},
                                                          {"FSDP_MIN_NUM_PARAMS", "100000000"},
                                                          {"FSDP_FORWARD_PREFETCH", "false"},
                                                          {"FSDP_USE_ORIG_PARAMS", "true"},
                                                          {"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"},
                                                          {"FSDP_SYNC_MODULE_STATES", "true"},
                                                          {"FSDP_ACTIVATION_CHECKPOINTING", "false"}};
  EXPECT_EQ(defaults, accelerates);

  const auto deepspeed_file = acc::parse_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  gradient_clipping: 1.0\nnum_processes: 2\n",
      "ds.yaml");
  acc::LaunchFlags json_file;
  json_file.deepspeed["deepspeed_config_file"] = "ds.json";
  EXPECT_NE(failure([&] {
              acc::resolve_launch_config(json_file, deepspeed_file, std::string("ds.yaml"), {"train"});
            }).second.find("zero_stage"),
            std::string::npos);
  acc::LaunchFlags upper;  // (Accelerate's launcher lower-cases the device)
  upper.use_deepspeed = true;
  upper.deepspeed["zero_stage"] = "2";
  upper.deepspeed["offload_optimizer_device"] = "CPU";
  EXPECT_EQ(acc::resolve_launch_config(upper, std::nullopt, std::nullopt, {"train"})
                .sharding_env.at("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"),
            "cpu");
}

// Accelerate's questionnaire writes an FSDP1 strategy into fsdp_reshard_after_forward: it is the one
// taken, on the file and on the command line. Beside fsdp_sharding_strategy it must name the same
// strategy (Accelerate takes fsdp_sharding_strategy and drops the other silently).
TEST_F(Sharding, AnFsdp1StrategyInReshardAfterForwardIsTaken) {
  auto strategy = [](const std::string& settings) {
    const auto file = acc::parse_config_text(
        "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n" + settings, "v1.yaml");
    return file.sharding_env.count("FSDP_SHARDING_STRATEGY") ? file.sharding_env.at("FSDP_SHARDING_STRATEGY")
                                                             : "(none)";
  };
  EXPECT_EQ(strategy("  fsdp_reshard_after_forward: NO_SHARD\n"), "NO_SHARD");
  EXPECT_EQ(strategy("  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"), "SHARD_GRAD_OP");
  EXPECT_EQ(strategy("  fsdp_reshard_after_forward: 4\n"), "HYBRID_SHARD");
  EXPECT_EQ(strategy("  fsdp_reshard_after_forward: false\n"), "SHARD_GRAD_OP");
  EXPECT_EQ(strategy("  fsdp_reshard_after_forward: true\n  fsdp_sharding_strategy: FULL_SHARD\n"), "FULL_SHARD");
  EXPECT_EQ(strategy("  fsdp_reshard_after_forward: SHARD_GRAD_OP\n  fsdp_sharding_strategy: 2\n"), "SHARD_GRAD_OP");
  EXPECT_NE(failure([&] { strategy("  fsdp_reshard_after_forward: NO_SHARD\n  fsdp_sharding_strategy: FULL_SHARD\n"); })
                .second.find("fsdp_sharding_strategy FULL_SHARD and fsdp_reshard_after_forward NO_SHARD name different "
                             "sharding strategies"),
            std::string::npos);
  EXPECT_NE(failure([&] {
              strategy("  fsdp_reshard_after_forward: NO_RESHARD\n");
            }).second.find("fsdp_reshard_after_forward = NO_RESHARD: must be FULL_SHARD, SHARD_GRAD_OP"),
            std::string::npos);
  acc::LaunchFlags flags;
  flags.use_fsdp = true;
  flags.fsdp["fsdp_reshard_after_forward"] = "NO_SHARD";
  EXPECT_EQ(acc::resolve_launch_config(flags, std::nullopt, std::nullopt, {"train"})
                .sharding_env.at("FSDP_SHARDING_STRATEGY"),
            "NO_SHARD");
}

// --multi_gpu and --cpu name the kind of job: a config file's FSDP or DeepSpeed then does not apply
// (Accelerate's launcher takes the file's distributed_type only without such a flag), and sharding
// flags beside them are refused.
TEST_F(Sharding, MultiGpuAndCpuFlagsTrainWithoutTheFilesSharding) {
  const auto file = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\nnum_processes: 2\n", "fsdp.yaml");
  for (const bool multi_gpu : {true, false}) {
    acc::LaunchFlags flags;
    (multi_gpu ? flags.multi_gpu : flags.cpu) = true;
    EXPECT_TRUE(acc::resolve_launch_config(flags, file, std::string("fsdp.yaml"), {"train"}).sharding_env.empty());
    flags.fsdp["fsdp_sharding_strategy"] = "SHARD_GRAD_OP";
    EXPECT_NE(failure([&] {
                acc::resolve_launch_config(flags, file, std::string("fsdp.yaml"), {"train"});
              }).second.find("FSDP flags need --use_fsdp"),
              std::string::npos);
  }
  EXPECT_EQ(acc::resolve_launch_config({}, file, std::string("fsdp.yaml"), {"train"})
                .sharding_env.at("FSDP_SHARDING_STRATEGY"),
            "FULL_SHARD");
}

// A process that no launcher started (torchrun, mpirun or a script) with ACCELERATE_CONFIG_FILE
// takes the file's FSDP or DeepSpeed section as our launcher would pass it on; it trained plain DDP
// with the file's accumulation dropped. Where a launcher said whether to shard (ours always does,
// false after --multi_gpu or --cpu), the file's section is not read.
TEST_F(Sharding, AConfigFileNamedByTheEnvironmentShardsWithoutALauncher) {
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/acc_cfg_" +
                           std::to_string(getpid()) + ".yaml";
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  setenv("ACCELERATE_CONFIG_FILE", path.c_str(), 1);
  write("distributed_type: DEEPSPEED\nnum_processes: 2\nuse_cpu: true\ndeepspeed_config:\n  zero_stage: 3\n"
        "  gradient_accumulation_steps: 4\n  gradient_clipping: 1.0\n");
  auto c = resolve();
  EXPECT_EQ(c.sharding.stage, 3);
  EXPECT_EQ(c.sharding_kind, "DEEPSPEED");
  EXPECT_EQ(c.gradient_accumulation_steps, 4);
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(resolve({{"gradient_accumulation_steps", "2"}}).gradient_accumulation_steps, 2) << "the program wins";

  write("distributed_type: FSDP\nnum_processes: 2\nuse_cpu: true\nmixed_precision: bf16\nfsdp_config:\n"
        "  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
  c = resolve();
  EXPECT_EQ(c.sharding.stage, 2);
  EXPECT_EQ(c.sharding_kind, "FSDP");
  EXPECT_EQ(c.sharding.state_dict_type, "SHARDED_STATE_DICT");
  EXPECT_EQ(c.mixed_precision, "bf16");

  // Our launcher's processes: the launcher said no sharding (the file's section was overridden).
  acc::LaunchFlags flags;
  flags.multi_gpu = true;
  const auto file = acc::load_config_file(path);
  const auto launched = acc::launch_environment(acc::resolve_launch_config(flags, file, path, {"train"}), 0, 29500, 0);
  EXPECT_EQ(launched.at("ACCELERATE_USE_FSDP"), "false");
  EXPECT_EQ(launched.at("ACCELERATE_USE_DEEPSPEED"), "false");
  setenv("ACCELERATE_USE_FSDP", "false", 1);
  setenv("ACCELERATE_USE_DEEPSPEED", "false", 1);
  EXPECT_EQ(resolve().sharding.stage, 0);
  std::remove(path.c_str());
}

// What Accelerate's launcher passes for Megatron-LM or a parallelism config beyond its data-parallel
// dimensions (a C program run by its `accelerate launch --no_python`): it trained plain DDP silently.
TEST_F(Sharding, LauncherVariablesForFeaturesNotBuiltAreRefused) {
  setenv("ACCELERATE_USE_MEGATRON_LM", "true", 1);
  auto [status, message] = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::Unsupported);
  EXPECT_NE(message.find("ACCELERATE_USE_MEGATRON_LM=true"), std::string::npos) << message;
  setenv("ACCELERATE_USE_MEGATRON_LM", "false", 1);
  EXPECT_NO_THROW(resolve());
  setenv("ACCELERATE_USE_PARALLELISM_CONFIG", "true", 1);
  setenv("PARALLELISM_CONFIG_DP_REPLICATE_SIZE", "2", 1);
  EXPECT_EQ(resolve().sharding.stage, 0) << "replicas alone are DDP";
  setenv("PARALLELISM_CONFIG_TP_SIZE", "2", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::Unsupported);
  EXPECT_NE(message.find("PARALLELISM_CONFIG_TP_SIZE=2"), std::string::npos) << message;
}

// Accelerate's ParallelismConfig (FSDP 2's N-D mesh): dp_shard_size processes share each copy of the
// model and dp_replicate_size groups hold replicas; from the config file's section, the launcher's
// flags and its variables, checked as Accelerate checks them (what it cannot honour named).
TEST_F(Sharding, ParallelismConfigsDataParallelDimensionsShapeTheShardGroups) {
  const std::string fsdp2 = "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\nnum_processes: 4\n";
  const auto file = acc::parse_config_text(
      fsdp2 +
          "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n  parallelism_config_dp_shard_size: 2\n"
          "  parallelism_config_tp_size: 1\n  parallelism_config_cp_size: 1\n",
      "nd.yaml");
  EXPECT_EQ(file.sharding_env.at("ACCELERATE_USE_PARALLELISM_CONFIG"), "true");
  EXPECT_EQ(file.sharding_env.at("PARALLELISM_CONFIG_DP_SHARD_SIZE"), "2");
  EXPECT_EQ(file.sharding_env.at("PARALLELISM_CONFIG_DP_REPLICATE_SIZE"), "2");
  for (const auto& w : file.warnings) EXPECT_EQ(w.find("parallelism"), std::string::npos) << w;
  // What is not built, a size that is no size, and sharding outside FSDP 2: refused naming the key.
  const std::vector<std::tuple<std::string, acc::Status, std::string>> refused = {
      {fsdp2 + "parallelism_config:\n  parallelism_config_tp_size: 2\n", acc::Status::Unsupported,
       "parallelism_config_tp_size = 2 is not supported"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_cp_size: 2\n", acc::Status::Unsupported,
       "parallelism_config_cp_size = 2"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_dp_shard_size: 0\n", acc::Status::InvalidArgument,
       "parallelism_config_dp_shard_size = 0: must be an integer >= 1"},
      {"distributed_type: MULTI_CPU\nnum_processes: 4\nparallelism_config:\n  parallelism_config_dp_shard_size: 2\n",
       acc::Status::InvalidArgument, "needs distributed_type FSDP with fsdp_version 2"},
      {"distributed_type: FSDP\nnum_processes: 4\nparallelism_config:\n  parallelism_config_dp_shard_size: 2\n",
       acc::Status::InvalidArgument, "needs distributed_type FSDP with fsdp_version 2"}};
  for (const auto& [text, status, words] : refused) {
    auto [got, message] = failure([&text = text] { acc::parse_config_text(text, "nd.yaml"); });
    EXPECT_EQ(got, status) << text;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  }
  // Replicas alone outside FSDP are what DDP is.
  EXPECT_FALSE(acc::parse_config_text("distributed_type: MULTI_CPU\nnum_processes: 2\nparallelism_config:\n"
                                      "  parallelism_config_dp_replicate_size: 2\n",
                                      "ddp.yaml")
                   .sharding_env.count("ACCELERATE_USE_PARALLELISM_CONFIG"));

  // The launcher's flags, over the file's section key by key; without FSDP 2 refused as Accelerate's launcher.
  acc::LaunchFlags flags;
  flags.parallelism["dp_shard_size"] = "4";
  flags.parallelism["dp_replicate_size"] = "1";
  auto launch = acc::resolve_launch_config(flags, file, std::string("nd.yaml"), {"prog"});
  EXPECT_EQ(launch.sharding_env.at("PARALLELISM_CONFIG_DP_SHARD_SIZE"), "4");
  EXPECT_EQ(launch.sharding_env.at("PARALLELISM_CONFIG_DP_REPLICATE_SIZE"), "1");
  auto [status, message] = failure([&] { acc::resolve_launch_config(flags, std::nullopt, std::nullopt, {"prog"}); });
  EXPECT_NE(message.find("need --use_parallelism_config"), std::string::npos) << message;
  flags.use_parallelism_config = true;
  std::tie(status, message) = failure([&] { acc::resolve_launch_config(flags, std::nullopt, std::nullopt, {"prog"}); });
  EXPECT_NE(message.find("needs distributed_type FSDP with fsdp_version 2"), std::string::npos) << message;
  flags.use_fsdp = true;
  flags.fsdp["fsdp_version"] = "2";
  flags.num_processes = 4;
  launch = acc::resolve_launch_config(flags, std::nullopt, std::nullopt, {"prog"});
  EXPECT_EQ(launch.sharding_env.at("PARALLELISM_CONFIG_DP_SHARD_SIZE"), "4");

  // The variables, as the accelerator reads them: FSDP 2's stage with the shard groups.
  for (const auto& [name, value] : file.sharding_env) setenv(name.c_str(), value.c_str(), 1);
  const auto c = resolve();
  EXPECT_EQ(c.sharding.stage, 3);
  EXPECT_EQ(c.sharding.dp_shard_size, 2);
  EXPECT_EQ(c.sharding.dp_replicate_size, 2);
  EXPECT_NO_THROW(acc::check_parallelism_world(c.sharding, 4));
  std::tie(status, message) = failure([&] { acc::check_parallelism_world(c.sharding, 2); });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("dp_shard_size 2 x dp_replicate_size 2 = 4 processes, but the job has 2"), std::string::npos)
      << message;
  EXPECT_EQ(resolve({{"zero_stage", "0"}}).sharding.dp_shard_size, 0)
      << "the program's DDP drops the launcher's groups";
  EXPECT_EQ(resolve({{"dp_shard_size", "0"}}).sharding.dp_shard_size, 2) << "0 is none: the launcher's size";
  // Found by a hunt: a size of 0, and shard groups under FSDP 1 (whose Accelerate never reads the
  // mesh), came through the variables unrefused.
  setenv("PARALLELISM_CONFIG_DP_SHARD_SIZE", "0", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_NE(message.find("PARALLELISM_CONFIG_DP_SHARD_SIZE='0': must be an integer >= 1"), std::string::npos)
      << message;
  setenv("PARALLELISM_CONFIG_DP_SHARD_SIZE", "2", 1);
  setenv("FSDP_VERSION", "1", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_NE(message.find("it needs FSDP version 2"), std::string::npos) << message;
  setenv("FSDP_VERSION", "2", 1);
  // The program's options, checked as Accelerate's ParallelismConfig is.
  unsetenv("ACCELERATE_USE_PARALLELISM_CONFIG");
  unsetenv("ACCELERATE_USE_FSDP");
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>> contradictions = {
      {{{"dp_shard_size", "2"}}, "dp_shard_size 2 shards the model: it needs zero_stage 1, 2 or 3"},
      {{{"zero_stage", "2"}, {"dp_shard_size", "2"}, {"hybrid_shard", "true"}}, "use one"},
      {{{"zero_stage", "3"}, {"dp_replicate_size", "2"}}, "needs dp_shard_size > 1"}};
  for (const auto& [options, words] : contradictions) {
    std::tie(status, message) = failure([&options = options] { resolve(options); });
    EXPECT_EQ(status, acc::Status::InvalidArgument) << words;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  }
  EXPECT_NO_THROW(resolve({{"dp_replicate_size", "2"}})) << "replicas alone: DDP";
}

TEST_F(Sharding, Zero3Save16BitModelComesFromEveryPlaceAccelerateReadsIt) {
  // The config file's key and the launcher's flag become Accelerate's variable.
  const auto file = acc::parse_config_text(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero3_save_16bit_model: true\n"
      "num_processes: 2\n", "ds.yaml");
  EXPECT_EQ(file.sharding_env.at("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"), "true");
  for (const auto& w : file.warnings) EXPECT_EQ(w.find("zero3_save_16bit_model"), std::string::npos) << w;
  EXPECT_EQ(failure([] {
              acc::parse_config_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero3_save_16bit_model: 2\n"
                                     "num_processes: 2\n", "bad.yaml");
            }).first,
            acc::Status::InvalidArgument);
  EXPECT_EQ(stage3_launcher_flag("zero3_save_16bit_model", "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"), "true");

  // The variable, under the program's option.
  EXPECT_FALSE(resolve().sharding.save_16bit_model);
  setenv("ACCELERATE_USE_DEEPSPEED", "true", 1);
  setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3", 1);
  EXPECT_FALSE(resolve().sharding.save_16bit_model);
  setenv("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "true", 1);
  EXPECT_TRUE(resolve().sharding.save_16bit_model);
  EXPECT_FALSE(resolve({{"zero3_save_16bit_model", "false"}}).sharding.save_16bit_model) << "the program's wins";

  // A DeepSpeed JSON config's stage3_gather_16bit_weights_on_model_save wins over the variable.
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/acc_ds16_" +
                           std::to_string(getpid()) + ".json";
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  write(R"({"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": false}})");
  setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", path.c_str(), 1);
  EXPECT_FALSE(resolve().sharding.save_16bit_model);
  write(R"({"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": "auto"}})");
  EXPECT_TRUE(resolve().sharding.save_16bit_model) << "auto: Accelerate fills it from the variable";
  write(R"({"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": "yes"}})");
  const auto [status, message] = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("stage3_gather_16bit_weights_on_model_save"), std::string::npos) << message;
  std::remove(path.c_str());
}

// fsdp_ignored_modules (Accelerate passes it to FSDP as ignored_modules, a regular expression of
// module names) reaches the option from the config file, its variable or the program; a pattern
// that is no regular expression, or one without sharding to keep modules out of, is refused.
TEST_F(Sharding, IgnoredModulesComeFromTheConfigAndItsVariable) {
  const auto fsdp = acc::parse_config_text(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_ignored_modules: 'embed|blocks\\.0'\nnum_processes: 2\n",
      "fsdp.yaml");
  EXPECT_EQ(fsdp.sharding_env.at("FSDP_IGNORED_MODULES"), "embed|blocks\\.0");
  for (const auto& w : fsdp.warnings) EXPECT_EQ(w.find("ignored_modules"), std::string::npos) << w;
  for (const auto& [name, value] : fsdp.sharding_env) setenv(name.c_str(), value.c_str(), 1);
  EXPECT_EQ(resolve().sharding.ignored_modules, "embed|blocks\\.0");
  EXPECT_EQ(resolve({{"ignored_modules", "head"}}).sharding.ignored_modules, "head") << "the program wins";
  EXPECT_EQ(resolve({{"zero_stage", "0"}}).sharding.ignored_modules, "") << "the program turned sharding off";
  // The launcher's NO_SHARD with ignored modules trained DDP, the pattern dropped unread (a hunt's
  // finding): refused, as the same request made by options is.
  setenv("FSDP_SHARDING_STRATEGY", "NO_SHARD", 1);
  const auto [no_shard_status, no_shard_message] = failure([] { resolve(); });
  EXPECT_EQ(no_shard_status, acc::Status::InvalidArgument);
  EXPECT_NE(no_shard_message.find("it needs zero_stage 1, 2 or 3, not 0"), std::string::npos) << no_shard_message;
  unsetenv("FSDP_SHARDING_STRATEGY");

  auto [status, message] = failure([] {
    acc::parse_config_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_ignored_modules: 'blocks.(0'\n", "bad.yaml");
  });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("bad.yaml: fsdp_config: fsdp_ignored_modules regular expression 'blocks.(0' is invalid"),
            std::string::npos)
      << message;
  setenv("FSDP_IGNORED_MODULES", "(", 1);
  std::tie(status, message) = failure([] { resolve(); });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("environment variable FSDP_IGNORED_MODULES"), std::string::npos) << message;
  unsetenv("FSDP_IGNORED_MODULES");
  unsetenv("ACCELERATE_USE_FSDP");
  std::tie(status, message) = failure([] { resolve({{"ignored_modules", "embed"}}); });
  EXPECT_EQ(status, acc::Status::InvalidArgument);
  EXPECT_NE(message.find("it needs zero_stage 1, 2 or 3, not 0"), std::string::npos) << message;
  std::tie(status, message) = failure([] { resolve({{"zero_stage", "3"}, {"ignored_modules", "[a-"}}); });
  EXPECT_EQ(status, acc::Status::InvalidArgument) << message;
  // A pattern std::regex would match in exponential time (or overflow the stack on) is refused unrun.
  std::tie(status, message) = failure([] { resolve({{"zero_stage", "3"}, {"ignored_modules", "(a+)+b"}}); });
  EXPECT_EQ(status, acc::Status::InvalidArgument) << message;
  EXPECT_NE(message.find("exponential"), std::string::npos) << message;
}

// Modules match by their whole names, a parameter lying in each module up its name's dots (and in
// the root, named ""); a pattern matching none is refused rather than shard everything.
TEST(IgnoredModules, AModulesParametersAndItsSubmodulesAreIgnored) {
  const std::vector<std::string> names = {"embed.weight",          "blocks.0.linear1.weight",
                                          "blocks.0.linear1.bias", "blocks.1.linear1.weight",
                                          "blocks.10.norm.weight", "head.weight"};
  using Set = std::set<std::string>;
  EXPECT_EQ(acc::ignored_parameter_names(names, ""), Set{});
  EXPECT_EQ(acc::ignored_parameter_names(names, "blocks\\.0"),
            (Set{"blocks.0.linear1.weight", "blocks.0.linear1.bias"}));
  EXPECT_EQ(acc::ignored_parameter_names(names, "blocks\\.1"), Set{"blocks.1.linear1.weight"}) << "whole names only";
  EXPECT_EQ(acc::ignored_parameter_names(names, "embed|head"), (Set{"embed.weight", "head.weight"}));
  EXPECT_EQ(acc::ignored_parameter_names(names, ".*linear1"),
            (Set{"blocks.0.linear1.weight", "blocks.0.linear1.bias", "blocks.1.linear1.weight"}));
  EXPECT_EQ(acc::ignored_parameter_names(names, ".*").size(), names.size()) << "the root matches";
  try {
    acc::ignored_parameter_names(names, "embed.weight");
    FAIL() << "a parameter's name is no module's";
  } catch (const acc::Error& e) {
    EXPECT_EQ(e.status(), acc::Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("matches no module that holds parameters"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lies in module 'embed'"), std::string::npos) << e.what();
  }
}
