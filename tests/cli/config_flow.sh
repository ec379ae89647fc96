#!/usr/bin/env bash
# accelerate config / config update / env / launch, end to end, in a private HF_HOME:
#   config_flow.sh ACCELERATE_BINARY FIXTURES_DIR
set -eu
acc=$1 fixtures=$2
export HF_HOME=$(mktemp -d)
trap 'rm -rf "$HF_HOME"' EXIT
file=$HF_HOME/accelerate/default_config.yaml
fail() { echo "config_flow: $*"; exit 1; }

# --default writes Accelerate's default config (JSON text, as its write_basic_config), and never
# overwrites one.
"$acc" config --default --mixed_precision bf16 | grep -q "saved at $file" || fail "config --default"
grep -qx '  "mixed_precision": "bf16",' "$file" || fail "mixed_precision not written"
grep -qx '  "distributed_type": "NO",' "$file" || fail "distributed_type not written as Accelerate does"
# As Accelerate: the existing file is kept and said so, which is not a failure (exit 0).
"$acc" config --default --mixed_precision fp16 2>&1 | grep -q "already exists and is kept" || fail "config --default on a file"
grep -qx '  "mixed_precision": "bf16",' "$file" || fail "config --default overwrote a file"

# The answers of the questionnaire, from a pipe.
printf '1\n1\n2\nno\nno\nno\nbf16\n' | "$acc" config --config_file "$HF_HOME/asked.yaml" >/dev/null || fail "config (questions)"
grep -qx "distributed_type: MULTI_CPU" "$HF_HOME/asked.yaml" || fail "answers not saved"
# Nothing Python's launcher refuses: the runtime's own top-level accumulation key is written by hand.
grep -q "^gradient_accumulation_steps" "$HF_HOME/asked.yaml" && fail "a key Python's launcher refuses was written"
echo "gradient_accumulation_steps: 3" >>"$HF_HOME/asked.yaml"

# FSDP's questions: version (0: FSDP1), strategy, offload, wrap policy, state dict type, CPU RAM efficient
# loading, activation checkpointing.
printf '1\n1\n2\nno\nno\nyes\n0\n1\nno\n2\n0\nyes\nno\nno\n1\n' |
  "$acc" config --config_file "$HF_HOME/fsdp.yaml" >/dev/null || fail "config (FSDP questions)"
grep -qx "distributed_type: FSDP" "$HF_HOME/fsdp.yaml" || fail "FSDP not chosen"
grep -qx "  fsdp_cpu_ram_efficient_loading: true" "$HF_HOME/fsdp.yaml" || fail "cpu_ram_efficient_loading not saved"
out=$("$acc" launch --config_file "$HF_HOME/fsdp.yaml" sh -c 'echo "$RANK:$FSDP_CPU_RAM_EFFICIENT_LOADING"' 2>&1)
echo "$out" | grep -q "rank1\]: 1:true" || fail "cpu_ram_efficient_loading did not reach the processes: $out"

# to-fsdp2: FSDP1's strategy becomes FSDP2's reshard_after_forward; an existing output needs --overwrite.
"$acc" to-fsdp2 --config_file "$HF_HOME/fsdp.yaml" --output_file "$HF_HOME/fsdp2.yaml" >/dev/null 2>&1 || fail "to-fsdp2"
grep -qx "  fsdp_version: 2" "$HF_HOME/fsdp2.yaml" || fail "to-fsdp2: no fsdp_version 2"
grep -qx "  fsdp_reshard_after_forward: false" "$HF_HOME/fsdp2.yaml" || fail "to-fsdp2: SHARD_GRAD_OP not converted"
grep -q "fsdp_sharding_strategy" "$HF_HOME/fsdp2.yaml" && fail "to-fsdp2: FSDP1's strategy kept"
if "$acc" to-fsdp2 --config_file "$HF_HOME/fsdp.yaml" --output_file "$HF_HOME/fsdp2.yaml" 2>/dev/null; then
  fail "to-fsdp2 replaced an output without --overwrite"
