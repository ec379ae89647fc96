/* callbacks.i — the callbacks the C API gained with checkpoints, trackers and user schedules
 * (custom checkpoint state, save/load pre-hooks, program trackers, LR lambdas), the accelerator
 * methods that go with them, and the progress display (included by accelerate.i after handles.i).
 * Host layers subclass the directors; each catches its language's exceptions and returns non-zero
 * after Accelerate.callbackSetError, like the dataset callbacks. */

%nodefaultctor accswig::Samples;
%nodefaultctor accswig::Bytes;
%nodefaultctor accswig::Metrics;
%nodefaultctor accswig::Texts;
%nodefaultctor accswig::Images;
%nodefaultctor accswig::HistogramView;
%nodefaultctor accswig::CheckpointModels;
%rename(CheckpointModelsView) accswig::CheckpointModels;
%rename(LrFactor) accswig::Factor;
%nodefaultctor accswig::Factor;
%include "swig/callbacks.hpp"

%extend acc_scheduler {
  /* PyTorch's LambdaLR: lr = base_lr * factor(step). The library owns `fn` from here on. */
  static acc_scheduler *fromLrLambda(acc_optimizer *opt, accswig::LrLambda *fn ERR) {
    acc_scheduler *out = nullptr;
    register_callback(fn, [&](void *ud, acc_free_fn fr) {
      return acc_scheduler_create_lambda(opt, &lr_lambda_trampoline, ud, fr, &out);
    });
    return out;
  }
  /* PyTorch's MultiplicativeLR: lr = the rate before * factor(step), from step 1. The library owns `fn`. */
  static acc_scheduler *fromLrMultiplicative(acc_optimizer *opt, accswig::LrLambda *fn ERR) {
    acc_scheduler *out = nullptr;
    register_callback(fn, [&](void *ud, acc_free_fn fr) {
      return acc_scheduler_create_multiplicative(opt, &lr_lambda_trampoline, ud, fr, &out);
    });
    return out;
  }
  /* LambdaLR and MultiplicativeLR with `groups` functions, one per parameter group (fn picks by group). */
  static acc_scheduler *fromGroupLrLambda(acc_optimizer *opt, size_t groups, accswig::GroupLrLambda *fn ERR) {
    acc_scheduler *out = nullptr;
    register_callback(fn, [&](void *ud, acc_free_fn fr) {
      return acc_scheduler_create_group_lambda(opt, groups, &group_lr_lambda_trampoline, ud, fr, &out);
    });
    return out;
  }
  static acc_scheduler *fromGroupLrMultiplicative(acc_optimizer *opt, size_t groups,
                                                  accswig::GroupLrLambda *fn ERR) {
    acc_scheduler *out = nullptr;
    register_callback(fn, [&](void *ud, acc_free_fn fr) {
      return acc_scheduler_create_group_multiplicative(opt, groups, &group_lr_lambda_trampoline, ud, fr, &out);
    });
    return out;
  }
  /* CyclicLR with a scale function (its factor is the scale of a cycle or step). The library owns `fn`. */
  static acc_scheduler *fromCyclicScale(acc_optimizer *opt, const acc_options *opts, accswig::LrLambda *fn ERR) {
    acc_scheduler *out = nullptr;
    register_callback(fn, [&](void *ud, acc_free_fn fr) {
      return acc_scheduler_create_cyclic(opt, opts, &lr_lambda_trampoline, ud, fr, &out);
    });
    return out;
  }
}

