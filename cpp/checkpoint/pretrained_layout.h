// Hugging Face's save_pretrained layout of weights: one model.safetensors, or shards
// model-0000k-of-0000n.safetensors with model.safetensors.index.json mapping names to shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/named_tensors.h"

namespace acc {

// "10GB" (10^9), "500MB", "2GiB" (2^30), "123" bytes -> bytes.
int64_t parse_size(const std::string& text);
// Accelerate's (and transformers') default max_shard_size.
constexpr const char* kDefaultMaxShardSize = "10GB";

// The layout in `dir`: model.safetensors, or shards plus the index when the tensors exceed
// max_shard_bytes. Shards of an earlier save that this one does not write are removed. A tensor
// listed again under another name (a buffer two modules share) is written once, under its first
// name, as Accelerate's save_model drops aliases (safetensors holds none). Returns the files written.
std::vector<std::string> save_sharded(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes);

// Whether a file name is one save_sharded writes (model.safetensors, its index, model-0000k-of-0000n).
bool is_pretrained_file_name(const std::string& name);

// Reads a single file, an index, or a directory holding either.
NamedTensors load_sharded(const std::string& path);

}  // namespace acc
