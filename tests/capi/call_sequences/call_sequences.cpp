// Random sequences of C API calls on a small pool of handles, each live, NULL or already freed: the
// calls a program makes in an order nobody planned (a step before backward, a loader freed under
// its accelerator, a save in the middle of an epoch, LoRA after the optimizer, a scheduler chained
// after it stepped...). Each sequence runs in a child process of its own and must end: no signal,
// no hang, no ACC_ERR_INTERNAL, a message with every error. Half of the pool's picks are coherent
// training steps (next, forward, loss, backward, clip, step, schedule), so that the calls around
// them meet objects in every state.
//
// Usage: acc_call_sequences FIRST_SEED COUNT [CALLS_PER_SEQUENCE]; a failing sequence's last calls
// are printed (all of them with ACC_CALL_SEQUENCES_WHOLE_LOG=1; every sequence's calls with
// ACC_CALL_SEQUENCES_SHOW=1; rerun one with COUNT 1).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "accelerate.h"

namespace {

constexpr int kTimeoutSeconds = 60;
constexpr int kExitNoMessage = 3, kExitInternal = 4;

std::mt19937_64 rng;
int log_fd = -1;
std::string work_dir;  // the sequence's own folder: checkpoints, saved models, tensor files

int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }
bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

// Writes the call and its status to the sequence's log; a failure without a message, or an
// internal error, ends the sequence as a finding.
void check(const char* call, acc_status status) {
  const char* message = status == ACC_OK ? "" : acc_last_error_message();
  dprintf(log_fd, "%s -> %s %s\n", call, acc_status_name(status), message ? message : "(null)");
  if (status != ACC_OK && (!message || !*message)) {
    dprintf(log_fd, "FINDING: an error without a message\n");
    _exit(kExitNoMessage);
  }
  if (status == ACC_ERR_INTERNAL) {
    dprintf(log_fd, "FINDING: ACC_ERR_INTERNAL\n");
    _exit(kExitInternal);
  }
}
#define CALL(name, expr) check(name, (expr))

// The pool. A freed handle may stay in its slot: every later use must be refused.
acc_accelerator* accelerators[3];
acc_model* models[5];
acc_optimizer* optimizers[3];
acc_scheduler* schedulers[3];
acc_dataset* datasets[3];
acc_dataloader* loaders[3];
acc_tensor* tensors[8];
acc_tensor_list* lists[4];
acc_averaged_model* averages[2];
std::vector<const void*> freed;

bool is_freed(const void* h) { return std::find(freed.begin(), freed.end(), h) != freed.end(); }

// Mostly a live handle of the kind, else any slot (NULL or freed).
template <class T, size_t N>
T*& any(T* (&slots)[N]) {
  if (coin(0.85)) {
    int live[N], n = 0;
    for (size_t i = 0; i < N; ++i)
      if (slots[i] && !is_freed(slots[i])) live[n++] = static_cast<int>(i);
    if (n) return slots[live[pick(n)]];
  }
  return slots[pick(N)];
}

// A new handle into an empty slot, else over a random one (the old handle is left to the process's end).
template <class T, size_t N>
void keep(T* (&slots)[N], T* h) {
  if (!h) return;
  for (auto& s : slots)
    if (!s || is_freed(s)) {
      s = h;
      return;
    }
  slots[pick(N)] = h;
}

template <class T, class Free>
void release(T*& h, Free free_handle) {
  free_handle(h);
  if (coin(0.7))
    h = nullptr;
  else if (h)
    freed.push_back(h);
}

acc_options* options(acc_options_kind kind) {
  acc_options* o = nullptr;
  CALL("options_create", acc_options_create(kind, &o));
  return o;
}
void set(acc_options* o, const char* key, const char* value) { CALL("options_set", acc_options_set(o, key, value)); }

const char* const kSpecs[] = {
    R"([{"type":"linear","in_features":4,"out_features":3}])",
    R"([{"type":"linear","in_features":4,"out_features":8},{"type":"relu"},{"type":"dropout","p":0.2},)"
    R"({"type":"linear","in_features":8,"out_features":3}])",
    R"([{"type":"linear","in_features":4,"out_features":6},{"type":"layernorm","normalized_shape":6},)"
    R"({"type":"linear","in_features":6,"out_features":3}])"};
const char* const kAlgorithms[] = {"adamw", "sgd", "adam", "rmsprop", "adagrad", "lion", "adafactor", "rprop", "nadam"};

