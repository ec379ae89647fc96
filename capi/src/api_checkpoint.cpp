// Safetensors reading and writing, save_model, and loading weights into a model.
#include "checkpoint/pretrained_layout.h"
#include "checkpoint/safetensors.h"
#include "guard.h"
#include "handles.h"
#include "model/pretrained_weights.h"
#include "parallel/merge_shards.h"

using namespace acc::capi;

extern "C" {

acc_status acc_tensor_list_save_safetensors(const acc_tensor_list* list, const char* path) {
  return guarded([&] {
    const auto& l = live(list, "list");
    acc::save_safetensors(path_arg(path, "path"), named_tensors(l));
  });
}

acc_status acc_tensor_list_load_safetensors(const char* path, acc_tensor_list** out) {
  return guarded([&] {
    const std::string file = path_arg(path, "path");
    out_param(out, "out");
    emit_named(out, acc::load_safetensors_copied(file));
  });
}

acc_status acc_model_load_safetensors(acc_model* model, const char* path, int strict, acc_string_list** missing,
                                      acc_string_list** unexpected) {
  return guarded([&] {
    auto& m = *live(model, "model").model;
    auto [lacking, extra] = acc::load_checkpoint_in_model(m, path_arg(path, "path"), strict != 0);
    if (missing) emit(missing, std::move(lacking));
    if (unexpected) emit(unexpected, std::move(extra));
  });
}

acc_status acc_save_model(acc_accelerator* a, acc_model* model, const char* dir, const char* max_shard_size) {
  return guarded([&] {
    auto& accelerator = accelerator_arg(a);
    auto& m = live(model, "model");
    accelerator.save_model(m.model, path_arg(dir, "dir"), max_shard_size ? max_shard_size : acc::kDefaultMaxShardSize);
  });
}

acc_status acc_merge_sharded_checkpoint(const char* checkpoint_dir, size_t model_index, const char* output_dir,
                                        const char* max_shard_size) {
  return guarded([&] {
    const std::string from = path_arg(checkpoint_dir, "checkpoint_dir"), to = path_arg(output_dir, "output_dir");
    acc::merge_sharded_checkpoint(from, model_index, to, max_shard_size ? max_shard_size : acc::kDefaultMaxShardSize);
  });
}

}  // extern "C"
