// The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the raw
// little-endian bytes. Reading maps the file and validates everything before any tensor is used.
#pragma once

#include <map>
#include <string>

#include "tensor/named_tensors.h"

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
// The tensors of load_safetensors(path) as tensors of their own, copied out of the mapping: what
// the caller keeps is unaffected by the file changing, shrinking or going afterwards.
NamedTensors load_safetensors_copied(const std::string& path);

}  // namespace acc
