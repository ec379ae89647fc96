// The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the raw
// little-endian bytes. Reading maps the file and validates everything before any tensor is used.
#pragma once

#include <map>
#include <string>

#include "model/model.h"

namespace acc {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  NamedTensors tensors;  // CPU tensors over the mapped file (copy-on-write), in file order
  Metadata metadata;
};

// Writes atomically (a temporary file renamed into place). Every tensor needs a name of its own.
// The default metadata is what PyTorch's save_file writes ({"format": "pt"}).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {{"format", "pt"}});

// Rejects, with the reason, a header that is too large or not JSON, unknown dtypes, shapes that do
// not match their bytes, offsets outside the data, overlapping or leaving holes.
SafetensorsContents load_safetensors(const std::string& path);

// "10GB" (10^9), "500MB", "2GiB" (2^30), "123" bytes -> bytes.
int64_t parse_size(const std::string& text);
// Accelerate's (and transformers') default max_shard_size.
constexpr const char* kDefaultMaxShardSize = "10GB";

// Hugging Face's save_pretrained layout in `dir`: model.safetensors, or shards
// model-0000k-of-0000n.safetensors plus model.safetensors.index.json when the tensors exceed
// max_shard_bytes. Shards of an earlier save that this one does not write are removed.
// Returns the files written.
std::vector<std::string> save_sharded(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes);

// Reads a single file, an index, or a directory holding either.
NamedTensors load_sharded(const std::string& path);
// Accelerate's load_checkpoint_in_model: load_sharded into the model (Model::load_state_dict's
// rules); returns the names missing from the files and those the model does not have.
std::pair<std::vector<std::string>, std::vector<std::string>> load_checkpoint_in_model(Model& model,
                                                                                      const std::string& path,
                                                                                      bool strict);

}  // namespace acc
