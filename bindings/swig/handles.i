/* handles.i — one proxy class per handle type of accelerate.h (included by accelerate.i).
 * Array parameters are named (const T *data, size_t n) for inputs, (T *dst, size_t n) for outputs
 * and (const int64_t *shape, size_t ndim) for shapes, (const int64_t *dims, size_t ndim) where the
 * shape is the only argument (Java takes it as varargs); the language files map them. An empty
 * string stands for NULL where the C API takes an optional string (Go strings cannot be null). */

%{
static const char *opt_str(const char *s) { return s && *s ? s : nullptr; }
%}

%nodefaultctor acc_tensor;
%nodefaultctor acc_string_list;
%nodefaultctor acc_model;
%nodefaultctor acc_dataset;
struct acc_tensor {};
struct acc_tensor_list {};
struct acc_string_list {};
struct acc_options {};
struct acc_model {};
struct acc_optimizer {};
struct acc_scheduler {};
struct acc_averaged_model {};
struct acc_dataset {};
struct acc_dataloader {};
struct acc_accelerator {};

/* ---- Tensor ---------------------------------------------------------------------------------- */

%define ACC_TENSOR_HOST_IO(CTYPE, DTYPE, FROM, COPY)
  static acc_tensor *FROM(const CTYPE *data, size_t n, const int64_t *shape, size_t ndim ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_from_host(data, n * sizeof(CTYPE), shape, ndim, DTYPE, &out));
    return out;
  }
  /* Copies the elements into dst, whose length must be numel; the tensor's dtype must match. */
  void COPY(CTYPE *dst, size_t n ERR) {
    acc_dtype dtype = ACC_DTYPE_UNDEFINED;
    check(acc_tensor_dtype($self, &dtype));
    if (dtype != DTYPE) fail(ACC_ERR_INVALID_ARGUMENT, "the tensor's dtype is not " #CTYPE);
    check(acc_tensor_to_host($self, dst, n * sizeof(CTYPE)));
  }
%enddef

%extend acc_tensor {
  ~acc_tensor() { acc_tensor_free($self); }
  ACC_TENSOR_HOST_IO(float, ACC_DTYPE_FLOAT32, fromFloats, copyToFloats)
  ACC_TENSOR_HOST_IO(double, ACC_DTYPE_FLOAT64, fromDoubles, copyToDoubles)
  ACC_TENSOR_HOST_IO(int64_t, ACC_DTYPE_INT64, fromLongs, copyToLongs)
  ACC_TENSOR_HOST_IO(int32_t, ACC_DTYPE_INT32, fromInts, copyToInts)
  ACC_TENSOR_HOST_IO(uint8_t, ACC_DTYPE_UINT8, fromBytes, copyToBytes)
  /* device "" means "cpu". */
  static acc_tensor *zeros_(const int64_t *shape, size_t ndim, acc_dtype dtype, const char *device ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_zeros(shape, ndim, dtype, opt_str(device), &out));
    return out;
  }
  /* torch.rand / torch.randn: float32 CPU draws from torch's global CPU generator (getRandomState). */
  static acc_tensor *rand_(const int64_t *dims, size_t ndim ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_rand(dims, ndim, &out));
    return out;
  }
  static acc_tensor *randn_(const int64_t *dims, size_t ndim ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_randn(dims, ndim, &out));
    return out;
  }
  static acc_tensor *fromIdxFile(const char *path ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_from_idx_file(path, &out));
    return out;
  }
  static acc_tensor *fromFileMmap(const char *path, int64_t offset, acc_dtype dtype, const int64_t *shape,
                                  size_t ndim ERR) {
    /* The bindings' offsets are signed: a negative one refused by its own value (not taken as ~2^64). */
    if (offset < 0) fail(ACC_ERR_INVALID_ARGUMENT, "offset is negative: " + std::to_string(offset));
    acc_tensor *out = nullptr;
    check(acc_tensor_from_file_mmap(path, (uint64_t)offset, dtype, shape, ndim, &out));
    return out;
  }
  size_t ndim_(ERR0) {
    size_t n = 0;
    check(acc_tensor_ndim($self, &n));
    return n;
  }
  /* Writes the shape into dst (its length must be ndim). */
  void copyShape(int64_t *dst, size_t n ERR) {
    size_t ndim = 0;
    check(acc_tensor_shape($self, dst, n, &ndim));
    if (ndim != n) fail(ACC_ERR_INVALID_ARGUMENT, "the shape array's length is not the tensor's ndim");
  }
  int64_t numel_(ERR0) {
    int64_t n = 0;
    check(acc_tensor_numel($self, &n));
    return n;
  }
  acc_dtype dtype_(ERR0) {
    acc_dtype d = ACC_DTYPE_UNDEFINED;
    check(acc_tensor_dtype($self, &d));
    return d;
  }
  std::string device_(ERR0) {
    char *s = nullptr;
    check(acc_tensor_device($self, &s));
    std::string r(s);
    acc_string_free(s);
    return r;
  }
  bool requiresGrad(ERR0) {
    int r = 0;
    check(acc_tensor_requires_grad($self, &r));
    return r != 0;
  }
  /* device "": the same device; dtype UNDEFINED: the same dtype. */
  acc_tensor *to_(const char *device, acc_dtype dtype ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_to($self, opt_str(device), dtype, &out));
    return out;
  }
  /* null when the tensor has no gradient. */
  acc_tensor *grad_(ERR0) {
    acc_tensor *out = nullptr;
    check(acc_tensor_grad($self, &out));
    return out;
  }
  void backward_(ERR0) { check(acc_tensor_backward($self)); }
  acc_tensor *sum_(ERR0) {
    acc_tensor *out = nullptr;
    check(acc_tensor_sum($self, &out));
    return out;
  }
  acc_tensor *mean_(ERR0) {
    acc_tensor *out = nullptr;
    check(acc_tensor_mean($self, &out));
    return out;
  }
  /* torch.reshape: one dim may be -1 (e.g. logits [B, T, V] to [-1, V] for the cross-entropy). */
  acc_tensor *reshape_(const int64_t *dims, size_t ndim ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_reshape($self, dims, ndim, &out));
    return out;
  }
  acc_tensor *argmax_(int64_t dim, bool keepdim ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_argmax($self, dim, keepdim ? 1 : 0, &out));
    return out;
  }
  int64_t countEqual(const acc_tensor *other ERR) {
    int64_t n = 0;
    check(acc_tensor_count_equal($self, other, &n));
    return n;
  }
  double item_(ERR0) {
    double v = 0;
    check(acc_tensor_item($self, &v));
    return v;
  }
}

