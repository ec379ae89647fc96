// The safetensors format (Hugging Face): an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the raw
// little-endian bytes. Reading takes the file into memory once and validates everything before any
// tensor is used: what was checked is what is used, whatever happens to the file afterwards.
#pragma once

#include <map>
#include <string>

#include "tensor/named_tensors.h"

namespace acc {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  NamedTensors tensors;  // CPU tensors over the file's bytes read into memory, in file order
  Metadata metadata;
};

// Writes atomically (a temporary file renamed into place). Every tensor needs a name of its own.
// The default metadata is what PyTorch's save_file writes ({"format": "pt"}).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {{"format", "pt"}});

// Rejects, with the reason, a header that is too large or not JSON, unknown dtypes, shapes that do
// not match their bytes, offsets outside the data, overlapping or leaving holes.
SafetensorsContents load_safetensors(const std::string& path);
// The tensors of load_safetensors(path) as tensors of their own, each holding only its bytes (a
// tensor kept does not keep the whole file's in memory).
NamedTensors load_safetensors_copied(const std::string& path);
// The metadata alone, from the header (the tensors' bytes are not read); checked as
// load_safetensors checks the header.
Metadata load_safetensors_metadata(const std::string& path);

}  // namespace acc
