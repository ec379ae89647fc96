// Helpers for the C API tests. These tests include only accelerate.h: they see what a C user sees.
#pragma once

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "accelerate.h"

// Asserts success and shows the library's message otherwise.
#define ACC_ASSERT_OK(expr)                                                                        \
  do {                                                                                             \
    acc_status acc_status_ = (expr);                                                               \
    ASSERT_EQ(acc_status_, ACC_OK) << #expr << " failed with " << acc_status_name(acc_status_) \
                                   << ": " << acc_last_error_message();                            \
  } while (0)

// Whether AddressSanitizer watches this build (it aborts on allocations too large to be real).
#if defined(__SANITIZE_ADDRESS__)
#define ACC_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ACC_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef ACC_TEST_UNDER_ASAN
#define ACC_TEST_UNDER_ASAN 0
#endif

// Asserts a failure with `code` whose message contains `needle`.
#define ACC_EXPECT_ERROR(expr, code, needle)                                                       \
  do {                                                                                             \
    acc_status acc_status_ = (expr);                                                               \
    EXPECT_EQ(acc_status_, (code)) << #expr << " gave " << acc_status_name(acc_status_) << ": " \
                                   << acc_last_error_message();                                    \
    EXPECT_NE(std::string(acc_last_error_message()).find(needle), std::string::npos)             \
        << "message of " << #expr << ": " << acc_last_error_message();                           \
  } while (0)

namespace acc_test {

// A float tensor of the given shape and values.
inline acc_tensor* floats(const std::vector<float>& values, const std::vector<int64_t>& dims) {
  acc_tensor* t = nullptr;
  if (acc_tensor_from_host(values.data(), values.size() * sizeof(float), dims.data(), dims.size(),
                           ACC_DTYPE_FLOAT32, &t) != ACC_OK)
    ADD_FAILURE() << acc_last_error_message();
  return t;
}

// `t` moved to the device of `like` (freed when moved): targets for a model's outputs, as a user's
// `y.to(accelerator.device)` (the GPU suite runs the distributed tests on CUDA).
inline acc_tensor* on_device_of(const acc_tensor* like, acc_tensor* t) {
  char *want = nullptr, *have = nullptr;
  acc_tensor* moved = t;
  if (acc_tensor_device(like, &want) == ACC_OK && acc_tensor_device(t, &have) == ACC_OK && std::string(want) != have) {
    if (acc_tensor_to(t, want, ACC_DTYPE_UNDEFINED, &moved) == ACC_OK) {
      acc_tensor_free(t);
    } else {
      ADD_FAILURE() << acc_last_error_message();
      moved = t;
    }
  }
  acc_string_free(want);
  acc_string_free(have);
  return moved;
}

inline acc_tensor* longs(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
  acc_tensor* t = nullptr;
  if (acc_tensor_from_host(values.data(), values.size() * sizeof(int64_t), dims.data(), dims.size(),
                           ACC_DTYPE_INT64, &t) != ACC_OK)
    ADD_FAILURE() << acc_last_error_message();
  return t;
}

// A bool tensor (a padding mask) from 0/1 values.
inline acc_tensor* bools(const std::vector<uint8_t>& values, const std::vector<int64_t>& dims) {
  acc_tensor* t = nullptr;
  if (acc_tensor_from_host(values.data(), values.size(), dims.data(), dims.size(), ACC_DTYPE_BOOL, &t) != ACC_OK)
    ADD_FAILURE() << acc_last_error_message();
  return t;
}

// The elements of a tensor of element type T (float32: float, int64: int64_t), in row-major order.
template <typename T>
std::vector<T> to_host(const acc_tensor* t) {
  int64_t n = 0;
  EXPECT_EQ(acc_tensor_numel(t, &n), ACC_OK);
  std::vector<T> out(static_cast<size_t>(n));
  EXPECT_EQ(acc_tensor_to_host(t, out.data(), out.size() * sizeof(T)), ACC_OK) << acc_last_error_message();
  return out;
}
inline std::vector<float> to_floats(const acc_tensor* t) { return to_host<float>(t); }

// Outputs of a model with frozen weights `frozen` against the same model's with trainable ones
// `trainable`: equal bit for bit on libtorch 1.x; from 2.0 torch's matmul folds a batch-first view
// only for weights that require grad (as it does under PyTorch), so the last bits may move.
inline void expect_equal_but_for_freezing(const std::vector<float>& frozen, const std::vector<float>& trainable) {
#if ACC_TEST_FREEZING_KEEPS_BITS
  EXPECT_EQ(frozen, trainable);
#else
  ASSERT_EQ(frozen.size(), trainable.size());
  for (size_t i = 0; i < frozen.size(); ++i) EXPECT_NEAR(frozen[i], trainable[i], 1e-5) << i;
#endif
}
inline std::vector<int64_t> to_longs(const acc_tensor* t) { return to_host<int64_t>(t); }

// Every float of a list's tensors, in list order, one after another; the list is freed.
inline std::vector<float> flat_floats(acc_tensor_list* list) {
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(list, &n), ACC_OK);
  std::vector<float> all;
  for (size_t i = 0; i < n; ++i) {
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_get(list, i, &t), ACC_OK);
    const auto values = to_floats(t);
    all.insert(all.end(), values.begin(), values.end());
    acc_tensor_free(t);
  }
  acc_tensor_list_free(list);
  return all;
}