fi
if "$acc" to-fsdp2 --config_file "$HF_HOME/fsdp.yaml" 2>/dev/null; then fail "to-fsdp2 without an output"; fi
# A file written by hand, without the keys `accelerate config` writes: the result has them all, as the
# README says (found by a hunt: downcast_bf16, tpu_use_cluster and tpu_use_sudo were left out).
printf 'distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n' \
  >"$HF_HOME/fsdp1_by_hand.yaml"
"$acc" to-fsdp2 --config_file "$HF_HOME/fsdp1_by_hand.yaml" --output_file "$HF_HOME/fsdp2_by_hand.yaml" \
  >/dev/null 2>&1 || fail "to-fsdp2 of a file written by hand"
for key in downcast_bf16 tpu_use_cluster tpu_use_sudo; do
  grep -qx "$key: false" "$HF_HOME/fsdp2_by_hand.yaml" || fail "to-fsdp2 left out $key"
done
out=$("$acc" launch --config_file "$HF_HOME/fsdp2.yaml" sh -c 'echo "$RANK:$FSDP_VERSION:$FSDP_RESHARD_AFTER_FORWARD"' 2>&1)
echo "$out" | grep -q "rank1\]: 1:2:false" || fail "to-fsdp2's file did not launch as FSDP2: $out"

# config update rewrites an older file in today's format and keeps its values and unknown keys.
printf 'distributed_type: MULTI_CPU\nnum_processes: 2\nfp16: true\nuse_cpu: true\nmy_key: 1\n' >"$HF_HOME/old.yaml"
"$acc" config update --config_file "$HF_HOME/old.yaml" 2>/dev/null | grep -q "updated" || fail "config update"
grep -qx "mixed_precision: fp16" "$HF_HOME/old.yaml" || fail "fp16 not converted"
grep -qx "my_key: 1" "$HF_HOME/old.yaml" || fail "unknown key dropped"
grep -q "^fp16" "$HF_HOME/old.yaml" && fail "legacy key kept"
# (and the keys Accelerate's ClusterConfig always writes)
for key in downcast_bf16 tpu_use_cluster tpu_use_sudo; do
  grep -qx "$key: false" "$HF_HOME/old.yaml" || fail "config update did not write $key"
done

# env shows the config in effect and the build.
"$acc" env | grep -q "Config file: $file" || fail "env: config file"
"$acc" env | grep -q "mixed_precision: bf16" || fail "env: config"
"$acc" env | grep -q "libtorch version" || fail "env: libtorch"

# launch: the file's values reach the processes; a flag beats the file; unknown keys warn once.
out=$("$acc" launch --config_file "$HF_HOME/asked.yaml" sh -c 'echo "$RANK:$ACCELERATE_MIXED_PRECISION:$ACCELERATE_GRADIENT_ACCUMULATION_STEPS:$ACCELERATE_USE_CPU"' 2>&1)
echo "$out" | grep -q "rank1\]: 1:bf16:3:true" || fail "launch did not use the file: $out"
out=$("$acc" launch --config_file "$HF_HOME/asked.yaml" --num_processes 1 --mixed_precision no sh -c 'echo "$WORLD_SIZE:$ACCELERATE_MIXED_PRECISION"' 2>&1)
[ "$out" = "1:no" ] || fail "flags did not beat the file: $out"
out=$("$acc" launch --config_file "$HF_HOME/old.yaml" true 2>&1)
[ "$(echo "$out" | grep -c "unknown keys are ignored: my_key")" = 1 ] || fail "unknown key not warned once: $out"
# The default file is used when no --config_file is given (it says bf16).
out=$("$acc" launch sh -c 'echo "$ACCELERATE_MIXED_PRECISION"' 2>&1)
[ "$out" = "bf16" ] || fail "default file not used: $out"
echo "config_flow: all passed"