void create_accelerator() {
  acc_options* o = options(ACC_OPTIONS_ACCELERATOR);
  if (coin(0.4)) set(o, "mixed_precision", coin(0.9) ? "bf16" : "fp16");  // fp16 needs a GPU: refused
  if (coin(0.4)) set(o, "gradient_accumulation_steps", coin(0.5) ? "2" : "3");
  if (coin(0.2)) set(o, "split_batches", "true");
  if (coin(0.2)) set(o, "zero_stage", std::to_string(pick(4)).c_str());
  if (coin(0.4)) set(o, "project_dir", work_dir.c_str());
  if (coin(0.3)) set(o, "log_with", "all");
  CALL("accelerator_create", acc_accelerator_create(o, &any(accelerators)));
  acc_options_free(o);
}

void create_model() { CALL("model_from_spec", acc_model_from_spec(kSpecs[pick(3)], &any(models))); }

void create_optimizer() {
  acc_options* o = coin(0.5) ? options(ACC_OPTIONS_OPTIMIZER) : nullptr;
  if (o) set(o, "lr", "0.01");
  acc_optimizer* out = nullptr;
  CALL("optimizer_create", acc_optimizer_create(any(models), kAlgorithms[pick(9)], o, &out));
  keep(optimizers, out);
  acc_options_free(o);
}

// A schedule with the options it needs; `names` the choice.
acc_options* schedule_options(const char* name) {
  acc_options* o = options(ACC_OPTIONS_SCHEDULER);
  set(o, "num_training_steps", std::to_string(1 + pick(20)).c_str());
  if (coin(0.5)) set(o, "num_warmup_steps", std::to_string(pick(4)).c_str());
  if (!strcmp(name, "one_cycle")) set(o, "max_lr", "0.1"), set(o, "total_steps", std::to_string(1 + pick(20)).c_str());
  if (!strcmp(name, "exponential")) set(o, "gamma", "0.9");
  if (!strcmp(name, "step")) set(o, "step_size", "2");
  if (!strcmp(name, "cyclic")) set(o, "base_lr", "0.001"), set(o, "max_lr", "0.01");
  if (!strcmp(name, "cosine_annealing")) set(o, "T_max", "5");
  return o;
}

void create_scheduler() {
  const char* const names[] = {
      "linear", "cosine",    "constant", "step", "one_cycle", "exponential", "reduce_lr_on_plateau",
      "cyclic", "polynomial"};
  const char* name = names[pick(9)];
  acc_options* o = schedule_options(name);
  acc_scheduler* out = nullptr;
  CALL("scheduler_create", acc_scheduler_create(any(optimizers), name, o, &out));
  keep(schedulers, out);
  acc_options_free(o);
}

void extend_scheduler() {
  const char* const names[] = {"constant_lr", "exponential", "linear_lr", "one_cycle", "cosine_annealing"};
  const char* name = names[pick(5)];
  acc_options* o = schedule_options(name);
  if (coin(0.5))
    CALL("scheduler_then", acc_scheduler_then(any(schedulers), pick(5), name, o));
  else
    CALL("scheduler_chain", acc_scheduler_chain(any(schedulers), name, o));
  acc_options_free(o);
}

void create_dataset() {
  const int64_t n = 1 + pick(13);
  std::vector<float> x(n * 4);
  for (auto& v : x) v = static_cast<float>(pick(200) - 100) / 50.f;
  std::vector<int64_t> y(n);
  for (auto& v : y) v = pick(3);
  const int64_t x_dims[2] = {n, 4}, y_dims[1] = {n};
  acc_tensor *tx = nullptr, *ty = nullptr;
  CALL("tensor_from_host", acc_tensor_from_host(x.data(), x.size() * sizeof(float), x_dims, 2, ACC_DTYPE_FLOAT32, &tx));
  CALL("tensor_from_host", acc_tensor_from_host(y.data(), y.size() * sizeof(int64_t), y_dims, 1, ACC_DTYPE_INT64, &ty));
  const acc_tensor* fields[2] = {tx, ty};
  acc_dataset* out = nullptr;
  CALL("dataset_from_tensors", acc_dataset_from_tensors(fields, 2, &out));
  keep(datasets, out);
  acc_tensor_free(tx);
  acc_tensor_free(ty);
}