/* ---- TensorList ------------------------------------------------------------------------------- */

%extend acc_tensor_list {
  acc_tensor_list(ERR0) {
    acc_tensor_list *out = nullptr;
    check(acc_tensor_list_create(&out));
    return out;
  }
  ~acc_tensor_list() { acc_tensor_list_free($self); }
  /* name "" appends an unnamed entry. The list takes its own reference. */
  void append_(const char *name, const acc_tensor *t ERR) { check(acc_tensor_list_append($self, opt_str(name), t)); }
  size_t size_(ERR0) {
    size_t n = 0;
    check(acc_tensor_list_size($self, &n));
    return n;
  }
  acc_tensor *get_(size_t index ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_list_get($self, index, &out));
    return out;
  }
  std::string name_(size_t index ERR) {
    const char *s = nullptr;
    check(acc_tensor_list_name($self, index, &s));
    return s;
  }
  acc_tensor *find_(const char *name ERR) {
    acc_tensor *out = nullptr;
    check(acc_tensor_list_find($self, name, &out));
    return out;
  }
  void saveSafetensors(const char *path ERR) { check(acc_tensor_list_save_safetensors($self, path)); }
  static acc_tensor_list *loadSafetensors(const char *path ERR) {
    acc_tensor_list *out = nullptr;
    check(acc_tensor_list_load_safetensors(path, &out));
    return out;
  }
}

/* ---- StringList ------------------------------------------------------------------------------- */

%extend acc_string_list {
  ~acc_string_list() { acc_string_list_free($self); }
  size_t size_(ERR0) {
    size_t n = 0;
    check(acc_string_list_size($self, &n));
    return n;
  }
  std::string get_(size_t index ERR) {
    const char *s = nullptr;
    check(acc_string_list_get($self, index, &s));
    return s;
  }
  /* Items of bytes (acc_gather_object): their size, then a copy into dst of that length. */
  size_t byteSize(size_t index ERR) {
    const void *data = nullptr;
    size_t size = 0;
    check(acc_string_list_get_bytes($self, index, &data, &size));
    return size;
  }
  void copyBytes(size_t index, uint8_t *dst, size_t n ERR) {
    const void *data = nullptr;
    size_t size = 0;
    check(acc_string_list_get_bytes($self, index, &data, &size));
    if (size != n) fail(ACC_ERR_INVALID_ARGUMENT, "the array's length is not the item's size");
    if (n) memcpy(dst, data, n);
  }
}

/* ---- Options ---------------------------------------------------------------------------------- */

%extend acc_options {
  acc_options(acc_options_kind kind ERR) {
    acc_options *out = nullptr;
    check(acc_options_create(kind, &out));
    return out;
  }
  ~acc_options() { acc_options_free($self); }
  void setInt(const char *key, int64_t value ERR) { check(acc_options_set_int($self, key, value)); }
  void setDouble(const char *key, double value ERR) { check(acc_options_set_double($self, key, value)); }
  void setBool(const char *key, bool value ERR) { check(acc_options_set_bool($self, key, value ? 1 : 0)); }
  void setString(const char *key, const char *value ERR) { check(acc_options_set_string($self, key, value)); }
  /* Any key from its text form ("4", "0.9", "true"). */
  void set_(const char *key, const char *value ERR) { check(acc_options_set($self, key, value)); }
  std::string get_(const char *key ERR) {
    char *s = nullptr;
    check(acc_options_get($self, key, &s));
    std::string r(s);
    acc_string_free(s);
    return r;
  }
}

/* ---- Model ------------------------------------------------------------------------------------ */

