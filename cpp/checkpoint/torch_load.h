// Files torch.save wrote (a zip of data.pkl and one record per tensor storage), read without Python
// and without running anything they name: Python Accelerate's optimizer.bin, scheduler.bin,
// scaler.pt, random_states_<rank>.pkl and pytorch_model.bin. The archive is checked whole first
// (structure, every record's CRC-32, storages as large as the pickle says); tensors are rebuilt only
// from torch._utils._rebuild_tensor_v2 (and its Parameter and subclass wrappers) over those storages.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>

#include "checkpoint/pickle_reader.h"
#include "model/torchscript_archive.h"
#include "tensor/named_tensors.h"

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace acc {

class TorchSavedFile {
 public:
  // Reads and checks the file; an Io error names it.
  explicit TorchSavedFile(const std::string& path);

  const std::string& path() const { return path_; }
  const PickleNode& root() const { return pickle_.root(); }

  // The tensor `node` pickles, on the CPU (a view of its storage); anything else is an Io error
  // naming the file and `where`.
  at::Tensor tensor(const PickleNode& node, const std::string& where) const;
  // Whether `node` pickles a tensor.
  static bool holds_tensor(const PickleNode& node);

  // Typed reads of plain values; errors name the file and `where` (the key's path).
  const PickleNode& field(const PickleNode& dict, const std::string& key, const std::string& where) const;
  int64_t integer(const PickleNode& node, const std::string& where) const;
  double number(const PickleNode& node, const std::string& where) const;  // a float or an int
  bool flag(const PickleNode& node, const std::string& where) const;
  const std::string& text(const PickleNode& node, const std::string& where) const;
  // A list's or tuple's items.
  const std::vector<const PickleNode*>& sequence(const PickleNode& node, const std::string& where) const;
  [[noreturn]] void refuse(const std::string& where, const std::string& expected, const PickleNode& found) const;

 private:
  at::Tensor storage(const PickleNode& id, const std::string& where) const;

  std::string path_;
  std::unique_ptr<VerifiedArchive> archive_;                        // the file, read once, for reader_
  std::shared_ptr<caffe2::serialize::PyTorchStreamReader> reader_;  // storages are read as they are asked for
  Pickle pickle_;
  mutable std::map<std::string, at::Tensor> storages_;
};

// The tensors of a file torch.save wrote of a state dict (a dict of names to tensors, as
// pytorch_model.bin and PEFT's adapter_model.bin hold), in the dict's order; anything else is an Io
// error naming the file.
NamedTensors read_torch_saved_state_dict(const std::string& path);

}  // namespace acc