inline double item(const acc_tensor* t) {
  double v = 0;
  EXPECT_EQ(acc_tensor_item(t, &v), ACC_OK) << acc_last_error_message();
  return v;
}

// What torch.rand(3) draws next from the global generator: where the global random stream stands.
inline std::vector<float> next_global_draws() {
  const int64_t three[] = {3};
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_tensor_rand(three, 1, &t), ACC_OK);
  auto values = to_floats(t);
  acc_tensor_free(t);
  return values;
}

// Field 0 (sample ids) of every batch this process gets in one epoch of `dl`, concatenated.
inline std::vector<int64_t> epoch_ids(acc_dataloader* dl) {
  std::vector<int64_t> ids;
  for (;;) {
    acc_tensor_list* batch = nullptr;
    EXPECT_EQ(acc_dataloader_next(dl, &batch), ACC_OK) << acc_last_error_message();
    if (!batch) break;
    acc_tensor* b = nullptr;
    EXPECT_EQ(acc_tensor_list_get(batch, 0, &b), ACC_OK);
    const auto v = to_longs(b);
    ids.insert(ids.end(), v.begin(), v.end());
    acc_tensor_free(b);
    acc_tensor_list_free(batch);
  }
  return ids;
}

inline acc_model* spec_model(const std::string& spec) {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(spec.c_str(), &m), ACC_OK) << acc_last_error_message();
  return m;
}

// An optimizer of `algorithm` over the model's trainable parameters with learning rate `lr`.
inline acc_optimizer* optimizer(acc_model* m, const char* algorithm, double lr) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "lr", lr), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(m, algorithm, o, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return opt;
}

// ACC_OPTIONS_LORA with rank r and lora_alpha (the caller frees them).
inline acc_options* lora_options(int64_t r, double alpha) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_LORA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", r), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "lora_alpha", alpha), ACC_OK);
  return o;
}

// The one output of a forward over several inputs (ACC_FORWARD_* flags).
inline acc_tensor* forward(acc_model* m, const std::vector<acc_tensor*>& inputs, uint32_t flags) {
  acc_tensor_list* out = nullptr;
  acc_tensor* y = nullptr;
  EXPECT_EQ(acc_model_forward(m, inputs.data(), inputs.size(), flags, &out), ACC_OK) << acc_last_error_message();
  if (out) EXPECT_EQ(acc_tensor_list_get(out, 0, &y), ACC_OK);
  acc_tensor_list_free(out);
  return y;
}

