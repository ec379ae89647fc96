// Views handed to the director callbacks (swig/directors.hpp), and the trampolines that build them.
// Included into every wrapper by accelerate.i (after its ERR macros) and parsed by SWIG for the views.
#pragma once

namespace accswig {

#ifndef SWIG
// Element i of a view of n, or an invalid-argument error naming what it holds.
inline size_t view_index(int64_t i, size_t n, const char *what) {
  if (i < 0 || (size_t)i >= n) fail(ACC_ERR_INVALID_ARGUMENT, std::string(what) + " index out of range");
  return (size_t)i;
}
#endif

/* The samples a collator batches: size() samples of fields(i) tensors each, the same number for
 * every sample (collate_trampoline checks). get returns a new handle the caller closes. */
class Samples {
 public:
  int64_t size_() const { return (int64_t)n_; }
  int64_t fields(int64_t i ERR) const {
    index(i);
    return (int64_t)fields_;
  }
  acc_tensor *get(int64_t i, int64_t j ERR) const {
    const acc_tensor_list *sample = lists_[index(i)];
    if (j < 0 || (size_t)j >= fields_) fail(ACC_ERR_INVALID_ARGUMENT, "sample field index out of range");
    acc_tensor *t = nullptr;
    check(acc_tensor_list_get(sample, (size_t)j, &t));
    return t;
  }
#ifndef SWIG
  const acc_tensor_list *const *lists_ = nullptr;
  size_t n_ = 0;
  size_t fields_ = 0;
  size_t index(int64_t i) const { return view_index(i, n_, "sample"); }
#endif
};

/* A state callback's bytes: appended to while saving, read while loading. */
class Bytes {
 public:
  void append_(const uint8_t *data, size_t n ERR) {
    if (!sink_) fail(ACC_ERR_INVALID_ARGUMENT, "these bytes are being loaded, not saved");
    check(acc_bytes_append(sink_, data, n));
  }
  int64_t size_() const { return (int64_t)len_; }
  /* Copies the bytes into dst, whose length must be size. */
  void copyTo(uint8_t *dst, size_t n ERR) {
    if (n != len_) fail(ACC_ERR_INVALID_ARGUMENT, "the array's length is not the size of the bytes");
    if (n) memcpy(dst, data_, n);
  }
#ifndef SWIG
  acc_bytes *sink_ = nullptr;
  const void *data_ = nullptr;
  size_t len_ = 0;
#endif
};

/* The values a tracker logs: n names and values. */
class Metrics {
 public:
  int64_t size_() const { return (int64_t)n_; }
  std::string name_(int64_t i ERR) const { return names_[index(i)]; }
  double value(int64_t i ERR) const { return values_[index(i)]; }
#ifndef SWIG
  const char *const *names_ = nullptr;
  const double *values_ = nullptr;
  size_t n_ = 0;
  size_t index(int64_t i) const { return view_index(i, n_, "metric"); }
#endif
};

/* The texts a tracker logs (acc_log_text): n names and texts. */
class Texts {
 public:
  int64_t size_() const { return (int64_t)n_; }
  std::string name_(int64_t i ERR) const { return names_[index(i)]; }
  std::string text(int64_t i ERR) const { return texts_[index(i)]; }
#ifndef SWIG
  const char* const* names_ = nullptr;
  const char* const* texts_ = nullptr;
  size_t n_ = 0;
  size_t index(int64_t i) const { return view_index(i, n_, "text"); }
#endif
};

/* The images a tracker logs (acc_log_images): n names and PNG files in memory. */
class Images {
 public:
  int64_t size_() const { return (int64_t)n_; }
  std::string name_(int64_t i ERR) const { return names_[index(i)]; }
  int64_t pngSize(int64_t i ERR) const { return (int64_t)sizes_[index(i)]; }
  /* Copies image i's PNG into dst, whose length must be pngSize(i). */
  void copyPng(int64_t i, uint8_t *dst, size_t n ERR) const {
    const size_t k = index(i);
    if (n != sizes_[k]) fail(ACC_ERR_INVALID_ARGUMENT, "the array's length is not the size of the PNG");
    if (n) memcpy(dst, pngs_[k], n);
  }
#ifndef SWIG
  const char* const* names_ = nullptr;
  const unsigned char* const* pngs_ = nullptr;
  const size_t* sizes_ = nullptr;
  size_t n_ = 0;
  size_t index(int64_t i) const { return view_index(i, n_, "image"); }
#endif
};

/* A histogram a tracker logs (acc_log_histogram): its name, TensorBoard's summary numbers, and
 * size() buckets, each a right edge (copyLimits) and a count (copyCounts). */
class HistogramView {
 public:
  std::string name_() const { return name_text_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double num() const { return num_; }
  double sum() const { return sum_; }
  double sumSquares() const { return sum_squares_; }
  int64_t size_() const { return (int64_t)n_; }
  /* Copies the buckets' right edges (or counts) into dst, whose length must be size. */
  void copyLimits(double *dst, size_t n ERR) const { copy(limits_, dst, n); }
  void copyCounts(double *dst, size_t n ERR) const { copy(counts_, dst, n); }
#ifndef SWIG
  const char *name_text_ = "";
  double min_ = 0, max_ = 0, num_ = 0, sum_ = 0, sum_squares_ = 0;
  const double *limits_ = nullptr;
  const double *counts_ = nullptr;
  size_t n_ = 0;
  void copy(const double *from, double *dst, size_t n) const {
    if (n != n_) fail(ACC_ERR_INVALID_ARGUMENT, "the array's length is not the number of buckets");
    if (n) memcpy(dst, from, n * sizeof(double));
  }
#endif
};

/* The models a checkpoint pre-hook is handed (acc_checkpoint_models): model(i) is a new handle the
 * caller closes, index(i) its place in prepare order; remove(i) takes it out (the hook saves or loads
 * its weights itself). Valid during the hook only: the host layer's wrapper refuses later calls. */
class CheckpointModels {
 public:
  int64_t size_(ERR0) const {
    size_t n = 0;
    check(acc_checkpoint_models_count(models_, &n));
    return (int64_t)n;
  }
  acc_model *model(int64_t i ERR) const {
    acc_model *out = nullptr;
    check(acc_checkpoint_models_get(models_, position(i), &out, nullptr));
    return out;
  }
  int64_t index(int64_t i ERR) const {
    acc_model *out = nullptr;
    size_t index = 0;
    check(acc_checkpoint_models_get(models_, position(i), &out, &index));
    acc_model_free(out);
    return (int64_t)index;
  }
  void remove(int64_t i ERR) { check(acc_checkpoint_models_remove(models_, position(i))); }
#ifndef SWIG
  acc_checkpoint_models *models_ = nullptr;
  static size_t position(int64_t i) {
    if (i < 0) fail(ACC_ERR_INVALID_ARGUMENT, "model index out of range (" + std::to_string(i) + ")");
    return (size_t)i;
  }
#endif
};

/* Where an LR lambda puts its factor. */
class Factor {
 public:
  void set_(double value) {
    value_ = value;
    has_ = true;
  }
#ifndef SWIG
  double value_ = 0;
  bool has_ = false;
#endif
};
}

#ifndef SWIG
namespace accswig {
/* Hands the collator the samples as a Samples view, once every sample has as many fields as the
 * first (else the loader fails with that message, before any host code runs). */
inline int collate_trampoline(void *user_data, const acc_tensor_list *const *samples, size_t n,
                              acc_tensor_list **out) {
  Samples view;
  view.lists_ = samples;
  view.n_ = n;
  for (size_t i = 0; i < n; ++i) {
    size_t fields = 0;
    if (acc_tensor_list_size(samples[i], &fields) != ACC_OK) {
      acc_callback_set_error(acc_last_error_message());
      return 1;
    }
    if (i == 0) {
      view.fields_ = fields;
    } else if (fields != view.fields_) {
      const std::string message = "collate: sample " + std::to_string(i) + " has " + std::to_string(fields) +
                                  " fields but sample 0 has " + std::to_string(view.fields_) +
                                  "; every sample of a batch needs the same fields";
      acc_callback_set_error(message.c_str());
      return 1;
    }
  }
  auto *collator = static_cast<Collator *>(user_data);
  return fill_list(out, [&](acc_tensor_list *list) { return collator->collate(&view, list); });
}

inline int state_save_trampoline(void *ud, acc_bytes *out) {
  Bytes b;
  b.sink_ = out;
  return guarded([&] { return static_cast<StateHandler *>(ud)->save(&b); });
}
inline int state_load_trampoline(void *ud, const void *data, size_t size) {
  Bytes b;
  b.data_ = data;
  b.len_ = size;
  return guarded([&] { return static_cast<StateHandler *>(ud)->load(&b); });
}
inline int hook_trampoline(void *ud, const char *dir) {
  return guarded([&] { return static_cast<CheckpointHook *>(ud)->run(dir); });
}
inline int models_hook_trampoline(void *ud, acc_checkpoint_models *models, const char *dir) {
  CheckpointModels view;
  view.models_ = models;
  return guarded([&] { return static_cast<ModelsCheckpointHook *>(ud)->run(&view, dir); });
}
inline int tracker_init_trampoline(void *ud, const char *project, const char *config) {
  return guarded([&] { return static_cast<Tracker *>(ud)->init(project, config ? config : "{}"); });
}
inline int tracker_log_trampoline(void *ud, const char *const *names, const double *values, size_t n, int64_t step) {
  Metrics m;
  m.names_ = names;
  m.values_ = values;
  m.n_ = n;
  return guarded([&] { return static_cast<Tracker *>(ud)->log(&m, step); });
}
inline int tracker_log_text_trampoline(void* ud, const char* const* names, const char* const* texts, size_t n,
                                       int64_t step) {
  Texts t;
  t.names_ = names;
  t.texts_ = texts;
  t.n_ = n;
  return guarded([&] { return static_cast<Tracker*>(ud)->logText(&t, step); });
}
inline int tracker_log_images_trampoline(void* ud, const char* const* names, const unsigned char* const* pngs,
                                         const size_t* sizes, size_t n, int64_t step) {
  Images images;
  images.names_ = names;
  images.pngs_ = pngs;
  images.sizes_ = sizes;
  images.n_ = n;
  return guarded([&] { return static_cast<Tracker*>(ud)->logImages(&images, step); });
}
inline int tracker_log_histogram_trampoline(void *ud, const char *name, double min, double max, double num,
                                            double sum, double sum_squares, const double *limits,
                                            const double *counts, size_t n, int64_t step) {
  HistogramView h;
  h.name_text_ = name;
  h.min_ = min;
  h.max_ = max;
  h.num_ = num;
  h.sum_ = sum;
  h.sum_squares_ = sum_squares;
  h.limits_ = limits;
  h.counts_ = counts;
  h.n_ = n;
  return guarded([&] { return static_cast<Tracker *>(ud)->logHistogram(&h, step); });
}
inline int tracker_finish_trampoline(void *ud) {
  return guarded([&] { return static_cast<Tracker *>(ud)->finish(); });
}
inline int batch_size_trampoline(void *ud, int64_t batch_size) {
  // The run returns a status: a C++ exception escaping it is reported as ACC_ERR_IO, not as 1.
  return guarded([&] { return static_cast<BatchSizeRun *>(ud)->run(batch_size); }, ACC_ERR_IO);
}
inline int trace_ready_trampoline(void *ud, int64_t step) {
  return guarded([&] { return static_cast<TraceReady *>(ud)->ready(step); });
}
// The factor a schedule callback set through `f` (after `code`, what the callback returned).
inline int factor_set(int code, const Factor &f, double *factor) {
  if (code != 0) return code;
  if (!f.has_) {
    acc_callback_set_error("the schedule callback set no factor");
    return 1;
  }
  *factor = f.value_;
  return 0;
}
inline int lr_lambda_trampoline(void *ud, int64_t step, double *factor) {
  Factor f;
  return factor_set(guarded([&] { return static_cast<LrLambda *>(ud)->factor(step, &f); }), f, factor);
}
inline int group_lr_lambda_trampoline(void *ud, size_t group, int64_t step, double *factor) {
  Factor f;
  return factor_set(guarded([&] { return static_cast<GroupLrLambda *>(ud)->factor(group, step, &f); }), f, factor);
}
}
#endif