void create_loader() {
  acc_options* o = options(ACC_OPTIONS_DATALOADER);
  set(o, "batch_size", std::to_string(1 + pick(5)).c_str());
  if (coin(0.5)) set(o, "shuffle", "true");
  if (coin(0.3)) set(o, "drop_last", "true");
  if (coin(0.3)) set(o, "num_workers", coin(0.5) ? "1" : "2");
  acc_dataloader* out = nullptr;
  CALL("dataloader_create", acc_dataloader_create(any(datasets), o, &out));
  keep(loaders, out);
  acc_options_free(o);
}

void prepare_all() {
  acc_model* m = any(models);
  acc_optimizer* o = any(optimizers);
  acc_dataloader* d = any(loaders);
  acc_scheduler* s = any(schedulers);
  acc_model** pm = coin(0.7) ? &m : nullptr;
  acc_optimizer** po = coin(0.7) ? &o : nullptr;
  acc_dataloader** pd = coin(0.7) ? &d : nullptr;
  acc_scheduler** ps = coin(0.5) ? &s : nullptr;
  const acc_status status = acc_prepare(any(accelerators), pm, po, pd, ps);
  check("prepare", status);
  if (status != ACC_OK) return;  // on success each handle passed in was freed and replaced
  if (pm) keep(models, m);
  if (po) keep(optimizers, o);
  if (pd) keep(loaders, d);
  if (ps) keep(schedulers, s);
}

acc_placement placement() { return static_cast<acc_placement>(pick(3) - 1); }