// Cross-entropy of logits [B, T, V] against targets [B, T] (-100: ignored), reshaped as PyTorch
// users do.
inline acc_tensor* sequence_loss(acc_tensor* logits, acc_tensor* targets, int64_t vocab) {
  const int64_t flat_logits[] = {-1, vocab}, flat_targets[] = {-1};
  acc_tensor *l = nullptr, *t = nullptr, *loss = nullptr;
  EXPECT_EQ(acc_tensor_reshape(logits, flat_logits, 2, &l), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_tensor_reshape(targets, flat_targets, 1, &t), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_loss_cross_entropy(l, t, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK) << acc_last_error_message();
  acc_tensor_free(l);
  acc_tensor_free(t);
  return loss;
}

// A file's bytes ("" when it cannot be read).
// The strings of a list, in order (the list stays the caller's).
inline std::vector<std::string> strings(const acc_string_list* list) {
  size_t n = 0;
  EXPECT_EQ(acc_string_list_size(list, &n), ACC_OK);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    const char* s = nullptr;
    EXPECT_EQ(acc_string_list_get(list, i, &s), ACC_OK);
    out.emplace_back(s);
  }
  return out;
}

// The names of a tensor list's entries, in its order.
inline std::vector<std::string> tensor_names(const acc_tensor_list* list) {
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(list, &n), ACC_OK);
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    EXPECT_EQ(acc_tensor_list_name(list, i, &name), ACC_OK);
    names.push_back(name ? name : "");
  }
  return names;
}

// Rewrites the safetensors file at `path` with its tensor `name` replaced by `replacement` (kept by
// the caller), the others as they were, in their order.
// A copy of `list` with each entry as `change` gives it: the entry's own tensor, another (which
// stays the caller's), or null to leave the entry out.
inline acc_tensor_list* changed_list(
    const acc_tensor_list* list,
    const std::function<const acc_tensor*(const std::string&, const acc_tensor*)>& change) {
  acc_tensor_list* changed = nullptr;
  EXPECT_EQ(acc_tensor_list_create(&changed), ACC_OK);
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(list, &n), ACC_OK);
  for (size_t i = 0; i < n; ++i) {
    const char* key = nullptr;
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_name(list, i, &key), ACC_OK);
    EXPECT_EQ(acc_tensor_list_get(list, i, &t), ACC_OK);
    if (const acc_tensor* kept = change(key, t)) EXPECT_EQ(acc_tensor_list_append(changed, key, kept), ACC_OK);
    acc_tensor_free(t);
  }
  return changed;
}

inline void replace_saved_tensor(const std::string& path, const std::string& name, const acc_tensor* replacement) {
  acc_tensor_list* list = nullptr;
  ASSERT_EQ(acc_tensor_list_load_safetensors(path.c_str(), &list), ACC_OK) << acc_last_error_message();
  acc_tensor_list* changed =
      changed_list(list, [&](const std::string& key, const acc_tensor* t) { return key == name ? replacement : t; });
  acc_tensor_list_free(list);
  ASSERT_EQ(acc_tensor_list_save_safetensors(changed, path.c_str()), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(changed);
}

inline std::vector<std::string> parameter_names(const acc_model* m) {
  acc_string_list* list = nullptr;
  EXPECT_EQ(acc_model_parameter_names(m, &list), ACC_OK) << acc_last_error_message();
  auto out = strings(list);
  acc_string_list_free(list);
  return out;
}

// The largest elementwise difference of two equally long vectors; NaN matches only NaN (infinity
// otherwise: std::max would skip it).
// The tensor's dimensions.
inline std::vector<int64_t> shape(const acc_tensor* t) {
  std::vector<int64_t> dims(8);
  size_t ndim = 0;
  EXPECT_EQ(acc_tensor_shape(t, dims.data(), dims.size(), &ndim), ACC_OK);
  dims.resize(ndim);
  return dims;
}

inline float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return std::numeric_limits<float>::infinity();
      continue;
    }
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// acc_accelerator_create with accelerator options given as text; its status (the error stays for
// acc_last_error_message). ACC_TEST_BACKEND (the GPU suite's "gloo", for processes sharing one GPU)
// is every accelerator's backend unless the items name one: a process joins its group once.
inline acc_status create_accelerator(const std::vector<std::pair<std::string, std::string>>& items,
                                     acc_accelerator** out) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o), ACC_OK);
  if (const char* backend = std::getenv("ACC_TEST_BACKEND"))
    EXPECT_EQ(acc_options_set(o, "backend", backend), ACC_OK) << acc_last_error_message();
  for (auto& kv : items)
    EXPECT_EQ(acc_options_set(o, kv.first.c_str(), kv.second.c_str()), ACC_OK) << acc_last_error_message();
  const acc_status status = acc_accelerator_create(o, out);
  acc_options_free(o);
  return status;
}

