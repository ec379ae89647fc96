// Datasets and data loaders.
#include <limits>

#include "common/device.h"
#include "data/idx.h"
#include "data/prepare_data_loader.h"
#include "guard.h"
#include "handles.h"
#include "tensor/mmap.h"

using namespace acc::capi;

namespace {

const std::shared_ptr<acc::Dataset>& map_dataset(const acc_dataset* ds) {
  const auto& d = live(ds, "ds");
  if (!d.dataset) acc::fail(acc::Status::InvalidArgument, "ds is an iterable dataset (a stream): it has no samples by index");
  return d.dataset;
}

void emit_fields(acc_tensor_list** out, std::vector<at::Tensor> fields) {
  emit(out, std::vector<std::string>(fields.size()), std::move(fields));
}

}  // namespace

extern "C" {

acc_status acc_dataset_from_tensors(const acc_tensor* const* fields, size_t n, acc_dataset** out) {
  return guarded([&] {
    auto tensors = tensors_arg(fields, n, "fields");
    out_param(out, "out");
    emit_dataset(out, std::make_shared<acc::TensorDataset>(std::move(tensors)));
  });
}

acc_status acc_tensor_from_file_mmap(const char* path, uint64_t offset, acc_dtype dtype, const int64_t* dims,
                                     size_t ndim, acc_tensor** out) {
  return guarded([&] {
    const std::string file = path_arg(path, "path");
    acc::require(dims || ndim == 0, "dims is NULL but ndim is ", ndim);
    out_param(out, "out");
    emit(out, acc::mmap_tensor(file, offset, to_scalar_type(dtype), std::vector<int64_t>(dims, dims + ndim)));
  });
}

acc_status acc_tensor_from_idx_file(const char* path, acc_tensor** out) {
  return guarded([&] {
    const std::string file = path_arg(path, "path");
    out_param(out, "out");
    emit(out, acc::read_idx(file));
  });
}

acc_status acc_dataset_from_idx(const char* images_path, const char* labels_path, acc_dataset** out) {
  return guarded([&] {
    const std::string images = path_arg(images_path, "images_path");
    const std::string labels = path_arg(labels_path, "labels_path");
    out_param(out, "out");
    emit_dataset(out, acc::idx_dataset(images, labels));
  });
}

acc_status acc_dataset_subset(acc_dataset* ds, int64_t start, int64_t count, acc_dataset** out) {
  return guarded([&] {
    auto& base = map_dataset(ds);
    out_param(out, "out");
    emit_dataset(out, std::make_shared<acc::SubsetDataset>(base, start, count));
  });
}

acc_status acc_dataset_size(const acc_dataset* ds, int64_t* out) {
  return guarded([&] {
    const auto& d = live(ds, "ds");
    *out_param(out, "out") = d.dataset ? d.dataset->size() : d.stream->size_hint();
  });
}

acc_status acc_dataset_get(const acc_dataset* ds, int64_t index, acc_tensor_list** out) {
  return guarded([&] {
    auto& dataset = *map_dataset(ds);
    out_param(out, "out");
    emit_fields(out, dataset.get(index));
  });
}

void acc_dataset_free(acc_dataset* ds) { release(ds); }

acc_status acc_dataloader_create(acc_dataset* ds, const acc_options* opts, acc_dataloader** out) {
  return guarded([&] {
    const auto& d = live(ds, "ds");
    auto options = acc::dataloader_options(options_arg(opts, acc::OptionsKind::DataLoader));
    out_param(out, "out");
    emit(out, acc::make_data_loader(d.dataset, d.stream, std::move(options)));
  });
}

acc_status acc_dataloader_create_from_batches(acc_dataset* ds, const int64_t* indices, const size_t* batch_sizes,
                                             size_t num_batches, const acc_options* opts, acc_dataloader** out) {
  return guarded([&] {
    const auto& d = live(ds, "ds");
    acc::require(batch_sizes != nullptr || num_batches == 0, "batch_sizes is NULL");
    const auto given = options_arg(opts, acc::OptionsKind::DataLoader);
    // Every index is read from the array: the sizes' sum must be a count that can exist.
    constexpr size_t kMaxIndices = static_cast<size_t>(std::numeric_limits<int64_t>::max()) / sizeof(int64_t);
    size_t total = 0;
    for (size_t b = 0; b < num_batches; ++b) {
      acc::require(batch_sizes[b] <= kMaxIndices - total, "batch_sizes[", b, "] = ", batch_sizes[b],
                   ": the batches' sizes add up past any array of indices");
      total += batch_sizes[b];
    }
    acc::require(indices != nullptr || total == 0, "indices is NULL");
    // The C arrays (batches laid end to end) become the loader's batches.
    std::vector<std::vector<int64_t>> batches(num_batches);
    for (size_t b = 0, at = 0; b < num_batches; at += batch_sizes[b], ++b)
      batches[b].assign(indices + at, indices + at + batch_sizes[b]);
    auto options = acc::dataloader_options(given, std::move(batches));
    out_param(out, "out");
    emit(out, acc::make_data_loader(d.dataset, d.stream, std::move(options)));
  });
}

acc_status acc_dataloader_next(acc_dataloader* dl, acc_tensor_list** out) {
  return guarded([&] {
    auto& loader = *live(dl, "dl").loader;
    out_param(out, "out");
    auto batch = loader.next();
    if (batch)
      emit_fields(out, std::move(*batch));
    else
      *out = nullptr;
  });
}

acc_status acc_dataloader_length(const acc_dataloader* dl, int64_t* out) {
  return guarded([&] { *out_param(out, "out") = live(dl, "dl").loader->length(); });
}

acc_status acc_dataloader_epoch(const acc_dataloader* dl, int64_t* out) {
  return guarded([&] { *out_param(out, "out") = live(dl, "dl").loader->epoch(); });
}

acc_status acc_dataloader_set_epoch(acc_dataloader* dl, int64_t epoch) {
  return guarded([&] { live(dl, "dl").loader->set_epoch(epoch); });
}

acc_status acc_dataloader_total_batch_size(const acc_dataloader* dl, int64_t* out) {
  return guarded([&] { *out_param(out, "out") = live(dl, "dl").loader->total_batch_size(); });
}

acc_status acc_dataloader_total_dataset_length(const acc_dataloader* dl, int64_t* out) {
  return guarded([&] { *out_param(out, "out") = live(dl, "dl").loader->total_dataset_length(); });
}

acc_status acc_dataloader_end_of_epoch(const acc_dataloader* dl, int* out) {
  return guarded([&] { *out_param(out, "out") = live(dl, "dl").loader->end_of_epoch() ? 1 : 0; });
}

acc_status acc_dataloader_end_epoch(acc_dataloader* dl) {
  return guarded([&] { live(dl, "dl").loader->end_epoch(); });
}

acc_status acc_dataloader_iter(acc_dataloader* dl) {
  return guarded([&] { live(dl, "dl").loader->create_iterator(); });
}

acc_status acc_dataloader_in_epoch(const acc_dataloader* dl, int* out) {
  return guarded([&] { *out_param(out, "out") = live(dl, "dl").loader->in_epoch() ? 1 : 0; });
}

void acc_dataloader_free(acc_dataloader* dl) {
  release(dl);  // a loader freed from its own worker's callback goes once that fetch ends (make_loader)
}

}  // extern "C"