%extend acc_accelerator {
  /* Accelerate's save(): named tensors as one safetensors file, written once per machine. */
  void save(const acc_tensor_list *tensors, const char *path ERR) { check(acc_save($self, tensors, path)); }
  /* A prepared model's parameters and buffers on the CPU; unwrap: the model's own names. */
  acc_tensor_list *getStateDict(acc_model *model, bool unwrap ERR) {
    acc_tensor_list *out = nullptr;
    check(acc_get_state_dict($self, model, unwrap ? 1 : 0, &out));
    return out;
  }
  /* How many checkpoints save_state wrote (or load_state restored) so far. */
  int64_t iteration_(ERR0) {
    int64_t n = 0;
    check(acc_accelerator_iteration($self, &n));
    return n;
  }
  /* opt null: every prepared optimizer. */
  void unscaleGradients(acc_optimizer *opt ERR) { check(acc_unscale_gradients($self, opt)); }
  /* Thread-bound (libtorch's autocast state is per thread): the layers pair them on one thread. */
  void autocastBegin(bool enabled ERR) { check(acc_autocast_begin($self, enabled ? 1 : 0)); }
  void autocastEnd(ERR0) { check(acc_autocast_end($self)); }

  /* The library owns each callback object from here on, until the accelerator is gone. */
  void registerForCheckpointing(accswig::StateHandler *handler ERR) {
    register_callback(handler, [&](void *ud, acc_free_fn fr) {
      return acc_register_for_checkpointing($self, &state_save_trampoline, &state_load_trampoline, ud, fr);
    });
  }
  /* Each returns the hook's id for removeStatePreHook (the layers hand out a removable handle). */
  int64_t registerSaveStatePreHook(accswig::CheckpointHook *hook ERR) {
    uint64_t id = 0;
    register_callback(hook, [&](void *ud, acc_free_fn fr) {
      return acc_register_save_state_pre_hook_removable($self, &hook_trampoline, ud, fr, &id);
    });
    return static_cast<int64_t>(id);
  }
  /* Accelerate's ProfileKwargs(on_trace_ready=...): for every later profile of this accelerator. */
  void onTraceReady(accswig::TraceReady *handler ERR) {
    register_callback(handler, [&](void *ud, acc_free_fn fr) {
      return acc_profile_on_trace_ready($self, &trace_ready_trampoline, ud, fr);
    });
  }
  int64_t registerLoadStatePreHook(accswig::CheckpointHook *hook ERR) {
    uint64_t id = 0;
    register_callback(hook, [&](void *ud, acc_free_fn fr) {
      return acc_register_load_state_pre_hook_removable($self, &hook_trampoline, ud, fr, &id);
    });
    return static_cast<int64_t>(id);
  }
  /* The same with the models whose weights the library saves or loads (a hook may take some out). */
  int64_t registerSaveStateModelsPreHook(accswig::ModelsCheckpointHook *hook ERR) {
    uint64_t id = 0;
    register_callback(hook, [&](void *ud, acc_free_fn fr) {
      return acc_register_save_state_models_pre_hook($self, &models_hook_trampoline, ud, fr, &id);
    });
    return static_cast<int64_t>(id);
  }
  int64_t registerLoadStateModelsPreHook(accswig::ModelsCheckpointHook *hook ERR) {
    uint64_t id = 0;
    register_callback(hook, [&](void *ud, acc_free_fn fr) {
      return acc_register_load_state_models_pre_hook($self, &models_hook_trampoline, ud, fr, &id);
    });
    return static_cast<int64_t>(id);
  }
  /* RemovableHandle.remove(): again is a no-op. */
  void removeStatePreHook(int64_t id ERR) {
    check(acc_remove_state_pre_hook($self, static_cast<uint64_t>(id)));
  }

  /* Experiment tracking. configJson "" means none; step < 0: the step after the last one. */
  void addTracker(const char *name, accswig::Tracker *tracker ERR) {
    register_callback(tracker, [&](void *ud, acc_free_fn fr) {
      return acc_add_tracker($self, name, &tracker_init_trampoline, &tracker_log_trampoline,
                             &tracker_finish_trampoline, ud, fr);
    });
    check(acc_tracker_set_log_text($self, name, &tracker_log_text_trampoline));
    if (tracker->takesImages()) check(acc_tracker_set_log_images($self, name, &tracker_log_images_trampoline));
    if (tracker->takesHistograms())
      check(acc_tracker_set_log_histogram($self, name, &tracker_log_histogram_trampoline));
  }
  void initTrackers(const char *project, const char *configJson ERR) {
    check(acc_init_trackers($self, project, opt_str(configJson)));
  }
  /* initKwargsJson: Accelerate's init_kwargs, {"mlflow": {"run_name": ...}, ...} (null or "" for none);
   * the layers name it as their language does. */
  void initTrackersWith(const char *project, const char *configJson, const char *initKwargsJson ERR) {
    check(acc_init_trackers_ex($self, project, opt_str(configJson), opt_str(initKwargsJson)));
  }
  /* names: each name's UTF-8 bytes and a NUL, one per value (split_nul_terminated). logKwargsJson:
   * Accelerate's log_kwargs, {"tensorboard": {"walltime": ...}, ...} (null or "" for none). */
  void logValues(const uint8_t *names, size_t namesSize, const double *data, size_t n, int64_t step,
                 const char *logKwargsJson ERR) {
    std::vector<std::string> list = split_nul_terminated(names, namesSize);
    if (list.size() != n)
      fail(ACC_ERR_INVALID_ARGUMENT, "log: " + std::to_string(list.size()) + " names for " + std::to_string(n) + " values");
    std::vector<const char *> ptrs;
    for (const auto &s : list) ptrs.push_back(s.c_str());
    check(acc_log_ex($self, ptrs.data(), data, n, step, opt_str(logKwargsJson)));
  }
  void logScalar(const char *name, double value, int64_t step ERR) { check(acc_log_scalar($self, name, value, step)); }
  /* names: as logValues'; the values of one main tag (Accelerate's log of a dict value). logKwargsJson:
   * as logValues'. */
  void logGroup(const char *mainTag, const uint8_t *names, size_t namesSize, const double *data, size_t n,
                int64_t step, const char *logKwargsJson ERR) {
    std::vector<std::string> list = split_nul_terminated(names, namesSize);
    if (list.size() != n)
      fail(ACC_ERR_INVALID_ARGUMENT, "log_scalars: " + std::to_string(list.size()) + " names for " + std::to_string(n) +
                                         " values");
    std::vector<const char *> ptrs;
    for (const auto &s : list) ptrs.push_back(s.c_str());
    check(acc_log_scalars_ex($self, mainTag, ptrs.data(), data, n, step, opt_str(logKwargsJson)));
  }
  /* names and texts: each one's UTF-8 bytes and a NUL (split_nul_terminated), in the same order.
   * logKwargsJson: as logValues'. */
  void logTexts(const uint8_t *names, size_t namesSize, const uint8_t *texts, size_t textsSize, int64_t step,
                const char *logKwargsJson ERR) {
    std::vector<std::string> keys = split_nul_terminated(names, namesSize);
    std::vector<std::string> values = split_nul_terminated(texts, textsSize);
    if (keys.size() != values.size())
      fail(ACC_ERR_INVALID_ARGUMENT, "log_text: " + std::to_string(keys.size()) + " names for " +
                                         std::to_string(values.size()) + " texts");
    std::vector<const char *> key_ptrs, value_ptrs;
    for (size_t i = 0; i < keys.size(); ++i) {
      key_ptrs.push_back(keys[i].c_str());
      value_ptrs.push_back(values[i].c_str());
    }
    check(acc_log_text_ex($self, key_ptrs.data(), value_ptrs.data(), keys.size(), step, opt_str(logKwargsJson)));
  }
  /* names: each name's UTF-8 bytes and a NUL, one per image of the list; dataformats "" is NCHW. */
  void logImages(const uint8_t *names, size_t namesSize, const acc_tensor_list *images, int64_t step,
                 const char *dataformats ERR) {
    std::vector<std::string> keys = split_nul_terminated(names, namesSize);
    ListTensors tensors(images);
    if (keys.size() != tensors.size())
      fail(ACC_ERR_INVALID_ARGUMENT, "log_images: " + std::to_string(keys.size()) + " names for " +
                                         std::to_string(tensors.size()) + " images");
    std::vector<const char *> key_ptrs;
    for (const auto &k : keys) key_ptrs.push_back(k.c_str());
    check(acc_log_images($self, key_ptrs.data(), tensors.data(), keys.size(), step, opt_str(dataformats)));
  }
  /* torch's add_histogram; bins null or "" is "tensorflow", maxBins 0 no limit; the layers name it as
   * their language does. */
  void logHistogramWith(const char *name, const acc_tensor *values, int64_t step, const char *bins, int64_t maxBins ERR) {
    check(acc_log_histogram($self, name, values, step, opt_str(bins), maxBins));
  }
  /* MLflow's log_artifact(s): a file or a folder's files kept with the tracker's run; artifactPath
   * null or "" for the run's artifact root. */
  void logArtifact(const char *tracker, const char *localPath, const char *artifactPath ERR) {
    check(acc_tracker_log_artifact($self, tracker, localPath, opt_str(artifactPath)));
  }
  void endTraining(ERR0) { check(acc_end_training($self)); }
  acc_string_list *trackerNames(ERR0) {
    acc_string_list *out = nullptr;
    check(acc_tracker_names($self, &out));
    return out;
  }
  std::string trackerPath(const char *name ERR) {
    char *s = nullptr;
    check(acc_tracker_path($self, name, &s));
    std::string r(s ? s : "");
    acc_string_free(s);
    return r;
  }
}

/* ---- Progress ---------------------------------------------------------------------------------- */

struct acc_progress {};
%extend acc_progress {
  /* total <= 0: unknown; description may be "". Shown on the main process only. */
  acc_progress(const acc_accelerator *acc, int64_t total, const char *description ERR) {
    acc_progress *out = nullptr;
    check(acc_progress_create(acc, total, opt_str(description), &out));
    return out;
  }
  ~acc_progress() { acc_progress_free($self); }
  void update_(int64_t n ERR) { check(acc_progress_update($self, n)); }
  void setPostfix(const char *text ERR) { check(acc_progress_set_postfix($self, text)); }
  /* Shows the final state; later updates are ignored (named finish: close releases the handle). */
  void finish(ERR0) { check(acc_progress_close($self)); }
}
