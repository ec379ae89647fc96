// The checkpoint parts of sharded models and their optimizers. FULL_STATE_DICT: every process takes
// part in consolidating the shards and the main process writes the same files as DDP does
// (model.safetensors, optimizer.safetensors), which load on any number of processes, sharded or
// not. SHARDED_STATE_DICT: each process writes its own shard (model_shard_<rank>.safetensors under
// stage 3, optimizer_shard_<rank>.safetensors), which loads on as many processes with the same
// sharding. Loading reads whichever of the two the checkpoint holds.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/checkpoint_part.h"
#include "parallel/sharded_data_parallel.h"
#include "parallel/sharded_optimizer.h"

namespace acc {

// Stage 3's weights (stages 1 and 2 keep full parameters: the plain weights part serves them).
std::unique_ptr<CheckpointPart> sharded_weights_part(size_t index, std::shared_ptr<ShardedDataParallel> engine);
std::unique_ptr<CheckpointPart> sharded_optimizer_part(size_t index, std::shared_ptr<ShardedOptimizer> optimizer);
// Whether a checkpoint file is one process's shard (it loads only on the same sharding).
bool is_shard_file(const std::string& path);
// The file of process `rank`'s shard of the index-th model or optimizer: "model_shard_0.safetensors",
// "optimizer_1_shard_2.safetensors". Its metadata: num_processes, process_index, zero_stage, save_id,
// data_crc32 (checkpoint/data_checksum.h), and for a model the layout
// (ShardedDataParallel::shard_layout_json).
std::string shard_name(const std::string& stem, size_t index, int64_t rank);
// Refuses checkpoint folder `dir` if it holds shards (SHARDED_STATE_DICT) of the index-th model or
// optimizer (`stem`), which this job keeps whole (`here` says how): that object would otherwise be
// looked for in its consolidated file and reported missing. The message names both shardings.
void refuse_shards_of_a_whole_object(const std::string& dir, const std::string& stem, size_t index,
                                     const std::string& here);

}  // namespace acc
