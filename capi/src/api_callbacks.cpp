// Datasets and collation driven by callbacks of the host program, and the batch-size search that
// runs the host's training.
#include "common/batch_size_search.h"
#include "data/callback_dataset.h"
#include "guard.h"
#include "handles.h"
#include "host_callbacks.h"

using namespace acc::capi;

namespace {

// Runs a callback and takes ownership of the list it hands out.
template <typename Call>
std::vector<at::Tensor> call_back(const std::string& what, Call call) {
  acc_tensor_list* list = nullptr;
  invoke_host(what, [&] {
    const int code = call(&list);
    if (code != 0) acc_tensor_list_free(list);  // whatever the callback handed out before failing
    return code;
  });
  if (!list) acc::fail(acc::Status::Io, what, " returned no tensor list");
  auto* returned = static_cast<acc_tensor_list*>(object_if_live(list, ACC_HANDLE_TENSOR_LIST));
  if (!returned) acc::fail(acc::Status::Io, what, " returned an invalid tensor list");
  std::vector<at::Tensor> tensors = std::move(returned->tensors);
  release(list);
  return tensors;
}

// An empty list standing for "the stream has ended", so call_back's checks pass.
acc_tensor_list* make_end_marker() {
  acc_tensor_list* list = nullptr;
  emit(&list, std::vector<std::string>{}, std::vector<at::Tensor>{});
  return list;
}

}  // namespace

extern "C" {

acc_status acc_find_executable_batch_size(int64_t starting_batch_size, acc_batch_size_fn fn, void* user_data,
                                          int64_t* out_batch_size) {
  return guarded([&] {
    acc::require(fn != nullptr, "fn is NULL");
    int64_t* out = out_param(out_batch_size, "out_batch_size");
    *out = acc::find_executable_batch_size(starting_batch_size, [&](int64_t batch_size) {
      const HostCallbackRun run;
      const int code = fn(user_data, batch_size);
      if (code == ACC_OK) return true;
      if (code == ACC_ERR_OUT_OF_MEMORY) return false;
      run.failed_with_status("the run with batch size " + std::to_string(batch_size), code);  // ends the search
    });
  });
}

acc_status acc_dataset_from_callback(int64_t size, acc_sample_fn sample, void* user_data, acc_free_fn free_user_data,
                                     acc_dataset** out) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    acc::require(sample != nullptr, "sample is NULL");
    out_param(out, "out");
    acc::SampleFn fn = [sample, data](int64_t index) {
      return call_back("the dataset's sample callback for index " + std::to_string(index),
                       [&](acc_tensor_list** list) { return sample(data.get(), index, list); });
    };
    emit_dataset(out, std::make_shared<acc::CallbackDataset>(size, fn));
  });
}

acc_status acc_dataset_from_iterator(acc_next_fn next, acc_start_fn start, void* user_data,
                                     acc_free_fn free_user_data, int64_t size_hint, acc_dataset** out) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    acc::require(next != nullptr, "next is NULL");
    acc::require(size_hint >= -1, "size_hint is a number of samples, or -1 when unknown; got ", size_hint);
    out_param(out, "out");
    acc::CallbackIterable::NextFn next_fn = [next, data]() -> std::optional<acc::Sample> {
      bool ended = false;
      auto sample = call_back("the dataset's next callback", [&](acc_tensor_list** list) {
        const int code = next(data.get(), list);
        ended = code == 0 && *list == nullptr;
        if (ended) *list = make_end_marker();
        return code;
      });
      if (ended) return std::nullopt;
      return sample;
    };
    acc::CallbackIterable::StartFn start_fn;
    if (start)
      start_fn = [start, data](int64_t epoch) {
        invoke_host("the dataset's start callback for epoch " + std::to_string(epoch),
                    [&] { return start(data.get(), epoch); });
      };
    emit(out, nullptr, std::make_shared<acc::CallbackIterable>(next_fn, start_fn, size_hint));
  });
}

acc_status acc_dataloader_set_collate(acc_dataloader* dl, acc_collate_fn collate, void* user_data,
                                      acc_free_fn free_user_data) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    auto& loader = *live(dl, "dl").loader;
    acc::require(collate != nullptr, "collate is NULL");
    loader.set_collate([collate, data](const std::vector<std::vector<at::Tensor>>& samples) {
      // The samples as lists the callback can read; freed whatever happens.
      std::vector<std::unique_ptr<acc_tensor_list, void (*)(acc_tensor_list*)>> lists;
      std::vector<const acc_tensor_list*> views;
      for (const auto& sample : samples) {
        acc_tensor_list* list = nullptr;
        emit(&list, std::vector<std::string>(sample.size()), sample);
        lists.emplace_back(list, acc_tensor_list_free);
        views.push_back(list);
      }
      return call_back("the loader's collate callback", [&](acc_tensor_list** batch) {
        return collate(data.get(), views.data(), views.size(), batch);
      });
    });
  });
}

acc_status acc_dataloader_skip_first_batches(acc_dataloader* dl, int64_t batches) {
  return guarded([&] { live(dl, "dl").loader->skip_first_batches(batches); });
}

}  // extern "C"
