#!/usr/bin/env bash
# Trains the Fashion-MNIST example on 2 processes with a checkpoint every 20 steps, then runs it again
# with --resume: fails unless the second run succeeds and resumed from the newest checkpoint.
#   resume_check.sh LAUNCHER PROGRAM PROJECT_DIR [DATA_DIR]
set -euo pipefail
launch=$1 program=$2 dir=$3 data=${4:-/usr/share/datasets/fashion-mnist}
job=("$launch" --num_processes 2 "$program" --train-samples 6000 --test-samples 1000 --save "" --data "$data"
     --project-dir "$dir" --checkpoint-every 20)
rm -rf "$dir"
"${job[@]}" --epochs 1
out=$("${job[@]}" --epochs 2 --resume)
echo "$out"
grep -q "resumed from $dir/checkpoints/checkpoint_1 (epoch 1, step 40)" <<<"$out"
