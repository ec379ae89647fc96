/* accelerator.i — the Accelerator proxy: prepare, backward, scopes, collectives (included by
 * handles.i). Scoped sections (accumulate, no_sync, main_process_first) are begin/end pairs here;
 * each language layer turns them into try-with-resources / using / defer. */

%extend acc_accelerator {
  /* opts may be null: defaults and accelerate-launch's environment. */
  acc_accelerator(const acc_options *opts ERR) {
    acc_accelerator *out = nullptr;
    check(acc_accelerator_create(opts, &out));
    return out;
  }
  ~acc_accelerator() { acc_accelerator_free($self); }

  std::string device_(ERR0) {
    char *s = nullptr;
    check(acc_accelerator_device($self, &s));
    std::string r(s);
    acc_string_free(s);
    return r;
  }
  std::string distributedType(ERR0) {
    const char *s = nullptr;
    check(acc_accelerator_distributed_type($self, &s));
    return s;
  }
  std::string mixedPrecision(ERR0) {
    const char *s = nullptr;
    check(acc_accelerator_mixed_precision($self, &s));
    return s;
  }
  int64_t processIndex(ERR0) {
    int64_t n = 0;
    check(acc_accelerator_process_index($self, &n));
    return n;
  }
  int64_t numProcesses(ERR0) {
    int64_t n = 0;
    check(acc_accelerator_num_processes($self, &n));
    return n;
  }
  int64_t localProcessIndex(ERR0) {
    int64_t n = 0;
    check(acc_accelerator_local_process_index($self, &n));
    return n;
  }
  bool isMainProcess(ERR0) {
    int r = 0;
    check(acc_accelerator_is_main_process($self, &r));
    return r != 0;
  }
  bool isLocalMainProcess(ERR0) {
    int r = 0;
    check(acc_accelerator_is_local_main_process($self, &r));
    return r != 0;
  }
  bool isLastProcess(ERR0) {
    int r = 0;
    check(acc_accelerator_is_last_process($self, &r));
    return r != 0;
  }
  int64_t gradientAccumulationSteps(ERR0) {
    int64_t n = 0;
    check(acc_accelerator_gradient_accumulation_steps($self, &n));
    return n;
  }
  bool syncGradients(ERR0) {
    int r = 0;
    check(acc_accelerator_sync_gradients($self, &r));
    return r != 0;
  }
  bool optimizerStepWasSkipped(ERR0) {
    int r = 0;
    check(acc_accelerator_optimizer_step_was_skipped($self, &r));
    return r != 0;
  }
  int64_t step_(ERR0) {
    int64_t n = 0;
    check(acc_accelerator_step($self, &n));
    return n;
  }

  /* Each returns a new handle to the prepared object; the one passed in stays valid (raw). */
  acc_model *prepareModel(acc_model *model, acc_placement placement ERR) {
    acc_model *out = nullptr;
    check(acc_prepare_model($self, model, placement, &out));
    return out;
  }
  acc_optimizer *prepareOptimizer(acc_optimizer *opt, acc_placement placement ERR) {
    acc_optimizer *out = nullptr;
    check(acc_prepare_optimizer($self, opt, placement, &out));
    return out;
  }
  acc_dataloader *prepareDataLoader(acc_dataloader *dl, acc_placement placement ERR) {
    acc_dataloader *out = nullptr;
    check(acc_prepare_dataloader($self, dl, placement, &out));
    return out;
  }
  acc_scheduler *prepareScheduler(acc_scheduler *sched ERR) {
    acc_scheduler *out = nullptr;
    check(acc_prepare_scheduler($self, sched, &out));
    return out;
  }
  acc_model *unwrapModel(acc_model *model ERR) {
    acc_model *out = nullptr;
    check(acc_unwrap_model($self, model, &out));
    return out;
  }

  void backward(const acc_tensor *loss ERR) { check(acc_backward($self, loss)); }
  /* torch's loss.backward(retain_graph=, create_graph=); the layers name it as their language does. */
  void backwardWith(const acc_tensor *loss, bool retainGraph, bool createGraph ERR) {
    check(acc_backward_ex($self, loss, retainGraph ? 1 : 0, createGraph ? 1 : 0));
  }
  /* LOMO (optimizers "lomo" and "adalomo"): Accelerate's lomo_backward, the update inside backward
   * at learningRate; backwardLr is its backward(loss, learning_rate=...), the loss over the
   * accumulation steps first; lomoGradNorm measures the gradients for clip_grad_norm first and
   * returns their total norm. */
  void lomoBackward(const acc_tensor *loss, double learningRate ERR) {
    check(acc_lomo_backward($self, loss, learningRate));
  }
  void backwardLr(const acc_tensor *loss, double learningRate ERR) { check(acc_backward_lr($self, loss, learningRate)); }
  double lomoGradNorm(const acc_tensor *loss ERR) {
    double norm = 0;
    check(acc_lomo_grad_norm($self, loss, &norm));
    return norm;
  }
  void accumulateBegin(ERR0) { check(acc_accumulate_begin($self)); }
  void accumulateEnd(ERR0) { check(acc_accumulate_end($self)); }
  /* Returns the total norm before clipping. */
  double clipGradNorm(acc_model *model, double maxNorm, double normType ERR) {
    double norm = 0;
    check(acc_clip_grad_norm($self, model, maxNorm, normType, &norm));
    return norm;
  }
  void clipGradValue(acc_model *model, double clipValue ERR) { check(acc_clip_grad_value($self, model, clipValue)); }
  /* maxShardSize "" means the default ("10GB"). */
  void saveModel(acc_model *model, const char *dir, const char *maxShardSize ERR) {
    check(acc_save_model($self, model, dir, opt_str(maxShardSize)));
  }
  /* Accelerate's merge-weights: the model shards of a SHARDED_STATE_DICT checkpoint (zero_stage 3)
   * merged into outputDir as saveModel lays it out. Needs no accelerator. */
  static void mergeShardedCheckpoint(const char *checkpointDir, int64_t modelIndex, const char *outputDir,
                                     const char *maxShardSize ERR) {
    if (modelIndex < 0) accswig::fail(ACC_ERR_INVALID_ARGUMENT, "modelIndex must not be negative");
    check(acc_merge_sharded_checkpoint(checkpointDir, static_cast<size_t>(modelIndex), outputDir, opt_str(maxShardSize)));
  }
  /* Checkpoints (Accelerate's save_state / load_state); dir "" uses automatic naming under
   * project_dir. Returns the folder written or read. Collectives. */
  std::string saveState(const char *dir ERR) {
    char *s = nullptr;
    check(acc_save_state($self, opt_str(dir), &s));
    std::string r(s ? s : "");
    acc_string_free(s);
    return r;
  }
  std::string loadState(const char *dir ERR) {
    char *s = nullptr;
    check(acc_load_state($self, opt_str(dir), &s));
    std::string r(s ? s : "");
    acc_string_free(s);
    return r;
  }
  void registerAveragedModel(acc_averaged_model *avg ERR) { check(acc_register_averaged_model($self, avg)); }
  void print(const char *text ERR) { check(acc_print($self, text)); }
  void waitForEveryone(ERR0) { check(acc_wait_for_everyone($self)); }
  void freeMemory(ERR0) { check(acc_free_memory($self)); }
  void noSyncBegin(acc_model *model ERR) { check(acc_no_sync_begin($self, model)); }
  void noSyncEnd(acc_model *model ERR) { check(acc_no_sync_end($self, model)); }
  void triggerSyncInBackward(acc_model *model ERR) { check(acc_trigger_sync_in_backward($self, model)); }
  void localSgdBegin(acc_model *model, int64_t localSgdSteps, bool enabled ERR) {
    check(acc_local_sgd_begin($self, model, localSgdSteps, enabled ? 1 : 0));
  }
  void localSgdStep(acc_model *model ERR) { check(acc_local_sgd_step($self, model)); }
  void localSgdEnd(acc_model *model ERR) { check(acc_local_sgd_end($self, model)); }
  /* Accelerate's profile(): torch's profiler from begin to end on the calling thread (opts: profile
   * options or null); profileStep is prof.step(); profileSummary is the last recorded cycle's table
   * and exportChromeTrace writes its trace (after the end, or in an onTraceReady handler). */
  void profileBegin(const acc_options *opts ERR) { check(acc_profile_begin($self, opts)); }
  void profileStep(ERR0) { check(acc_profile_step($self)); }
  void profileEnd(ERR0) { check(acc_profile_end($self)); }
  std::string profileSummary(ERR0) {
    char *s = nullptr;
    check(acc_profile_summary($self, &s));
    std::string r(s ? s : "");
    acc_string_free(s);
    return r;
  }
  void exportChromeTrace(const char *path ERR) { check(acc_profile_export_chrome_trace($self, path)); }
  /* evenBatches: -1 keeps the loaders' setting, 0 or 1 overrides it until the end. */
  void joinUnevenInputsBegin(acc_model *model, int evenBatches ERR) {
    check(acc_join_uneven_inputs_begin($self, model, evenBatches));
  }
  void joinUnevenInputsEnd(acc_model *model ERR) { check(acc_join_uneven_inputs_end($self, model)); }
  void mainProcessFirstBegin(ERR0) { check(acc_main_process_first_begin($self)); }
  void mainProcessFirstEnd(ERR0) { check(acc_main_process_first_end($self)); }
  void localMainProcessFirstBegin(ERR0) { check(acc_local_main_process_first_begin($self)); }
  void localMainProcessFirstEnd(ERR0) { check(acc_local_main_process_first_end($self)); }

  /* Collectives; name "" lets the library name the call. */
  acc_tensor *gather(const acc_tensor *t, const char *name ERR) {
    acc_tensor *out = nullptr;
    check(acc_gather($self, t, opt_str(name), &out));
    return out;
  }
  acc_tensor *gatherForMetrics(const acc_tensor *t, const char *name ERR) {
    acc_tensor *out = nullptr;
    check(acc_gather_for_metrics($self, t, opt_str(name), &out));
    return out;
  }
  acc_string_list *gatherObject(const uint8_t *data, size_t n, const char *name ERR) {
    acc_string_list *out = nullptr;
    check(acc_gather_object($self, data, n, opt_str(name), &out));
    return out;
  }
  acc_string_list *broadcastObject(const uint8_t *data, size_t n, int64_t src, const char *name ERR) {
    acc_string_list *out = nullptr;
    check(acc_broadcast_object($self, data, n, src, opt_str(name), &out));
    return out;
  }
  acc_tensor *reduce(const acc_tensor *t, acc_reduction op, const char *name ERR) {
    acc_tensor *out = nullptr;
    check(acc_reduce($self, t, op, opt_str(name), &out));
    return out;
  }
  acc_tensor *broadcast(const acc_tensor *t, int64_t src, const char *name ERR) {
    acc_tensor *out = nullptr;
    check(acc_broadcast($self, t, src, opt_str(name), &out));
    return out;
  }
  acc_tensor *padAcrossProcesses(const acc_tensor *t, int64_t dim, double value, bool padFirst, const char *name ERR) {
    acc_tensor *out = nullptr;
    check(acc_pad_across_processes($self, t, dim, value, padFirst ? 1 : 0, opt_str(name), &out));
    return out;
  }
  /* Writes {start, end, padding} into dst (length 3). */
  void splitBetweenProcesses(int64_t count, bool applyPadding, int64_t *dst, size_t n ERR) {
    if (n != 3) fail(ACC_ERR_INVALID_ARGUMENT, "splitBetweenProcesses needs an array of 3");
    check(acc_split_between_processes($self, count, applyPadding ? 1 : 0, &dst[0], &dst[1], &dst[2]));
  }
  void setTrigger(ERR0) { check(acc_set_trigger($self)); }
  bool checkTrigger(ERR0) {
    int r = 0;
    check(acc_check_trigger($self, &r));
    return r != 0;
  }
}
