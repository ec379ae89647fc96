#include "checkpoint/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <ostream>

#include "common/error.h"
#include "common/files.h"

namespace acc {

c10::IValue python_dict(std::vector<std::pair<std::string, c10::IValue>> items) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  for (auto& [key, value] : items) dict.insert_or_assign(key, std::move(value));
  return dict;
}

c10::IValue python_int_dict(std::vector<std::pair<int64_t, c10::IValue>> items) {
  c10::impl::GenericDict dict(c10::IntType::get(), c10::AnyType::get());
  for (auto& [key, value] : items) dict.insert_or_assign(key, std::move(value));
  return dict;
}

c10::IValue python_list(std::vector<c10::IValue> items) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (auto& item : items) list.push_back(std::move(item));
  return list;
}

c10::IValue python_floats(const std::vector<double>& values) {
  return python_list(std::vector<c10::IValue>(values.begin(), values.end()));
}

c10::IValue python_tuple(std::vector<c10::IValue> items) { return c10::ivalue::Tuple::create(std::move(items)); }

namespace {

// Tensors on the CPU whose storages hold just their elements: the pickle writes whole storages (a
// view is copied out; a tensor that is all of its storage is written as it is).
c10::IValue compact_tensors(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor t = value.toTensor().detach().to(at::kCPU);
    const bool whole = t.is_contiguous() && t.storage_offset() == 0 && t.storage().nbytes() == t.nbytes();
    return whole ? t : t.contiguous().clone();
  }
  if (value.isGenericDict()) {
    auto dict = value.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    for (const auto& entry : dict) out.insert(entry.key(), compact_tensors(entry.value()));
    return out;
  }
  if (value.isList()) {
    c10::impl::GenericList out(c10::AnyType::get());
    for (const auto& item : value.toListRef()) out.push_back(compact_tensors(item));
    return out;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& item : value.toTupleRef().elements()) items.push_back(compact_tensors(item));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  return value;
}

}  // namespace

void save_torch_pickle(const std::string& path, const c10::IValue& value) {
  const c10::IValue compact = compact_tensors(value);
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.append(bytes, n); }, nullptr, nullptr, nullptr,
                              nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(compact);
  pickler.stop();
  // Streamed to the file: an optimizer's state is not held twice.
  write_stream(path, [&](std::ostream& out) {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
      out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
      return n;
    });
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    // The pickle names each storage by its index in tensorData(): torch.load reads it as data/<index>.
    const auto& tensors = pickler.tensorData();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto data = torch::jit::getWriteableTensorData(tensors[i]);
      writer.writeRecord("data/" + std::to_string(i), data.data(), data.sizeInBytes());
    }
    writer.writeEndOfFile();
  });
}

}  // namespace acc
