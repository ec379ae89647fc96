// save_state / load_state, custom checkpoint state and hooks, save(), get_state_dict.
#include "guard.h"
#include "handles.h"
#include "host_callbacks.h"

using namespace acc::capi;

namespace {

// What a save callback appends to a sink made for the call; the sink is released afterwards, so
// one kept past the callback is refused as a dead handle.
std::string collect_bytes(const std::function<void(acc_bytes*)>& fill) {
  acc_bytes* sink = nullptr;
  emit(&sink);
  struct Release {
    acc_bytes* sink;
    ~Release() { release(sink); }
  } release_sink{sink};
  fill(sink);
  return std::move(static_cast<acc_bytes*>(object_if_live(sink, ACC_HANDLE_BYTES))->data);  // (made just above)
}

void emit_dir(char** out_dir, const std::string& dir) {
  if (out_dir) *out_dir = owned_string(dir);
}

const char* hook_kind_name(acc::CheckpointHooks::Kind kind) {
  return kind == acc::CheckpointHooks::Kind::Save ? "the save_state pre-hook" : "the load_state pre-hook";
}

acc::Accelerator::CheckpointHook hook_of(acc_checkpoint_hook_fn hook, std::shared_ptr<void> data, const char* what) {
  acc::require(hook != nullptr, "hook is NULL");
  return [hook, data, what](acc::CheckpointModels&, const std::string& dir) {
    invoke_host(std::string(what) + " for '" + dir + "'", [&] { return hook(data.get(), dir.c_str()); });
  };
}

// A hook with its models: they are handed over as a handle made for the call, released afterwards,
// so one kept past the hook is refused as a dead handle.
acc::Accelerator::CheckpointHook models_hook_of(acc_checkpoint_models_hook_fn hook, std::shared_ptr<void> data,
                                                const char* what) {
  acc::require(hook != nullptr, "hook is NULL");
  return [hook, data, what](acc::CheckpointModels& models, const std::string& dir) {
    acc_checkpoint_models* handle = nullptr;
    emit(&handle, &models);
    struct Release {
      acc_checkpoint_models* handle;
      ~Release() { release(handle); }
    } release_handle{handle};
    invoke_host(std::string(what) + " for '" + dir + "'", [&] { return hook(data.get(), handle, dir.c_str()); });
  };
}

// One registration of either kind; out_id (may be NULL: the plain registrations) gets the hook's id.
acc_status register_state_pre_hook(acc_accelerator* a, acc::CheckpointHooks::Kind kind, acc_checkpoint_hook_fn hook,
                                   void* user_data, acc_free_fn free_user_data, uint64_t* out_id) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    auto& x = accelerator_arg(a);
    const uint64_t id = x.register_state_pre_hook(kind, hook_of(hook, std::move(data), hook_kind_name(kind)));
    if (out_id) *out_id = id;
  });
}

acc_status register_models_pre_hook(acc_accelerator* a, acc::CheckpointHooks::Kind kind,
                                    acc_checkpoint_models_hook_fn hook, void* user_data, acc_free_fn free_user_data,
                                    uint64_t* out_id) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    auto& x = accelerator_arg(a);
    const uint64_t id = x.register_state_pre_hook(kind, models_hook_of(hook, std::move(data), hook_kind_name(kind)));
    if (out_id) *out_id = id;
  });
}

acc::CheckpointModels& checkpoint_models_arg(const acc_checkpoint_models* models) {
  return *live(models, "models").models;
}

}  // namespace

extern "C" {

acc_status acc_save_state(acc_accelerator* a, const char* dir, char** out_dir) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    emit_dir(out_dir, x.save_state(dir ? dir : ""));
  });
}

acc_status acc_load_state(acc_accelerator* a, const char* dir, char** out_dir) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    emit_dir(out_dir, x.load_state(dir ? dir : ""));
  });
}

acc_status acc_bytes_append(acc_bytes* sink, const void* data, size_t size) {
  return guarded([&] {
    auto& bytes = live(sink, "sink").data;
    acc::require(data != nullptr || size == 0, "data is NULL but size is ", size);
    if (size) bytes.append(static_cast<const char*>(data), size);
  });
}