// One training step on handles picked at random (mostly live): what a loop does.
void train_step() {
  acc_tensor_list* batch = nullptr;
  CALL("step: dataloader_next", acc_dataloader_next(any(loaders), &batch));
  if (!batch) return;
  acc_tensor *x = nullptr, *y = nullptr, *logits = nullptr, *loss = nullptr;
  CALL("step: tensor_list_get", acc_tensor_list_get(batch, 0, &x));
  CALL("step: tensor_list_get", acc_tensor_list_get(batch, 1, &y));
  acc_accelerator* acc = any(accelerators);
  if (coin(0.5)) CALL("step: accumulate_begin", acc_accumulate_begin(acc));
  CALL("step: model_forward1", acc_model_forward1(any(models), x, ACC_FORWARD_DEFAULT, &logits));
  CALL("step: loss_cross_entropy", acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
  CALL("step: backward", acc_backward(acc, loss));
  if (coin(0.3)) CALL("step: clip_grad_norm", acc_clip_grad_norm(acc, any(models), 1.0, 2.0, nullptr));
  acc_optimizer* opt = any(optimizers);
  CALL("step: optimizer_step", acc_optimizer_step(opt));
  if (coin(0.7)) CALL("step: scheduler_step", acc_scheduler_step(any(schedulers)));
  CALL("step: optimizer_zero_grad", acc_optimizer_zero_grad(opt));
  if (coin(0.5)) CALL("step: accumulate_end", acc_accumulate_end(acc));
  if (coin(0.3))
    keep(tensors, loss);
  else
    acc_tensor_free(loss);
  acc_tensor_free(x);
  acc_tensor_free(y);
  acc_tensor_free(logits);
  if (coin(0.3))
    keep(lists, batch);
  else
    acc_tensor_list_free(batch);
}

std::string in_work_dir(const char* name, int variants) {
  return work_dir + "/" + name + std::to_string(pick(variants));
}

void free_something() {
  switch (pick(8)) {
    case 0:
      release(any(accelerators), acc_accelerator_free);
      break;
    case 1:
      release(any(models), acc_model_free);
      break;
    case 2:
      release(any(optimizers), acc_optimizer_free);
      break;
    case 3:
      release(any(schedulers), acc_scheduler_free);
      break;
    case 4:
      release(any(datasets), acc_dataset_free);
      break;
    case 5:
      release(any(loaders), acc_dataloader_free);
      break;
    case 6:
      release(any(tensors), acc_tensor_free);
      break;
    default:
      release(any(lists), acc_tensor_list_free);
      break;
  }
}

// Callbacks: each may fail, hand back something malformed, or (on the thread running the sequence,
// not nested) make one more call of the sequence's own, which may free the very object it serves.
std::thread::id sequence_thread;
int callback_depth = 0;
void call_any();
void maybe_call_back_in() {
  if (callback_depth > 0 || std::this_thread::get_id() != sequence_thread || !coin(0.3)) return;
  ++callback_depth;
  call_any();
  --callback_depth;
}

int lambda_factor(void*, int64_t step, double* factor) {
  maybe_call_back_in();
  const int kind = pick(20);
  if (kind == 0) {
    acc_callback_set_error("the factor refuses");
    return 1;
  }
  *factor = kind == 1 ? NAN : kind == 2 ? -1.0 : 1.0 / static_cast<double>(1 + step);
  return 0;
}

acc_tensor* zeros(std::vector<int64_t> dims, acc_dtype dtype) {
  acc_tensor* t = nullptr;
  CALL("callback: tensor_zeros", acc_tensor_zeros(dims.data(), dims.size(), dtype, nullptr, &t));
  return t;
}

// A list of (name, tensor) fields; the tensors are freed here (the list holds its own references).
acc_tensor_list* fields(std::vector<acc_tensor*> tensors) {
  acc_tensor_list* list = nullptr;
  CALL("callback: tensor_list_create", acc_tensor_list_create(&list));
  for (acc_tensor* t : tensors) {
    CALL("callback: tensor_list_append", acc_tensor_list_append(list, nullptr, t));
    acc_tensor_free(t);
  }
  return list;
}

int sample(void*, int64_t, acc_tensor_list** out) {
  maybe_call_back_in();
  switch (pick(20)) {
    case 0:
      acc_callback_set_error("the sample refuses");
      return 1;
    case 1:
      *out = nullptr;
      return 0;  // nothing handed back
    case 2:
      *out = fields({zeros({3}, ACC_DTYPE_FLOAT32), zeros({}, ACC_DTYPE_INT64)});
      return 0;  // odd shape
    case 3:
      *out = fields({zeros({4}, ACC_DTYPE_FLOAT32)});
      return 0;  // a field short
    default:
      *out = fields({zeros({4}, ACC_DTYPE_FLOAT32), zeros({}, ACC_DTYPE_INT64)});
      return 0;
  }
}

int stream_next(void* user_data, acc_tensor_list** out) {
  int64_t& left = *static_cast<int64_t*>(user_data);
  if (left-- <= 0 || pick(15) == 0) {
    *out = nullptr;  // the stream's end
    return 0;
  }
  return sample(nullptr, 0, out);
}

int stream_start(void* user_data, int64_t) {
  maybe_call_back_in();
  *static_cast<int64_t*>(user_data) = 1 + pick(12);
  return pick(25) == 0 ? (acc_callback_set_error("the stream cannot start"), 1) : 0;
}

int collate(void*, const acc_tensor_list* const*, size_t n, acc_tensor_list** out) {
  maybe_call_back_in();
  const int64_t rows = static_cast<int64_t>(n);
  switch (pick(15)) {
    case 0:
      acc_callback_set_error("the collate refuses");
      return 1;
    case 1:
      *out = nullptr;
      return 0;
    case 2:
      *out = fields({zeros({rows + 1, 4}, ACC_DTYPE_FLOAT32), zeros({rows}, ACC_DTYPE_INT64)});
      return 0;
    default:
      *out = fields({zeros({rows, 4}, ACC_DTYPE_FLOAT32), zeros({rows}, ACC_DTYPE_INT64)});
      return 0;
  }
}

void free_counter(void* user_data) { delete static_cast<int64_t*>(user_data); }

// A registered object's state: a few bytes, or a failure, or bytes that do not load.
int save_object(void*, acc_bytes* sink) {
  maybe_call_back_in();
  if (pick(15) == 0) return (acc_callback_set_error("the object cannot save"), 1);
  const char bytes[] = "state";
  return acc_bytes_append(sink, bytes, pick(6)) == ACC_OK ? 0 : 1;
}
int load_object(void*, const void*, size_t size) {
  maybe_call_back_in();
  return size > 4 || pick(4) ? 0 : (acc_callback_set_error("the object cannot load"), 1);
}
int checkpoint_hook(void*, const char*) {
  maybe_call_back_in();
  return pick(10) == 0 ? (acc_callback_set_error("the hook refuses"), 1) : 0;
}
int batch_size_attempt(void*, int64_t batch_size) {
  maybe_call_back_in();
  return batch_size > 3 && pick(2) ? ACC_ERR_OUT_OF_MEMORY : pick(6) == 0 ? ACC_ERR_INVALID_ARGUMENT : ACC_OK;
}

void register_callbacks() {
  acc_accelerator* acc = any(accelerators);
  switch (pick(4)) {
    case 0:
      CALL("register_for_checkpointing",
           acc_register_for_checkpointing(acc, save_object, load_object, nullptr, nullptr));
      break;
    case 1:
      CALL("register_save_state_pre_hook", acc_register_save_state_pre_hook(acc, checkpoint_hook, nullptr, nullptr));
      break;
    case 2:
      CALL("register_load_state_pre_hook", acc_register_load_state_pre_hook(acc, checkpoint_hook, nullptr, nullptr));
      break;
    default: {
      int64_t found = 0;
      CALL("find_executable_batch_size",
           acc_find_executable_batch_size(1 + pick(64), batch_size_attempt, nullptr, &found));
    }
  }
}

// Odd shapes and values for the tensor functions.
void tensor_calls() {
  acc_tensor* t = any(tensors);
  acc_tensor* out = nullptr;
  switch (pick(8)) {
    case 0: {
      const int64_t dims[3] = {-1, pick(3), 2};
      CALL("tensor_reshape", acc_tensor_reshape(t, dims, 1 + pick(3), &out));
      break;
    }
    case 1:
      CALL("tensor_to", acc_tensor_to(t, coin(0.8) ? "cpu" : "cuda:7", static_cast<acc_dtype>(pick(11)), &out));
      break;
    case 2:
      CALL("tensor_argmax", acc_tensor_argmax(t, pick(4) - 2, pick(2), &out));
      break;
    case 3: {
      double v;
      CALL("tensor_item", acc_tensor_item(t, &v));
      break;
    }
    case 4:
      CALL("tensor_grad", acc_tensor_grad(t, &out));
      break;
    case 5:
      CALL("tensor_backward", acc_tensor_backward(t));
      break;
    case 6: {
      int64_t n;
      CALL("tensor_count_equal", acc_tensor_count_equal(t, any(tensors), &n));
      break;
    }
    default:
      CALL("backward_ex", acc_backward_ex(any(accelerators), t, pick(2), pick(2)));
      break;
  }
  keep(tensors, out);
}

void model_files() {
  acc_model* m = any(models);
  const std::string lora = in_work_dir("lora", 2), script = in_work_dir("model", 2) + ".pt";
  switch (pick(7)) {
    case 0:
      CALL("model_save_lora", acc_model_save_lora(m, lora.c_str()));
      break;
    case 1:
      CALL("model_load_lora", acc_model_load_lora(m, lora.c_str()));
      break;
    case 2:
      CALL("model_merge_lora", acc_model_merge_lora(m));
      break;
    case 3:
      CALL("model_save_torchscript", acc_model_save_torchscript(m, script.c_str()));
      break;
    case 4: {
      acc_model* out = nullptr;
      CALL("model_load_torchscript", acc_model_load_torchscript(script.c_str(), &out));
      keep(models, out);
      break;
    }
    case 5:
      CALL("model_update_bn", acc_model_update_bn(m, any(loaders)));
      break;
    default:
      CALL("averaged_model_copy_to", acc_averaged_model_copy_to(any(averages), m));
      break;
  }
}

void data_calls() {
  switch (pick(5)) {
    case 0: {
      acc_dataset* out = nullptr;
      CALL("dataset_subset", acc_dataset_subset(any(datasets), pick(8) - 1, pick(8) - 1, &out));
      keep(datasets, out);
      break;
    }
    case 1:
      CALL("dataloader_set_epoch", acc_dataloader_set_epoch(any(loaders), pick(4) - 1));
      break;
    case 2: {
      const int64_t indices[5] = {0, 1, 2, pick(20) - 2, 0};
      const size_t sizes[2] = {2, static_cast<size_t>(pick(4))};
      acc_dataloader* out = nullptr;
      CALL("dataloader_create_from_batches",
           acc_dataloader_create_from_batches(any(datasets), indices, sizes, 2, nullptr, &out));
      keep(loaders, out);
      break;
    }
    case 3: {
      acc_tensor_list* out = nullptr;
      CALL("dataset_get", acc_dataset_get(any(datasets), pick(15) - 1, &out));
      keep(lists, out);
      break;
    }
    default: {
      int64_t n;
      CALL("dataloader_length", acc_dataloader_length(any(loaders), &n));
      break;
    }
  }
}

void accelerator_calls() {
  acc_accelerator* acc = any(accelerators);
  switch (pick(10)) {
    case 0:
      CALL("profile_begin", acc_profile_begin(acc, nullptr));
      break;
    case 1:
      CALL("profile_step", acc_profile_step(acc));
      break;
    case 2: {
      char* summary = nullptr;
      CALL("profile_end", acc_profile_end(acc));
      CALL("profile_summary", acc_profile_summary(acc, &summary));
      acc_string_free(summary);
      break;
    }
    case 3:
      CALL("join_uneven_inputs_begin", acc_join_uneven_inputs_begin(acc, any(models), pick(2)));
      break;
    case 4:
      CALL("join_uneven_inputs_end", acc_join_uneven_inputs_end(acc, any(models)));
      break;
    case 5:
      CALL("unscale_gradients", acc_unscale_gradients(acc, coin(0.5) ? any(optimizers) : nullptr));
      break;
    case 6:
      CALL("clip_grad_value", acc_clip_grad_value(acc, any(models), coin(0.8) ? 0.1 : -1));
      break;
    case 7:
      CALL("trigger_sync_in_backward", acc_trigger_sync_in_backward(acc, any(models)));
      break;
    case 8:
      CALL("optimizer_set_lr", acc_optimizer_set_lr(any(optimizers), pick(3),
                                                    coin(0.7)   ? 0.01
                                                    : coin(0.5) ? NAN
                                                                : 1e308));
      break;
    default: {
      const char* names[] = {"note"};
      const char* texts[] = {coin(0.5) ? "a | b\nc" : ""};
      CALL("log_text", acc_log_text(acc, names, texts, 1, -1));
    }
  }
}

void create_callback_objects() {
  switch (pick(4)) {
    case 0: {
      acc_scheduler* out = nullptr;
      CALL("scheduler_create_lambda",
           acc_scheduler_create_lambda(any(optimizers), lambda_factor, nullptr, nullptr, &out));
      keep(schedulers, out);
      break;
    }
    case 1: {
      acc_dataset* out = nullptr;
      CALL("dataset_from_callback", acc_dataset_from_callback(1 + pick(12), sample, nullptr, nullptr, &out));
      keep(datasets, out);
      break;
    }
    case 2: {
      acc_dataset* out = nullptr;
      CALL("dataset_from_iterator", acc_dataset_from_iterator(stream_next, stream_start, new int64_t(0), free_counter,
                                                              coin(0.5) ? -1 : pick(12), &out));
      keep(datasets, out);
      break;
    }
    default:
      CALL("dataloader_set_collate", acc_dataloader_set_collate(any(loaders), collate, nullptr, nullptr));
      break;
  }
}

using Call = void (*)();
const Call kCalls[] = {
    create_callback_objects,
    create_callback_objects,
    register_callbacks,
    tensor_calls,
    tensor_calls,
    model_files,
    data_calls,
    data_calls,
    accelerator_calls,
    accelerator_calls,
    create_accelerator,
    create_model,
    create_optimizer,
    create_scheduler,
    create_dataset,
    create_loader,
    prepare_all,
    extend_scheduler,
    free_something,
    train_step,
    train_step,
    train_step,
    train_step,
    train_step,
    [] {
      acc_model* out = nullptr;
      CALL("prepare_model", acc_prepare_model(any(accelerators), any(models), placement(), &out));
      keep(models, out);
    },
    [] {
      acc_optimizer* out = nullptr;
      CALL("prepare_optimizer", acc_prepare_optimizer(any(accelerators), any(optimizers), placement(), &out));
      keep(optimizers, out);
    },
    [] {
      acc_dataloader* out = nullptr;
      CALL("prepare_dataloader", acc_prepare_dataloader(any(accelerators), any(loaders), placement(), &out));
      keep(loaders, out);
    },
    [] {
      acc_scheduler* out = nullptr;
      CALL("prepare_scheduler", acc_prepare_scheduler(any(accelerators), any(schedulers), &out));
      keep(schedulers, out);
    },
    [] {
      acc_tensor_list* out = nullptr;
      CALL("dataloader_next", acc_dataloader_next(any(loaders), &out));
      keep(lists, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("tensor_list_get", acc_tensor_list_get(any(lists), pick(3), &out));
      keep(tensors, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("model_forward1", acc_model_forward1(any(models), any(tensors), pick(2), &out));
      keep(tensors, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("loss_cross_entropy",
           acc_loss_cross_entropy(any(tensors), any(tensors), ACC_REDUCTION_MEAN, coin(0.3) ? 0.1 : 0.0, &out));
      keep(tensors, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("loss_mse", acc_loss_mse(any(tensors), any(tensors), static_cast<acc_reduction>(pick(3)), &out));
      keep(tensors, out);
    },
    [] { CALL("backward", acc_backward(any(accelerators), any(tensors))); },
    [] { CALL("optimizer_step", acc_optimizer_step(any(optimizers))); },
    [] { CALL("optimizer_zero_grad", acc_optimizer_zero_grad(any(optimizers))); },
    [] { CALL("scheduler_step", acc_scheduler_step(any(schedulers))); },
    [] { CALL("scheduler_step_metric", acc_scheduler_step_metric(any(schedulers), 0.5)); },
    [] {
      double norm;
      CALL("clip_grad_norm", acc_clip_grad_norm(any(accelerators), any(models), coin(0.5) ? 0.5 : INFINITY,
                                                coin(0.7) ? 2.0 : INFINITY, &norm));
    },
    [] { CALL("accumulate_begin", acc_accumulate_begin(any(accelerators))); },
    [] { CALL("accumulate_end", acc_accumulate_end(any(accelerators))); },
    [] { CALL("save_state", acc_save_state(any(accelerators), in_work_dir("checkpoint", 2).c_str(), nullptr)); },
    [] {
      CALL("load_state",
           acc_load_state(any(accelerators), coin(0.8) ? in_work_dir("checkpoint", 2).c_str() : nullptr, nullptr));
    },
    [] {
      CALL("save_model", acc_save_model(any(accelerators), any(models), in_work_dir("model", 2).c_str(),
                                        coin(0.5) ? nullptr : "100"));
    },
    [] {
      CALL("model_load_safetensors",
           acc_model_load_safetensors(any(models), in_work_dir("model", 2).c_str(), pick(2), nullptr, nullptr));
    },
    [] {
      acc_model* out = nullptr;
      CALL("unwrap_model", acc_unwrap_model(any(accelerators), any(models), &out));
      keep(models, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("gather", acc_gather(any(accelerators), any(tensors), "x", &out));
      keep(tensors, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("gather_for_metrics", acc_gather_for_metrics(any(accelerators), any(tensors), "x", &out));
      keep(tensors, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("reduce", acc_reduce(any(accelerators), any(tensors), ACC_REDUCTION_MEAN, "r", &out));
      keep(tensors, out);
    },
    [] {
      acc_tensor* out = nullptr;
      CALL("pad_across_processes",
           acc_pad_across_processes(any(accelerators), any(tensors), pick(2), 0.0, pick(2), "p", &out));
      keep(tensors, out);
    },
    [] { CALL("dataloader_end_epoch", acc_dataloader_end_epoch(any(loaders))); },
    [] { CALL("dataloader_skip_first_batches", acc_dataloader_skip_first_batches(any(loaders), pick(4))); },
    [] { CALL("no_sync_begin", acc_no_sync_begin(any(accelerators), any(models))); },
    [] { CALL("no_sync_end", acc_no_sync_end(any(accelerators), any(models))); },
    [] { CALL("autocast_begin", acc_autocast_begin(any(accelerators), pick(2))); },
    [] { CALL("autocast_end", acc_autocast_end(any(accelerators))); },
    [] {
      acc_options* o = options(ACC_OPTIONS_AVERAGED_MODEL);
      if (coin(0.5)) set(o, "strategy", "ema"), set(o, "decay", "0.9");
      CALL("averaged_model_create", acc_averaged_model_create(any(models), o, &any(averages)));
      acc_options_free(o);
    },
    [] { CALL("averaged_model_update", acc_averaged_model_update(any(averages), any(models))); },
    [] { CALL("averaged_model_swap", acc_averaged_model_swap(any(averages), any(models))); },
    [] { CALL("register_averaged_model", acc_register_averaged_model(any(accelerators), any(averages))); },
    [] {
      acc_tensor_list* out = nullptr;
      CALL("get_state_dict", acc_get_state_dict(any(accelerators), any(models), pick(2), &out));
      keep(lists, out);
    },
    [] { CALL("model_set_training", acc_model_set_training(any(models), pick(2))); },
    [] {
      acc_options* o = options(ACC_OPTIONS_LORA);
      set(o, "r", std::to_string(1 + pick(4)).c_str());
      if (coin(0.3)) set(o, "modules_to_save", coin(0.5) ? "2" : "1");  // a trained layer beside the adapters
      CALL("model_add_lora", acc_model_add_lora(any(models), coin(0.5) ? "0" : "re:.*", o, nullptr));
      acc_options_free(o);
    },
    [] {
      CALL("model_set_requires_grad",
           acc_model_set_requires_grad(any(models), coin(0.5) ? "0.*" : "*.bias", pick(2), nullptr));
    },
    [] {
      acc_options* o = coin(0.5) ? options(ACC_OPTIONS_OPTIMIZER) : nullptr;
      if (o) set(o, "lr", "0.001");
      CALL("optimizer_add_param_group_matching",
           acc_optimizer_add_param_group_matching(any(optimizers), "*.bias", o, nullptr));
      acc_options_free(o);
    },
    [] { CALL("local_sgd_begin", acc_local_sgd_begin(any(accelerators), any(models), 1 + pick(3), pick(2))); },
    [] { CALL("local_sgd_step", acc_local_sgd_step(any(accelerators), any(models))); },
    [] { CALL("local_sgd_end", acc_local_sgd_end(any(accelerators), any(models))); },
    [] {
      CALL("init_trackers",
           acc_init_trackers(any(accelerators), "sequence", coin(0.5) ? R"({"lr": 0.1, "a": {"b": 2}})" : nullptr));
    },
    [] {
      const char* const names[] = {"loss", "accuracy"};
      const double values[] = {0.5, NAN};
      CALL("log", acc_log(any(accelerators), names, values, pick(3), coin(0.5) ? -1 : pick(5)));
    },
    [] { CALL("end_training", acc_end_training(any(accelerators))); },
    [] { CALL("model_to", acc_model_to(any(models), "cpu", coin(0.5) ? ACC_DTYPE_BFLOAT16 : ACC_DTYPE_FLOAT32)); },
    [] {
      acc_tensor_list* state = nullptr;
      CALL("model_state_dict", acc_model_state_dict(any(models), &state));
      CALL("model_load_state_dict", acc_model_load_state_dict(any(models), coin(0.7) ? state : any(lists), pick(2)));
      acc_tensor_list_free(state);
    },
    [] {
      CALL("tensor_list_save_safetensors",
           acc_tensor_list_save_safetensors(any(lists), (work_dir + "/list.safetensors").c_str()));
    },
    [] {
      acc_tensor_list* out = nullptr;
      CALL("tensor_list_load_safetensors",
           acc_tensor_list_load_safetensors((work_dir + "/list.safetensors").c_str(), &out));
      keep(lists, out);
    },
    [] { CALL("free_memory", acc_free_memory(any(accelerators))); },
};

void call_any() { kCalls[pick(static_cast<int>(std::size(kCalls)))](); }

void run_sequence(uint64_t seed, int calls) {
  rng.seed(seed);
  sequence_thread = std::this_thread::get_id();
  for (Call c : {create_accelerator, create_model, create_optimizer, create_scheduler, create_dataset, create_loader})
    c();
  if (coin(0.6)) prepare_all();
  for (int i = 0; i < calls; ++i) call_any();
  dprintf(log_fd, "END\n");
}

void print_tail(const std::string& log, size_t lines) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) printf("    %s\n", all[i].c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s FIRST_SEED COUNT [CALLS_PER_SEQUENCE]\n", argv[0]);
    return 2;
  }
  const uint64_t first = strtoull(argv[1], nullptr, 10), count = strtoull(argv[2], nullptr, 10);
  const int calls = argc > 3 ? atoi(argv[3]) : 150;
  char base_template[] = "/tmp/acc_call_sequences.XXXXXX";
  const std::string base = mkdtemp(base_template);
  int failed = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    const std::string dir = base + "/" + std::to_string(seed), log = dir + ".log";
    mkdir(dir.c_str(), 0755);
    const pid_t child = fork();
    if (child == 0) {
      work_dir = dir;
      log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
      dup2(log_fd, STDERR_FILENO);  // libtorch's warnings, beside the calls that gave them
      alarm(kTimeoutSeconds);  // a hang ends as SIGALRM
      run_sequence(seed, calls);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (getenv("ACC_CALL_SEQUENCES_SHOW")) print_tail(log, SIZE_MAX);
    if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      printf("sequence %llu: %s %d; its last calls:\n", static_cast<unsigned long long>(seed),
             WIFSIGNALED(status) ? "killed by signal" : "exit status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      print_tail(log, getenv("ACC_CALL_SEQUENCES_WHOLE_LOG") ? SIZE_MAX : 25);
    }
  }
  std::string remove = "rm -rf '" + base + "'";
  if (system(remove.c_str()) != 0) fprintf(stderr, "could not remove %s\n", base.c_str());
  printf("%d of %llu sequences of %d calls failed\n", failed, static_cast<unsigned long long>(count), calls);
  return failed ? 1 : 0;
}