// Where the tracker `name` writes (acc_tracker_path), "" where it says so.
inline std::string tracker_path(acc_accelerator* a, const char* name) {
  char* path = nullptr;
  EXPECT_EQ(acc_tracker_path(a, name, &path), ACC_OK) << acc_last_error_message();
  std::string out = path ? path : "";
  acc_string_free(path);
  return out;
}

inline acc_accelerator* make_accelerator(const std::vector<std::pair<std::string, std::string>>& items) {
  acc_accelerator* a = nullptr;
  EXPECT_EQ(create_accelerator(items, &a), ACC_OK) << acc_last_error_message();
  return a;
}

// Sets every parameter and buffer of `model` to `value` (a model whose saves are told apart by it).
inline void fill_state(acc_model* model, float value) {
  acc_tensor_list* state = nullptr;
  ASSERT_EQ(acc_model_state_dict(model, &state), ACC_OK);
  size_t n = 0;
  ASSERT_EQ(acc_tensor_list_size(state, &n), ACC_OK);
  acc_tensor_list* filled = nullptr;
  ASSERT_EQ(acc_tensor_list_create(&filled), ACC_OK);
  for (size_t i = 0; i < n; ++i) {
    acc_tensor* t = nullptr;
    const char* name = nullptr;
    int64_t dims[8];
    size_t ndim = 0;
    int64_t numel = 0;
    ASSERT_EQ(acc_tensor_list_get(state, i, &t), ACC_OK);
    ASSERT_EQ(acc_tensor_list_name(state, i, &name), ACC_OK);
    ASSERT_EQ(acc_tensor_shape(t, dims, 8, &ndim), ACC_OK);
    ASSERT_EQ(acc_tensor_numel(t, &numel), ACC_OK);
    acc_tensor* same = floats(std::vector<float>(static_cast<size_t>(numel), value), {dims, dims + ndim});
    ASSERT_EQ(acc_tensor_list_append(filled, name, same), ACC_OK);
    acc_tensor_free(same);
    acc_tensor_free(t);
  }
  ASSERT_EQ(acc_model_load_state_dict(model, filled, 1), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(filled);
  acc_tensor_list_free(state);
}

// The distinct values of a model's parameters (of those whose names hold `only`, where given).
inline std::set<float> parameter_values(acc_model* model, const char* only = nullptr) {
  std::set<float> values;
  acc_string_list* names = nullptr;
  EXPECT_EQ(acc_model_parameter_names(model, &names), ACC_OK);
  for (const std::string& name : strings(names)) {
    if (only && name.find(only) == std::string::npos) continue;
    acc_tensor* p = nullptr;
    EXPECT_EQ(acc_model_parameter(model, name.c_str(), &p), ACC_OK);
    for (float v : to_floats(p)) values.insert(v);
    acc_tensor_free(p);
  }
  acc_string_list_free(names);
  return values;
}

// This test binary started again with only `filter`'s tests and `settings` ("NAME=value") added to its
// environment (gtest's own settings left out, so that a sharded run leaves the child its test, and
// LD_PRELOAD, which settings may give); the child's pid, or -1 when it could not start.
inline pid_t spawn_self(const std::string& filter, std::vector<std::string> settings) {
  std::vector<char*> env;
  for (char** e = ::environ; *e; ++e)
    if (std::strncmp(*e, "GTEST_", 6) != 0 && std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
  for (auto& setting : settings) env.push_back(setting.data());
  env.push_back(nullptr);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string(), option = "--gtest_filter=" + filter;
  char* argv[] = {self.data(), option.data(), nullptr};
  pid_t child = 0;
  return ::posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, env.data()) == 0 ? child : -1;
}

// spawn_self, waited for: the wait status, or -1 when it could not start.
inline int run_self(const std::string& filter, std::vector<std::string> settings) {
  const pid_t child = spawn_self(filter, std::move(settings));
  if (child < 0) return -1;
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

// The names of the accelerator's trackers (acc_tracker_names).
inline std::vector<std::string> tracker_names(acc_accelerator* a) {
  acc_string_list* list = nullptr;
  EXPECT_EQ(acc_tracker_names(a, &list), ACC_OK) << acc_last_error_message();
  std::vector<std::string> names = list ? strings(list) : std::vector<std::string>{};
  acc_string_list_free(list);
  return names;
}

// Where the test fixtures (TorchScript files exported by PyTorch) are.
inline std::string data_dir() {
  const char* dir = std::getenv("ACC_TEST_DATA");
  return dir ? dir : "";
}

// A folder of this test process's own ($TMPDIR/acc_test_<pid>), removed with everything in it when
// the process that made it exits (not when a child forked from it does). A process started from it
// (a death test's child runs the test again) works in a folder of its own inside it, found through
// the environment, and leaves its removal to the owner: such children often end by _exit or a
// signal, which removes nothing.
class TempRoot {
 public:
  TempRoot() {
    const char* inherited = std::getenv(kInherited);
    if (inherited != nullptr && *inherited != '\0') {
      path_ = std::string(inherited) + "/child_" + std::to_string(owner_);
      owner_ = -1;
    } else {
      const char* dir = std::getenv("TMPDIR");
      path_ = std::string(dir ? dir : "/tmp") + "/acc_test_" + std::to_string(owner_);
      ::setenv(kInherited, path_.c_str(), 1);
    }
    std::filesystem::create_directories(path_);
  }
  ~TempRoot() { remove_if_owner(); }
  void remove_if_owner() const {
    std::error_code ignored;
    if (::getpid() == owner_) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  static constexpr const char* kInherited = "ACC_TEST_TEMP_ROOT";
  pid_t owner_ = ::getpid();
  std::string path_;
};

inline const TempRoot& temp_root() {
  static const TempRoot root;
  return root;
}

inline std::string temp_path(const std::string& name) { return temp_root().path() + "/" + name; }

// Sets (or, with nullptr, clears) an environment variable for one test, and puts it back after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// temp_path(name), emptied: nothing of an earlier run of the test is left there.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = temp_path(name);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return dir;
}

// Ends the process at once, without static teardown (a process group whose peer is gone can hang
// in it), after removing this process's temporary folder, which that teardown would have removed.
[[noreturn]] inline void exit_at_once(int code) {
  temp_root().remove_if_owner();
  ::_exit(code);
}

// The temporaries beside `path` that writes through a temporary name for it ("<name>.tmp" and 12 hex
// digits): a failed or finished write leaves none.
inline std::vector<std::string> temporaries_of(const std::string& path) {
  const std::filesystem::path file(path);
  const std::string prefix = file.filename().string() + ".tmp";
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(file.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == prefix.size() + 12 && name.compare(0, prefix.size(), prefix) == 0) found.push_back(name);
  }
  return found;
}

}  // namespace acc_test