acc_status acc_register_for_checkpointing(acc_accelerator* a, acc_state_save_fn save, acc_state_load_fn load,
                                          void* user_data, acc_free_fn free_user_data) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    auto& x = accelerator_arg(a);
    acc::require(save != nullptr && load != nullptr, "save and load callbacks must both be given");
    x.register_for_checkpointing(
        [save, data] {
          return collect_bytes([&](acc_bytes* sink) {
            invoke_host("a registered object's save callback", [&] { return save(data.get(), sink); });
          });
        },
        [load, data](const std::string& bytes) {
          invoke_host("a registered object's load callback",
                      [&] { return load(data.get(), bytes.data(), bytes.size()); });
        });
  });
}

acc_status acc_register_save_state_pre_hook(acc_accelerator* a, acc_checkpoint_hook_fn hook, void* user_data,
                                            acc_free_fn free_user_data) {
  return register_state_pre_hook(a, acc::CheckpointHooks::Kind::Save, hook, user_data, free_user_data, nullptr);
}

acc_status acc_register_load_state_pre_hook(acc_accelerator* a, acc_checkpoint_hook_fn hook, void* user_data,
                                            acc_free_fn free_user_data) {
  return register_state_pre_hook(a, acc::CheckpointHooks::Kind::Load, hook, user_data, free_user_data, nullptr);
}

acc_status acc_register_save_state_pre_hook_removable(acc_accelerator* a, acc_checkpoint_hook_fn hook, void* user_data,
                                                      acc_free_fn free_user_data, uint64_t* out_id) {
  return register_state_pre_hook(a, acc::CheckpointHooks::Kind::Save, hook, user_data, free_user_data, out_id);
}

acc_status acc_register_load_state_pre_hook_removable(acc_accelerator* a, acc_checkpoint_hook_fn hook, void* user_data,
                                                      acc_free_fn free_user_data, uint64_t* out_id) {
  return register_state_pre_hook(a, acc::CheckpointHooks::Kind::Load, hook, user_data, free_user_data, out_id);
}

acc_status acc_register_save_state_models_pre_hook(acc_accelerator* a, acc_checkpoint_models_hook_fn hook,
                                                   void* user_data, acc_free_fn free_user_data, uint64_t* out_id) {
  return register_models_pre_hook(a, acc::CheckpointHooks::Kind::Save, hook, user_data, free_user_data, out_id);
}

acc_status acc_register_load_state_models_pre_hook(acc_accelerator* a, acc_checkpoint_models_hook_fn hook,
                                                   void* user_data, acc_free_fn free_user_data, uint64_t* out_id) {
  return register_models_pre_hook(a, acc::CheckpointHooks::Kind::Load, hook, user_data, free_user_data, out_id);
}

acc_status acc_checkpoint_models_count(const acc_checkpoint_models* models, size_t* out) {
  return guarded([&] {
    const auto& m = checkpoint_models_arg(models);
    out_param(out, "out");
    *out = m.size();
  });
}

acc_status acc_checkpoint_models_get(const acc_checkpoint_models* models, size_t i, acc_model** out, size_t* index) {
  return guarded([&] {
    const auto& m = checkpoint_models_arg(models);
    out_param(out, "out");
    const acc::CheckpointModels::Entry& entry = m.at(i);
    emit(out, entry.model);
    if (index) *index = entry.index;
  });
}

acc_status acc_checkpoint_models_remove(acc_checkpoint_models* models, size_t i) {
  return guarded([&] { checkpoint_models_arg(models).remove(i); });
}

acc_status acc_remove_state_pre_hook(acc_accelerator* a, uint64_t id) {
  return guarded([&] { accelerator_arg(a).remove_state_pre_hook(id); });
}

acc_status acc_save(acc_accelerator* a, const acc_tensor_list* tensors, const char* path) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    x.save(named_tensors(live(tensors, "tensors")), path_arg(path, "path"));
  });
}

acc_status acc_get_state_dict(acc_accelerator* a, acc_model* model, int unwrap, acc_tensor_list** out) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    auto& m = live(model, "model");
    out_param(out, "out");
    emit_named(out, x.get_state_dict(m.model, unwrap != 0));
  });
}

}  // extern "C"
