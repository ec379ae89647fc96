// The director classes the host layers subclass: included by glue.hpp for C++ and %included by
// accelerate.i for SWIG (after its %feature("director") lines), so they are declared once.
#pragma once

#ifndef SWIG
#include <cstdint>

#include "accelerate.h"
#endif

namespace accswig {

// ---- callbacks ------------------------------------------------------------------------------
// Host objects implement these (SWIG directors). A method returns 0 on success; on failure the host
// layer has already called acc_callback_set_error with its exception's text and returns non-zero.
// released() runs once when the library drops the object, so a host that must pin it (C#) can unpin.

class Callback {
 public:
  virtual ~Callback() {}
  virtual void released() {}
};

class SampleSource : public Callback {
 public:
  // Appends the fields of sample `index` to `out`.
  virtual int sample(int64_t index, acc_tensor_list* out) = 0;
};

class StreamSource : public Callback {
 public:
  virtual int start(int64_t epoch) = 0;
  // Appends the next sample's fields to `out`; leaves it empty at the end of the stream.
  virtual int next(acc_tensor_list* out) = 0;
};

// Views handed to the callbacks, valid during the call only (defined in swig/callbacks.hpp).
class Samples;
class Bytes;
class Metrics;
class Texts;
class Images;
class HistogramView;
class CheckpointModels;
class Factor;

class Collator : public Callback {
 public:
  // Appends the batch made of `samples` (each with the same number of fields) to `out`.
  virtual int collate(Samples* samples, acc_tensor_list* out) = 0;
};

class StateHandler : public Callback {
 public:
  // Writes the object's state into `out` (save_state) / restores it from `in` (load_state).
  virtual int save(Bytes* out) = 0;
  virtual int load(Bytes* in) = 0;
};

class CheckpointHook : public Callback {
 public:
  // Runs with the checkpoint folder before save_state writes or load_state reads it.
  virtual int run(const char* dir) = 0;
};

class ModelsCheckpointHook : public Callback {
 public:
  // Runs with the models whose weights the library saves or loads, and the checkpoint folder
  // (Accelerate's hook(models, weights, dir) / hook(models, dir)).
  virtual int run(CheckpointModels* models, const char* dir) = 0;
};

class Tracker : public Callback {
 public:
  virtual int init(const char* project, const char* configJson) = 0;
  virtual int log(Metrics* metrics, int64_t step) = 0;
  virtual int finish() = 0;
  // The texts of acc_log_text; a tracker that does not take texts leaves them.
  virtual int logText(Texts* texts, int64_t step) { return 0; }
  // The images of acc_log_images, as PNGs, for a tracker whose takesImages() is true (asked once,
  // when it is added: only then are images encoded for it).
  virtual bool takesImages() { return false; }
  virtual int logImages(Images* images, int64_t step) { return 0; }
  // The histograms of acc_log_histogram, for a tracker whose takesHistograms() is true (asked once,
  // when it is added: only then are histograms computed for it).
  virtual bool takesHistograms() { return false; }
  virtual int logHistogram(HistogramView* histogram, int64_t step) { return 0; }
};

class LrLambda : public Callback {
 public:
  // Sets the learning-rate factor of `step` through out.
  virtual int factor(int64_t step, Factor* out) = 0;
};

class GroupLrLambda : public Callback {
 public:
  // Sets parameter group `group`'s learning-rate factor of `step` through out.
  virtual int factor(size_t group, int64_t step, Factor* out) = 0;
};

class TraceReady : public Callback {
 public:
  // A profile's recorded cycle ended at `step` (torch.profiler's on_trace_ready).
  virtual int ready(int64_t step) = 0;
};

class BatchSizeRun : public Callback {
 public:
  // Trains with `batch_size`. Unlike the others it returns an acc_status: the host layer turns the
  // library's exception into its status (ACC_ERR_OUT_OF_MEMORY: try a smaller batch), any other
  // into ACC_ERR_IO. Borrowed for one Library.findBatchSizeWith call, never owned by the library.
  virtual int run(int64_t batch_size) = 0;
};

}  // namespace accswig
