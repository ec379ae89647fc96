// A SHARDED_STATE_DICT checkpoint's model shards merged into full weights without the job that
// wrote them (Accelerate's `accelerate merge-weights` / merge_fsdp_weights): every process's
// model_shard_<r>.safetensors of a zero_stage 3 checkpoint, put back together by the layout each
// shard records, into Hugging Face's layout (model.safetensors, or shards and an index) — the same
// tensors acc_save_model writes. Every shard is checked before anything is written; a missing,
// foreign or damaged shard is an error naming the file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tensor/named_tensors.h"

namespace acc {

// The full state of the checkpoint's model_index-th model, in the model's order.
NamedTensors merge_model_shards(const std::string& checkpoint_dir, size_t model_index);

// merge_model_shards written to output_dir (max_shard_size as acc_save_model's); the files written.
std::vector<std::string> merge_sharded_checkpoint(const std::string& checkpoint_dir, size_t model_index,
                                                  const std::string& output_dir, const std::string& max_shard_size);

}  // namespace acc
