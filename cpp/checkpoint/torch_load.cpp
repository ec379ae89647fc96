#include "checkpoint/torch_load.h"

#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

#include "common/error.h"
#include "model/torchscript_archive.h"

namespace acc {
namespace {

std::optional<at::ScalarType> storage_dtype(const std::string& storage_class) {
  static const std::map<std::string, at::ScalarType> types = {
      {"torch.FloatStorage", at::kFloat},       {"torch.DoubleStorage", at::kDouble}, {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16}, {"torch.LongStorage", at::kLong},     {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},       {"torch.CharStorage", at::kChar},     {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool}};
  auto it = types.find(storage_class);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

// The arguments of torch._utils._rebuild_tensor_v2 behind `node`: the call itself, a Parameter's
// _rebuild_parameter(tensor, ...) around it, or a subclass's _rebuild_from_type_v2(func, type, args,
// state). Unwrapped in a loop: a pickle may nest wrappers a million deep.
const PickleNode* rebuild_arguments(const PickleNode& node) {
  const PickleNode* at = &node;
  while (at->is_call_of("torch._utils._rebuild_parameter") && !at->items[1]->items.empty()) at = at->items[1]->items[0];
  if (at->is_call_of("torch._utils._rebuild_tensor_v2")) return at->items[1];
  if (!at->is_call_of("torch._tensor._rebuild_from_type_v2")) return nullptr;
  const auto& args = at->items[1]->items;
  const bool plain = args.size() >= 3 && args[0]->kind == PickleNode::Kind::Global &&
                     args[0]->text == "torch._utils._rebuild_tensor_v2" && args[2]->kind == PickleNode::Kind::Tuple;
  return plain ? args[2] : nullptr;
}

}  // namespace

TorchSavedFile::TorchSavedFile(const std::string& path) : path_(path) {
  {
    std::ifstream in(path, std::ios::binary);
    char magic[2] = {};
    if (!in || !in.read(magic, 2)) fail(Status::Io, "cannot read '", path, "'");
    if (std::memcmp(magic, "PK", 2) != 0)
      fail(Status::Io, "'", path,
           "' is not in torch.save's zip format (the format before torch 1.6, or "
           "_use_new_zipfile_serialization=False, is not read)");
  }
  archive_ = std::make_unique<VerifiedArchive>(path);  // the storages read later come from its checked bytes
  try {
    reader_ = std::make_shared<caffe2::serialize::PyTorchStreamReader>(&archive_->stream());
    if (reader_->hasRecord("byteorder")) {
      auto [data, size] = reader_->getRecord("byteorder");
      if (std::string(static_cast<const char*>(data.get()), size) != "little")
        fail(Status::Io, "'", path, "' was saved on a big-endian machine: its tensors are not read");
    }
    if (!reader_->hasRecord("data.pkl"))
      fail(Status::Io, "'", path, "' is a zip file without data.pkl: not torch.save's");
    auto [data, size] = reader_->getRecord("data.pkl");
    pickle_ = read_pickle(std::string_view(static_cast<const char*>(data.get()), size), path);
  } catch (const c10::Error& e) {
    fail(Status::Io, "'", path, "' cannot be read as torch.save's archive: ", e.what_without_backtrace());
  }
}

void TorchSavedFile::refuse(const std::string& where, const std::string& expected, const PickleNode& found) const {
  fail(Status::Io, "checkpoint file '", path_, "': '", where, "' must be ", expected, ", not ",
       pickle_kind_name(found));
}

const PickleNode& TorchSavedFile::field(const PickleNode& dict, const std::string& key,
                                        const std::string& where) const {
  if (dict.kind != PickleNode::Kind::Dict) refuse(where, "a dict", dict);
  const PickleNode* value = dict.find(key);
  if (!value) fail(Status::Io, "checkpoint file '", path_, "': '", where, "' has no '", key, "'");
  return *value;
}

int64_t TorchSavedFile::integer(const PickleNode& node, const std::string& where) const {
  if (node.kind != PickleNode::Kind::Int) refuse(where, "an int", node);
  return node.integer;
}

double TorchSavedFile::number(const PickleNode& node, const std::string& where) const {
  if (node.kind == PickleNode::Kind::Int) return static_cast<double>(node.integer);
  if (node.kind != PickleNode::Kind::Float) refuse(where, "a number", node);
  return node.number;
}

bool TorchSavedFile::flag(const PickleNode& node, const std::string& where) const {
  if (node.kind != PickleNode::Kind::Bool) refuse(where, "True or False", node);
  return node.boolean;
}

const std::string& TorchSavedFile::text(const PickleNode& node, const std::string& where) const {
  if (node.kind != PickleNode::Kind::String) refuse(where, "a string", node);
  return node.text;
}

const std::vector<const PickleNode*>& TorchSavedFile::sequence(const PickleNode& node, const std::string& where) const {
  if (node.kind != PickleNode::Kind::List && node.kind != PickleNode::Kind::Tuple) refuse(where, "a list", node);
  return node.items;
}

bool TorchSavedFile::holds_tensor(const PickleNode& node) { return rebuild_arguments(node) != nullptr; }

// A storage's persistent id: ("storage", <its class>, key, location, element count).
at::Tensor TorchSavedFile::storage(const PickleNode& id, const std::string& where) const {
  const auto& fields = id.items;
  if (id.kind != PickleNode::Kind::Tuple || fields.size() != 5 || fields[0]->kind != PickleNode::Kind::String ||
      fields[0]->text != "storage" || fields[1]->kind != PickleNode::Kind::Global ||
      fields[2]->kind != PickleNode::Kind::String || fields[4]->kind != PickleNode::Kind::Int)
    fail(Status::Io, "checkpoint file '", path_, "': '", where, "' refers to a storage it does not describe");
  const auto dtype = storage_dtype(fields[1]->text);
  if (!dtype) fail(Status::Io, "checkpoint file '", path_, "': '", where, "' is a ", fields[1]->text, " (not read)");
  const std::string& key = fields[2]->text;
  auto cached = storages_.find(key);
  if (cached != storages_.end()) return cached->second;
  const int64_t numel = fields[4]->integer;
  const auto item = static_cast<int64_t>(c10::elementSize(*dtype));
  if (numel < 0 || numel > std::numeric_limits<int64_t>::max() / item)
    fail(Status::Io, "checkpoint file '", path_, "': '", where, "' declares a storage of ", numel, " elements");
  const std::string record = "data/" + key;
  try {
    if (!reader_->hasRecord(record))
      fail(Status::Io, "checkpoint file '", path_, "': the data of '", where, "' (record ", record, ") is missing");
    auto [data, size] = reader_->getRecord(record);
    if (size != static_cast<size_t>(numel * item))
      fail(Status::Io, "checkpoint file '", path_, "': record ", record, " holds ", size, " bytes, but '", where,
           "' declares ", numel * item);
    at::Tensor flat = at::empty({numel}, at::TensorOptions().dtype(*dtype));
    if (size) std::memcpy(flat.data_ptr(), data.get(), size);
    return storages_[key] = flat;
  } catch (const c10::Error& e) {
    fail(Status::Io, "checkpoint file '", path_, "': reading record ", record, ": ", e.what_without_backtrace());
  }
}

at::Tensor TorchSavedFile::tensor(const PickleNode& node, const std::string& where) const {
  const PickleNode* args = rebuild_arguments(node);
  if (!args) refuse(where, "a tensor", node);
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  const auto& a = args->items;
  if (a.size() < 4 || a[0]->kind != PickleNode::Kind::Persistent)
    fail(Status::Io, "checkpoint file '", path_, "': '", where, "' is a tensor without its storage");
  const at::Tensor flat = storage(*a[0]->items[0], where);
  const int64_t offset = integer(*a[1], where + " (storage offset)");
  std::vector<int64_t> sizes, strides;
  for (const PickleNode* s : sequence(*a[2], where + " (size)")) sizes.push_back(integer(*s, where + " (size)"));
  for (const PickleNode* s : sequence(*a[3], where + " (stride)")) strides.push_back(integer(*s, where + " (stride)"));
  // Every element it views must lie inside the storage (no wrap-around on the way).
  bool inside = sizes.size() == strides.size() && offset >= 0;
  int64_t last = offset;
  bool empty = false;
  for (size_t d = 0; inside && d < sizes.size(); ++d) {
    inside = sizes[d] >= 0 && strides[d] >= 0;
    if (sizes[d] == 0) empty = true;
    if (inside && sizes[d] > 0) {
      int64_t reach = 0;
      inside = !__builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) && !__builtin_add_overflow(last, reach, &last);
    }
  }
  if (!inside || (!empty && last >= flat.numel()))
    fail(Status::Io, "checkpoint file '", path_, "': '", where, "' (size ", c10::IntArrayRef(sizes), ", stride ",
         c10::IntArrayRef(strides), ", offset ", offset, ") does not lie inside its storage of ", flat.numel(),
         " elements");
  if (empty) return at::empty(sizes, flat.options());
  return flat.as_strided(sizes, strides, offset);
}

NamedTensors read_torch_saved_state_dict(const std::string& path) {
  const TorchSavedFile file(path);
  const PickleNode& root = file.root();
  if (root.kind != PickleNode::Kind::Dict) file.refuse("the state dict", "a dict", root);
  NamedTensors tensors;
  for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
    const std::string& name = file.text(*root.items[i], "the state dict (a key)");
    tensors.emplace_back(name, file.tensor(*root.items[i + 1], name));
  }
  return tensors;
}

}  // namespace acc