%extend acc_model {
  ~acc_model() { acc_model_free($self); }
  static acc_model *loadTorchscript(const char *path ERR) {
    acc_model *out = nullptr;
    check(acc_model_load_torchscript(path, &out));
    return out;
  }
  static acc_model *fromSpec(const char *jsonSpec ERR) {
    acc_model *out = nullptr;
    check(acc_model_from_spec(jsonSpec, &out));
    return out;
  }
  /* Forward on the list's tensors (in order); flags: ACC_FORWARD_*. */
  acc_tensor_list *forward_(const acc_tensor_list *inputs, unsigned int flags ERR) {
    ListTensors in(inputs);
    acc_tensor_list *out = nullptr;
    check(acc_model_forward($self, in.data(), in.size(), flags, &out));
    return out;
  }
  /* PEFT's forward with adapter_names (names: each sample's adapter name's UTF-8 bytes and a NUL,
   * "__base__" for none); see acc_model_forward_adapters. */
  acc_tensor_list *forwardAdapters_(const acc_tensor_list *inputs, const uint8_t *names, size_t namesSize,
                                    unsigned int flags ERR) {
    ListTensors in(inputs);
    std::vector<std::string> list = split_nul_terminated(names, namesSize);
    std::vector<const char *> ptrs;
    for (const auto &s : list) ptrs.push_back(s.c_str());
    acc_tensor_list *out = nullptr;
    check(acc_model_forward_adapters($self, in.data(), in.size(), ptrs.data(), ptrs.size(), flags, &out));
    return out;
  }
  acc_tensor *forward1_(const acc_tensor *input, unsigned int flags ERR) {
    acc_tensor *out = nullptr;
    check(acc_model_forward1($self, input, flags, &out));
    return out;
  }
  void setTraining(bool training ERR) { check(acc_model_set_training($self, training ? 1 : 0)); }
  bool isTraining(ERR0) {
    int r = 0;
    check(acc_model_is_training($self, &r));
    return r != 0;
  }
  /* false: a TorchScript forward runs eagerly, op by op (PyTorch's eager numbers); layer-spec models
   * always do (accepted, no effect); a prepared model passes it to the model it wraps. */
  void setGraphOptimization(bool enabled ERR) {
    check(acc_model_set_graph_optimization($self, enabled ? 1 : 0));
  }
  /* torch.optim.swa_utils.update_bn(loader, model): BatchNorm's running statistics recomputed as plain
   * averages over the loader's next epoch (layer-spec models; see acc_model_update_bn). */
  void updateBn(acc_dataloader *loader ERR) { check(acc_model_update_bn($self, loader)); }
  /* device "": keep; dtype UNDEFINED: keep. */
  void to_(const char *device, acc_dtype dtype ERR) { check(acc_model_to($self, opt_str(device), dtype)); }
  size_t parameterTensorCount(ERR0) {
    size_t n = 0;
    check(acc_model_parameter_count($self, &n, nullptr));
    return n;
  }
  int64_t parameterElementCount(ERR0) {
    int64_t n = 0;
    check(acc_model_parameter_count($self, nullptr, &n));
    return n;
  }
  acc_string_list *parameterNames(ERR0) {
    acc_string_list *out = nullptr;
    check(acc_model_parameter_names($self, &out));
    return out;
  }
  acc_tensor *parameter_(const char *name ERR) {
    acc_tensor *out = nullptr;
    check(acc_model_parameter($self, name, &out));
    return out;
  }
  void zeroGrad(ERR0) { check(acc_model_zero_grad($self)); }
  /* Freezes (false) or unfreezes the parameters whose names match patterns, comma-separated shell
   * globs over whole names ("0.*", "*.bias,encoder.*"); returns how many matched (none is
   * INVALID_ARGUMENT). Before creating the optimizer and preparing (a prepared model is refused). */
  size_t setRequiresGrad(const char *patterns, bool requiresGrad ERR) {
    size_t n = 0;
    check(acc_model_set_requires_grad($self, patterns, requiresGrad ? 1 : 0, &n));
    return n;
  }
  /* LoRA adapters (PEFT's get_peft_model): adapts the linear layers (and a TorchScript model's
   * convolutions) targetModules names (module names
   * separated by commas, each matching a module named so or ending in "." and it; or "re:" and a
   * regular expression over whole names) and freezes every other parameter. opts: LoRA options (r,
   * lora_alpha, use_rslora, use_dora, rank_pattern, target_parameters, ...: the keys of
   * ACC_OPTIONS_LORA) or null; with target_parameters (a mixture of experts' expert weights),
   * targetModules may be null or "". Before creating the optimizer and preparing.
   * Returns how many layers and parameters were adapted. */
  size_t addLora(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_lora($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's preprocess_corda and get_peft_model with init_lora_weights "corda": the model runs on one
   * epoch of the loader (the forward taking each batch's first `inputs` fields), and the targeted
   * linear layers' adapters start from their weights' components along the inputs' covariance, the
   * weights keeping the residual; opts: the keys of ACC_OPTIONS_LORA (corda_method ipm or kpm, ...).
   * See acc_model_add_lora_corda. Returns how many layers were adapted. */
  size_t addLoraCorda(const char *targetModules, const acc_options *opts, acc_dataloader *loader,
                      int64_t inputs ERR) {
    size_t n = 0;
    check(acc_model_add_lora_corda($self, targetModules, opts, loader, inputs, &n));
    return n;
  }
  /* PEFT's preprocess_loraga, first half: the model trains with every parameter frozen but the
   * targeted linear layers' weights, whose gradients the caller's own forward, loss and backward
   * passes then accumulate; addLoraGa adds the adapters from them. See acc_model_begin_lora_ga. */
  void beginLoraGa(const char *targetModules, const acc_options *opts ERR) {
    check(acc_model_begin_lora_ga($self, targetModules, opts));
  }
  /* PEFT's get_peft_model with init_lora_weights "lora_ga": the adapters start from the averaged
   * gradients' singular vectors, the weights keeping the residual. Returns how many layers were adapted. */
  size_t addLoraGa(ERR0) {
    size_t n = 0;
    check(acc_model_add_lora_ga($self, &n));
    return n;
  }
  /* PEFT's TrainableTokensConfig: chosen rows of embeddings train alone (new tokens without LoRA),
   * every other parameter frozen. targetModules: named as for addLora, or null/"" for the model's
   * input embedding (a head tied to it computes with the same rows). opts: trainable-tokens options
   * (token_indices, init_weights, ...: the keys of ACC_OPTIONS_TRAINABLE_TOKENS). saveLora, loadLora,
   * mergeLora and setLoraEnabled act on them. Returns how many layers have trainable rows. */
  size_t addTrainableTokens(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_trainable_tokens($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's IA3Config: each targeted layer trains a vector scaling its output, or for the
   * feedforward_modules its input, every other parameter frozen. targetModules: named as for addLora.
   * opts: IA3 options (feedforward_modules, init_ia3_weights, ...: the keys of ACC_OPTIONS_IA3) or
   * null. saveLora, loadLora, mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addIa3(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_ia3($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's LoHaConfig: each targeted layer's weight trains as W + ((w1_a w1_b) * (w2_a w2_b)) *
   * alpha / r, every other parameter frozen. targetModules: named as for addLora. opts: LoHa options
   * (r, alpha, rank_dropout, module_dropout, ...: the keys of ACC_OPTIONS_LOHA) or null. saveLora,
   * loadLora, mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addLoha(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_loha($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's LoKrConfig: each targeted layer's weight trains as W + kron(w1, w2) * alpha / r, w1 and w2
   * whole or rank-r products, every other parameter frozen. targetModules: named as for addLora.
   * opts: LoKr options (r, alpha, decompose_both, decompose_factor, init_weights, ...: the keys of
   * ACC_OPTIONS_LOKR) or null. saveLora, loadLora, mergeLora and setLoraEnabled act on them. Returns
   * how many layers. */
  size_t addLokr(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_lokr($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's VeraConfig: frozen random projections shared by the targeted linear layers, each layer
   * training two vectors (vera_lambda_b, vera_lambda_d), every other parameter frozen. targetModules:
   * named as for addLora. opts: VeRA options (r, projection_prng_key, save_projection, vera_dropout,
   * d_initial, ...: the keys of ACC_OPTIONS_VERA) or null. saveLora, loadLora, mergeLora and
   * setLoraEnabled act on them. Returns how many layers. */
  size_t addVera(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_vera($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's OFTConfig on linear layers: each targeted layer's input rotated block by block, the
   * rotations trained (oft_R.weight), every other parameter frozen. targetModules: named as for
   * addLora. opts: OFT options (r or oft_block_size, coft, block_share, ...: the keys of
   * ACC_OPTIONS_OFT) or null. saveLora, loadLora, mergeLora and setLoraEnabled act on them. Returns
   * how many layers. */
  size_t addOft(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_oft($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's AdaLoraConfig: each targeted layer trains lora_A, lora_E and lora_B (an SVD-like delta
   * whose ranks are pruned from init_r towards target_r), every other parameter frozen. targetModules:
   * named as for addLora. opts: AdaLoRA options (total_step, required; init_r, target_r, tinit,
   * tfinal, deltaT, orth_reg_weight, ...: the keys of ACC_OPTIONS_ADALORA). Train on adaloraLoss's
   * loss and call adaloraUpdateAndAllocate after each step. saveLora, loadLora, mergeLora and
   * setLoraEnabled act on them. Returns how many layers. */
  size_t addAdalora(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_adalora($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's BOFTConfig (butterfly orthogonal fine-tuning) on linear layers and 2-D convolutions: each
   * targeted layer's input rotated by boft_n_butterfly_factor butterfly factors of block rotations
   * (boft_R) and its output scaled (boft_s), both trained, every other parameter frozen.
   * targetModules: named as for addLora. opts: BOFT options (boft_block_size or boft_block_num,
   * boft_n_butterfly_factor, boft_dropout, ...: the keys of ACC_OPTIONS_BOFT) or null. saveLora,
   * loadLora, mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addBoft(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_boft($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's HRAConfig (Householder reflection adaptation) on linear layers and 2-D convolutions: each
   * targeted layer computes with its weight times r Householder reflections of hra_u's columns
   * (trained), every other parameter frozen. targetModules: named as for addLora. opts: HRA options
   * (r, apply_GS, init_weights, bias, ...: the keys of ACC_OPTIONS_HRA) or null. saveLora, loadLora,
   * mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addHra(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_hra($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's FourierFTConfig on linear layers (transformers' Conv1D too): each targeted layer trains
   * n_frequency entries of its delta's spectrum (fourierft_spectrum) at places drawn from
   * random_loc_seed, the delta the inverse 2-D FFT, every other parameter frozen. targetModules:
   * named as for addLora. opts: FourierFT options (n_frequency, scaling, random_loc_seed,
   * n_frequency_pattern, ...: the keys of ACC_OPTIONS_FOURIERFT) or null. saveLora, loadLora,
   * mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addFourierft(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_fourierft($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's LNTuningConfig: the modules targetModules names (typically the layer norms) train
   * themselves, every other parameter frozen; their values at the start are kept for a disabled
   * forward and unload. opts: LN tuning options (exclude_modules, modules_to_save, ...: the keys of
   * ACC_OPTIONS_LN_TUNING) or null. saveLora, loadLora, mergeLora and setLoraEnabled act on them.
   * Returns how many modules. */
  size_t addLnTuning(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_ln_tuning($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's MissConfig on linear layers: each targeted layer trains one shard (miss_block) shared by
   * its input's r-wide blocks, in PEFT's variants (init_weights true, false, bat, mini), every other
   * parameter frozen. targetModules: named as for addLora. opts: MiSS options (r, miss_dropout,
   * mini_r, init_weights, bias, ...: the keys of ACC_OPTIONS_MISS) or null. saveLora, loadLora,
   * mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addMiss(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_miss($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's C3AConfig on linear layers: each targeted layer trains a kernel (c3a_kernel) and adds its
   * input convolved circularly, block by block, with it (a block circulant delta), every other
   * parameter frozen. targetModules: named as for addLora. opts: C3A options (block_size,
   * block_size_pattern, init_weights, bias, ...: the keys of ACC_OPTIONS_C3A) or null. saveLora,
   * loadLora, mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addC3a(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_c3a($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's ShiraConfig on linear layers: each targeted layer trains r (in + out) entries of its
   * weight at places its own generator picks (shira_weight, shira_indices), every other parameter
   * frozen. targetModules: named as for addLora. opts: SHiRA options (r, mask_type, random_seed,
   * init_weights, ...: the keys of ACC_OPTIONS_SHIRA) or null. saveLora, loadLora, mergeLora and
   * setLoraEnabled act on them. Returns how many layers. */
  size_t addShira(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_shira($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's RandLoraConfig on linear layers: one pair of frozen random bases for all of them, scaled
   * in each layer by its trained randlora_lambda and randlora_gamma, every other parameter frozen.
   * targetModules: named as for addLora. opts: RandLoRA options (r, projection_prng_key,
   * randlora_alpha, sparse, ...: the keys of ACC_OPTIONS_RANDLORA) or null. saveLora, loadLora,
   * mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addRandlora(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_randlora($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's DeloraConfig on linear layers: each targeted layer trains delora_A, delora_B and
   * delora_lambda (a normalised low-rank delta of trained strength, scaled by the weight's column
   * norms at the start, a frozen buffer), every other parameter frozen. targetModules: named as for
   * addLora. opts: DeLoRA options (r, delora_lambda, module_dropout, ...: the keys of
   * ACC_OPTIONS_DELORA) or null. saveLora, loadLora, mergeLora and setLoraEnabled act on them.
   * Returns how many layers. */
  size_t addDelora(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_delora($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's RoadConfig on linear layers: each targeted layer trains road_theta and road_alpha, the
   * angles and scales that rotate its output pair by pair, every other parameter frozen.
   * targetModules: named as for addLora. opts: RoAd options (variant, group_size, init_weights: the
   * keys of ACC_OPTIONS_ROAD) or null. saveLora, loadLora, mergeLora and setLoraEnabled act on them.
   * Returns how many layers. */
  size_t addRoad(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_road($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's GraloraConfig on linear layers (transformers' Conv1D too): each targeted layer trains
   * gralora_A and gralora_B (its delta's k x k blocks, each of rank r / k) and with hybrid_r a plain
   * LoRA pair beside them, every other parameter frozen. targetModules: named as for addLora. opts:
   * GraLoRA options (r, hybrid_r, alpha, gralora_k, ...: the keys of ACC_OPTIONS_GRALORA) or null.
   * saveLora, loadLora, mergeLora and setLoraEnabled act on them. Returns how many layers. */
  size_t addGralora(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_gralora($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's HiraConfig on linear layers (transformers' Conv1D too): each targeted layer trains hira_A
   * and hira_B, its weight computing as W + W * (B A), every other parameter frozen. targetModules:
   * named as for addLora. opts: HiRA options (r, hira_dropout, init_weights, ...: the keys of
   * ACC_OPTIONS_HIRA) or null. saveLora, loadLora, mergeLora and setLoraEnabled act on them. Returns
   * how many layers. */
  size_t addHira(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_hira($self, targetModules, opts, &n));
    return n;
  }
  /* PEFT's PveraConfig on linear layers (transformers' Conv1D too): VeRA's shared projections and
   * two trained vectors per layer, "<module>.pvera_lambda_b" and "<module>.pvera_lambda_d", the
   * middle sampled in training from the mean and log-variance they give. targetModules: named as for
   * addLora. opts: PVeRA options (r, pvera_dropout, sample_at_inference, generator_seed, ...: the
   * keys of ACC_OPTIONS_PVERA) or null. saveLora, loadLora, mergeLora and setLoraEnabled act on
   * them. Returns how many layers. */
  size_t addPvera(const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_pvera($self, targetModules, opts, &n));
    return n;
  }
  /* AdaLoRA's training loss: loss plus orth_reg_weight times the adapters' orthogonal
   * regularization, a new tensor with autograd history (backward it instead of loss). */
  acc_tensor *adaloraLoss(const acc_tensor *loss ERR) {
    acc_tensor *out = nullptr;
    check(acc_model_adalora_loss($self, loss, &out));
    return out;
  }
  /* PEFT's update_and_allocate(globalStep): once per step, after the backward and the optimizer
   * step and before the gradients are zeroed, it updates the importances and prunes the ranks to
   * the step's budget. */
  void adaloraUpdateAndAllocate(int64_t globalStep ERR) {
    check(acc_model_adalora_update_and_allocate($self, globalStep));
  }
  /* transformers' bitsandbytes quantisation: quantizationConfig is BitsAndBytesConfig as JSON with
   * "load_in_4bit": true (as quantize4bit) or "load_in_8bit": true (LLM.int8 layers, bitsandbytes'
   * Linear8bitLt, int8 weights frozen); see acc_model_quantize. Returns how many layers. */
  size_t quantize(const char *quantizationConfig ERR) {
    size_t n = 0;
    check(acc_model_quantize($self, quantizationConfig, &n));
    return n;
  }
  /* transformers' load_in_4bit (QLoRA's base model): the linear layers keep bitsandbytes' 4-bit
   * weights, frozen. quantizationConfig: BitsAndBytesConfig as JSON ({"load_in_4bit": true,
   * "bnb_4bit_quant_type": "nf4", ...}); see acc_model_quantize_4bit. Returns how many layers. */
  size_t quantize4bit(const char *quantizationConfig ERR) {
    size_t n = 0;
    check(acc_model_quantize_4bit($self, quantizationConfig, &n));
    return n;
  }
  /* PEFT's prepare_model_for_kbit_training: every parameter frozen, float16/bfloat16 ones cast to
   * float32 (the 4-bit and int8 codes stay). Returns how many were cast. */
  size_t prepareForKbitTraining(ERR0) {
    size_t n = 0;
    check(acc_model_prepare_for_kbit_training($self, &n));
    return n;
  }
  /* Writes PEFT's adapter_config.json and adapter_model.safetensors into dir. */
  void saveLora(const char *dir ERR) { check(acc_model_save_lora($self, dir)); }
  /* Reads PEFT's adapter files (adds the adapters if the model has none); checks before changing. */
  void loadLora(const char *dir ERR) { check(acc_model_load_lora($self, dir)); }
  /* Merges the adapters into the weights and removes them (PEFT's merge_and_unload). */
  void mergeLora(ERR0) { check(acc_model_merge_lora($self)); }
  /* PEFT's merge_and_unload(adapter_names=...) (names: each name's UTF-8 bytes and a NUL): the named
   * adapters merged in order, then every adapter removed; see acc_model_merge_lora_adapters. */
  void mergeLoraAdapters(const uint8_t *names, size_t namesSize ERR) {
    std::vector<std::string> list = split_nul_terminated(names, namesSize);
    std::vector<const char *> ptrs;
    for (const auto &s : list) ptrs.push_back(s.c_str());
    check(acc_model_merge_lora_adapters($self, ptrs.data(), ptrs.size()));
  }
  /* The number of adapted layers (0 without adapters). */
  size_t loraCount(ERR0) {
    size_t n = 0;
    check(acc_model_lora_count($self, &n));
    return n;
  }
  /* PEFT's enable_adapter_layers / disable_adapter_layers: disabled, the adapted layers compute as the
   * base model's, e.g. a reference model's outputs (see acc_model_set_lora_enabled). */
  void setLoraEnabled(bool enabled ERR) { check(acc_model_set_lora_enabled($self, enabled ? 1 : 0)); }
  /* Whether the model has adapters and they are enabled. */
  bool isLoraEnabled(ERR0) {
    int r = 0;
    check(acc_model_lora_enabled($self, &r));
    return r != 0;
  }
  /* Several named adapters (PEFT's add_adapter, load_adapter, set_adapter, delete_adapter, unload;
   * see acc_model_add_lora_named): one is active and is the model's adapters, the others are kept
   * aside, frozen. addLoraNamed draws the new adapter as addLora would and keeps it aside (the first
   * adapter of a model is the active one); loadLoraNamed reads PEFT's files as loadLora into a model
   * without adapters would; setAdapter makes one active (drawing nothing); deleteAdapter removes
   * one (the first of the others by name takes the active one's place); unloadLora removes them all
   * without merging. Adapters made by addLora or loadLora are "default"; saveLora writes each other
   * adapter into dir/<name>. Before creating the optimizer and preparing. */
  size_t addLoraNamed(const char *adapterName, const char *targetModules, const acc_options *opts ERR) {
    size_t n = 0;
    check(acc_model_add_lora_named($self, adapterName, targetModules, opts, &n));
    return n;
  }
  void loadLoraNamed(const char *dir, const char *adapterName ERR) {
    check(acc_model_load_lora_named($self, dir, adapterName));
  }
  void setAdapter(const char *adapterName ERR) { check(acc_model_set_adapter($self, adapterName)); }
  void deleteAdapter(const char *adapterName ERR) { check(acc_model_delete_adapter($self, adapterName)); }
  void unloadLora(ERR0) { check(acc_model_unload_lora($self)); }
  /* PEFT's add_weighted_adapter: a new adapter, kept aside, combining the named adapters (names:
   * each name's UTF-8 bytes and a NUL) with one weight each, combinationType "svd", "linear", "cat",
   * "ties", "dare_linear", "dare_ties", "magnitude_prune" or a pruning one with "_svd"; opts (may be
   * null): the keys of ACC_OPTIONS_WEIGHTED_ADAPTER (density, majority_sign_method, svd_rank, ...);
   * see acc_model_add_weighted_adapter_with. Returns how many layers it adapts. */
  size_t addWeightedAdapter(const uint8_t *names, size_t namesSize, const double *data, size_t n,
                            const char *adapterName, const char *combinationType, const acc_options *opts ERR) {
    std::vector<std::string> list = split_nul_terminated(names, namesSize);
    if (list.size() != n)
      fail(ACC_ERR_INVALID_ARGUMENT, "addWeightedAdapter: " + std::to_string(list.size()) + " adapters for " +
                                         std::to_string(n) + " weights");
    std::vector<const char *> ptrs;
    for (const auto &s : list) ptrs.push_back(s.c_str());
    size_t count = 0;
    check(acc_model_add_weighted_adapter_with($self, ptrs.data(), data, n, adapterName, combinationType, opts,
                                              &count));
    return count;
  }
  /* PEFT's initialize_lora_eva_weights: adapters made with init_lora_weights "eva" take the principal
   * components of their layers' inputs on the loader's batches, their ranks redistributed; opts
   * (may be null): the keys of ACC_OPTIONS_EVA (inputs, labels, attention_mask, ...); acc (may be
   * null): on several processes every layer's inputs are gathered from all. See
   * acc_model_initialize_lora_eva. Returns how many layers keep adapters. */
  size_t initializeLoraEva(acc_dataloader *loader, const acc_options *opts, acc_accelerator *acc ERR) {
    size_t count = 0;
    check(acc_model_initialize_lora_eva($self, loader, opts, acc, &count));
    return count;
  }
  /* PEFT's replace_lora_weights_loftq: the adapters of adapterName (null or "": the active one) on
   * 4-bit layers restart from LoftQ's factors of each layer's quantisation error against the
   * unquantised weights in modelPath (a model.safetensors or its folder). The C API's keep callback
   * is not taken here (every layer keeps its new adapters); see
   * acc_model_replace_lora_weights_loftq. Returns how many layers. */
  size_t replaceLoraWeightsLoftq(const char *modelPath, const char *adapterName ERR) {
    size_t n = 0;
    check(acc_model_replace_lora_weights_loftq($self, modelPath, adapterName, nullptr, nullptr, &n));
    return n;
  }
  /* The active adapter's name (an error without adapters). */
  std::string activeAdapter(ERR0) {
    char *s = nullptr;
    check(acc_model_active_adapter($self, &s));
    std::string r(s ? s : "");
    acc_string_free(s);
    return r;
  }
  /* Every adapter's name, in the order they came. */
  acc_string_list *adapterNames(ERR0) {
    acc_string_list *out = nullptr;
    check(acc_model_adapter_names($self, &out));
    return out;
  }
  acc_tensor_list *stateDict(ERR0) {
    acc_tensor_list *out = nullptr;
    check(acc_model_state_dict($self, &out));
    return out;
  }
  void loadStateDict(const acc_tensor_list *state, bool strict ERR) {
    check(acc_model_load_state_dict($self, state, strict ? 1 : 0));
  }
  void saveTorchscript(const char *path ERR) { check(acc_model_save_torchscript($self, path)); }
  accswig::LoadReport *loadSafetensors(const char *path, bool strict ERR) {
    acc_string_list *missing = nullptr, *unexpected = nullptr;
    check(acc_model_load_safetensors($self, path, strict ? 1 : 0, &missing, &unexpected));
    auto *report = new accswig::LoadReport;
    for (auto pair : {std::make_pair(missing, &report->missing_names), std::make_pair(unexpected, &report->unexpected_names)}) {
      size_t n = 0;
      if (pair.first && acc_string_list_size(pair.first, &n) == ACC_OK)
        for (size_t i = 0; i < n; ++i) {
          const char *s = nullptr;
          if (acc_string_list_get(pair.first, i, &s) == ACC_OK) pair.second->push_back(s);
        }
      acc_string_list_free(pair.first);
    }
    return report;
  }
}

/* ---- Optimizer and Scheduler ------------------------------------------------------------------ */

%extend acc_optimizer {
  /* algorithm "sgd", "adam", "adamw", "rmsprop", "adagrad", "lion" or "adafactor"; opts may be null
   * (PyTorch's defaults, or the reference code's for lion and adafactor). */
  acc_optimizer(acc_model *model, const char *algorithm, const acc_options *opts ERR) {
    acc_optimizer *out = nullptr;
    check(acc_optimizer_create(model, algorithm, opts, &out));
    return out;
  }
  ~acc_optimizer() { acc_optimizer_free($self); }
  /* names: each parameter name's UTF-8 bytes and a NUL (split_nul_terminated). */
  void addParamGroup(const uint8_t *names, size_t namesSize, const acc_options *overrides ERR) {
    std::vector<std::string> list = split_nul_terminated(names, namesSize);
    std::vector<const char *> ptrs;
    for (const auto &s : list) ptrs.push_back(s.c_str());
    check(acc_optimizer_add_param_group($self, ptrs.data(), ptrs.size(), overrides));
  }
  /* The same for the trainable parameters whose names match patterns (as setRequiresGrad matches
   * them); returns how many moved. */
  size_t addParamGroupMatching(const char *patterns, const acc_options *overrides ERR) {
    size_t n = 0;
    check(acc_optimizer_add_param_group_matching($self, patterns, overrides, &n));
    return n;
  }
  size_t numParamGroups(ERR0) {
    size_t n = 0;
    check(acc_optimizer_num_param_groups($self, &n));
    return n;
  }
  double getLr(size_t group ERR) {
    double lr = 0;
    check(acc_optimizer_get_lr($self, group, &lr));
    return lr;
  }
  void setLr(size_t group, double lr ERR) { check(acc_optimizer_set_lr($self, group, lr)); }
  /* PyTorch's param_groups[group][key] for a numeric key ("momentum", "beta1", "weight_decay", ...). */
  double getHyperparameter(size_t group, const char *key ERR) {
    double value = 0;
    check(acc_optimizer_get_hyperparameter($self, group, key, &value));
    return value;
  }
  void step_(ERR0) { check(acc_optimizer_step($self)); }
  void zeroGrad(ERR0) { check(acc_optimizer_zero_grad($self)); }
  /* A schedule-free optimizer's train() (true) or eval() (false); others ignore it. */
  void setTraining(bool training ERR) { check(acc_optimizer_set_training($self, training ? 1 : 0)); }
  /* PyTorch's optimizer.state[p][field] for the parameter named `param` (a copy). */
  acc_tensor *stateOf(const char *param, const char *field ERR) {
    acc_tensor *out = nullptr;
    check(acc_optimizer_state($self, param, field, &out));
    return out;
  }
  /* The fields stateOf gives for `param`: none before its first step. */
  acc_string_list *stateFields(const char *param ERR) {
    acc_string_list *out = nullptr;
    check(acc_optimizer_state_fields($self, param, &out));
    return out;
  }
}

%extend acc_scheduler {
  /* name: one of transformers' get_scheduler() names ("linear", "cosine", ...) or "step"; see accelerate.h. */
  acc_scheduler(acc_optimizer *opt, const char *name, const acc_options *opts ERR) {
    acc_scheduler *out = nullptr;
    check(acc_scheduler_create(opt, name, opts, &out));
    return out;
  }
  ~acc_scheduler() { acc_scheduler_free($self); }
  /* PyTorch's SequentialLR: from step `milestone` on, schedule `name` takes over (opts may be null). */
  void then_(int64_t milestone, const char *name, const acc_options *opts ERR) {
    check(acc_scheduler_then($self, milestone, name, opts));
  }
  /* PyTorch's ChainedScheduler: schedule `name` steps with this one, from the rate it leaves (opts may be null). */
  void chain_(const char *name, const acc_options *opts ERR) { check(acc_scheduler_chain($self, name, opts)); }
  void step_(ERR0) { check(acc_scheduler_step($self)); }
  /* reduce_lr_on_plateau's step, with the metric it follows. */
  void stepMetric(double metric ERR) { check(acc_scheduler_step_metric($self, metric)); }
  double getLastLr(size_t group ERR) {
    double lr = 0;
    check(acc_scheduler_get_last_lr($self, group, &lr));
    return lr;
  }
  int64_t getStep(ERR0) {
    int64_t n = 0;
    check(acc_scheduler_get_step($self, &n));
    return n;
  }
}

/* ---- AveragedModel ---------------------------------------------------------------------------- */

%extend acc_averaged_model {
  /* opts: averaged-model options (strategy "swa" or "ema", decay, use_buffers, device) or null (SWA). */
  acc_averaged_model(const acc_model *model, const acc_options *opts ERR) {
    acc_averaged_model *out = nullptr;
    check(acc_averaged_model_create(model, opts, &out));
    return out;
  }
  ~acc_averaged_model() { acc_averaged_model_free($self); }
  void update_(const acc_model *model ERR) { check(acc_averaged_model_update($self, model)); }
  int64_t count_(ERR0) {
    int64_t n = 0;
    check(acc_averaged_model_count($self, &n));
    return n;
  }
  void copyTo(acc_model *model ERR) { check(acc_averaged_model_copy_to($self, model)); }
  void swap_(acc_model *model ERR) { check(acc_averaged_model_swap($self, model)); }
  acc_tensor_list *stateDict(ERR0) {
    acc_tensor_list *out = nullptr;
    check(acc_averaged_model_state_dict($self, &out));
    return out;
  }
  void loadStateDict(const acc_tensor_list *state ERR) { check(acc_averaged_model_load_state_dict($self, state)); }
}

/* ---- Dataset and DataLoader ------------------------------------------------------------------- */

%extend acc_dataset {
  ~acc_dataset() { acc_dataset_free($self); }
  /* Fields: tensors sharing their first dimension, in the list's order. */
  static acc_dataset *fromTensors(const acc_tensor_list *fields ERR) {
    ListTensors in(fields);
    acc_dataset *out = nullptr;
    check(acc_dataset_from_tensors(in.data(), in.size(), &out));
    return out;
  }
  static acc_dataset *fromIdx(const char *imagesPath, const char *labelsPath ERR) {
    acc_dataset *out = nullptr;
    check(acc_dataset_from_idx(imagesPath, labelsPath, &out));
    return out;
  }
  /* The library owns `source` from here on and releases it when the dataset is gone. */
  static acc_dataset *fromSampleSource(int64_t size, accswig::SampleSource *source ERR) {
    acc_dataset *out = nullptr;
    register_callback(source, [&](void *ud, acc_free_fn fr) {
      return acc_dataset_from_callback(size, &sample_trampoline, ud, fr, &out);
    });
    return out;
  }
  static acc_dataset *fromStreamSource(accswig::StreamSource *source, int64_t sizeHint ERR) {
    acc_dataset *out = nullptr;
    register_callback(source, [&](void *ud, acc_free_fn fr) {
      return acc_dataset_from_iterator(&next_trampoline, &start_trampoline, ud, fr, sizeHint, &out);
    });
    return out;
  }
  acc_dataset *subset_(int64_t start, int64_t count ERR) {
    acc_dataset *out = nullptr;
    check(acc_dataset_subset($self, start, count, &out));
    return out;
  }
  int64_t size_(ERR0) {
    int64_t n = 0;
    check(acc_dataset_size($self, &n));
    return n;
  }
  acc_tensor_list *get_(int64_t index ERR) {
    acc_tensor_list *out = nullptr;
    check(acc_dataset_get($self, index, &out));
    return out;
  }
}

%extend acc_dataloader {
  /* opts may be null (batch size 1, in order). */
  acc_dataloader(acc_dataset *ds, const acc_options *opts ERR) {
    acc_dataloader *out = nullptr;
    check(acc_dataloader_create(ds, opts, &out));
    return out;
  }
  ~acc_dataloader() { acc_dataloader_free($self); }
  /* A batch sampler's batches: their indices laid end to end (data) and each batch's size (sizes);
   * the host layers flatten a list of index arrays into these. The sizes must add up to the indices'
   * length, which the C function cannot check. opts may be null. */
  static acc_dataloader *fromBatchArrays(acc_dataset *ds, const int64_t *data, size_t n, const int64_t *sizes,
                                         size_t nsizes, const acc_options *opts ERR) {
    std::vector<size_t> counts(nsizes);
    size_t total = 0;
    for (size_t k = 0; k < nsizes; ++k) {
      if (sizes[k] < 0) fail(ACC_ERR_INVALID_ARGUMENT, "a batch size is negative");
      counts[k] = (size_t)sizes[k];
      total += counts[k];
    }
    if (total != n) fail(ACC_ERR_INVALID_ARGUMENT, "the batch sizes do not add up to the number of indices");
    acc_dataloader *out = nullptr;
    check(acc_dataloader_create_from_batches(ds, data, counts.data(), counts.size(), opts, &out));
    return out;
  }
  /* The next batch, or null at the end of the epoch (the call after that starts the next one). */
  acc_tensor_list *next_(ERR0) {
    acc_tensor_list *out = nullptr;
    check(acc_dataloader_next($self, &out));
    return out;
  }
  int64_t length_(ERR0) {
    int64_t n = 0;
    check(acc_dataloader_length($self, &n));
    return n;
  }
  int64_t epoch_(ERR0) {
    int64_t n = 0;
    check(acc_dataloader_epoch($self, &n));
    return n;
  }
  void setEpoch(int64_t epoch ERR) { check(acc_dataloader_set_epoch($self, epoch)); }
  /* The library owns `collator` from here on. */
  void setCollator(accswig::Collator *collator ERR) {
    register_callback(collator, [&](void *ud, acc_free_fn fr) {
      return acc_dataloader_set_collate($self, &collate_trampoline, ud, fr);
    });
  }
  void skipFirstBatches(int64_t batches ERR) { check(acc_dataloader_skip_first_batches($self, batches)); }
  int64_t totalBatchSize(ERR0) {
    int64_t n = 0;
    check(acc_dataloader_total_batch_size($self, &n));
    return n;
  }
  int64_t totalDatasetLength(ERR0) {
    int64_t n = 0;
    check(acc_dataloader_total_dataset_length($self, &n));
    return n;
  }
  bool endOfEpoch(ERR0) {
    int r = 0;
    check(acc_dataloader_end_of_epoch($self, &r));
    return r != 0;
  }
  /* Ends the epoch being iterated before its last batch (a loop left early); between epochs it only
     drops an iterator iter() made. */
  void endEpoch(ERR0) { check(acc_dataloader_end_epoch($self)); }
  /* What creating a Python iterator over the loader (iter(loader)) draws before its first batch, so
     that loaders read in step draw as Python's zip (acc_dataloader_iter); every pass does it. Named
     iter_ here, since SWIG would name a member iter's wrapper acc_dataloader_iter, the C function. */
  void iter_(ERR0) { check(acc_dataloader_iter($self)); }
  /* Whether an epoch has begun and not ended. */
  bool inEpoch(ERR0) {
    int r = 0;
    check(acc_dataloader_in_epoch($self, &r));
    return r != 0;
  }
}

%include "swig/accelerator.i"
%include "swig/callbacks.i"
