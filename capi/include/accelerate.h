/*
 * accelerate.h — the C API of accelerate, Hugging Face Accelerate's training runtime on libtorch.
 *
 * This is the only public header. It is plain C11 (and valid C++), and stable within a major
 * version: functions are only ever added, enum values never change.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 *
 *  - Errors. A fallible function returns an acc_status; ACC_OK (0) is success. On failure nothing
 *    is written to the out-parameters, and acc_last_error_message() describes the problem. The
 *    message is thread-local and library-owned: read it on the same thread before the next acc_*
 *    call, and never free it.
 *  - Out-parameters come last. A handle handed out through an out-parameter is owned by the caller,
 *    who releases it with the matching acc_<type>_free(). Every free function accepts NULL.
 *  - Lifetimes. Children keep their parents alive (an optimizer keeps its model alive, a scheduler
 *    its optimizer), so handles may be released in any order. A released or foreign handle is
 *    reported as ACC_ERR_INVALID_HANDLE, never dereferenced.
 *  - User data. A function taking `user_data` with a `free_user_data` (may be NULL) owns user_data
 *    from the call on: free_user_data(user_data) runs once when what it was given to is gone, and
 *    before the call returns where the call fails, whatever failed (a NULL or freed handle included).
 *    (acc_tensor_from_host_borrow's deleter is the one exception, as its comment says.)
 *  - Threads. A handle is used by one thread at a time; freeing may happen on any thread. Torch's
 *    per-thread state (grad mode, autocast) is set inside each call, never left behind. An
 *    accelerator may serve threads that each train their own objects (they prepare, step and log
 *    at once); its accumulation and no_sync state is one for all of them, as in Accelerate.
 *    acc_save_state and acc_load_state read or write every object the accelerator prepared: call
 *    them while no other thread steps or changes those objects. Calls from a pthread key's
 *    destructor or an exit handler work.
 *  - fork(). A child forked from a process that has used the library may compute (models,
 *    tensors, new loaders, saves), and its exit() leaves the parent's tracker files alone. What
 *    the parent's threads serve stays the parent's: in the child, iterating a loader with worker
 *    threads, logging to the parent's trackers or starting runs with them (acc_init_trackers) is
 *    ACC_ERR_INVALID_ARGUMENT; ending training and freeing such objects return without waiting for
 *    threads the child does not have, and leave the parent's runs open (MLflow's, ClearML's, ...).
 *  - Callbacks may call the library. A call that would change an object in the middle of the call
 *    running the callback (the loader fetching, the schedule stepping, the trackers being called)
 *    is ACC_ERR_INVALID_ARGUMENT; freeing a handle in use takes effect once that call returns.
 *  - Sizes are int64_t; counts are size_t and follow their pointer. Strings are UTF-8.
 *
 * Enums are int-sized (each has a *_MAX_ENUM sentinel that is never a valid value), so any int a
 * caller passes is checked, not undefined behaviour.
 *
 * Names: every export starts with acc_. None shares a name with the OpenACC functions that GCC's
 * libgomp (loaded by libtorch) exports, such as acc_init, acc_create or acc_free.
 */
#ifndef ACCELERATE_H
#define ACCELERATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define ACC_API __attribute__((visibility("default")))
#define ACC_NODISCARD __attribute__((warn_unused_result))
#else
#define ACC_API
#define ACC_NODISCARD
#endif

/* ------------------------------------------------------------------------------------------------
 * Versions
 * ---------------------------------------------------------------------------------------------- */

#define ACC_VERSION_MAJOR 0
#define ACC_VERSION_MINOR 1
#define ACC_VERSION_PATCH 0
/* Bumped on any incompatible change of the ABI; bindings compare it at load. */
#define ACC_ABI_VERSION 1

/* ------------------------------------------------------------------------------------------------
 * Status codes. Values are fixed forever.
 * ---------------------------------------------------------------------------------------------- */

typedef enum acc_status {
  ACC_OK = 0,
  ACC_ERR_INVALID_ARGUMENT = 1, /* a bad value: NULL pointer, wrong shape or dtype, bad option */
  ACC_ERR_INVALID_HANDLE = 2,   /* NULL, released or foreign handle */
  ACC_ERR_NOT_INITIALIZED = 3,  /* a precondition is not met (e.g. a step before backward) */
  ACC_ERR_UNSUPPORTED = 4,      /* the feature is not built in or not available on this machine */
  ACC_ERR_OUT_OF_MEMORY = 5,    /* host or device memory exhausted */
  ACC_ERR_TIMEOUT = 6,          /* a collective or rendezvous did not finish in time */
  ACC_ERR_ABORTED = 7,          /* a peer process failed */
  ACC_ERR_DISTRIBUTED = 8,      /* any other error of the process group */
  ACC_ERR_IO = 9,               /* a file could not be read or written, or is corrupt */
  ACC_ERR_VERSION_MISMATCH = 10,/* the caller was built against another ABI version */
  ACC_ERR_INTERNAL = 11,        /* a bug: please report it with acc_last_error_backtrace() */
  ACC_STATUS_MAX_ENUM = 0x7fffffff
} acc_status;

/* Tensor element types. Values are fixed forever. */
typedef enum acc_dtype {
  ACC_DTYPE_UNDEFINED = 0, /* "keep the current dtype" where a function accepts it */
  ACC_DTYPE_FLOAT32 = 1,
  ACC_DTYPE_FLOAT64 = 2,
  ACC_DTYPE_BFLOAT16 = 3,
  ACC_DTYPE_FLOAT16 = 4,
  ACC_DTYPE_INT64 = 5,
  ACC_DTYPE_INT32 = 6,
  ACC_DTYPE_UINT8 = 7,
  ACC_DTYPE_BOOL = 8,
  ACC_DTYPE_INT8 = 9,
  ACC_DTYPE_INT16 = 10,
  ACC_DTYPE_MAX_ENUM = 0x7fffffff
} acc_dtype;

/* Loss reductions, as PyTorch's reduction="none" | "mean" | "sum". */
typedef enum acc_reduction {
  ACC_REDUCTION_NONE = 0,
  ACC_REDUCTION_MEAN = 1,
  ACC_REDUCTION_SUM = 2,
  ACC_REDUCTION_MAX_ENUM = 0x7fffffff
} acc_reduction;

/* Flags of acc_model_forward(). */
#define ACC_FORWARD_DEFAULT 0u
#define ACC_FORWARD_NO_GRAD 1u /* run without recording autograd history (inference, evaluation) */

/* Kinds of handle, for the live-handle counters. */
typedef enum acc_handle_kind {
  ACC_HANDLE_ANY = 0,
  ACC_HANDLE_TENSOR = 1,
  ACC_HANDLE_TENSOR_LIST = 2,
  ACC_HANDLE_STRING_LIST = 3,
  ACC_HANDLE_OPTIONS = 4,
  ACC_HANDLE_MODEL = 5,
  ACC_HANDLE_OPTIMIZER = 6,
  ACC_HANDLE_SCHEDULER = 7,
  ACC_HANDLE_DATASET = 8,
  ACC_HANDLE_DATALOADER = 9,
  ACC_HANDLE_ACCELERATOR = 10,
  ACC_HANDLE_PROGRESS = 11,
  ACC_HANDLE_BYTES = 12, /* the sink of a state-saving callback, live during that callback only */
  ACC_HANDLE_AVERAGED_MODEL = 13,
  ACC_HANDLE_CHECKPOINT_MODELS = 14, /* the models a checkpoint pre-hook gets, live during that hook only */
  ACC_HANDLE_MAX_ENUM = 0x7fffffff
} acc_handle_kind;

/* Opaque handles. */
typedef struct acc_tensor acc_tensor;
typedef struct acc_tensor_list acc_tensor_list;
typedef struct acc_string_list acc_string_list;
typedef struct acc_options acc_options;
typedef struct acc_model acc_model;
typedef struct acc_optimizer acc_optimizer;
typedef struct acc_scheduler acc_scheduler;
typedef struct acc_dataset acc_dataset;
typedef struct acc_dataloader acc_dataloader;
typedef struct acc_accelerator acc_accelerator;
typedef struct acc_averaged_model acc_averaged_model;

/* Releases the user_data of a callback once the library no longer needs it (may be NULL wherever one
 * is taken). It may run on any thread. */
typedef void (*acc_free_fn)(void *user_data);

/* ------------------------------------------------------------------------------------------------
 * Library information and errors
 * ---------------------------------------------------------------------------------------------- */

/* Writes the library's version. Any pointer may be NULL. */
ACC_API void acc_version(int *major, int *minor, int *patch);

/* The ABI version the library was built with (ACC_ABI_VERSION of its header). */
ACC_API int acc_abi_version(void);

/* Returns ACC_OK when a caller built against ACC_ABI_VERSION == expected can use this library,
 * ACC_ERR_VERSION_MISMATCH (naming both versions) otherwise. Bindings call it once at load. */
ACC_API ACC_NODISCARD acc_status acc_check_abi(int expected);

/* A JSON object describing the build: library and libtorch versions, CUDA and NCCL availability,
 * the BLAS library in use, the C++ ABI. Library-owned, valid until the process exits. */
ACC_API const char *acc_build_info(void);

/* The message of the last failure on this thread ("" if none). Library-owned; valid until the next
 * acc_* call on this thread. */
ACC_API const char *acc_last_error_message(void);

/* The status of the last failure on this thread (ACC_OK if none). */
ACC_API acc_status acc_last_error_code(void);

/* The C++ backtrace of the last failure on this thread ("" if none was captured). Library-owned,
 * valid until the next acc_* call on this thread. */
ACC_API const char *acc_last_error_backtrace(void);

/* A static, human-readable name for a status ("ACC_ERR_IO"); "unknown status" for other values. */
ACC_API const char *acc_status_name(acc_status status);

/* Frees a string that the library handed out through a char** out-parameter. NULL, a pointer the
 * library did not hand out and one already freed are ignored. */
ACC_API void acc_string_free(char *str);

/* Number of live handles of a kind (ACC_HANDLE_ANY: all kinds); for leak checks in tests and
 * bindings. */
ACC_API int64_t acc_debug_live_handles(acc_handle_kind kind);

/* Accelerate's set_seed: seeds every random generator the library uses (torch's CPU and CUDA
 * generators; shuffling loaders without their own seed draw from them). The same seed gives the
 * same run. */
ACC_API ACC_NODISCARD acc_status acc_set_seed(uint64_t seed);
/* Flags of acc_set_seed_with(). */
#define ACC_SEED_DEVICE_SPECIFIC 1u /* seed + this process's index (from the launcher's environment) */
#define ACC_SEED_DETERMINISTIC 2u   /* and torch.use_deterministic_algorithms(True) from now on */
/* Accelerate's set_seed(seed, device_specific, deterministic): flags is 0 or a bitwise OR of
 * ACC_SEED_*. With ACC_SEED_DEVICE_SPECIFIC every process draws its own stream (different dropout
 * and augmentation per process); a seed that would pass 2^64 - 1 is ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_set_seed_with(uint64_t seed, uint32_t flags);

/* torch.get_rng_state(): the state of torch's global CPU generator (the one dropout, shuffles
 * without a seed and acc_tensor_rand draw from), as a new 1-D uint8 tensor. */
ACC_API ACC_NODISCARD acc_status acc_random_get_state(acc_tensor **out);
/* torch.set_rng_state(state): restores a state acc_random_get_state returned (or Python's
 * torch.get_rng_state()). Anything else (another dtype, shape or size, or bytes that are not a
 * generator state) is ACC_ERR_INVALID_ARGUMENT and changes nothing. */
ACC_API ACC_NODISCARD acc_status acc_random_set_state(const acc_tensor *state);
/* torch.rand(dims) and torch.randn(dims): new float32 CPU tensors drawn from torch's global CPU
 * generator, the same numbers Python draws after the same seed. */
ACC_API ACC_NODISCARD acc_status acc_tensor_rand(const int64_t *dims, size_t ndim, acc_tensor **out);
ACC_API ACC_NODISCARD acc_status acc_tensor_randn(const int64_t *dims, size_t ndim, acc_tensor **out);

/* A training run for acc_find_executable_batch_size: returns 0 when it finished with batch_size, or
 * an acc_status when it failed, usually the status of the library call that failed
 * (ACC_ERR_OUT_OF_MEMORY when the batch did not fit). */
typedef int (*acc_batch_size_fn)(void *user_data, int64_t batch_size);
/* Accelerate's find_executable_batch_size: runs fn with starting_batch_size and, each time it returns
 * ACC_ERR_OUT_OF_MEMORY, gives cached GPU memory back and runs it again with 90% of the batch size
 * (rounded down). *out_batch_size: the batch size of the run that finished. Another status from fn
 * ends the search and is returned, with the message fn left with acc_callback_set_error or else that
 * of the library call that failed (a value that is no acc_status is ACC_ERR_IO). When no batch size
 * down to 1 fits: ACC_ERR_OUT_OF_MEMORY. fn runs on the calling thread; each process searches on its
 * own, as in Accelerate. */
ACC_API ACC_NODISCARD acc_status acc_find_executable_batch_size(int64_t starting_batch_size, acc_batch_size_fn fn,
                                                                void *user_data, int64_t *out_batch_size);

/* ------------------------------------------------------------------------------------------------
 * String lists (parameter names, state-dict keys, ...)
 * ---------------------------------------------------------------------------------------------- */

ACC_API ACC_NODISCARD acc_status acc_string_list_size(const acc_string_list *list, size_t *out);
/* Borrowed: valid while the list lives. */
ACC_API ACC_NODISCARD acc_status acc_string_list_get(const acc_string_list *list, size_t index,
                                                     const char **out);
/* An item with its size, for lists of bytes that may hold NUL (acc_gather_object). */
ACC_API ACC_NODISCARD acc_status acc_string_list_get_bytes(const acc_string_list *list, size_t index,
                                                           const void **data, size_t *size);
ACC_API void acc_string_list_free(acc_string_list *list);

/* ------------------------------------------------------------------------------------------------
 * Options: a typed key/value object. An options object is created for one purpose (its kind
 * decides the keys it accepts); setting an unknown key or a value of the wrong type or range is
 * ACC_ERR_INVALID_ARGUMENT with a message that names the key.
 *
 * Keys of ACC_OPTIONS_OPTIMIZER (all optional; defaults are PyTorch's, or for lion and adafactor
 * those of their reference code; a key the algorithm does not take is an error):
 *   lr (double; default 1e-3 for sgd, adam, adamw, radam; 2e-3 for nadam, adamax; 1e-2 for
 *   rmsprop, adagrad, rprop, asgd; 1 for adadelta; 1e-4 for lion; unset for adafactor),
 *   weight_decay (double; 0, or 1e-2 for adamw; every algorithm but rprop),
 *   momentum (double, sgd and rmsprop, default 0; sgd_schedule_free 0.9), dampening (double, sgd), nesterov (bool, sgd),
 *   beta1, beta2 (double; adam/adamw/radam/nadam/adamax 0.9, 0.999; lion 0.9, 0.99; adafactor
 *   takes beta1 alone: unset, no first moment), eps (double; adam/adamw/radam/nadam/adamax and
 *   rmsprop 1e-8, adagrad 1e-10, adadelta 1e-6),
 *   amsgrad (bool, adam/adamw), alpha (double, rmsprop's smoothing, default 0.99; asgd's power of
 *   the step size's decay, default 0.75), centered (bool, rmsprop, default false),
 *   lr_decay (double, adagrad, default 0), initial_accumulator_value (double,
 *   adagrad, default 0: every accumulator starts at the optimizer's value, as torch's constructor
 *   fills them; a group's own changes nothing), decoupled_weight_decay (bool, radam and nadam, default false: the
 *   weights decay as adamw's), momentum_decay (double, nadam, default 0.004),
 *   maximize (bool, every algorithm but lion and adafactor, default false: PyTorch's maximize, the
 *   loss ascends; for the whole optimizer, not a group; the gradients are as backward left them
 *   after the step),
 *   foreach (bool, every algorithm but lion and adafactor; unset: PyTorch's default, the foreach
 *   rules for CUDA parameters from PyTorch 2.0, the one-tensor rules elsewhere; true needs a
 *   libtorch of 2.0 or later, else ACC_ERR_UNSUPPORTED; not with fused; for the whole optimizer),
 *   fused (bool, sgd, adam, adamw, adagrad, default false: PyTorch's fused=True, one kernel per
 *   device and dtype, bit for bit PyTorch's fused step; needs a libtorch of 2.4 or later, else
 *   ACC_ERR_UNSUPPORTED; adagrad's runs on the CPU only, as PyTorch's; for the whole optimizer,
 *   not a group), rho (double, adadelta, in [0, 1], default 0.9),
 *   etaminus, etaplus (double, rprop: PyTorch's etas, 0 < etaminus < 1 < etaplus, default 0.5 and
 *   1.2), step_size_min, step_size_max (double, rprop: PyTorch's step_sizes, default 1e-6 and 50;
 *   lr is every step size's start), lambd (double, asgd, default 1e-4), t0 (double, asgd: the step
 *   from which the parameters are averaged into its state's "ax", default 1e6).
 *   adafactor (transformers' arguments): eps1, eps2 (double, its eps pair, default 1e-30 and 1e-3),
 *   clip_threshold (double > 0, default 1), decay_rate (double <= 0, default -0.8),
 *   scale_parameter (bool, default true: the step size is scaled by the parameter's RMS),
 *   relative_step (bool, default true: a step size of min(1e-2, 1/sqrt(step)) instead of lr; lr
 *   must then be unset, and relative_step false needs lr), warmup_init (bool, default false:
 *   min(1e-6 * step, 1/sqrt(step)); needs relative_step).
 *   lomo and adalomo (lomo_optim's arguments; lr default 1e-3): clip_grad_norm (double > 0, unset:
 *   none; needs acc_lomo_grad_norm before each backward), clip_grad_value (double > 0, unset: none),
 *   weight_decay (double, default 0); adalomo also loss_scale (double, default 1024, 0: none; the
 *   loss is multiplied by it and the gradients divided), eps1, eps2 (default 1e-30 and 1e-3),
 *   clip_threshold (default 1), decay_rate (default -0.8), as adafactor's.
 *   adamw_schedule_free and sgd_schedule_free (the schedulefree package's arguments; lr default
 *   0.0025 and 1, betas 0.9, 0.999 or momentum 0.9 in (0, 1), eps 1e-8):
 *   warmup_steps (int, default 0: the rate warms up linearly over them), r (double, default 0),
 *   weight_lr_power (double, default 2: the averaging weights grow as step^r * max
 *   rate^weight_lr_power), inner_momentum (double in [0, 1), adamw_schedule_free, default 0).
 *   bitsandbytes' 8-bit optimizers (its classes' arguments and defaults: adam_8bit and adamw_8bit
 *   lr 1e-3, beta1, beta2 0.9, 0.999, eps 1e-8, weight_decay 0 and 1e-2; lion_8bit lr 1e-4,
 *   beta1, beta2 0.9, 0.99; sgd_8bit lr (needed), momentum (needed, in (0, 1)), weight_decay 0;
 *   rmsprop_8bit lr 1e-2, alpha 0.99 (in (0, 1)), eps 1e-8, weight_decay 0; adagrad_8bit lr 1e-2,
 *   eps 1e-10, weight_decay 0; ademamix_8bit lr 1e-3, beta1, beta2 0.9, 0.999, eps 1e-8,
 *   weight_decay 1e-2 and:) beta3 (double in [0, 1), default 0.9999: the slow first moment's decay),
 *   alpha (double, default 5: the slow moment's weight), t_alpha, t_beta3 (int >= 0, default 0:
 *   none; steps over which alpha and beta3 warm up, as AdEMAMix's schedulers), and for each:
 *   min_8bit_size (int >= 0, default 4096: parameters with fewer elements keep 32-bit moments).
 * Keys of ACC_OPTIONS_SCHEDULER (transformers' names; every schedule takes num_warmup_steps and
 * num_training_steps, ignored where unused as get_scheduler() does; another key that the schedule
 * does not use is an error):
 *   num_warmup_steps (int, default 0), num_training_steps (int),
 *   num_cycles (double; cosine, cosine_with_min_lr, cosine_warmup_with_min_lr and
 *   warmup_stable_decay's cosine decay: waves, unset 0.5; cosine_with_restarts: restarts, unset 1),
 *   power (double, polynomial, default 1.0), lr_end (double, polynomial, default 1e-7),
 *   PyTorch's chainable schedulers: step_size (int, step), gamma (double; step and multistep: unset
 *   0.1; exponential: needed), milestones (string, multistep: the steps that decay, "30,80"),
 *   T_max (int, cosine_annealing: steps from the base rate down to eta_min), eta_min (double,
 *   cosine_annealing and cosine_annealing_warm_restarts, default 0),
 *   total_iters (int, constant_lr, linear_lr, polynomial_lr: the steps the change lasts, default 5),
 *   factor (double; constant_lr: the rate over the base rate until total_iters, in (0, 1], unset
 *   1/3; reduce_lr_on_plateau below), start_factor (double in (0, 1], linear_lr: the first step's
 *   rate over the base rate, default 1/3), end_factor (double in [0, 1], linear_lr: the rate
 *   from total_iters on, default 1), power above (polynomial_lr too),
 *   T_0 (int, cosine_annealing_warm_restarts: steps until the first restart), T_mult (int,
 *   cosine_annealing_warm_restarts: each period over the one before, default 1),
 *   swa_lr (PyTorch's SWALR, from the rate it finds to swa_lr, then swa_lr; it can only lead a
 *   sequence): swa_lr (double, needed), anneal_epochs (int, the steps it takes, 0: at once,
 *   default 10), anneal_strategy ("cos" or "linear", default "cos"),
 *   timescale (int, inverse_sqrt; unset: num_warmup_steps, or 10000 without warm-up),
 *   min_lr, min_lr_rate (double, one of the two: cosine_with_min_lr, cosine_warmup_with_min_lr; the
 *   final learning rate, or its ratio to the optimizer's lr), warmup_lr_rate (double,
 *   cosine_warmup_with_min_lr: the first step's rate; unset, warm-up is (step + 1) / num_warmup_steps),
 *   warmup_stable_decay: num_decay_steps (int, needed), num_stable_steps (int; unset:
 *   num_training_steps - num_warmup_steps - num_decay_steps), warmup_type, decay_type ("linear",
 *   "cosine", "1-sqrt"; defaults "linear" and "cosine"), min_lr_ratio (double in [0, 1], default 0).
 *   reduce_lr_on_plateau (PyTorch's ReduceLROnPlateau, stepped by acc_scheduler_step_metric):
 *   mode ("min" or "max", default "min"), factor (double < 1, unset 0.1),
 *   patience (int, default 10), threshold (double, default 1e-4),
 *   threshold_mode ("rel" or "abs", default "rel"), cooldown (int, default 0),
 *   eps (double, default 1e-8), and min_lr above as the floor (here a double or list; unset: 0).
 *   A "double or list" key takes one number for every parameter group, or one per group as text
 *   with commas between them, e.g. "0.01,0.001" through acc_options_set or acc_options_set_string,
 *   as PyTorch's schedulers take a float or a list; another count is an error at creation.
 *   one_cycle (PyTorch's OneCycleLR; the optimizer's own lr is not used): max_lr (double or list,
 *   needed),
 *   total_steps (int; or else both of epochs, steps_per_epoch (int)),
 *   pct_start (double in [0, 1], default 0.3), anneal_strategy ("cos" or "linear", default "cos"),
 *   cycle_momentum (bool, default true: SGD's and RMSprop's momentum, Adam's, AdamW's and Lion's
 *   beta1 move between max_momentum and base_momentum against the rate; an optimizer without
 *   either needs it false), base_momentum (double or list, unset 0.85), max_momentum (double or
 *   list, unset 0.95), div_factor (double, default 25: the first rate is max_lr / div_factor),
 *   final_div_factor (double, default 1e4: the last is the first / final_div_factor),
 *   three_phase (bool, default false).
 *   cyclic (PyTorch's CyclicLR; every group's rate is set to base_lr at creation):
 *   base_lr, max_lr (double or list, needed), step_size_up (int, steps up to max_lr, default 2000),
 *   step_size_down (int; unset: step_size_up; 0: straight back to base_lr, a sawtooth), mode ("triangular", "triangular2": each cycle half
 *   as high as the one before, "exp_range": the height times gamma ** step; default "triangular"),
 *   gamma (double, exp_range; unset 1), cycle_momentum (bool, default true, as for one_cycle),
 *   base_momentum (double or list, unset 0.8), max_momentum (double or list, unset 0.9),
 *   scale_mode ("cycle" or "iterations", only with acc_scheduler_create_cyclic's scale function).
 * Keys of ACC_OPTIONS_DATALOADER:
 *   batch_size (int, default 1), shuffle (bool, default false), drop_last (bool, default false),
 *   seed (int: seedable shuffling, epoch e uses seed + e; unset: drawn from torch's generator, which
 *   acc_set_seed seeds), generator_seed (int: the loader's own generator, as PyTorch's
 *   DataLoader(generator=torch.Generator().manual_seed(generator_seed)); each epoch's base seed, and a
 *   shuffle without a seed, draw from it instead of torch's global generator; acc_prepare keeps it, as
 *   Accelerate keeps a loader's generator, and checkpoints keep its state), num_workers (int, worker
 *   threads fetching batches of a map-style dataset,
 *   batch i on worker i % num_workers as PyTorch's worker processes; default 0, PyTorch's: loads in
 *   the calling thread; a stream is always read in the calling thread), prefetch_factor (int,
 *   batches fetched ahead per worker, default 2),
 *   device (string, where batches are put; default: where the dataset is).
 * Keys of ACC_OPTIONS_ACCELERATOR (Accelerator(...)'s arguments):
 *   cpu (bool, default false: the GPU when CUDA is there), mixed_precision ("no", "bf16", "fp16"),
 *   gradient_accumulation_steps (int, default 1), sync_with_dataloader (bool, default true: the last
 *   batch of a prepared loader ends an accumulation window), sync_each_batch (bool, default false:
 *   gradients are allreduced on every micro-step, saving memory; the optimizer still steps at the
 *   window's end) (GradientAccumulationPlugin), seed (int: acc_set_seed at creation),
 *   device_placement (bool, default true), step_scheduler_with_optimizer (bool, default true),
 *   split_batches (bool, default false), even_batches (bool, default true:
 *   on several processes the last batches are completed from the epoch's start so every process
 *   gets as many), dispatch_batches (bool; default: true for streams, false for map-style datasets:
 *   process 0 reads and sends each process its slice), use_seedable_sampler (bool, default false: a
 *   prepared shuffling loader without a seed of its own shuffles as Accelerate's SeedableRandomSampler,
 *   epoch e permuting with data_seed + e, or without data_seed with the seed torch's generator was
 *   seeded with + e), data_seed (int; as in Accelerate it counts only with use_seedable_sampler, and
 *   alone it is ignored with a warning on stderr), non_blocking (bool, default true: batches go to a GPU
 *   asynchronously from pinned memory), timeout_seconds (int, default 1800, at most 3153600000 (100
 *   years): rendezvous and every collective),
 *   backend ("gloo" or "nccl", InitProcessGroupKwargs(backend=...); default nccl when the process
 *   runs on a GPU, gloo on the CPU; "gloo" on GPUs lets several processes share one GPU, which NCCL
 *   refuses; "nccl" on the CPU is ACC_ERR_UNSUPPORTED),
 *   ddp_bucket_cap_mb (int, default 25, at most 2^43 - 1), ddp_find_unused_parameters (bool, default false),
 *   ddp_broadcast_buffers (bool, default true), ddp_gradient_as_bucket_view (bool, default false:
 *   each gradient is a view into DDP's gradient bucket, saving a copy of every gradient; the same
 *   numbers), ddp_static_graph (bool, default false: DDP's static_graph, the promise that every
 *   step gives gradients to the same parameters in the same order; the first averaging step
 *   reduces at the end of backward and finds the unused parameters, which are then never waited
 *   for; with libtorch 2.x a no_sync or accumulation micro-step before that first step is
 *   ACC_ERR_UNSUPPORTED), ddp_comm_hook ("no", "fp16", "bf16": gradients travel compressed (bf16 needs NCCL,
 *   or PyTorch 2.x's Gloo); "power_sgd", "batched_power_sgd": PyTorch's PowerSGD hooks, gradient
 *   matrices sent as low-rank factors after start_powerSGD_iter plain steps, matrix by matrix or
 *   the whole bucket as one), ddp_comm_wrapper ("no", "fp16", "bf16": PowerSGD on a 16-bit copy
 *   of each bucket), ddp_comm_state_option (string, a JSON object of PowerSGDState's arguments:
 *   matrix_approximation_rank (default 1), start_powerSGD_iter (1000), min_compression_rate (2),
 *   use_error_feedback (true), warm_start (true), orthogonalization_epsilon (0), random_seed (0),
 *   compression_stats_logging_frequency (accepted, not logged), batch_tensors_with_same_shape
 *   (false)) (DistributedDataParallelKwargs: comm_hook, comm_wrapper, comm_state_option).
 *   Sharded data parallelism (README "Sharded data parallelism"): zero_stage (int 0-3, default 0:
 *   DDP; 1 shards the optimizer state, 2 also the gradients (FSDP's SHARD_GRAD_OP), 3 also the
 *   parameters (FULL_SHARD)), offload_optimizer (bool, default false), offload_params (bool,
 *   default false) (CPU offload: the optimizer steps this process's slice and keeps its state in
 *   host memory; stage 3 also keeps the parameter shard there; on a CPU device it costs a host copy
 *   and saves nothing), hybrid_shard (bool, default false: shard among the processes of each
 *   machine and replicate across machines, FSDP's HYBRID_SHARD; one machine: plain sharding),
 *   dp_shard_size (int, default 0: not set; Accelerate's ParallelismConfig: under zero_stage 1-3
 *   each group of dp_shard_size consecutive ranks shards one copy of the model),
 *   dp_replicate_size (int, default 0: not set; the groups holding replicas, HSDP; the product of
 *   the two must be the number of processes; dp_replicate_size alone is DDP, zero_stage 0) (both
 *   from ACCELERATE_USE_PARALLELISM_CONFIG's PARALLELISM_CONFIG_DP_SHARD_SIZE and _DP_REPLICATE_SIZE),
 *   auto_wrap_policy ("TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP" or "NO_WRAP", FSDP's; unset:
 *   zero_stage 3's units are the submodules a TorchScript forward calls and a spec model's layers,
 *   or the classes below when named), min_num_params (int, default 0: SIZE_BASED_WRAP's threshold,
 *   torch's size_based_auto_wrap_policy, nested units included; 0 wraps nothing, one unit, as
 *   Accelerate), transformer_cls_to_wrap (string, default "": the units are the modules of these
 *   comma-separated classes, e.g. "Block", however deep the forward calls them (FSDP's
 *   transformer_layer_cls_to_wrap; a layer-spec model's classes are its layer types, e.g.
 *   "transformer_encoder_layer"); a class the model lacks is an error), ignored_modules (string,
 *   default "": FSDP's ignored_modules as Accelerate's fsdp_ignored_modules gives it, a regular
 *   expression matched against whole module names, e.g. "embed|blocks\\.[01]"; the parameters of a
 *   matched module and its submodules are kept whole on every process, not sharded; they must be
 *   frozen (ACC_ERR_UNSUPPORTED at prepare otherwise: FSDP leaves their gradients unreduced); a
 *   pattern matching no module holding parameters is an error; zero_stage 1-3 only),
 *   activation_checkpointing (bool, default false: FSDP's fsdp_activation_checkpointing; the
 *   layers of a spec model that the policy above wraps, every layer under NO_WRAP, are recomputed
 *   in backward, with the same gradients; any zero_stage; a TorchScript model: ACC_ERR_UNSUPPORTED
 *   at prepare), state_dict_type ("FULL_STATE_DICT", default: save_state writes
 *   consolidated files any number of processes can load; "SHARDED_STATE_DICT": each process writes
 *   its own shard; the default under FSDP_VERSION 2, as Accelerate's), zero3_save_16bit_model (bool, default false: DeepSpeed's; under zero_stage 3
 *   with mixed_precision bf16/fp16, acc_save_model and acc_get_state_dict give the weights and
 *   floating buffers in that dtype, each rounded to nearest; otherwise fp32). Unset, they are read
 *   from Accelerate's ACCELERATE_USE_FSDP / FSDP_* and
 *   ACCELERATE_USE_DEEPSPEED / ACCELERATE_DEEPSPEED_* variables (set by accelerate-launch).
 *   ProjectConfiguration: project_dir (string: where checkpoints and logs go), logging_dir (string,
 *   default project_dir), automatic_checkpoint_naming (bool, default false: acc_save_state with no
 *   folder writes project_dir/checkpoints/checkpoint_<iteration>), total_limit (int: checkpoints
 *   kept by rotation; 0 or less keeps only the newest), iteration (int, default 0: the next automatic checkpoint's number),
 *   save_on_each_node (bool, default false: shared files on every node's local main process).
 *   python_state_files (bool, default false: acc_save_state also writes the files Python
 *   Accelerate's load_state reads, optimizer.bin, scheduler.bin, scaler.pt and
 *   random_states_<rank>.pkl in torch.save's format, so that a Python program that prepares the
 *   same objects resumes the run, schedules of every kind included (sequences and chains too);
 *   ACC_ERR_UNSUPPORTED from acc_save_state, before anything is written, for a schedule-free or
 *   sharded optimizer).
 *   log_with (string: trackers, "tensorboard", "jsonl", "csv", "mlflow", "dvclive", "trackio",
 *   "wandb", "clearml", "all" or a comma-separated list).
 *   GradScalerKwargs (fp16): scaler_enabled (bool, default true; false: fp16 autocast without loss
 *   scaling, as GradScaler(enabled=False)), scaler_init_scale (double, default 65536),
 *   scaler_growth_factor (double, default 2), scaler_backoff_factor (double, default 0.5),
 *   scaler_growth_interval (int, default 2000). DeepSpeed's DynamicLossScaler:
 *   scaler_hysteresis (int, default 1: overflows before the scale backs off),
 *   scaler_consecutive_hysteresis (bool, default false: any good step restores it),
 *   scaler_min_scale (double, default 0: none; an overflow at it fails the step). Under DeepSpeed's
 *   sharding (zero_stage > 0, not FSDP) with fp16, unset ones take DeepSpeed's defaults: growth
 *   interval 1000, hysteresis 2, minimum 1.
 *   gradient_clipping (double, default 0: none; DeepSpeed's gradient_clipping, also read from
 *   ACCELERATE_GRADIENT_CLIPPING: each prepared optimizer's step first clips its model's
 *   gradients, unscaled, to this global L2 norm, over every shard; acc_clip_grad_norm still clips
 *   when called).
 *   Unset cpu, mixed_precision and gradient_accumulation_steps are read from ACCELERATE_USE_CPU,
 *   ACCELERATE_MIXED_PRECISION and ACCELERATE_GRADIENT_ACCUMULATION_STEPS (set by
 *   accelerate-launch); a value set with acc_options_* always wins.
 * Keys of ACC_OPTIONS_LORA (PEFT's LoraConfig, see acc_model_add_lora):
 *   r (int, default 8: the adapters' rank), lora_alpha (double, default 8: the scaling is
 *   lora_alpha / r; either sign, as PEFT), use_rslora (bool, default false: lora_alpha / sqrt(r)), use_dora (bool,
 *   default false: PEFT's DoRA, each adapted layer also training a magnitude per output, saved as
 *   "<module>.lora_magnitude_vector"), lora_bias (bool, default false: lora_B has a trained bias,
 *   "<module>.lora_B.bias", zero at the start; with init_lora_weights true or false alone and not
 *   with use_dora (ACC_ERR_INVALID_ARGUMENT, PEFT's LoraConfig's ValueErrors), nor on a layer whose
 *   weight the forward reads itself; merging adds it, scaled, to the layer's bias, which must exist),
 *   fan_in_fan_out (bool, default false: PEFT's flag for weights stored in x out; as in PEFT each
 *   layer's kind decides, transformers' Conv1D true and nn.Linear false, and adapter_config.json
 *   gets the last adapted linear layer's),
 *   init_lora_weights ("true", default: Kaiming-uniform A and zero B, so training starts from the
 *   base model; "gaussian": A ~ N(0, 1/r), zero B; "false": both as nn.Linear initialises them;
 *   "olora", "pissa", "pissa_niter_<n>": PEFT's OLoRA and PiSSA, A and B taken from the layer's
 *   weight (its QR decomposition; its SVD, or torch.svd_lowrank's randomised SVD with n subspace
 *   iterations, which draws from the global generator) and the weight left as the residual
 *   W - scaling * B A, so the model starts as before, to rounding; r at most min(out, in), float32,
 *   float16 or bfloat16 weights, none tied to another module's (an embedding's adapters start
 *   as with "true" and its weight stays, as PEFT's Embedding has neither; a convolution's are
 *   ACC_ERR_INVALID_ARGUMENT, as PEFT's ValueError); "mica": PEFT's MiCA, B the layer
 *   weight's r left singular vectors of the smallest singular values (an embedding's or a Conv1D's
 *   weight transposed), frozen, and A zero, the weight unchanged; not on convolutions, nor with
 *   use_dora (ACC_ERR_INVALID_ARGUMENT, as PEFT); "orthogonal": PEFT's orthogonal start,
 *   A and B Gaussian draws projected on the odd and even rows of a random orthogonal r x r matrix,
 *   divided by 10, so B A is zero to rounding while neither is; r even (ACC_ERR_INVALID_ARGUMENT),
 *   the weight unchanged; an embedding's start
 *   as with "true", a convolution's ACC_ERR_INVALID_ARGUMENT, as PEFT; "eva": PEFT's EVA, B zero
 *   and A computed from data by acc_model_initialize_lora_eva, which may change each layer's rank),
 *   eva_rho (double, default 2, at least 1: EVA gives a layer at most round(r * eva_rho)
 *   components), eva_tau (double, default 0.99, in [0, 1]: the cosine similarity between
 *   consecutive batches' components at which a layer counts as converged),
 *   eva_use_label_mask (bool, default true: positions whose label is eva_label_mask_value are left out),
 *   eva_label_mask_value (int, default -100), eva_whiten (bool, default false: the components
 *   divided by the square roots of their singular values), eva_adjust_scaling_factors (bool,
 *   default true: a layer whose rank changes gets lora_alpha times new rank / r, keeping its
 *   scaling) (PEFT's EvaConfig, written to adapter_config.json as eva_config with init "eva");
 *   "corda": PEFT's CorDA, set by acc_model_add_lora_corda (acc_model_add_lora refuses it: its start
 *   comes from data),
 *   corda_method ("ipm", default: the adapters start from the weight's largest components along the
 *   inputs' covariance; "kpm": from the smallest, keeping the knowledge the largest carry),
 *   corda_use_float16_for_covariance (bool, default false: the covariance summed in the inputs' own
 *   dtype instead of float32); "lora_ga": PEFT's LoRA-GA, set by acc_model_begin_lora_ga (acc_model_add_lora
 *   and files start such adapters as with "true", as PEFT without gradients),
 *   lora_ga_direction ("ArB2r", default: A the gradient's first r right singular vectors, B the
 *   next r left ones times their singular values; "A2rBr": the other way round; "ArBr": alternating;
 *   "random": r of the 2 r, by torch.randperm), lora_ga_scale ("stable", default: B times
 *   out^(1/4) / sqrt(lora_ga_stable_gamma); "weight_svd": times the weight's largest singular value
 *   over B's first (torch.svd_lowrank); "gd_scale": A and B divided by the scaling; "unit"),
 *   lora_ga_stable_gamma (int, default 16); "loftq": PEFT's LoftQ, each layer's weight replaced by
 *   its quantised approximation Q (kept dequantised, in the weight's dtype) and A, B the r largest
 *   singular vectors of the error, B A ~ W - Q (B = U sqrt(S), A = sqrt(S) Vh, as PEFT's
 *   loftq_init computes them in float32); nn.Linear layers only (an embedding, a Conv1D and an
 *   attention ACC_ERR_UNSUPPORTED, a convolution ACC_ERR_INVALID_ARGUMENT, where PEFT fails), r at
 *   most min(out, in), weights without inf or NaN (ACC_ERR_INVALID_ARGUMENT); computed on the
 *   weight's device, as bitsandbytes' PyTorch implementation computes it (PEFT runs it on CUDA only),
 *   loftq_bits (int, default 4: bitsandbytes' NF4 in blocks of 64, each scaled by its absolute
 *   maximum; 8: its row-wise int8, which goes through float16, so a weight beyond float16's range
 *   is ACC_ERR_INVALID_ARGUMENT), loftq_iter (int, default 1, at most 10000: rounds, each
 *   quantising W - B A of the round before) (written to adapter_config.json as loftq_config),
 *   lora_dropout (double, default 0: dropout on the adapted layer's input, in training mode; see
 *   acc_model_add_lora for TorchScript models), exclude_modules (string, default none: modules left
 *   unadapted, named as target_modules are), target_parameters (string, default none: PEFT's, for
 *   a mixture of experts' expert weights: parameter names "<module>.<parameter>" (or the end of one
 *   after a dot) separated by commas, or its JSON list; see acc_model_add_lora), modules_to_save (string, default none: PEFT's
 *   modules_to_save, names separated by commas, a module matching a name its own name ends with:
 *   the module, e.g. a classifier head, trains whole beside the adapters and acc_model_save_lora
 *   writes its parameters and buffers with them; a target inside it stays unadapted, as in PEFT;
 *   task_type SEQ_CLS or TOKEN_CLS adds "classifier" and "score", QUESTION_ANS "qa_outputs"; a
 *   name given that matches nothing is an error), bias ("none", default; "all": every parameter
 *   named "bias" or "*.bias" trains; "lora_only": the adapted layers' biases train; PEFT's, saved
 *   with the adapters, an adapted layer's as "<module>.base_layer.bias"),
 *   trainable_token_indices (string, default none: PEFT's, for new special tokens: token indices
 *   separated by commas, or its JSON list, for the model's input embedding (its first embedding
 *   layer), or a JSON object from module names (matched as modules_to_save) to lists, e.g.
 *   {"embed_tokens": [32000, 32001]}: those rows of the embedding train as a parameter of their
 *   own, "<module>.token_adapter.trainable_tokens_delta" (n x dim, starting as the rows), the rest
 *   of the weight stays frozen; every forward computes with W.index_copy(0, indices, delta), as
 *   PEFT's TrainableTokensLayer, and a layer tied to the embedding (an LM head) with the same rows;
 *   acc_model_save_lora writes the delta alone, merging writes the rows into the weight. Indices
 *   in range and distinct, one list per weight, not a layer LoRA adapts nor one in
 *   modules_to_save, a linear layer named only without a bias (PEFT would drop it:
 *   ACC_ERR_UNSUPPORTED); under zero_stage 3 the replaced weight is made as the embedding's unit
 *   is gathered),
 *   rank_pattern (string, default none: PEFT's rank_pattern as a JSON object, e.g.
 *   {"q_proj": 16, "layers\\.0\\..*": 4}: the first key, a regular expression, that matches a
 *   module's name or its end after a dot gives that module its own r), alpha_pattern (string,
 *   default none: the same for lora_alpha), layers_to_transform (string, default none: layer
 *   numbers separated by commas; with target_modules as names, a module a name ends with is adapted
 *   only in those layers, the number after the first component that follows a dot, as
 *   "model.layers.3.q_proj" is in layer 3), layers_pattern (string, default none: expressions
 *   separated by commas naming the component before the number instead, e.g. "layers,h"),
 *   base_model_name_or_path, revision, task_type (strings,
 *   default none: written to adapter_config.json, where PEFT's AutoPeftModel reads them; task_type
 *   one of PEFT's SEQ_CLS, SEQ_2_SEQ_LM, CAUSAL_LM, TOKEN_CLS, QUESTION_ANS, FEATURE_EXTRACTION).
 * Keys of ACC_OPTIONS_TRAINABLE_TOKENS (PEFT's TrainableTokensConfig, see
 *   acc_model_add_trainable_tokens): token_indices (string, required: the rows that train in every
 *   target, indices separated by commas or PEFT's JSON list, e.g. "32000,32001"),
 *   init_weights (bool, default true: the rows start as the layer's, so the model starts unchanged;
 *   false: as torch.randn draws from the global generator, in the weight's dtype, as PEFT's),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_IA3 (PEFT's IA3Config, see acc_model_add_ia3): feedforward_modules (string,
 *   default none: the targets whose vector scales their input instead of their output, names
 *   separated by commas, a module matching one its name ends with, as PEFT's endswith, or "re:"
 *   and an expression matching a whole name), fan_in_fan_out (bool, default false: PEFT's flag,
 *   set from each linear layer's kind as PEFT sets it), init_ia3_weights (bool, default true: the
 *   vectors start as ones; false: as the torch.randn draws), exclude_modules (string, default none),
 *   modules_to_save (string, default none: as ACC_OPTIONS_LORA's),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_LOHA (PEFT's LoHaConfig, see acc_model_add_loha): r (int, default 8: each
 *   product's rank), alpha (double, default 8: the scaling is alpha / r), rank_dropout (double,
 *   default 0: in training, the probability of dropping each output row of the delta, the rest
 *   rescaled), module_dropout (double, default 0: in training, the probability of leaving a layer's
 *   branch out), use_effective_conv2d (bool, default false: a convolution wider than 1 x 1 in
 *   PEFT's CP form, hada_t1 and hada_t2), init_weights (bool, default true: hada_w2_b starts as zeros, the model
 *   unchanged; false: drawn as the others),
 *   exclude_modules, modules_to_save, rank_pattern, alpha_pattern, layers_to_transform (strings,
 *   default none: as ACC_OPTIONS_LORA's, alpha_pattern giving alpha), layers_pattern (string,
 *   default none), base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_LOKR (PEFT's LoKrConfig, see acc_model_add_lokr): r (int, default 8: the rank
 *   of a factor made as a product), alpha (double, default 8: the scaling is alpha / r),
 *   rank_dropout (double, default 0: in training, the probability of dropping each output row of
 *   the delta), module_dropout (double, default 0: in training, the probability of leaving a
 *   layer's branch out), rank_dropout_scale (bool, default false: rank dropout rescales the kept
 *   rows by their fraction), use_effective_conv2d (bool, default false: a convolution's w2 in
 *   PEFT's CP form, lokr_t2 with lokr_w2_a and lokr_w2_b, for kernels wider than 1),
 *   decompose_both (bool, default false: w1 too is a product, w1_a w1_b, where r is below half its
 *   larger side), decompose_factor (int, default -1: the factorisation's divisor of out and in; -1
 *   near their square roots), init_weights ("true", default: w1 or w1_a starts as zeros, the model
 *   unchanged; "false": every factor drawn; "lycoris": w2 or w2_b zeros, as LyCORIS starts),
 *   exclude_modules, modules_to_save, rank_pattern, alpha_pattern, layers_to_transform (strings,
 *   default none: as ACC_OPTIONS_LORA's, alpha_pattern giving alpha), layers_pattern (string,
 *   default none), base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_VERA (PEFT's VeraConfig, see acc_model_add_vera): r (int, default 256: the
 *   shared projections' rank), projection_prng_key (int, default 0: the seed of the generator the
 *   projections are drawn from), save_projection (bool, default true: acc_model_save_lora writes
 *   the projections; false: they are drawn again from the seed when loaded), vera_dropout (double,
 *   default 0: dropout on each adapted layer's input to its branch), d_initial (double, default
 *   0.1: lambda_d's starting value), fan_in_fan_out (bool, default false: PEFT's flag, set from each
 *   linear layer's kind as PEFT sets it), bias ("none", default, "all" or "vera_only": which biases
 *   train beside the vectors), init_weights (bool, default true: lambda_d starts as d_initial and
 *   lambda_b as zeros, the model unchanged; false: torch.randn and ones),
 *   modules_to_save, layers_to_transform (strings, default none: as ACC_OPTIONS_LORA's),
 *   layers_pattern (string, default none), base_model_name_or_path, revision, task_type (strings,
 *   default none: written to adapter_config.json).
 * Keys of ACC_OPTIONS_PVERA (PEFT's PveraConfig, see acc_model_add_pvera), as ACC_OPTIONS_VERA's
 *   where named alike: r (int, default 256: the shared projections' rank; pvera_A has 2 r rows),
 *   projection_prng_key (int, default 0), save_projection (bool, default true),
 *   pvera_dropout (double, default 0), d_initial (double, default 0.1), fan_in_fan_out (bool,
 *   default false), bias ("none", default, "all" or "pvera_only"), init_weights (bool, default
 *   true), sample_at_inference (bool, default false: evaluation computes with the middle's mean;
 *   true: it samples as training does), generator_seed (int, unset: the samples come from the
 *   global generator; set: from a CPU generator of each layer's own seeded so),
 *   modules_to_save, layers_to_transform (strings, default none: as ACC_OPTIONS_LORA's),
 *   layers_pattern (string, default none), base_model_name_or_path, revision, task_type (strings,
 *   default none: written to adapter_config.json).
 * Keys of ACC_OPTIONS_OFT (PEFT's OFTConfig, see acc_model_add_oft): r (int, default 0: the blocks
 *   per layer; 0: from oft_block_size), oft_block_size (int, default 32: each block's size; 0: from
 *   r; exactly one of the two non-zero), module_dropout (double, default 0: kept in the
 *   configuration; PEFT's linear layers do not apply it), coft (bool, default false: each block's
 *   rotation kept within eps of the identity), eps (double, default 6e-5), block_share (bool,
 *   default false: one rotation for all of a layer's blocks), use_cayley_neumann (bool, default
 *   true: the Cayley transform by PEFT's Neumann series; false: by a solve),
 *   num_cayley_neumann_terms (int, default 5), fan_in_fan_out (bool, default false: PEFT's flag),
 *   bias ("none", default, "all" or "oft_only"), init_weights (bool, default true: the rotations
 *   start as the identity; false: their weights drawn normal(0, 0.1)),
 *   exclude_modules, modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_ADALORA (PEFT's AdaLoraConfig, see acc_model_add_adalora): total_step (int,
 *   default 0: required, the training's steps, where the budget's schedule ends), init_r (int,
 *   default 12: each layer's rank at the start), target_r (int, default 8: the average rank per
 *   layer the budget ends at, below init_r), tinit (int, default 0: the steps before any pruning),
 *   tfinal (int, default 0: the steps after the last pruning, which keep its pattern), deltaT (int,
 *   default 1: the steps between two prunings), beta1 (double, default 0.85: the smoothing of each
 *   entry's sensitivity), beta2 (double, default 0.85: of its uncertainty),
 *   orth_reg_weight (double, default 0.5: the weight of the orthogonal regularization
 *   acc_model_adalora_loss adds), lora_alpha (double, default 8: the scaling is lora_alpha /
 *   (init_r + 1e-5)), lora_dropout (double, default 0: dropout on each adapted layer's input),
 *   fan_in_fan_out (bool, default false: PEFT's flag, set from each linear layer's kind as PEFT
 *   sets it), bias ("none", default, "all" or "lora_only"), init_lora_weights (bool, default true: E starts as zeros, the model unchanged,
 *   and A and B as normal(0, 0.02) draws; false: torch.randn draws),
 *   exclude_modules, modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_BOFT (PEFT's BOFTConfig, see acc_model_add_boft): boft_block_size (int,
 *   default 4: each block's size; 0: from boft_block_num), boft_block_num (int, default 0: the blocks
 *   per factor; 0: from boft_block_size; exactly one of the two non-zero),
 *   boft_n_butterfly_factor (int, default 1: the butterfly's factors; 1 is one block diagonal,
 *   OFT's), boft_dropout (double, default 0: in training, the fraction of one factor's blocks made
 *   the identity), fan_in_fan_out (bool, default false: PEFT's flag), bias ("none", default, "all"
 *   or "boft_only"), init_weights (bool, default true: the rotations start as the identity and the
 *   scales as ones; false: boft_R drawn normal(0, 0.1) and boft_s normal(1, 0.1)),
 *   exclude_modules, modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_HRA (PEFT's HRAConfig, see acc_model_add_hra): r (int, default 8: the
 *   Householder reflections per layer; an even r starts the layer unchanged), apply_GS (bool,
 *   default false: the reflections orthonormalised by Gram-Schmidt, one reflection I - 2 U U^T),
 *   bias ("none", default, "all" or "hra_only"), init_weights (bool, default true: hra_u drawn as
 *   equal pairs of columns, the layer unchanged at the start without apply_GS; with it, as in PEFT,
 *   Gram-Schmidt of a repeated column divides rounding residue by its norm, or 0 by 0: NaN, so
 *   apply_GS wants init_weights false; false: every column drawn),
 *   exclude_modules, modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_FOURIERFT (PEFT's FourierFTConfig, see acc_model_add_fourierft):
 *   n_frequency (int, default 1000: the spectrum's entries trained per layer), scaling (double, default 150: the
 *   delta's scaling), random_loc_seed (int, default 777: the seed of the entries' places),
 *   n_frequency_pattern (string, default none: a JSON object from module-name expressions to counts
 *   of their own, matched as PEFT's FourierFTModel matches them), init_weights (bool, default false:
 *   the spectrum drawn by torch.randn; true: zeros, the model unchanged), fan_in_fan_out (bool,
 *   default false: PEFT's flag), bias ("none", default, "all" or "fourier_only"),
 *   exclude_modules, modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_MISS (PEFT's MissConfig, see acc_model_add_miss): r (int, default 64: the
 *   shard's rows, the width of the input's blocks; "bat": of the weight's square blocks), miss_dropout (double, default 0: dropout on the padded input to the shard's
 *   branch), mini_r (int, default 1: "mini"'s shard width along the outputs),
 *   init_weights ("true", default: the shard zeros, the layer unchanged; "false": Kaiming draws;
 *   "bat": the weight's blocks times their shard; "mini": an r x mini_r shard repeated along the
 *   outputs), bias ("none", default, "all" or "MiSS_only"),
 *   exclude_modules, modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_C3A (PEFT's C3AConfig, see acc_model_add_c3a): block_size (int, default 256:
 *   the circulant blocks' size, which must divide each targeted layer's inputs and outputs),
 *   block_size_pattern (string, default none: a JSON object from module-name expressions to block
 *   sizes of their own, matched as PEFT's C3AModel matches them), init_weights ("xavier_uniform",
 *   default, and "false": uniform within sqrt(6 / (in + out)); "kaiming_uniform": within
 *   sqrt(1 / in); "gaussian": normal draws; "true": zeros, the layer unchanged), bias ("none",
 *   default, "all" or "c3a_only"), modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's; PEFT's C3AConfig has no exclude_modules), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_SHIRA (PEFT's ShiraConfig, see acc_model_add_shira): r (int, default 32: each
 *   layer trains r (in + out) entries of its weight), mask_type ("random", default: PEFT's
 *   random_mask), random_seed (int, unset: each layer's mask generator starts from a new generator's
 *   initial seed, so layers of one shape share their places; set: the seed of each layer's mask
 *   generator), init_weights (bool,
 *   default true: the entries start as zeros; false: torch.randn draws), modules_to_save (string,
 *   default none: as ACC_OPTIONS_LORA's; PEFT's ShiraConfig has no exclude_modules, bias or layer
 *   settings), base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_DELORA (PEFT's DeloraConfig, see acc_model_add_delora): r (int, default 8: the
 *   rank of each layer's A and B), delora_lambda (double, default 15: the delta's starting strength,
 *   of either sign, trained as delora_lambda), module_dropout (double, default 0: dropout on each layer's input to
 *   its branch), bias ("none", default, "all" or "delora_only"), init_weights (bool, default true: B
 *   zeros, the layer unchanged; false: Kaiming draws), rank_pattern (string, default none: as
 *   ACC_OPTIONS_LORA's), lambda_pattern (string, default none: a JSON object from module-name
 *   expressions to delora_lambda values of their own, matched as rank_pattern),
 *   exclude_modules, modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's), layers_pattern (string, default none), base_model_name_or_path, revision, task_type (strings,
 *   default none: written to adapter_config.json).
 * Keys of ACC_OPTIONS_ROAD (PEFT's RoadConfig, see acc_model_add_road): variant ("road_1", default:
 *   one angle and scale per pair of outputs; "road_2": per output; "road_4": per output and column of
 *   each rotation), group_size (int, default 64: outputs j and j + group_size / 2 of each group pair
 *   up; even, and a divisor of each adapted layer's outputs), init_weights (bool, default true: the
 *   angles zeros and the scales ones, the layer unchanged; false: normal draws),
 *   modules_to_save (string, default none: as ACC_OPTIONS_LORA's; PEFT's RoadConfig has no
 *   exclude_modules, bias or layer settings),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to adapter_config.json).
 * Keys of ACC_OPTIONS_GRALORA (PEFT's GraloraConfig, see acc_model_add_gralora): r (int, default 32:
 *   the rank of each layer's blocks together, each of the k x k blocks r / k), hybrid_r (int, default
 *   0: the rank of a plain LoRA pair beside the blocks, none at 0), alpha (double, default 64: the
 *   scaling is alpha / (r + hybrid_r)), gralora_dropout (double, default 0: dropout on each layer's
 *   input to its branches), gralora_k (int, default 2: the blocks each side of a layer is cut into;
 *   it must divide r and each adapted layer's inputs and outputs), fan_in_fan_out (bool,
 *   default false: PEFT's flag), bias ("none", default, "all" or "gralora_only"), init_weights (bool,
 *   default true: B zeros, the layer unchanged; false: Kaiming draws),
 *   modules_to_save, layers_to_transform (strings, default none: as ACC_OPTIONS_LORA's; PEFT's
 *   GraloraConfig has no exclude_modules), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to adapter_config.json).
 * Keys of ACC_OPTIONS_HIRA (PEFT's HiraConfig, see acc_model_add_hira): r (int, default 32: the rank
 *   of each layer's A and B), hira_dropout (double, default 0: dropout on each layer's input to its
 *   branch), fan_in_fan_out (bool, default false: PEFT's flag), init_weights ("true", default: A
 *   Kaiming draws and B zeros, the layer unchanged; "gaussian", in any case as PEFT: A normal
 *   draws of std 1 / r, B zeros; "false": A and B as torch.randn drew them), rank_pattern (string,
 *   default none: as
 *   ACC_OPTIONS_LORA's), exclude_modules, modules_to_save, layers_to_transform (strings, default
 *   none: as ACC_OPTIONS_LORA's; PEFT's HiraConfig has no bias), layers_pattern (string, default none),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to adapter_config.json).
 * Keys of ACC_OPTIONS_RANDLORA (PEFT's RandLoraConfig, see acc_model_add_randlora): r (int, default
 *   32: the bases' rank; each layer trains r x n and n x its smaller side, n = ceil(smaller side /
 *   r)), projection_prng_key (int, default 0: the seed of the generator the bases are drawn from),
 *   save_projection (bool, default true: acc_model_save_lora writes the bases; false: they are drawn
 *   again from the seed when loaded), sparse (bool, default false: ternary sparse bases),
 *   very_sparse (bool, default false: sparser still), randlora_dropout (double, default 0),
 *   randlora_alpha (double, default 640: the scaling is randlora_alpha / r), bias ("none", default,
 *   "all" or "randlora_only"), init_weights (bool, default true: lambda zeros, the layer unchanged; false:
 *   torch.randn draws), modules_to_save, layers_to_transform (strings, default none: as
 *   ACC_OPTIONS_LORA's; PEFT's RandLoraConfig has no exclude_modules), layers_pattern (string,
 *   default none), base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_LN_TUNING (PEFT's LNTuningConfig, see acc_model_add_ln_tuning):
 *   exclude_modules, modules_to_save (strings, default none: as ACC_OPTIONS_LORA's),
 *   base_model_name_or_path, revision, task_type (strings, default none: written to
 *   adapter_config.json).
 * Keys of ACC_OPTIONS_PROFILE (Accelerate's ProfileKwargs, see acc_profile_begin):
 *   activities ("cpu", "cuda" or "cpu,cuda"; default: cpu, and cuda when the accelerator is on a GPU),
 *   schedule_wait, schedule_warmup, schedule_active, schedule_repeat, schedule_skip_first (int,
 *   default 0: torch.profiler.schedule's; with schedule_active 0 there is no schedule and every step
 *   is recorded), record_shapes (bool, default false), profile_memory (bool, default false),
 *   with_stack (bool, default false: TorchScript source locations), with_flops (bool, default
 *   false), with_modules (bool, default false: the TorchScript module hierarchy),
 *   output_trace_dir (string, default none: the Chrome trace is not written).
 * Keys of ACC_OPTIONS_AVERAGED_MODEL (PyTorch's AveragedModel, see acc_averaged_model_create):
 *   strategy ("swa", default: the equal average of every update, AveragedModel's default; "ema":
 *   an exponential moving average, get_ema_multi_avg_fn(decay); "diffusers_ema": diffusers'
 *   EMAModel, whose decay warms up),
 *   decay (double, in [0, 1]; unset 0.999 for ema, 0.9999 for diffusers_ema: the average's weight
 *   at each update, diffusers_ema's most; not with swa), use_buffers (bool, default false:
 *   average the buffers too, instead of copying the model's at each update; not with
 *   diffusers_ema), device (string, default: where the model's tensors are; e.g. "cpu" keeps the
 *   averages off the GPU).
 *   diffusers_ema only (EMAModel's arguments): min_decay (double, default 0: the decay's floor),
 *   update_after_step (int, default 0: updates before averaging starts copy the weights),
 *   use_ema_warmup (bool, default false: the decay is 1 - (1 + step / inv_gamma) ** -power instead
 *   of (1 + step) / (10 + step)), inv_gamma (double, default 1), power (double, default 2/3).
 * Keys of ACC_OPTIONS_WEIGHTED_ADAPTER (PEFT's add_weighted_adapter keywords, see
 *   acc_model_add_weighted_adapter_with): density (double, at least 0, required by ties, dare_linear,
 *   dare_ties, magnitude_prune and their _svd forms: the fraction of each tensor's values kept; >= 1
 *   keeps all), majority_sign_method ("total", default, or "frequency": ties and dare_ties elect
 *   each value's sign by the adapters' sum or by the count of signs),
 *   svd_rank (int, default 0: the largest of the adapters' ranks), svd_clamp (double, in [0, 1],
 *   unset by default; set: U and Vh clamped to +- this quantile of their values), svd_full_matrices (bool,
 *   default true: torch.linalg.svd's), svd_driver ("gesvd", "gesvdj" or "gesvda"; default none:
 *   cuSOLVER's driver, CUDA only as in torch). The svd keys matter to svd combinations only, density
 *   and majority_sign_method to the pruning ones; elsewhere they are ignored, as in PEFT.
 * Keys of ACC_OPTIONS_EVA (how acc_model_initialize_lora_eva reads the loader's batches):
 *   inputs (int, default 1: the model's forward takes the batch's first `inputs` fields),
 *   labels (int, default -1: none; the batch's field of labels: with the adapters' eva_use_label_mask,
 *   positions whose label is eva_label_mask_value are left out), attention_mask (int, default -1:
 *   none; the batch's field of the attention mask: only its non-zero positions count); with
 *   labels or attention_mask the positions are the leading dimensions of every adapted layer's
 *   input (batch x sequence, as PEFT's language-modelling defaults), with neither every row of
 *   a layer's input counts (its leading dimensions flattened, as PEFT's
 *   prepare_layer_inputs_fn=None), gather_distributed_inputs (bool, default true: with an
 *   accelerator of several processes, each layer's inputs are gathered from all of them, as
 *   PEFT's), max_batches (int, default 10000: forward passes before layers that have not
 *   converged are an error; PEFT goes on without end).
 * ---------------------------------------------------------------------------------------------- */

typedef enum acc_options_kind {
  ACC_OPTIONS_OPTIMIZER = 1,
  ACC_OPTIONS_SCHEDULER = 2,
  ACC_OPTIONS_DATALOADER = 3,
  ACC_OPTIONS_ACCELERATOR = 4,
  ACC_OPTIONS_LORA = 5,
  ACC_OPTIONS_PROFILE = 6,
  ACC_OPTIONS_AVERAGED_MODEL = 7,
  ACC_OPTIONS_TRAINABLE_TOKENS = 8,
  ACC_OPTIONS_WEIGHTED_ADAPTER = 9,
  ACC_OPTIONS_EVA = 10,
  ACC_OPTIONS_IA3 = 11,
  ACC_OPTIONS_LOHA = 12,
  ACC_OPTIONS_LOKR = 13,
  ACC_OPTIONS_VERA = 14,
  ACC_OPTIONS_OFT = 15,
  ACC_OPTIONS_ADALORA = 16,
  ACC_OPTIONS_BOFT = 17,
  ACC_OPTIONS_HRA = 18,
  ACC_OPTIONS_FOURIERFT = 19,
  ACC_OPTIONS_LN_TUNING = 20,
  ACC_OPTIONS_MISS = 21,
  ACC_OPTIONS_C3A = 22,
  ACC_OPTIONS_SHIRA = 23,
  ACC_OPTIONS_RANDLORA = 24,
  ACC_OPTIONS_DELORA = 25,
  ACC_OPTIONS_ROAD = 26,
  ACC_OPTIONS_GRALORA = 27,
  ACC_OPTIONS_HIRA = 28,
  ACC_OPTIONS_PVERA = 29,
  ACC_OPTIONS_MAX_ENUM = 0x7fffffff
} acc_options_kind;

ACC_API ACC_NODISCARD acc_status acc_options_create(acc_options_kind kind, acc_options **out);
ACC_API ACC_NODISCARD acc_status acc_options_set_int(acc_options *opts, const char *key, int64_t value);
ACC_API ACC_NODISCARD acc_status acc_options_set_double(acc_options *opts, const char *key, double value);
ACC_API ACC_NODISCARD acc_status acc_options_set_bool(acc_options *opts, const char *key, int value);
ACC_API ACC_NODISCARD acc_status acc_options_set_string(acc_options *opts, const char *key, const char *value);
/* Sets any key from its text form ("4", "0.9", "true"), parsed by the key's type. */
ACC_API ACC_NODISCARD acc_status acc_options_set(acc_options *opts, const char *key, const char *value);
/* Reads a key's value as text (owned by the caller: acc_string_free). Unset keys give their
 * default, or "" where there is none. */
ACC_API ACC_NODISCARD acc_status acc_options_get(const acc_options *opts, const char *key, char **out);
ACC_API void acc_options_free(acc_options *opts);

/* ------------------------------------------------------------------------------------------------
 * Tensors
 * ---------------------------------------------------------------------------------------------- */

/* Size in bytes of one element of a dtype (0 for ACC_DTYPE_UNDEFINED or an unknown value). */
ACC_API size_t acc_dtype_size(acc_dtype dtype);

/* A new CPU tensor holding a copy of `nbytes` bytes at `data`, of shape dims[0..ndim) and the given
 * dtype. nbytes must equal numel * acc_dtype_size(dtype). `data` may be NULL when nbytes is 0. */
ACC_API ACC_NODISCARD acc_status acc_tensor_from_host(const void *data, size_t nbytes, const int64_t *dims,
                                                      size_t ndim, acc_dtype dtype, acc_tensor **out);

/* Called when a borrowed buffer is no longer used: on any thread, possibly long after the call. */
typedef void (*acc_deleter)(void *data, void *ctx);

/* A CPU tensor over the caller's memory, without a copy. The memory must stay valid and unchanged
 * by others until `deleter(data, ctx)` is called (deleter may be NULL when the memory outlives
 * every tensor made from it). If the call fails the deleter is NOT called. */
ACC_API ACC_NODISCARD acc_status acc_tensor_from_host_borrow(void *data, size_t nbytes, const int64_t *dims,
                                                             size_t ndim, acc_dtype dtype, acc_deleter deleter,
                                                             void *ctx, acc_tensor **out);

/* A new tensor filled with zeros (device NULL means "cpu"). */
ACC_API ACC_NODISCARD acc_status acc_tensor_zeros(const int64_t *dims, size_t ndim, acc_dtype dtype,
                                                  const char *device, acc_tensor **out);

/* Copies the tensor's elements, in row-major order, into `dst`; nbytes must equal
 * numel * acc_dtype_size(dtype). Works for tensors on any device. */
ACC_API ACC_NODISCARD acc_status acc_tensor_to_host(const acc_tensor *t, void *dst, size_t nbytes);

ACC_API ACC_NODISCARD acc_status acc_tensor_ndim(const acc_tensor *t, size_t *out);
/* Writes min(ndim, capacity) sizes into dims and the tensor's ndim into *ndim. */
ACC_API ACC_NODISCARD acc_status acc_tensor_shape(const acc_tensor *t, int64_t *dims, size_t capacity,
                                                  size_t *ndim);
ACC_API ACC_NODISCARD acc_status acc_tensor_numel(const acc_tensor *t, int64_t *out);
ACC_API ACC_NODISCARD acc_status acc_tensor_dtype(const acc_tensor *t, acc_dtype *out);
/* The device as text ("cpu", "cuda:0"); owned by the caller (acc_string_free). */
ACC_API ACC_NODISCARD acc_status acc_tensor_device(const acc_tensor *t, char **out);
/* Whether autograd records operations on this tensor. */
ACC_API ACC_NODISCARD acc_status acc_tensor_requires_grad(const acc_tensor *t, int *out);

/* The same elements in a new shape, as torch.reshape: one dim may be -1 (inferred); the result
 * shares the input's storage where it can and carries autograd history. E.g. GPT-style logits
 * [B, T, V] become [B*T, V] with dims {-1, V} (and targets [B, T] become {-1}) for
 * acc_loss_cross_entropy, as `logits.view(-1, V)` in PyTorch. */
ACC_API ACC_NODISCARD acc_status acc_tensor_reshape(const acc_tensor *t, const int64_t *dims, size_t ndim,
                                                    acc_tensor **out);

/* A new tensor on `device` (NULL: the same device) with `dtype` (ACC_DTYPE_UNDEFINED: the same).
 * Returns a new handle to the same data when nothing changes. */
ACC_API ACC_NODISCARD acc_status acc_tensor_to(const acc_tensor *t, const char *device, acc_dtype dtype,
                                               acc_tensor **out);

/* The accumulated gradient of a leaf tensor (e.g. a parameter); *out is NULL when it has none. */
ACC_API ACC_NODISCARD acc_status acc_tensor_grad(const acc_tensor *t, acc_tensor **out);

/* Back-propagates from a scalar tensor (a loss) into the gradients of the leaves. */
ACC_API ACC_NODISCARD acc_status acc_tensor_backward(const acc_tensor *loss);

/* Reductions and comparisons. */
ACC_API ACC_NODISCARD acc_status acc_tensor_sum(const acc_tensor *t, acc_tensor **out);
ACC_API ACC_NODISCARD acc_status acc_tensor_mean(const acc_tensor *t, acc_tensor **out);
/* Index of the maximum along `dim` (negative counts from the end), as int64; a 0-d tensor takes dim
 * 0 or -1 and gives 0, as torch. */
ACC_API ACC_NODISCARD acc_status acc_tensor_argmax(const acc_tensor *t, int64_t dim, int keepdim,
                                                   acc_tensor **out);
/* Number of positions where a and b (same shape) hold equal values. */
ACC_API ACC_NODISCARD acc_status acc_tensor_count_equal(const acc_tensor *a, const acc_tensor *b, int64_t *out);
/* The value of a one-element tensor, converted to double. */
ACC_API ACC_NODISCARD acc_status acc_tensor_item(const acc_tensor *t, double *out);

/* ------------------------------------------------------------------------------------------------
 * Losses (PyTorch's definitions; the result is a new tensor that carries autograd history). The
 * element-wise losses (mse, l1, smooth_l1, huber, bce_with_logits) take an input and a target of one
 * shape, both floating (PyTorch would broadcast other shapes, with a warning, and promote an integer
 * target).
 * ---------------------------------------------------------------------------------------------- */

/* logits [N, C] (or [N, C, d...]), target class indices int64 [N] ([N, d...]); ignore_index -100.
 * Or a floating target of the logits' own shape: class probabilities (soft labels, as from mixup or
 * a teacher), as PyTorch takes them; label_smoothing, in [0, 1], mixes them with the uniform
 * distribution.
 * Sequence logits [B, T, V] are reshaped to [B*T, V] first (acc_tensor_reshape), as in PyTorch. */
ACC_API ACC_NODISCARD acc_status acc_loss_cross_entropy(const acc_tensor *logits, const acc_tensor *target,
                                                        acc_reduction reduction, double label_smoothing,
                                                        acc_tensor **out);
/* log-probabilities [N, C], target class indices int64 [N]; ignore_index -100. */
ACC_API ACC_NODISCARD acc_status acc_loss_nll(const acc_tensor *log_probs, const acc_tensor *target,
                                              acc_reduction reduction, acc_tensor **out);
ACC_API ACC_NODISCARD acc_status acc_loss_mse(const acc_tensor *input, const acc_tensor *target,
                                              acc_reduction reduction, acc_tensor **out);
/* Mean absolute error, as torch's l1_loss. */
ACC_API ACC_NODISCARD acc_status acc_loss_l1(const acc_tensor *input, const acc_tensor *target,
                                             acc_reduction reduction, acc_tensor **out);
/* torch's smooth_l1_loss: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; beta >= 0 (0 is L1; infinity
 * gives 0 * d^2 = 0, as torch). */
ACC_API ACC_NODISCARD acc_status acc_loss_smooth_l1(const acc_tensor *input, const acc_tensor *target,
                                                    acc_reduction reduction, double beta, acc_tensor **out);
/* torch's huber_loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); delta > 0
 * (infinity allowed, as torch). */
ACC_API ACC_NODISCARD acc_status acc_loss_huber(const acc_tensor *input, const acc_tensor *target,
                                                acc_reduction reduction, double delta, acc_tensor **out);
ACC_API ACC_NODISCARD acc_status acc_loss_bce_with_logits(const acc_tensor *logits, const acc_tensor *target,
                                                          acc_reduction reduction, acc_tensor **out);

ACC_API void acc_tensor_free(acc_tensor *t);

/* ------------------------------------------------------------------------------------------------
 * Tensor lists: ordered, optionally named tensors (model outputs, state dicts)
 * ---------------------------------------------------------------------------------------------- */

ACC_API ACC_NODISCARD acc_status acc_tensor_list_create(acc_tensor_list **out);
/* Appends a tensor (the list takes its own reference; the caller keeps `t`). name may be NULL. */
ACC_API ACC_NODISCARD acc_status acc_tensor_list_append(acc_tensor_list *list, const char *name,
                                                        const acc_tensor *t);
ACC_API ACC_NODISCARD acc_status acc_tensor_list_size(const acc_tensor_list *list, size_t *out);
/* A new handle to the tensor at `index`. */
ACC_API ACC_NODISCARD acc_status acc_tensor_list_get(const acc_tensor_list *list, size_t index,
                                                     acc_tensor **out);
/* The name at `index` ("" when unnamed); borrowed, valid while the list lives. */
ACC_API ACC_NODISCARD acc_status acc_tensor_list_name(const acc_tensor_list *list, size_t index,
                                                      const char **out);
/* A new handle to the tensor named `name`; ACC_ERR_INVALID_ARGUMENT when there is none. */
ACC_API ACC_NODISCARD acc_status acc_tensor_list_find(const acc_tensor_list *list, const char *name,
                                                      acc_tensor **out);
ACC_API void acc_tensor_list_free(acc_tensor_list *list);

/* ------------------------------------------------------------------------------------------------
 * Models
 *
 * Under FSDP's cpu_ram_efficient_loading or DeepSpeed's zero3_init_flag (the launcher's variables
 * FSDP_CPU_RAM_EFFICIENT_LOADING / ACCELERATE_DEEPSPEED_ZERO3_INIT), a model loaded or built on a
 * process other than the main one has placeholder weights (no memory) until acc_prepare fills
 * them from the main process; until then acc_model_forward*, acc_model_parameter,
 * acc_model_state_dict, acc_model_save_torchscript and acc_model_merge_lora are
 * ACC_ERR_NOT_INITIALIZED there, and loading weights only checks names and shapes.
 *
 * Prepared under zero_stage 3 (FSDP FULL_SHARD), a model is sharded at rest: each process holds only
 * slices of its parameters and the model's own tensors are empty (acc_model_parameter_count counts
 * what they hold). acc_model_parameter, acc_model_state_dict, acc_model_load_state_dict,
 * acc_model_load_safetensors and acc_model_save_torchscript are then ACC_ERR_INVALID_ARGUMENT, on the
 * prepared, unwrapped or raw handle alike: acc_get_state_dict gives the full weights (every process
 * calls it), and weights are loaded before acc_prepare or by acc_load_state.
 * ---------------------------------------------------------------------------------------------- */

/* Loads a TorchScript module saved by PyTorch (torch.jit.save) onto the CPU. Missing files are
 * ACC_ERR_IO, files that are not TorchScript archives ACC_ERR_IO with the reason. */
ACC_API ACC_NODISCARD acc_status acc_model_load_torchscript(const char *path, acc_model **out);
/* Whether the TorchScript JIT optimises the model's forward (1, the default, as for a module
 * torch.jit.load gives Python: profiling-guided specialisation, fused GPU kernels); 0 runs every
 * operation one by one as PyTorch's eager mode does, which gives Python's eager numbers. A prepared
 * model passes it to the model it wraps; layer-spec models always run eagerly (accepted, no effect). */
ACC_API ACC_NODISCARD acc_status acc_model_set_graph_optimization(acc_model *model, int enabled);

/* Builds a model from a JSON layer spec, initialised as PyTorch initialises each layer
 * (draws from torch's CPU generator: seed with acc_set_seed for a reproducible model).
 * The spec is an array of layers, each an object with "type" and PyTorch's argument names:
 *   {"type":"linear","in_features":784,"out_features":128,"bias":true}
 *   {"type":"conv2d","in_channels":1,"out_channels":32,"kernel_size":3,"stride":1,"padding":1}
 *   {"type":"maxpool2d","kernel_size":2} {"type":"avgpool2d","kernel_size":2,"stride":2}
 *   {"type":"flatten"} {"type":"relu"} {"type":"gelu"} {"type":"tanh"} {"type":"sigmoid"}
 *   {"type":"softmax","dim":1} {"type":"dropout","p":0.5}
 *   {"type":"layernorm","normalized_shape":[128],"eps":1e-5}
 *   {"type":"batchnorm1d","num_features":128} {"type":"batchnorm2d","num_features":32}
 *   {"type":"embedding","num_embeddings":1000,"embedding_dim":64}
 * Transformer layers (nn.MultiheadAttention's, nn.TransformerEncoderLayer's and
 * nn.TransformerDecoderLayer's arguments and parameter names; "causal":true masks future positions
 * in self-attention):
 *   {"type":"multihead_attention","embed_dim":64,"num_heads":4,"batch_first":true,"causal":true}
 *   {"type":"multihead_attention","embed_dim":64,"num_heads":4,"key_value":{"input":1}}  (cross)
 *   {"type":"transformer_encoder_layer","d_model":64,"nhead":4,"dim_feedforward":256,"dropout":0.1,
 *    "activation":"gelu","layer_norm_eps":1e-5,"batch_first":true,"norm_first":true,"causal":true}
 *   {"type":"transformer_decoder_layer", the encoder layer's arguments, "memory":{"layer":3}}
 * Padding masks (PyTorch's names; absent by default) are tensors the layer reads, named as
 * "memory" is: multihead_attention's "key_padding_mask", transformer_encoder_layer's
 * "src_key_padding_mask", transformer_decoder_layer's "tgt_key_padding_mask" and
 * "memory_key_padding_mask", e.g. "src_key_padding_mask":{"input":1}. A mask is [batch, keys]
 * whatever batch_first says ([keys] unbatched), bool (true: ignore that key) or floating (added to
 * the scores); with "causal" both apply, as PyTorch merges attn_mask and key_padding_mask. A query
 * whose keys are all masked gets NaN, as in PyTorch 1.13. A mask of the wrong shape, dtype or device
 * makes acc_model_forward fail with ACC_ERR_INVALID_ARGUMENT naming the layer and the mask.
 *   {"type":"positional_embedding","num_embeddings":512,"embedding_dim":64}  (learned, added)
 *   {"type":"sinusoidal_positional_encoding","embedding_dim":64}  (fixed, added; no parameters)
 *   {"type":"rmsnorm","normalized_shape":[64],"eps":1e-6}  (eps null: the dtype's epsilon)
 *   {"type":"tied_linear","tie_to":0,"bias":false}  (logits with embedding layer 0's weight, shared)
 * Each layer reads the previous layer's output (layer 0: the model's input 0) unless it says
 * "from":{"input":k} (the model's input k) or "from":{"layer":i} (an earlier layer's output); the
 * tensors a layer attends to are named the same way ("memory", default {"input":1}; "key_value"),
 * so acc_model_forward takes as many inputs as the layers read. The last layer's output is the
 * model's. Parameters are named as in a PyTorch nn.Sequential ("0.weight", "0.bias",
 * "2.self_attn.in_proj_weight", ...); a tied weight is listed once, under its embedding. */
ACC_API ACC_NODISCARD acc_status acc_model_from_spec(const char *json_spec, acc_model **out);

/* Runs forward on n inputs. Outputs are flattened into a list: a tensor gives one unnamed entry;
 * a tuple or list one entry per element ("0", "1", ...); a dict one entry per key; nested
 * containers join names with '.'; numbers become 0-dim tensors. flags: ACC_FORWARD_*. */
ACC_API ACC_NODISCARD acc_status acc_model_forward(acc_model *model, const acc_tensor *const *inputs,
                                                   size_t n, uint32_t flags, acc_tensor_list **out);
/* PEFT's forward with adapter_names (mixed batches): acc_model_forward in which sample i of the
 * batch (the first dimension of each adapted layer's input) computes with the named adapter
 * adapter_names[i] (acc_model_add_lora_named, acc_model_load_lora_named; the active one's name too),
 * "__base__" with none: one model serving several fine-tunes in one batch. n_names must equal the
 * batch's size (else the forward is ACC_ERR_INVALID_ARGUMENT, PEFT's check). Each adapted layer
 * computes its base output, then adds to each sample's rows its adapter's B(A(x)) * scaling (in the
 * adapter's dtype, cast to the output's), as PEFT's lora layers do; a layer without a sample's
 * adapter leaves its rows as they are; disabled adapters (acc_model_set_lora_enabled 0) leave every
 * row as it is. RoAd adapters rotate their samples' rows as their layers do. Evaluation only: in
 * training mode ACC_ERR_INVALID_ARGUMENT, as a name no adapter has ("Trying to infer with
 * non-existing adapter(s)"), DoRA adapters and adapters of methods PEFT mixes no batches of (all
 * but LoRA and RoAd). ACC_ERR_UNSUPPORTED (not built here): trainable tokens, modules to save, and
 * adapters of layers other than linear ones the forward calls as modules (embeddings, convolutions,
 * attentions, quantised layers, parameters adapted themselves). The active adapter stays as it was. */
ACC_API ACC_NODISCARD acc_status acc_model_forward_adapters(acc_model *model, const acc_tensor *const *inputs,
                                                            size_t n, const char *const *adapter_names,
                                                            size_t n_names, uint32_t flags, acc_tensor_list **out);
/* Forward for the common case of one input and one tensor output. */
ACC_API ACC_NODISCARD acc_status acc_model_forward1(acc_model *model, const acc_tensor *input, uint32_t flags,
                                                    acc_tensor **out);

/* Training mode (dropout active, batch norm updating its statistics) or evaluation mode. */
ACC_API ACC_NODISCARD acc_status acc_model_set_training(acc_model *model, int training);
ACC_API ACC_NODISCARD acc_status acc_model_is_training(const acc_model *model, int *out);

/* Moves parameters and buffers to `device` (NULL: keep) and floating ones to `dtype`
 * (ACC_DTYPE_UNDEFINED: keep), in place: optimizers made over the model stay valid (their state
 * follows the parameters' dtype and device at their next step). */
ACC_API ACC_NODISCARD acc_status acc_model_to(acc_model *model, const char *device, acc_dtype dtype);

/* Number of parameter tensors and of parameter elements (either pointer may be NULL). */
ACC_API ACC_NODISCARD acc_status acc_model_parameter_count(const acc_model *model, size_t *tensors,
                                                           int64_t *elements);
ACC_API ACC_NODISCARD acc_status acc_model_parameter_names(const acc_model *model, acc_string_list **out);
/* A new handle to the parameter or buffer named `name` (it aliases the model's storage). */
ACC_API ACC_NODISCARD acc_status acc_model_parameter(const acc_model *model, const char *name, acc_tensor **out);
/* Sets every parameter's gradient to none (model.zero_grad()); prepared under sharded data
 * parallelism, also the gradient slices the optimizer steps. */
ACC_API ACC_NODISCARD acc_status acc_model_zero_grad(acc_model *model);
/* Freezes (requires_grad 0) or unfreezes the parameters whose names match `patterns`: a
 * comma-separated list of shell globs matched against whole names, '*' crossing dots ("0.*",
 * "*.bias,encoder.*"). A frozen parameter gets no gradient, no optimizer state and no allreduce.
 * Call it before creating the optimizer and before preparing the model (a prepared model is
 * refused). *count (may be NULL): how many matched; no match is ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_model_set_requires_grad(acc_model *model, const char *patterns,
                                                             int requires_grad, size_t *count);

/* Parameters and buffers by name, as detached tensors sharing the model's storage. */
ACC_API ACC_NODISCARD acc_status acc_model_state_dict(const acc_model *model, acc_tensor_list **out);
/* Copies named tensors into the model. strict: every model entry must be given and no other name;
 * otherwise missing and unexpected names are ignored. Shapes must match. The error message lists
 * missing and unexpected names. */
ACC_API ACC_NODISCARD acc_status acc_model_load_state_dict(acc_model *model, const acc_tensor_list *state,
                                                           int strict);

/* Saves the model as a TorchScript archive that PyTorch's torch.jit.load and
 * acc_model_load_torchscript read. */
ACC_API ACC_NODISCARD acc_status acc_model_save_torchscript(const acc_model *model, const char *path);

/* transformers' from_pretrained(quantization_config=...) with bitsandbytes: "load_in_4bit": true
 * is acc_model_quantize_4bit's 4-bit layers; "load_in_8bit": true makes the chosen linear layers
 * (nn.Linear, transformers' Conv1D) LLM.int8 layers, bitsandbytes' Linear8bitLt: each weight cast
 * to float16 and kept as int8 codes row by row, frozen (Int8Params), with each row's absolute
 * maximum. In training mode on the CPU a product dequantises the weight (bitsandbytes'
 * MatMul8bitFp); otherwise (evaluation, or CUDA) the input is quantised too and multiplied in
 * int8, its columns holding a value of magnitude >= "llm_int8_threshold" (default 6.0; 0: none)
 * computed in floating point. The state dict then holds `<layer>.weight` (int8), `<layer>.SCB` and
 * `<layer>.weight_format`, as transformers saves an 8-bit model; LoRA on these layers is PEFT's
 * lora.bnb.Linear8bitLt (adapters in float32), and merging quantises again. Also read for 8 bits:
 * "llm_int8_skip_modules" (as for 4 bits); Unsupported: "llm_int8_has_fp16_weight": true. Both
 * true, or neither, is InvalidArgument. Otherwise as acc_model_quantize_4bit. */
ACC_API ACC_NODISCARD acc_status acc_model_quantize(acc_model *model, const char *quantization_config,
                                                    size_t *count);
/* transformers' load_in_4bit (QLoRA's base model): the linear layers (nn.Linear, transformers'
 * Conv1D) keep their weights in bitsandbytes' 4-bit storage, frozen, and compute as its Linear4bit
 * does on the CPU: the weight dequantised for each product (and again for the input's gradient),
 * never kept as floats. `quantization_config` is transformers' BitsAndBytesConfig as JSON (its
 * to_dict(), as a 4-bit model's config.json holds it): "load_in_4bit": true (required),
 * "bnb_4bit_quant_type" "nf4" or "fp4" (default "fp4"), "bnb_4bit_compute_dtype" ("float32"
 * default, "bfloat16", "float16", "float64"; also "torch.<name>"), "bnb_4bit_use_double_quant" (default false), "llm_int8_skip_modules"
 * (modules left as they are; default: tied weights' modules and the module of the last parameter,
 * the output layer, as transformers). The model's state dict then holds bitsandbytes' entries
 * (`<layer>.weight` uint8 codes, `.weight.absmax`, `.weight.quant_map`, `.weight.nested_absmax`,
 * `.weight.nested_quant_map`, `.weight.quant_state.bitsandbytes__nf4`), as transformers saves a 4-bit
 * model. TorchScript models only; before adapters, optimizers and preparing. InvalidArgument:
 * load_in_8bit (acc_model_quantize takes it). Unsupported: a bnb_4bit_quant_storage other than uint8, a forward using a layer's weight other
 * than as torch.linear(x, weight, bias) (skip that layer), and afterwards casting the model's dtype,
 * saving TorchScript and zero_stage 3.
 * Merging adapters into 4-bit layers quantises them again (PEFT's bnb merge). *count (may be
 * NULL): how many layers. */
ACC_API ACC_NODISCARD acc_status acc_model_quantize_4bit(acc_model *model, const char *quantization_config,
                                                         size_t *count);
/* PEFT's prepare_model_for_kbit_training, before acc_model_add_lora: every parameter frozen and
 * every float16/bfloat16 one cast to float32 (layer norms, embeddings, the output layer; a 4-bit
 * layer's bias too, which its next forward casts back to bnb_4bit_compute_dtype, as bitsandbytes'
 * Linear4bit does, or an 8-bit layer's to its input's dtype); the 4-bit and int8 codes stay. Any model (as PEFT's). Its gradient checkpointing is not
 * done here. *cast (may be NULL): how many parameters were cast. */
ACC_API ACC_NODISCARD acc_status acc_model_prepare_for_kbit_training(acc_model *model, size_t *cast);

/* Safetensors (Hugging Face's format, read by Python's safetensors and transformers as is). */

/* Writes the named tensors of `list` to one safetensors file, atomically. */
ACC_API ACC_NODISCARD acc_status acc_tensor_list_save_safetensors(const acc_tensor_list *list, const char *path);
/* Reads a safetensors file (validated: a corrupt file is ACC_ERR_IO with the reason) into a new
 * named list of tensors of their own: the file may change or be removed afterwards. */
ACC_API ACC_NODISCARD acc_status acc_tensor_list_load_safetensors(const char *path, acc_tensor_list **out);

/* Loads weights saved by acc_save_model or by Python's save_pretrained: a .safetensors file, a
 * model.safetensors.index.json, or a directory holding either. strict: as acc_model_load_state_dict.
 * The names the model has but the checkpoint lacks, and the other way round, are written to
 * *missing and *unexpected (each may be NULL; new lists owned by the caller). */
ACC_API ACC_NODISCARD acc_status acc_model_load_safetensors(acc_model *model, const char *path, int strict,
                                                            acc_string_list **missing, acc_string_list **unexpected);


/* LoRA adapters (beyond Python Accelerate: what PEFT's get_peft_model gives Python users). A
 * linear layer's weight W trains as W + (B A) * scaling with W frozen; A (r x in) and B (out x r)
 * are parameters of the model, "<module>.lora_A.weight" and "<module>.lora_B.weight", each pair
 * listed right after its layer's own parameters (PEFT's order), so optimizers, DDP, sharding and
 * save_state treat them as any others.
 * A layer-spec model's linear layers compute as PEFT's LoRA layer: output + B(A(dropout(x))) *
 * scaling (the same numbers, dropout masks included). So do a TorchScript model's nn.Linear layers,
 * whose code is not edited, through a marked copy of forward. A layer whose weight the forward
 * reads itself instead of calling the layer (nn.MultiheadAttention's out_proj) computes with the
 * adapted weight W + (B A) * scaling when lora_dropout is 0 (the same to rounding), and is
 * ACC_ERR_UNSUPPORTED with dropout.
 *
 * acc_model_add_lora: adapts the linear layers (torch.nn.Linear in TorchScript, "linear" and the
 * linear layers inside spec layers) that `target_modules` names, transformers' Conv1D in TorchScript
 * (GPT-2's c_attn, c_proj, c_fc: a class "Conv1D" from the transformers package with its weight in
 * x out and a bias; PEFT's LoRA with fan_in_fan_out: A r x in and B out x r as for nn.Linear, the
 * delta (B A)^T merged into the weight; PiSSA and MiCA decompose the weight transposed, as PEFT's;
 * OLoRA is ACC_ERR_UNSUPPORTED there, since PEFT's factors the weight as stored), attention
 * (torch.nn.MultiheadAttention in TorchScript, a spec's "multihead_attention" layers and transformer
 * layers' self_attn and multihead_attn; PEFT's lora.MultiheadAttention: targeting the attention
 * adapts its in_proj, one adapter "<attention>.lora_A.weight" (r x E) and
 * "<attention>.lora_B.weight" (3E x r) for q, k and v, and its out_proj,
 * "<attention>.out_proj.lora_A.weight", both with the attention's
 * rank and alpha; PEFT's draws, its files ("<attention>.base_layer.out_proj..." for the out_proj);
 * a TorchScript attention computes with the adapted weights its forward reads, W + (B A) * scaling
 * (a spec's adds the adapters' branches to its projections: the same to rounding), so its adapters
 * take no lora_dropout, as in PEFT; q, k and v of one size only, as PEFT; use_dora is
 * ACC_ERR_INVALID_ARGUMENT as PEFT's ValueError, lora_bias and initialisations other than true,
 * gaussian and false ACC_ERR_UNSUPPORTED; targeting both the attention and its out_proj is
 * ACC_ERR_INVALID_ARGUMENT; an out_proj targeted alone is a linear layer of its own), and
 * convolutions (a TorchScript model's torch.nn.Conv1d/2d/3d, a spec model's "conv2d": PEFT's LoRA for
 * convolutions, A of the layer's kernel, stride and padding from all its input channels, B 1 x 1
 * with the layer's groups,
 * so r must be divisible by them (ACC_ERR_INVALID_ARGUMENT); DoRA's magnitude 1 x out x 1 ..., as
 * PEFT shapes it; a dilation, a padding_mode other than zeros or a string padding are
 * ACC_ERR_UNSUPPORTED, OLoRA or PiSSA on a convolution ACC_ERR_INVALID_ARGUMENT as PEFT's
 * ValueError (DoRA on one with groups takes PEFT's norms of its
 * flattened kernels' product in the weight's shape); an adapter of a convolution
 * with groups has no weight of the layer's shape, so merging it, acc_save_model and
 * acc_model_save_torchscript are ACC_ERR_UNSUPPORTED, as PEFT refuses to merge it: save it with
 * acc_model_save_lora), and embeddings (torch.nn.Embedding in TorchScript, a spec model's
 * "embedding": PEFT's lora_embedding_A (r x num_embeddings, zero at the start) looked up as the
 * layer looks up its rows, times lora_embedding_B (dim x r, N(0, 1)), parameters
 * "<module>.lora_embedding_A" and "<module>.lora_embedding_B"; no dropout, as in PEFT; lora_bias is
 * ACC_ERR_INVALID_ARGUMENT, as PEFT refuses it; use_dora trains a magnitude per embedding dimension,
 * as PEFT's; OLoRA/PiSSA start it as "true" does, as PEFT's; a max_norm, sparse gradients, or an
 * embedding the forward does not call as a module are ACC_ERR_UNSUPPORTED), and freezes every other parameter
 * (unfreeze some with acc_model_set_requires_grad afterwards). `target_modules` is PEFT's: module
 * names separated by commas (a module matches a name if its own name is it or ends with "." and it:
 * "q_proj,v_proj", "linear1"), or "re:" and a regular expression that must match the whole module
 * name ("re:.*\.(linear1|linear2)"), or PEFT's "all-linear" (any case): every linear layer
 * (nn.Linear, an attention's out_proj included, and transformers' Conv1D) but a transformers
 * model's output layer (lm_head, embed_out, proj_out or cls.predictions.decoder, by convention,
 * where the TorchScript class is a transformers one), which acc_model_save_lora writes as the
 * names it stood for, as PEFT does. Targets that match no linear layer, or match a module that is
 * not one, are ACC_ERR_INVALID_ARGUMENT. With the option target_parameters (PEFT's lora.ParamWrapper,
 * on a TorchScript model), each named parameter of a submodule is adapted itself, after the layers
 * (`target_modules` "" or NULL, PEFT's None: the parameters alone): a 2-D one as a linear layer's weight, a
 * 3-D one (experts x d1 x d2, as transformers keeps expert weights) with r rows per expert,
 * "<module>.lora_A.weight" (r experts x d2) and "<module>.lora_B.weight" (d1 x r experts), or d1
 * and d2 the other way round where the module has is_transposed true; the module computes with W +
 * delta, the delta PEFT's einsum of the experts' products (in W's dtype). A module with several
 * targeted parameters nests one wrapper in the next, as PEFT: the first one's adapters are
 * "<module>.base_layer.lora_A.weight". rank_pattern and alpha_pattern match the parameter's name.
 * As PEFT's ValueError, lora_dropout, use_dora, lora_bias and a parameter that is not a 2-D or
 * 3-D floating-point tensor are ACC_ERR_INVALID_ARGUMENT; init_lora_weights other than true,
 * false, gaussian and eva, a parameter of a layer target_modules adapts, and modules_to_save or
 * bias training a tensor of a wrapped module are ACC_ERR_UNSUPPORTED; target_parameters that
 * match nothing are ACC_ERR_INVALID_ARGUMENT (PEFT warns). `opts`: ACC_OPTIONS_LORA or NULL for
 * the defaults.
 * Initialisation draws from torch's global generator as PEFT does. Add adapters before creating the
 * optimizer and before acc_prepare (a prepared model refuses). `count` (optional): layers and parameters adapted.
 * acc_model_save_lora: PEFT's layout in `dir`: adapter_config.json and adapter_model.safetensors with
 * PEFT's names ("base_model.model.<module>.lora_A.weight"), read by PeftModel.from_pretrained.
 * Every process of a job may call it with one folder: they take turns (a lock file,
 * .accelerate_adapter_save.lock, stays in the folder). A model prepared under zero_stage 3 holds
 * slices of its adapters: through its prepared handle the call is a collective (every process calls
 * it; the full adapters are gathered, the main process writes, as Python's
 * save_pretrained(state_dict=accelerator.get_state_dict(model))); its unwrapped model's slices are
 * ACC_ERR_INVALID_ARGUMENT.
 * acc_model_load_lora: reads that layout (PEFT's own files too): adds the adapters if the model has
 * none, else requires the same targets, ranks, scalings, use_dora and lora_bias; every check comes
 * before anything changes. A file whose init_lora_weights is olora or pissa (PEFT writes it so)
 * decomposes the model's weights first, as PeftModel.from_pretrained does: load such adapters into
 * the model they were trained from (with pissa_niter_<n>, after the same seed). Not implemented
 * settings in a file (layer_replication, CorDA's residual, PEFT's LoRA variants aLoRA, VeLoRA,
 * MonteCLoRA, BD-LoRA, Arrow, KaSA, QALoRA and Megatron's layers, and ensure_weight_tying where it
 * would tie layers that share a weight (ACC_ERR_UNSUPPORTED)) are refused by name; init_lora_weights
 * "loftq" quantises the model's weights first, as PEFT's from_pretrained does (quantising weights that
 * are quantised already leaves them as they are), and needs the file's loftq_config;
 * trainable_token_indices is read, its rows taken from the file. A file of peft_type
 * TRAINABLE_TOKENS (acc_model_add_trainable_tokens) adds or loads trainable tokens alone; one of
 * IA3, LOHA, LOKR, VERA, PVERA, OFT, BOFT, HRA, FOURIERFT, LN_TUNING, MISS, C3A, SHIRA, RANDLORA,
 * DELORA, ROAD, GRALORA, HIRA or ADALORA adds that method's adapters (as acc_model_add_ia3, _loha,
 * _lokr, _vera, _pvera, _oft, _boft, _hra, _fourierft, _ln_tuning, _miss, _c3a, _shira, _randlora,
 * _delora, _road, _gralora, _hira, _adalora) and reads their tensors; other PEFT methods are refused
 * naming the peft_type.
 * acc_model_merge_lora: merges the adapters into the weights and removes them (merge_and_unload);
 * on the handle from before acc_prepare (Accelerate's unwrap_model(...).merge_and_unload(), to save
 * the merged model) the prepared model's next forward is ACC_ERR_INVALID_ARGUMENT: its engine holds
 * the parameters of the time;
 * a model prepared under zero_stage 3 holds only slices of them: ACC_ERR_INVALID_ARGUMENT.
 * acc_model_merge_lora_adapters: PEFT's merge_and_unload(adapter_names=...): the `n` named adapters
 * (see acc_model_add_lora_named; active or kept aside) merged into the weights one after the other,
 * in the order given, then every adapter removed (the modules to save keep the active adapter's
 * copies, as PEFT's unload). Every check (names, adapters that cannot merge) before any weight
 * changes. A prepared model refuses, as for acc_model_merge_lora.
 * acc_save_model and acc_model_save_torchscript always write merged weights (the base model's
 * layout), leaving the adapters in place. */
ACC_API ACC_NODISCARD acc_status acc_model_add_lora(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
ACC_API ACC_NODISCARD acc_status acc_model_save_lora(const acc_model *model, const char *dir);
ACC_API ACC_NODISCARD acc_status acc_model_load_lora(acc_model *model, const char *dir);
ACC_API ACC_NODISCARD acc_status acc_model_merge_lora(acc_model *model);
ACC_API ACC_NODISCARD acc_status acc_model_merge_lora_adapters(acc_model *model, const char *const *adapter_names,
                                                              size_t n);
/* The number of adapted layers (0 without adapters). */
ACC_API ACC_NODISCARD acc_status acc_model_lora_count(const acc_model *model, size_t *out);
/* acc_model_add_trainable_tokens: PEFT's TrainableTokensConfig (get_peft_model with peft_type
 * TRAINABLE_TOKENS): chosen rows of embeddings train alone, without LoRA (new tokens of a
 * vocabulary), every other parameter frozen. `target_modules`: named as for acc_model_add_lora
 * (embeddings, or linear layers without a bias reading a vocabulary), or NULL or "" for the model's
 * input embedding (its first embedding layer); a layer tied to a target embedding (an LM head)
 * computes with the same rows, as PEFT's tied adapter; a target whose weight is tied to an
 * embedding not targeted is ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_TRAINABLE_TOKENS, whose
 * token_indices is required. The rows train as "<module>.trainable_tokens_delta" (n x dim, listed
 * after the layer's weight), every forward computing with W.index_copy(0, indices, delta).
 * acc_model_save_lora writes PEFT's files for them (peft_type TRAINABLE_TOKENS), acc_model_load_lora
 * reads them (PEFT's own too), acc_model_merge_lora writes the rows into the weights,
 * acc_model_set_lora_enabled disables them, acc_save_model writes merged weights; acc_model_lora_count
 * counts LoRA adapters only (0 here). `count` (optional): the layers whose rows train (a tied head
 * not counted). Before creating the optimizer and before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_trainable_tokens(acc_model *model, const char *target_modules,
                                                               const acc_options *opts, size_t *count);
/* acc_model_add_ia3: PEFT's IA3Config ((IA)^3, get_peft_model with peft_type IA3): each targeted
 * layer trains one vector, "<module>.ia3_l" (listed after the layer's own parameters), that
 * multiplies its output element-wise (PEFT's shape out x 1; a convolution's 1 x out x 1 x 1), or
 * for the feedforward_modules its input (1 x in; 1 x in x 1 x 1); every other parameter is frozen
 * but modules_to_save's. Computed as PEFT's ia3.Linear and ia3.Conv2d/Conv3d compute it, dtype
 * casts included (a convolution's result comes back in its input's dtype, as PEFT's). The vectors
 * start as ones (the model unchanged) after torch.randn draws of their shapes from the global
 * generator, layer by layer in the model's order, as PEFT's; init_ia3_weights false keeps the
 * draws. `target_modules`: named as for acc_model_add_lora ("all-linear" too); targets must be
 * linear layers (torch.nn.Linear, transformers' Conv1D, a spec model's "linear"), or 2-D or 3-D
 * convolutions, that the forward calls as modules: an embedding, attention or 1-D convolution is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's ValueError); a layer whose weight the forward reads itself, or a
 * quantised one, ACC_ERR_UNSUPPORTED. feedforward_modules named as a list must be among
 * target_modules' names (PEFT's ValueError). `opts`: ACC_OPTIONS_IA3 or NULL (defaults; no
 * feedforward modules, where PEFT asks for the list on a model it does not know).
 * acc_model_save_lora writes PEFT's files (peft_type IA3, "base_model.model.<module>.ia3_l"),
 * acc_model_load_lora reads them (PEFT's own too), acc_model_merge_lora merges as PEFT's
 * merge_and_unload (the weight scaled along its outputs or inputs, an output-scaled layer's bias
 * too), acc_model_set_lora_enabled disables them, acc_save_model writes merged weights,
 * acc_model_lora_count counts them. Several named IA3 adapters: acc_model_add_lora_named with
 * ACC_OPTIONS_IA3, acc_model_load_lora_named, acc_model_set_adapter and the rest act on them as
 * on LoRA's, and acc_model_add_weighted_adapter sums their vectors as PEFT's IA3 does. `count` (optional):
 * the layers adapted. Before creating the optimizer and before acc_prepare, on a model without
 * adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_ia3(acc_model *model, const char *target_modules,
                                                  const acc_options *opts, size_t *count);
/* acc_model_add_loha: PEFT's LoHaConfig (LyCORIS' LoHa, get_peft_model with peft_type LOHA): each
 * targeted layer's weight W trains as W + ((w1_a w1_b) * (w2_a w2_b)) * alpha / r, the Hadamard
 * product of two rank-r products, with the parameters "<module>.hada_w1_a", "<module>.hada_w1_b",
 * "<module>.hada_w2_a", "<module>.hada_w2_b" (out x r, r x in, out x r, r x in; a convolution's in
 * its input channels per group times its kernel), listed after the layer's own; with
 * use_effective_conv2d a convolution wider than 1 x 1 takes PEFT's CP form instead ("<module>.hada_t1"
 * and "<module>.hada_t2", r x r x kernel, a 1-D kernel's k x 1, after w1_a, w1_b, w2_a, w2_b of
 * r x out, r x in, r x out, r x in; gradients as PEFT's HadaWeightCP computes them); every other
 * parameter frozen but modules_to_save's. Computed as PEFT's loha layers compute it: the layer's
 * output plus its input through the delta (F.linear, or the layer's convolution), in training with
 * rank_dropout (torch.rand per output row of the delta) and module_dropout (torch.rand(1) per layer
 * and forward, drawn whatever the probability), cast to the input's dtype. Drawn as PEFT draws them:
 * Kaiming-uniform w1_a, w1_b, w2_a and zero w2_b (init_weights false: w2_b drawn too), then
 * t1 and t2, layer by layer in the model's order. `target_modules`: named as for acc_model_add_lora; targets must be
 * linear layers (torch.nn.Linear, a spec's "linear") or 1-D and 2-D convolutions (a spec's
 * "conv2d") that the forward calls as modules: transformers' Conv1D, an embedding, an attention or
 * a 3-D convolution is ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError); a layer whose weight the forward
 * reads itself or a quantised one ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_LOHA or NULL (defaults). The files,
 * merging (W plus the delta, without dropout), disabling, counting and named adapters
 * (acc_model_add_lora_named with ACC_OPTIONS_LOHA) act as for LoRA; acc_model_add_weighted_adapter
 * is ACC_ERR_INVALID_ARGUMENT (PEFT's LoHa has none). Before creating the optimizer and before
 * acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_loha(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
/* acc_model_add_lokr: PEFT's LoKrConfig (LyCORIS' LoKr, get_peft_model with peft_type LOKR): each
 * targeted layer's weight W (out x in, factored as out = a b and in = c d by LyCORIS'
 * factorization, a convolution's in its input channels per group) trains as
 * W + kron(w1, w2) * alpha / r, with w1 (a x c) and w2 (b x d, a convolution's times its kernel)
 * new parameters: "<module>.lokr_w1", or "<module>.lokr_w1_a" and "<module>.lokr_w1_b" (a x r,
 * r x c) with decompose_both where r < max(a, c) / 2; "<module>.lokr_w2", or "<module>.lokr_w2_a"
 * and "<module>.lokr_w2_b" (b x r, r x d times the kernel) where r < max(b, d) / 2, a wider
 * kernel's with use_effective_conv2d in the CP form (lokr_w2_a r x b, lokr_w2_b r x d,
 * "<module>.lokr_t2" r x r x kernel); listed after the layer's own in that order; every other
 * parameter frozen but modules_to_save's. Computed as PEFT's lokr layers compute it: the layer's
 * output plus its input through the delta (F.linear, or the layer's convolution with its stride,
 * padding, dilation and groups), in training with rank_dropout and module_dropout drawn as LoHa's,
 * cast to the input's dtype. Drawn as PEFT draws them (init_weights), layer by layer in the model's
 * order. `target_modules`: as for acc_model_add_loha, the same layers taken and refused. `opts`: ACC_OPTIONS_LOKR or NULL (defaults). The files, merging,
 * disabling, counting and named adapters (acc_model_add_lora_named with ACC_OPTIONS_LOKR) act as
 * for LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's LoKr has none).
 * Before creating the optimizer and before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_lokr(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
/* acc_model_add_vera: PEFT's VeraConfig (VeRA, get_peft_model with peft_type VERA): one pair of
 * frozen random projections for all the targeted layers, vera_A (r x the largest input) and vera_B
 * (the largest output x r), drawn Kaiming-uniform from a CPU generator of their own seeded
 * projection_prng_key (the global generator untouched); each layer trains "<module>.vera_lambda_b"
 * (out) and "<module>.vera_lambda_d" (r), listed after the layer's own, and computes its output plus
 * lambda_b * (vera_B[:out] (lambda_d * (vera_A[:, :in] dropout(x)))), cast to the output's dtype;
 * every other parameter frozen but modules_to_save's (and biases, with bias). Drawn as PEFT's layers
 * draw them: torch.randn(r) per layer in the model's order, then lambda_d d_initial and lambda_b
 * zeros (init_weights false: the draw and ones). `target_modules`: named as for acc_model_add_lora
 * ("all-linear" too); targets must be linear layers (torch.nn.Linear, transformers' Conv1D, a spec's
 * "linear") that the forward calls as modules: anything else is ACC_ERR_INVALID_ARGUMENT (PEFT's
 * TypeError), a layer whose weight the forward reads itself or a quantised one ACC_ERR_UNSUPPORTED.
 * `opts`: ACC_OPTIONS_VERA or NULL (defaults). acc_model_save_lora writes PEFT's files, the
 * projections as "base_model.vera_A" and "base_model.vera_B" where save_projection; a file that
 * saves them is loaded with them (of the shapes its layers give), one that does not draws them again
 * from its projection_prng_key. Merging (W plus lambda_b B lambda_d A), disabling, counting and named
 * adapters (acc_model_add_lora_named with ACC_OPTIONS_VERA; each adapter its own projections) act as
 * for LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's VeRA has none). The
 * projections are buffers of the model's state, "vera_A" and "vera_B" (acc_model_state_dict,
 * acc_save_state and acc_load_state hold them, as PEFT's model state does; acc_model_to moves them;
 * acc_save_model's merged weights leave them out). Loading a file into a model with VeRA adapters
 * needs the same r, projection_prng_key and save_projection. Before creating the optimizer and
 * before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_vera(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
/* acc_model_add_oft: PEFT's OFTConfig (orthogonal fine-tuning, get_peft_model with peft_type OFT)
 * on linear layers: each targeted layer's input is split into blocks (oft_block_size, or r of
 * them; a size that does not divide the input moved to the nearest divisor, the lower on a tie, as
 * PEFT moves it) and rotated block by block before the layer computes; the rotations come from
 * "<module>.oft_R.weight" (blocks, or 1 with block_share, x block (block - 1) / 2: each block's
 * skew-symmetric Q) by PEFT's Cayley-Neumann series or a solve, with coft's projection written
 * back to the weight at each forward as PEFT's does; every other parameter frozen but
 * modules_to_save's (and biases, with bias). Drawn as PEFT draws: zeros, or normal(0, 0.1) from the
 * global generator without init_weights, layer by layer in the model's order. `target_modules`:
 * named as for acc_model_add_lora ("all-linear" too); targets must be linear layers
 * (torch.nn.Linear, a spec's "linear") that the forward calls as modules: transformers' Conv1D or an
 * attention is ACC_ERR_INVALID_ARGUMENT (PEFT's), a convolution, an embedding, a quantised layer
 * or one whose weight the forward reads itself ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_OFT or
 * NULL (defaults). Files (PEFT's, from 0.14 on; written with peft_version 0.18.0, whose
 * Cayley-Neumann series they follow; an earlier version's with the series is ACC_ERR_UNSUPPORTED),
 * merging (W times the block-diagonal rotation),
 * disabling, counting and named adapters act as for LoRA; acc_model_add_weighted_adapter is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's OFT has none). Before creating the optimizer and before
 * acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_oft(acc_model *model, const char *target_modules,
                                                  const acc_options *opts, size_t *count);
/* acc_model_add_adalora: PEFT's AdaLoraConfig (AdaLoRA, get_peft_model with peft_type ADALORA):
 * each targeted layer computes its output plus (dropout(x) @ (A * E)^T @ B^T) * lora_alpha /
 * (ranknum + 1e-5) (a 2-D convolution: its convolution of dropout(x) with that delta in its
 * weight's shape), with "<module>.lora_A" (init_r x in; a convolution's in x kernel),
 * "<module>.lora_B" (out x init_r) and "<module>.lora_E" (init_r x 1) trained and
 * "<module>.ranknum" (init_r, frozen, in the layer's dtype) listed after them, after the layer's own;
 * every other parameter frozen but modules_to_save's (and biases, with bias). Drawn as PEFT's
 * layers draw them: torch.randn for A, E, B and ranknum per layer in the model's order, then E
 * zeros and A and B normal(0, 0.02) (init_lora_weights false: the randn draws). Training, as with
 * PEFT: the loss is acc_model_adalora_loss's, and acc_model_adalora_update_and_allocate(step) comes
 * after each backward (and optimizer step) and before the gradients are zeroed; it prunes the
 * ranks to a budget falling from init_r to target_r per layer (see ACC_OPTIONS_ADALORA) by zeroing
 * entries of E. `target_modules`: named as for acc_model_add_lora ("all-linear" too); targets must
 * be linear layers (torch.nn.Linear, transformers' Conv1D, a spec's "linear") or torch.nn.Conv2d
 * that the forward calls as modules: anything else is ACC_ERR_INVALID_ARGUMENT (PEFT's
 * ValueError), a grouped convolution, a quantised layer or one whose weight the forward reads
 * itself ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_ADALORA (its total_step is required).
 * acc_model_save_lora writes PEFT's files: the last pruning's pattern as rank_pattern and each
 * layer's kept entries only (PEFT's resize); acc_model_load_lora reads them (PEFT's own too), each
 * layer at its kept rank, drawn as PEFT's from_pretrained draws. Merging (W plus the delta),
 * disabling and counting act as for LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT
 * (PEFT's AdaLoRA has none). Before creating the optimizer and before acc_prepare, on a model
 * without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_adalora(acc_model *model, const char *target_modules,
                                                      const acc_options *opts, size_t *count);
/* acc_model_add_boft: PEFT's BOFTConfig (butterfly orthogonal fine-tuning, get_peft_model with
 * peft_type BOFT): each targeted layer's input (a 2-D convolution's: its weight) is rotated by an
 * orthogonal matrix M of boft_n_butterfly_factor factors, each a block diagonal of Cayley rotations
 * ((I + S)^-1 (I - S), S the skew-symmetric half of each block of "<module>.boft_R": factors x
 * blocks x block x block) permuted by PEFT's butterfly permutation, the last factor on the left;
 * the output is scaled per output by "<module>.boft_s" (out x 1; a convolution's 1 x out), the bias
 * left as it is. A linear layer computes base(x M) with its bias taken out, scaled and put back; a
 * convolution with its weight (M W^T)^T * s; every other parameter frozen but modules_to_save's (and
 * biases, with bias). Drawn as PEFT draws: zeros and ones, or (init_weights false) boft_R from
 * normal(0, 0.1) then boft_s from normal(1, 0.1), layer by layer in the model's order; in training,
 * boft_dropout draws one factor (torch.randint) and its blocks (torch.randperm) as PEFT's
 * MultiplicativeDropoutLayer. `target_modules`: named as for acc_model_add_lora ("all-linear" too);
 * targets must be linear layers (torch.nn.Linear, a spec's "linear") the forward calls as modules or
 * torch.nn.Conv2d of a square kernel, one stride and one padding without dilation or groups:
 * transformers' Conv1D, an embedding or an attention is ACC_ERR_INVALID_ARGUMENT (PEFT's
 * TypeError), as are block settings PEFT refuses for a layer; a quantised layer or another
 * convolution ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_BOFT or NULL (defaults). Files (PEFT's),
 * merging (the weight rotated and scaled), disabling, counting and named adapters act as for LoRA;
 * acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's BOFT has none). Several
 * butterfly factors compute as PEFT's CUDA extension builds them (PEFT without it, on a CPU, takes
 * one factor whatever boft_n_butterfly_factor says). Before creating the optimizer and before
 * acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_boft(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
/* acc_model_add_hra: PEFT's HRAConfig (Householder reflection adaptation, get_peft_model with
 * peft_type HRA): each targeted layer computes with its weight times H, the product of r
 * Householder reflections I - 2 u u^T, u the columns of "<module>.hra_u" (in x r; a 2-D
 * convolution's in * kernel^2 x r, its weight viewed as out x in * kernel^2) normalised, in order;
 * with apply_GS H is I - 2 U U^T, U those columns orthonormalised by Gram-Schmidt. The bias stays
 * as it is; every other parameter is frozen but modules_to_save's (and biases, with bias). Drawn as
 * PEFT draws, layer by layer in the model's order: with init_weights and an even r,
 * kaiming_uniform_(a = sqrt(5)) of in x r/2, each column repeated (equal pairs of reflections: the
 * layer starts unchanged); otherwise kaiming_uniform_ of in x r. `target_modules`: named as for
 * acc_model_add_lora ("all-linear" too); targets must be linear layers (torch.nn.Linear, a spec's
 * "linear") or torch.nn.Conv2d of a square kernel, one stride and one padding without dilation or
 * groups, each called by the forward as a module: transformers' Conv1D, an embedding or an
 * attention is ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError); a quantised layer, another convolution
 * or a layer whose weight the forward reads itself ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_HRA or
 * NULL (defaults). Files (PEFT's), merging (W H), disabling, counting and named adapters act as for
 * LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's HRA has none). The layer
 * computes its output anew with W H (its own output is not used). Before creating the optimizer and
 * before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_hra(acc_model *model, const char *target_modules,
                                                  const acc_options *opts, size_t *count);
/* acc_model_add_fourierft: PEFT's FourierFTConfig (get_peft_model with peft_type FOURIERFT): each
 * targeted layer trains "<module>.fourierft_spectrum", n_frequency entries (n_frequency_pattern's
 * for the modules it names) of an out x in spectrum at places the first n_frequency of
 * torch.randperm(out * in) give, drawn from a generator seeded random_loc_seed (the same places on
 * every load); the layer adds its input times the delta, the real part of the spectrum's inverse
 * 2-D FFT times scaling, W frozen. Drawn as PEFT draws: torch.randn of n_frequency per layer in the
 * model's order (zeros after it with init_weights). `target_modules`: named as for acc_model_add_lora
 * ("all-linear" too); targets must be linear layers (torch.nn.Linear, transformers' Conv1D, a spec's
 * "linear") the forward calls as modules: a convolution, an embedding or an attention is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError), as is an n_frequency above the weight's entries; a
 * quantised layer, or a layer whose weight the forward reads itself, ACC_ERR_UNSUPPORTED. `opts`:
 * ACC_OPTIONS_FOURIERFT or NULL (defaults). Files (PEFT's), merging (W plus the delta), disabling,
 * counting and named adapters act as for LoRA; acc_model_add_weighted_adapter is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's FourierFT has none). Before creating the optimizer and before
 * acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_fourierft(acc_model *model, const char *target_modules,
                                                        const acc_options *opts, size_t *count);
/* acc_model_add_miss: PEFT's MissConfig (MiSS, formerly Bone; get_peft_model with peft_type MISS):
 * each targeted layer trains one shard, "<module>.miss_block", shared by every r-wide block of its
 * input. init_weights "true" (zeros) or "false" (kaiming_uniform_(a = sqrt(5)) draws, layer by
 * layer in the model's order): the shard is r x out and the layer adds (its input zero-padded to a
 * multiple of r, miss_dropout applied, the r-wide blocks summed) times the shard; "mini": an
 * r x mini_r shard, repeated out / mini_r times along the outputs, added so; "bat": an out/r x r x r
 * shard and the layer computes anew with W + W_blocks B + B, each r x r block of W times its row's
 * shard (r must divide the inputs and the outputs). W is frozen; every other parameter too but
 * modules_to_save's (and biases, with bias). `target_modules`: named as for acc_model_add_lora
 * ("all-linear" too); targets must be torch.nn.Linear layers (or a spec's "linear") the forward
 * calls as modules: a convolution, transformers' Conv1D, an embedding or an attention is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError), as is "bat" where r does not divide the weight's
 * sides or "mini" where mini_r does not divide the outputs (PEFT's ValueErrors); a quantised
 * layer, or a layer whose weight the forward reads itself, ACC_ERR_UNSUPPORTED. `opts`:
 * ACC_OPTIONS_MISS or NULL (defaults). Files (PEFT's), merging (W plus the shard laid over each
 * block of columns; "bat": W + W_blocks B + B), disabling, counting and named adapters act as for
 * LoRA (each named adapter computes as its own init_weights says; PEFT's layer keeps the first
 * adapter's variant); acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's MiSS has
 * none). Before creating the optimizer and before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_miss(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
/* acc_model_add_c3a: PEFT's C3AConfig (circular convolution adaptation, get_peft_model with
 * peft_type C3A): each targeted layer trains "<module>.c3a_kernel" (out/b x in/b x b, b its
 * block_size: block_size_pattern's for the modules it names) and adds its input, in float32,
 * convolved circularly block by block with the kernel (PEFT's BlockCircularConvolution: FFTs, its
 * hand-written backward too) and divided by the input's width, cast to the output's dtype: the
 * delta is a block circulant matrix. Drawn as PEFT draws, layer by layer in the model's order:
 * uniform within sqrt(6 / (in + out)) ("xavier_uniform", PEFT's default), within sqrt(1 / in)
 * ("kaiming_uniform"), torch.randn ("gaussian"), or zeros ("true"). `target_modules`: named as for
 * acc_model_add_lora ("all-linear" too); targets must be torch.nn.Linear layers (or a spec's
 * "linear") the forward calls as modules: a convolution, transformers' Conv1D, an embedding or an
 * attention is ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError), as is a block size that does not
 * divide the layer's inputs and outputs (its ValueError); a quantised layer, or a layer whose weight
 * the forward reads itself, ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_C3A or NULL (defaults). Files
 * (PEFT's), merging (W plus the block circulant matrix over the input's width), disabling, counting
 * and named adapters act as for LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT
 * (PEFT's C3A has none). Before creating the optimizer and before acc_prepare, on a model without
 * adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_c3a(acc_model *model, const char *target_modules,
                                                  const acc_options *opts, size_t *count);
/* acc_model_add_shira: PEFT's ShiraConfig (sparse high rank adapters, get_peft_model with
 * peft_type SHIRA): each targeted layer (out x in) trains r (in + out) entries of its weight,
 * "<module>.shira_weight", at fixed places, "<module>.shira_indices" (2 x K int32: rows, then
 * columns), and computes F.linear(x, W + that sparse matrix, bias); W is frozen. The places come
 * from PEFT's random_mask: the first r (in + out) of torch.randperm(out * in) drawn from a
 * generator of the layer's own (seeded random_seed, else a new generator's default seed), in
 * row-major order; the entries start as zeros, or torch.randn draws (init_weights false) layer by
 * layer in the model's order. `target_modules`: named as for acc_model_add_lora ("all-linear"
 * too); targets must be torch.nn.Linear layers (or a spec's "linear") the forward calls as modules:
 * a convolution, transformers' Conv1D, an embedding or an attention is ACC_ERR_INVALID_ARGUMENT
 * (PEFT's TypeError), as is an r that trains more entries than the weight holds (its ValueError);
 * a quantised layer, or a layer whose weight the forward reads itself, ACC_ERR_UNSUPPORTED. `opts`:
 * ACC_OPTIONS_SHIRA or NULL (defaults). Files are PEFT's, the places with the values: a file whose
 * mask_type names a mask function of the user's (PEFT's mask_fn) loads with the file's places.
 * The places are not in the model's state (acc_model_state_dict, save_state), as PEFT keeps them
 * outside its state_dict: a resumed run draws them again from random_seed. Merging (W plus the
 * entries), disabling (the layer's own output, uncast, as PEFT's), counting and named adapters act
 * as for LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's SHiRA has none).
 * Before creating the optimizer and before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_shira(acc_model *model, const char *target_modules,
                                                    const acc_options *opts, size_t *count);
/* acc_model_add_randlora: PEFT's RandLoraConfig (get_peft_model with peft_type RANDLORA): one pair
 * of frozen random bases for all the targeted layers, drawn from a CPU generator seeded
 * projection_prng_key (torch's global generator untouched) over the largest output and input of
 * the targeted layers: randlora_A (r x 1 x the smaller of the two), randlora_B (the larger x n x r,
 * n = ceil(smaller / r)), Kaiming draws in bfloat16 divided by their std (or, sparse / very_sparse,
 * ternary ones), kept in float32; each layer trains "<module>.randlora_lambda" (r x n, torch.randn
 * from the global generator layer by layer in the model's order, zeros with init_weights) and
 * "<module>.randlora_gamma" (n x its smaller side), n from the layer's smaller side, and adds
 * F.linear(F.linear(x, first), second) * randlora_alpha / r with the bases sliced to the layer and
 * scaled by lambda and gamma (PEFT's UniqueBaseGrad, its hand-written backward too), computed in
 * float32 and cast back to the input's dtype. The bases are buffers of the model's state,
 * "randlora_A" and "randlora_B"; files (PEFT's: the bases as "base_model.randlora_A" and
 * "base_model.randlora_B" and under each layer's name, where save_projection) and merging
 * (W + (second first) * randlora_alpha / r). `target_modules`: named as for acc_model_add_lora
 * ("all-linear" too); targets must be torch.nn.Linear layers, transformers' Conv1D (or a spec's
 * "linear") the forward calls as modules: anything else is ACC_ERR_INVALID_ARGUMENT (PEFT's
 * ValueError); a quantised layer, or a layer whose weight the forward reads itself,
 * ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_RANDLORA or NULL (defaults). Disabling, counting and
 * named adapters (each adapter draws its own bases: PEFT's shared ones where r and the layers
 * agree) act as for LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's
 * RandLoRA has none). Before creating the optimizer and before acc_prepare, on a model without
 * adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_randlora(acc_model *model, const char *target_modules,
                                                       const acc_options *opts, size_t *count);
/* acc_model_add_delora: PEFT's DeloraConfig (decoupled low-rank adaptation, get_peft_model with
 * peft_type DELORA): each targeted layer trains "<module>.delora_A" (r x in, kaiming_uniform_(a =
 * sqrt(5)) from the global generator), "<module>.delora_B" (out x r: zeros, or with init_weights
 * false Kaiming draws too) and "<module>.delora_lambda" (1: delora_lambda, lambda_pattern's for the
 * modules it names; r rank_pattern's), keeps "<module>.delora_w_norm", the norms of the weight's
 * columns at the start (in; a buffer of the model's state and of PEFT's files), and adds
 * F.linear(F.linear(dropout(x) * w_norm, A) * (lambda / r) / (|A_i| |B^i|), B) (the norms of A's
 * rows and B's columns, at least 1e-4), in the output's dtype, the result in the input's.
 * `target_modules`: named as for acc_model_add_lora ("all-linear" too); targets must be
 * torch.nn.Linear layers (or a spec's "linear") the forward calls as modules: a convolution,
 * transformers' Conv1D, an embedding or an attention is ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError);
 * a quantised layer, or a layer whose weight the forward reads itself, ACC_ERR_UNSUPPORTED. `opts`:
 * ACC_OPTIONS_DELORA or NULL (defaults). Files (PEFT's), merging (W + (B diag(lambda / r / (|A_i|
 * |B^i|)) A) * w_norm), disabling, counting and named adapters act as for LoRA;
 * acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's DeLoRA has none). Before
 * creating the optimizer and before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_delora(acc_model *model, const char *target_modules,
                                                     const acc_options *opts, size_t *count);
/* acc_model_add_road: PEFT's RoadConfig (2D rotary adaptation, get_peft_model with peft_type ROAD):
 * each targeted layer trains "<module>.road_theta" and "<module>.road_alpha" (out / 2 each with
 * variant road_1, out with road_2, 2 out with road_4: zeros and ones, or with init_weights false
 * normal_(0, 0.5) and normal_(1, 0.5) from the global generator, layer by layer) and rotates its
 * output (bias included) pair by pair: within each group of group_size outputs, output j and
 * k = j + group_size / 2 pair up and (y_j, y_k) becomes (c_j y_j - s_j y_k, c_k y_k + s_k y_j), c =
 * alpha cos theta and s = alpha sin theta (road_1: one theta and alpha per pair; road_2: per output;
 * road_4: c's and s's own), computed in theta's dtype and returned in the output's.
 * `target_modules`: named as for acc_model_add_lora ("all-linear" too); targets must be
 * torch.nn.Linear layers (or a spec's "linear") the forward calls as modules, their outputs a multiple
 * of group_size: a convolution, transformers' Conv1D, an embedding, an attention or such a layer is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError and ValueError); a quantised layer, or a layer whose
 * weight the forward reads itself, ACC_ERR_UNSUPPORTED. `opts`: ACC_OPTIONS_ROAD or NULL (defaults).
 * Files (PEFT's), merging (the rotation matrix R times the weight and times the bias), disabling,
 * counting and named adapters act as for LoRA; acc_model_add_weighted_adapter is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's RoAd has none). Before creating the optimizer and before
 * acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_road(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
/* acc_model_add_gralora: PEFT's GraloraConfig (granular low-rank adaptation, get_peft_model with
 * peft_type GRALORA): each targeted layer's inputs and outputs are cut into gralora_k blocks and
 * each of the k x k blocks of its delta is a low-rank product of rank r / k: the layer trains
 * "<module>.gralora_A" (k x in/k x r) and "<module>.gralora_B" (k x r x out/k), drawn block by block
 * from the global generator (A's rows kaiming_uniform_(a = sqrt(5)), B zeros, or with init_weights
 * false Kaiming draws too), and with hybrid_r a plain LoRA pair beside them,
 * "<module>.gralora_A_general.weight" (hybrid_r x in) and "<module>.gralora_B_general.weight" (out x
 * hybrid_r), made as two new nn.Linear layers (their own draws) then A drawn again and B zeroed.
 * The layer adds alpha / (r + hybrid_r) times both branches (dropout on the input of each, a mask of
 * its own), as PEFT's einsums compute them; its output in the input's dtype.
 * `target_modules`: named as for acc_model_add_lora ("all-linear" too); targets must be
 * torch.nn.Linear layers (or a spec's "linear") or transformers' Conv1D the forward calls as
 * modules, their sides multiples of gralora_k: a convolution, an embedding, an attention or such a
 * layer is ACC_ERR_INVALID_ARGUMENT (PEFT's TypeError and ValueError); a quantised layer, or a layer
 * whose weight the forward reads itself, ACC_ERR_UNSUPPORTED. Inputs of more than three dimensions
 * (which PEFT's layer refuses) fold their leading ones into the batch. `opts`: ACC_OPTIONS_GRALORA
 * or NULL (defaults). Files (PEFT's), merging (PEFT's block-scattered delta), disabling, counting and
 * named adapters act as for LoRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT (PEFT's
 * GraLoRA has none). Before creating the optimizer and before acc_prepare, on a model without
 * adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_gralora(acc_model *model, const char *target_modules,
                                                      const acc_options *opts, size_t *count);
/* acc_model_add_hira: PEFT's HiraConfig (Hadamard high-rank adaptation, get_peft_model with
 * peft_type HIRA): each targeted layer trains "<module>.hira_A" (r x in) and "<module>.hira_B"
 * (out x r), drawn as PEFT draws them from the global generator (torch.randn of A, then of B; then,
 * init_weights "true", A kaiming_uniform_(a = sqrt(5)) and B zeros; "gaussian", A normal_(std 1 / r)
 * and B zeros), and adds F.linear(dropout(x), W * (B A)): the weight's Hadamard product with the
 * low-rank product, a high-rank update (no scaling), in the output's dtype. `target_modules`: named
 * as for acc_model_add_lora ("all-linear" too); targets must be torch.nn.Linear layers (or a spec's
 * "linear") or transformers' Conv1D the forward calls as modules: an attention is
 * ACC_ERR_INVALID_ARGUMENT; an embedding or a convolution (PEFT's HiRA layers for them are not built
 * here), a quantised layer, or a layer whose weight the forward reads itself, ACC_ERR_UNSUPPORTED.
 * `opts`: ACC_OPTIONS_HIRA or NULL (defaults). Files (PEFT's), merging (W + W * (B A)), disabling,
 * counting and named adapters act as for LoRA; acc_model_add_weighted_adapter is
 * ACC_ERR_INVALID_ARGUMENT (PEFT's HiRA has none). Before creating the optimizer and before
 * acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_hira(acc_model *model, const char *target_modules,
                                                   const acc_options *opts, size_t *count);
/* acc_model_add_pvera: PEFT's PveraConfig (probabilistic VeRA, get_peft_model with peft_type PVERA):
 * VeRA's frozen projections shared by the targeted layers, pvera_A (2 r x the largest input) and
 * pvera_B (the largest output x r), drawn as acc_model_add_vera draws VeRA's; each layer trains
 * "<module>.pvera_lambda_b" (out) and "<module>.pvera_lambda_d" (2 r), drawn as VeRA's vectors. Its
 * output plus lambda_b * (pvera_B[:out] z), where lambda_d * (pvera_A[:, :in] dropout(x)) splits
 * into a mean mu and a log-variance (its halves): in training (and in evaluation with
 * sample_at_inference) z = mu + eps * exp(logvar / 2), eps drawn by torch.randn from the global
 * generator (or the layer's own generator seeded generator_seed, as PEFT's), else z = mu; cast to
 * the input's dtype. `target_modules`: as for acc_model_add_vera, the same layers taken and refused.
 * `opts`: ACC_OPTIONS_PVERA or NULL (defaults). Files ("base_model.pvera_A" and
 * "base_model.pvera_B" where save_projection), the projections as state buffers "pvera_A" and
 * "pvera_B", merging (W plus lambda_b B mu's half of lambda_d A: the mean), disabling, counting and
 * named adapters act as for VeRA; acc_model_add_weighted_adapter is ACC_ERR_INVALID_ARGUMENT. The
 * layers' own generators are not part of acc_save_state (nor of Accelerate's checkpoints). Before
 * creating the optimizer and before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_pvera(acc_model *model, const char *target_modules,
                                                    const acc_options *opts, size_t *count);
/* acc_model_add_ln_tuning: PEFT's LNTuningConfig (get_peft_model with peft_type LN_TUNING): the
 * modules `target_modules` names (any module: typically the layer norms, e.g.
 * "input_layernorm,post_attention_layernorm"; named as for acc_model_add_lora, a name matching a
 * module named it or ending in "." and it) train, with everything inside them; every other
 * parameter is frozen but modules_to_save's. PEFT trains a copy of each module beside the original;
 * here they train in place and their values at the start are kept, as for modules_to_save: a
 * disabled forward computes with them (without gradients: ACC_FORWARD_NO_GRAD), acc_model_unload_lora
 * puts them back and acc_model_merge_lora keeps the trained values. Files are PEFT's
 * ("base_model.model.<module>.ln_tuning_layers.<tensor>", buffers too). A target matching no module
 * that holds tensors, or one module inside another, is ACC_ERR_INVALID_ARGUMENT; a second named
 * adapter beside LN tuning ACC_ERR_UNSUPPORTED. `count`: the modules tuned (also
 * acc_model_lora_count's). `opts`: ACC_OPTIONS_LN_TUNING or NULL. Before creating the optimizer
 * and before acc_prepare, on a model without adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_add_ln_tuning(acc_model *model, const char *target_modules,
                                                        const acc_options *opts, size_t *count);
/* acc_model_adalora_loss: *out = loss + orth_reg_weight * the mean over the adapters' A and B (in
 * the model's order) of ||A A^T - I||_F and ||B^T B - I||_F, with autograd history: what PEFT's
 * AdaLoraModel adds to the loss its model returns. Call it on the loss before acc_backward.
 * ACC_ERR_INVALID_ARGUMENT without AdaLoRA adapters; ACC_ERR_UNSUPPORTED under zero_stage 3. */
ACC_API ACC_NODISCARD acc_status acc_model_adalora_loss(const acc_model *model, const acc_tensor *loss,
                                                       acc_tensor **out);
/* acc_model_adalora_update_and_allocate: PEFT's update_and_allocate(global_step), once per step
 * after the backward (and the optimizer step) and before the gradients are zeroed: up to step
 * total_step - tfinal it smooths each adapter tensor's |p * grad|, and at steps past tinit that
 * deltaT divides it zeroes the entries of E whose importance is lowest until the budget of ranks
 * holds; at total_step - tfinal the last pruning (target_r per layer); after it, that pattern again.
 * The pattern is the adapters' rank_pattern, which acc_model_save_lora writes. Under DDP every
 * process computes the same pattern from the averaged gradients. ACC_ERR_INVALID_ARGUMENT without
 * AdaLoRA adapters, for a negative step, for an adapter tensor without a gradient where one is read,
 * or where target_r is not below init_r; ACC_ERR_UNSUPPORTED under sharded data parallelism (any
 * zero_stage). */
ACC_API ACC_NODISCARD acc_status acc_model_adalora_update_and_allocate(acc_model *model, int64_t global_step);
/* acc_model_set_lora_enabled: PEFT's enable_adapter_layers (enabled != 0) and disable_adapter_layers
 * (its disable_adapter scope is disable, compute, enable). Disabled, every adapted layer computes as
 * its base layer alone, drawing no dropout mask: the base model's outputs, e.g. a reference model's
 * for DPO or a KL penalty, without a second copy of the model. The adapters keep their values and
 * stay parameters; saving and merging act on them as when enabled. A prepared model (DDP, every
 * zero_stage) takes it too; run such a forward with ACC_FORWARD_NO_GRAD (a backward through it gives
 * the adapters no gradient). With bias "all" or "lora_only" the trained biases stay in the layers
 * (PEFT warns, and so does this, on stderr). Trainable token rows are left out as the adapters
 * are. The modules to save (trained in place here) compute as they were when the adapters were
 * added, as PEFT's original module does: the model keeps those values (PEFT keeps the module) and
 * puts them in for a forward without gradients; a forward with gradients while disabled beside
 * modules_to_save is ACC_ERR_UNSUPPORTED, and so is disabling them on a model prepared under
 * zero_stage 3 (no process keeps a whole original). Without adapters: ACC_ERR_INVALID_ARGUMENT.
 * New adapters start enabled.
 * acc_model_lora_enabled: 1 while the model has adapters and they are enabled, else 0. */
ACC_API ACC_NODISCARD acc_status acc_model_set_lora_enabled(acc_model *model, int enabled);
ACC_API ACC_NODISCARD acc_status acc_model_lora_enabled(const acc_model *model, int *out);
/* Several named adapters on one model (PEFT's add_adapter, load_adapter, set_adapter,
 * delete_adapter, unload), e.g. one base model serving several fine-tunes. One adapter is active: it
 * computes and trains, and is the model's adapters in every other function (parameters, state
 * dict, acc_model_lora_count, merging, checkpoints). The others are kept aside, frozen, compute
 * nothing and are not among the model's parameters (PEFT lists them, frozen, with their names in
 * the parameters' names: here the active adapter's parameters keep their usual names). Adapters
 * made by acc_model_add_lora or acc_model_load_lora are named "default", PEFT's name.
 * acc_model_add_lora_named: PEFT's add_adapter(adapter_name, config): draws the new adapter as
 * acc_model_add_lora would (the same draws from torch's global generator), and keeps it aside (on a
 * model without adapters it is the active one, as get_peft_model(..., adapter_name)). `opts`:
 * ACC_OPTIONS_LORA (or NULL), or ACC_OPTIONS_IA3 / ACC_OPTIONS_LOHA / ACC_OPTIONS_LOKR /
 * ACC_OPTIONS_VERA / ACC_OPTIONS_OFT / ACC_OPTIONS_BOFT / ACC_OPTIONS_HRA / ACC_OPTIONS_FOURIERFT /
 * ACC_OPTIONS_MISS / ACC_OPTIONS_C3A / ACC_OPTIONS_SHIRA / ACC_OPTIONS_RANDLORA / ACC_OPTIONS_DELORA /
 * ACC_OPTIONS_ROAD / ACC_OPTIONS_GRALORA / ACC_OPTIONS_HIRA / ACC_OPTIONS_PVERA / ACC_OPTIONS_ADALORA
 * for an adapter of that
 * method, drawn as its acc_model_add_* draws it; adapters of one method per model, as PEFT. (PEFT
 * trains one AdaLoRA adapter at a time, the others in inference mode; here each named AdaLoRA
 * adapter keeps its own rank allocator.) Switching adapters and a refused add leave the base
 * parameters' requires_grad as the user set them (acc_model_set_requires_grad), as PEFT's
 * set_adapter does; a successful add freezes them, as PEFT's add_adapter does.
 * acc_model_load_lora_named: PEFT's load_adapter(dir, adapter_name): as acc_model_load_lora into a
 * model without adapters (the same checks and draws), kept aside; the model's training mode stays
 * (PEFT's load_adapter puts the model in evaluation mode).
 * acc_model_set_adapter: PEFT's set_adapter: `adapter_name` computes and trains from the next
 * forward, with the tensors it had (switching away and back keeps the same parameters); the adapter
 * it replaces is kept aside, frozen. Draws nothing; disabled adapters (acc_model_set_lora_enabled)
 * stay disabled.
 * acc_model_delete_adapter: PEFT's delete_adapter: deleting the active adapter makes the first of the
 * others by name active, as PEFT; deleting the last removes the adapters as acc_model_unload_lora
 * does and also puts the modules to save back as they were, frozen (PEFT's ModulesToSaveWrapper
 * computes with its original module once no adapter is left).
 * acc_model_unload_lora: PEFT's unload: removes every adapter without merging them; the model
 * computes as its base model, its parameters stay frozen as they were. As acc_model_merge_lora it
 * may follow training (an optimizer or acc_prepare holding the parameters): the prepared model's
 * next forward is then ACC_ERR_INVALID_ARGUMENT (its engine holds the parameters of the time).
 * acc_model_save_lora writes every adapter as PEFT's save_pretrained: "default" in `dir`, each other
 * in `dir/<adapter_name>`. acc_model_merge_lora merges the active adapter and removes the others
 * (merge_and_unload). Names are those a folder can have, without a '.' (PEFT's rule), not
 * "__base__" (a mixed batch's name for the base model), unique:
 * ACC_ERR_INVALID_ARGUMENT otherwise, or for a name the model does not have. modules_to_save as
 * PEFT's ModulesToSaveWrapper: each adapter saving a module trains its own copy, made from the
 * original when it is added, and writes it in its folder; while an adapter that does not save the
 * module is active, the module is the original, frozen; unload leaves the active adapter's copy.
 * Trainable tokens (trainable_token_indices, or standalone ones) are each adapter's own rows,
 * starting as the embedding's. Adapters are of one method (LoRA, or standalone trainable tokens),
 * as PEFT's (ACC_ERR_INVALID_ARGUMENT otherwise), and so is a second adapter beside one that trains
 * the model's own biases (bias "all"/"lora_only"), which PEFT refuses too. An adapter initialised
 * olora or pissa rewrites the base weights every adapter shares, as PEFT's: the others then adapt
 * the residual. All of these but unload before acc_prepare and while no optimizer holds the model's
 * parameters (ACC_ERR_INVALID_ARGUMENT otherwise); a refusal changes nothing, the global generator included.
 * acc_model_active_adapter: the active adapter's name (free it with acc_string_free);
 * ACC_ERR_INVALID_ARGUMENT without adapters. acc_model_adapter_names: every adapter's name, in the
 * order they came (empty without adapters). */
ACC_API ACC_NODISCARD acc_status acc_model_add_lora_named(acc_model *model, const char *adapter_name,
                                                         const char *target_modules, const acc_options *opts,
                                                         size_t *count);
ACC_API ACC_NODISCARD acc_status acc_model_load_lora_named(acc_model *model, const char *dir,
                                                          const char *adapter_name);
ACC_API ACC_NODISCARD acc_status acc_model_set_adapter(acc_model *model, const char *adapter_name);
ACC_API ACC_NODISCARD acc_status acc_model_delete_adapter(acc_model *model, const char *adapter_name);
ACC_API ACC_NODISCARD acc_status acc_model_unload_lora(acc_model *model);
/* acc_model_add_weighted_adapter_with: PEFT's add_weighted_adapter(adapters, weights, adapter_name,
 * combination_type, **keywords): a new adapter, kept aside, combining `n` named adapters (the
 * active one among them or not) with `weights` (negative ones subtract), layer by layer, as
 * `combination_type` says:
 *   "cat": the As times weight times scaling stacked, the Bs beside each other (the ranks add up);
 *   "linear", "ties", "dare_linear", "dare_ties", "magnitude_prune": the As merged, then the Bs
 *     (one rank for all), each weighted by sqrt(|weight x scaling|), the sign on A: linear sums,
 *     magnitude_prune keeps each tensor's largest `density` fraction first, dare_* keep each value
 *     with probability density (torch.bernoulli from the global generator, A's masks before B's,
 *     layer by layer) and divide by it, ties and dare_ties average only the values whose sign is the
 *     majority's;
 *   "svd", "ties_svd", "dare_linear_svd", "dare_ties_svd", "magnitude_prune_svd": the layers' deltas
 *     merged so (svd: summed) with weight x scaling, then factored by torch.linalg.svd to svd_rank.
 * A single adapter is combined "linear", as PEFT. `opts` (optional, ACC_OPTIONS_WEIGHTED_ADAPTER):
 * density, majority_sign_method, svd_rank, svd_clamp, svd_full_matrices, svd_driver. The new
 * adapter's configuration is the first adapter's with the targets of all (names joined, or
 * expressions joined "(a)|(b)") and r = lora_alpha = the combined rank; it is drawn as PEFT draws it
 * (the global generator) before its values are written. Adapters of parameters (target_parameters)
 * are ACC_ERR_INVALID_ARGUMENT as in PEFT, and so is an existing `adapter_name` (PEFT returns
 * without a word), a pruning combination without a density (PEFT fails on None) and svd_driver on
 * CPU tensors (torch refuses it). `count` (optional): the layers it adapts. Over IA3 adapters
 * (PEFT's IA3Model.add_weighted_adapter): combination_type "linear" only; the targets and
 * feedforward_modules of all, each layer's vector the sum of the adapters' vectors there times their
 * weights (zero where none has the layer), drawn first as acc_model_add_ia3 draws; a layer whose
 * vector scales its input in one adapter and its output in another is ACC_ERR_INVALID_ARGUMENT.
 * acc_model_add_weighted_adapter: the same with svd_rank alone as keyword. */
ACC_API ACC_NODISCARD acc_status acc_model_add_weighted_adapter_with(acc_model *model,
                                                                    const char *const *adapter_names,
                                                                    const double *weights, size_t n,
                                                                    const char *adapter_name,
                                                                    const char *combination_type,
                                                                    const acc_options *opts, size_t *count);
ACC_API ACC_NODISCARD acc_status acc_model_add_weighted_adapter(acc_model *model, const char *const *adapter_names,
                                                               const double *weights, size_t n,
                                                               const char *adapter_name, const char *combination_type,
                                                               int64_t svd_rank, size_t *count);
/* PEFT's initialize_lora_eva_weights(model, dataloader): EVA's data-driven start for adapters
 * made with init_lora_weights "eva" (acc_model_add_lora; PEFT's ValueError, here
 * ACC_ERR_INVALID_ARGUMENT, for another start). In evaluation mode, without gradients and with the
 * adapters disabled, the model runs on `dl`'s batches (its first batch, then an epoch that is
 * cycled through again if needed, as PEFT's itertools.cycle; the loader draws from torch's global
 * generator as a Python iterator would, and is left between epochs); each adapted layer's inputs
 * (the positions ACC_OPTIONS_EVA `opts` picks) update an incremental PCA (PEFT's IncrementalPCA:
 * torch.svd_lowrank seeded 42 in a forked generator, so the global stream is not moved by it)
 * until its components' cosine similarity between batches reaches eva_tau. The layers' ranks
 * (their r, rank_pattern applied) are then redistributed: their sum goes to the components that
 * explain the largest shares of their layer's input variance, a layer getting at most round(r *
 * eva_rho); layers whose inputs are equal (q, k and v of one input) share one computation. Each
 * layer's lora_A becomes its first components (whitened with eva_whiten), B stays zero; a layer
 * whose rank changed gets new adapters drawn as PEFT's update_layer draws them (A's and B's
 * nn.Linear initialisations, from the global generator, in the layers' order), with lora_alpha
 * scaled by the new rank / r (eva_adjust_scaling_factors); a layer given rank 0 loses its
 * adapter. The configuration then holds what PEFT's does: target_modules the layers kept (listed;
 * PEFT condenses 20 or more to suffixes), rank_pattern and alpha_pattern their new ranks and
 * alphas by name; acc_model_save_lora writes it with eva_config. Only nn.Linear and transformers'
 * Conv1D layers that the forward calls as modules (PEFT skips convolutions, embeddings and
 * attention, re-initialising them: here ACC_ERR_UNSUPPORTED), with one active adapter, before
 * acc_prepare and before an optimizer holds the model's parameters (ACC_ERR_INVALID_ARGUMENT).
 * `acc` (optional): with several processes and gather_distributed_inputs, every layer's inputs
 * are gathered from all processes (each process reads its own part of the data), so every
 * process computes the same adapters; every process must call this. `count` (optional): the layers
 * adapted afterwards. Errors (ACC_ERR_INVALID_ARGUMENT): `dl` in an epoch, empty, a batch with
 * fewer fields than `opts` names, a layer's round(r * eva_rho) above its input features, labels or
 * an attention mask that are not a layer input's leading dimensions, layers that have not
 * converged after max_batches forward passes; each changes no adapter (the loader's draws and
 * epochs stay taken). */
ACC_API ACC_NODISCARD acc_status acc_model_initialize_lora_eva(acc_model *model, acc_dataloader *dl,
                                                               const acc_options *opts, acc_accelerator *acc,
                                                               size_t *count);
/* PEFT's preprocess_corda(model, config, run_model) and get_peft_model with init_lora_weights
 * "corda" (CorDA, Context-oriented Decomposition Adaptation), in one call: the model runs in
 * evaluation mode, without gradients, on one epoch of `dl` (the forward taking each batch's first
 * `inputs` fields; the loader draws from torch's global generator as a Python loop over it would,
 * and is left between epochs); each targeted linear layer's input at each call (its rows, divided by
 * the absolute value of its largest entry) adds x^T x to a covariance C, averaged over the calls.
 * Then, as PEFT's collect_eigens: C is damped (its mean diagonal times 0.01 added, doubled until
 * its inverse is within 0.05 of one), W C = U S Vh, V = (Vh C^-1)^T, and the adapters start from r
 * components (corda_method "ipm": the largest, "kpm": the smallest): A = sqrt(S / scaling) V^T, B =
 * U sqrt(S / scaling), drawn first as PEFT's update_layer draws (two nn.Linear initialisations,
 * from the global generator), and the layer's weight becomes W - scaling B A, so the model starts
 * computing as before, to rounding. `target_modules` and `opts` (ACC_OPTIONS_LORA; init_lora_weights
 * is "corda" whatever it says) as acc_model_add_lora's: nn.Linear and transformers' Conv1D layers
 * that the forward calls as modules (others are ACC_ERR_UNSUPPORTED), float32, float16 or bfloat16
 * weights, r at most min(out, in). PEFT hooks one sequence per call (input[0].squeeze(0)): a batch of
 * sequences here counts as one call over all its rows, so feed batches of one sequence for PEFT's
 * numbers. acc_model_save_lora writes init_lora_weights "corda" and corda_config, as PEFT; such files
 * are refused by acc_model_load_lora (the residual weights cannot be rebuilt from them). Before
 * acc_prepare, on a model without adapters. `count` (optional): the layers adapted. Errors:
 * ACC_ERR_INVALID_ARGUMENT for `dl` in an epoch or giving no batch, a batch with fewer than
 * `inputs` fields, inputs holding a NaN or an infinity; a failure adds no adapter and changes no
 * weight (the loader's draws and epoch stay taken). */
ACC_API ACC_NODISCARD acc_status acc_model_add_lora_corda(acc_model *model, const char *target_modules,
                                                          const acc_options *opts, acc_dataloader *dl, int64_t inputs,
                                                          size_t *count);
/* PEFT's preprocess_loraga(model, config, train_step) and get_peft_model with init_lora_weights
 * "lora_ga" (LoRA-GA, Low-Rank Adaptation with Gradient Approximation), in two calls around the
 * caller's own training steps (PEFT's train_step):
 * acc_model_begin_lora_ga: the model goes into training mode with every parameter frozen but the
 * targeted linear layers' weights (their gradients cleared), whose backward passes are counted.
 * The caller then runs forward, a loss and acc_tensor_backward on a few batches, without an
 * optimizer step or clearing gradients (they accumulate, as in PEFT).
 * acc_model_add_lora_ga: each weight's gradient averaged over its backward passes, the parameters'
 * requires_grad and the model's mode restored, and the adapters added: drawn as PEFT's update_layer
 * draws them, then, per layer, the gradient G (nn.Linear's layout) factored by torch.svd_lowrank(G,
 * q = min(4 r, min dims), niter = 4), drawing from the global generator, and A and B taken from its
 * first 2 r singular vectors as lora_ga_direction says, B scaled as lora_ga_scale says; the weight
 * becomes W - scaling (B A), so the model starts computing as before, to rounding. A layer no
 * backward reached starts as with "true" (PEFT's fallback). `target_modules` and `opts`
 * (ACC_OPTIONS_LORA; init_lora_weights is "lora_ga" whatever it says) as acc_model_add_lora's:
 * nn.Linear and transformers' Conv1D layers (others ACC_ERR_UNSUPPORTED), r at most half the
 * weight's smaller size (ACC_ERR_INVALID_ARGUMENT, at acc_model_begin_lora_ga). On a model without
 * adapters, before acc_prepare and any optimizer (one made before the begin, or between begin and
 * add, is ACC_ERR_INVALID_ARGUMENT, as are adapters, freezing and unfreezing in between).
 * acc_model_add_lora_ga without a begin, or a second begin, is ACC_ERR_INVALID_ARGUMENT; the estimate is consumed by acc_model_add_lora_ga even where
 * adding fails. acc_model_save_lora writes init_lora_weights "lora_ga" and lora_ga_config, as PEFT;
 * acc_model_load_lora reads them back as PEFT does (the adapters start as with "true", then take
 * the file's values; the weights are taken as they are: load into the residual model).
 * `count` (optional): the layers adapted. */
ACC_API ACC_NODISCARD acc_status acc_model_begin_lora_ga(acc_model *model, const char *target_modules,
                                                         const acc_options *opts);
ACC_API ACC_NODISCARD acc_status acc_model_add_lora_ga(acc_model *model, size_t *count);
/* Decides whether the adapters LoftQ just gave `module` stay (*keep non-zero) or the layer's earlier
 * ones come back (0); returns 0, or a non-zero status that fails the call (its message set with
 * acc_callback_set_error). It may run the model (a forward comparing outputs); changing its adapters
 * (adding, removing, switching, merging) is refused while it runs; it must not free the model. */
typedef int (*acc_loftq_keep_fn)(void *user_data, const char *module, int *keep);
/* PEFT's replace_lora_weights_loftq(peft_model, model_path, adapter_name, callback): on a model
 * quantised to 4 bits (acc_model_quantize) with LoRA adapters, each adapter of a 4-bit layer
 * (Linear4bit; 8-bit layers are left alone, as PEFT's) restarts from LoftQ's factors of the layer's
 * quantisation error: W - dequantize_4bit(Q) in float32, W the layer's unquantised weight
 * (`<module>.weight`) read from `model_path` (a model.safetensors, or a folder holding it or a
 * sharded index, as acc_model_load_safetensors reads), factored by torch.linalg.svd as PEFT's
 * _low_rank_decomposition: lora_A = sqrt(S)[:r] Vh, lora_B = U sqrt(S)[:, :r], float32. PEFT
 * computes it on CUDA only; here on the layer's device. `adapter_name`: NULL or "" for the active
 * adapter, else a named one. `keep` (may be NULL: every layer keeps them) is asked after each
 * layer, in the model's order. InvalidArgument, before anything changes: no adapter of that name,
 * none on a 4-bit layer (PEFT's "No bnb LoRA module found"), a weight missing from the file, of
 * another shape (a Conv1D's transposed one included), not finite in float32, or whose factors are
 * not (near float32's limits; PEFT's adapters would be NaN). A failing `keep` fails the call and
 * brings every layer's earlier adapters back. A prepared model takes the values in place. `count` (optional): the layers that kept new
 * adapters. */
ACC_API ACC_NODISCARD acc_status acc_model_replace_lora_weights_loftq(acc_model *model, const char *model_path,
                                                                      const char *adapter_name, acc_loftq_keep_fn keep,
                                                                      void *user_data, size_t *count);
ACC_API ACC_NODISCARD acc_status acc_model_active_adapter(const acc_model *model, char **out);
ACC_API ACC_NODISCARD acc_status acc_model_adapter_names(const acc_model *model, acc_string_list **out);

ACC_API void acc_model_free(acc_model *model);

/* ------------------------------------------------------------------------------------------------
 * Optimizers
 * ---------------------------------------------------------------------------------------------- */

/* An optimizer over every trainable parameter of `model`, in one parameter group (a model with
 * none, all frozen, is ACC_ERR_INVALID_ARGUMENT, as PyTorch refuses an empty parameter list).
 * algorithm: "sgd", "adam", "adamw", "rmsprop", "adagrad", "radam", "nadam", "adamax", "adadelta",
 * "rprop", "asgd" (PyTorch's, with its arithmetic: its one-tensor rules, and its foreach rules
 * where it takes them (PyTorch's default for CUDA parameters; see the foreach option); libtorch
 * has none of the last six),
 * "lion" (Chen et al. 2023: p -= lr * sign(beta1 * m + (1 - beta1) * g), m tracks g with beta2,
 * decoupled weight decay), "adafactor" (transformers' Adafactor, Shazeer & Stern 2018: factored
 * second moments of matrices, update clipping, a relative step size unless lr is given), or
 * "adamw_schedule_free" / "sgd_schedule_free" (the schedulefree package's AdamWScheduleFree and
 * SGDScheduleFree, Defazio et al. 2024: no schedule needed; options lr, beta1/beta2 or momentum,
 * eps, weight_decay, warmup_steps, r, weight_lr_power, AdamW's inner_momentum; see
 * acc_optimizer_set_training), or "lomo" / "adalomo" (lomo_optim's Lomo and AdaLomo, Lv et al.
 * 2023: updates inside backward, see acc_lomo_backward; one parameter group only, adding one is
 * ACC_ERR_UNSUPPORTED; acc_optimizer_step on the handle not prepared is ACC_ERR_INVALID_ARGUMENT),
 * or bitsandbytes' 8-bit optimizers "adam_8bit", "adamw_8bit", "ademamix_8bit", "lion_8bit",
 * "sgd_8bit", "rmsprop_8bit", "adagrad_8bit" (Adam8bit, AdamW8bit, AdEMAMix8bit, Lion8bit, SGD8bit,
 * RMSprop8bit, Adagrad8bit, as its CPU backend steps them: the moments of a parameter with at least
 * min_8bit_size elements kept as blockwise 8-bit codes, a smaller one's in float32 with its 32-bit
 * rule; weight decay decoupled for adam, ademamix and lion, added to the gradient for the others;
 * what those classes refuse is refused: sgd_8bit without momentum and rmsprop_8bit with alpha 0
 * ACC_ERR_UNSUPPORTED, as its NotImplementedError; its paged optimizers, any "paged_<name>",
 * ACC_ERR_UNSUPPORTED; OneCycleLR's cycled momentum is the class's first beta: sgd_8bit's
 * momentum, rmsprop_8bit's alpha, none for adagrad_8bit; python_state_files writes and reads
 * bitsandbytes' layout; zero_stage 1-3 refuse them: their blocks need whole parameters);
 * opts: an ACC_OPTIONS_OPTIMIZER object or NULL (defaults).
 * An option that the algorithm does not use (momentum for adam) is ACC_ERR_INVALID_ARGUMENT, as
 * is a combination that PyTorch or transformers refuse (adafactor's lr with relative_step true).
 * An adafactor group with relative_step has no learning rate: acc_optimizer_get_lr, _set_lr and
 * schedulers over it are ACC_ERR_INVALID_ARGUMENT. The state that acc_save_state writes holds the
 * fields PyTorch's state_dict names: step, exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer,
 * square_avg, grad_avg, sum, nadam's mu_product, adamax's exp_inf, adadelta's acc_delta, rprop's
 * prev and step_size, asgd's eta, mu and ax, adafactor's exp_avg_sq_row, exp_avg_sq_col, RMS, and
 * the schedule-free optimizers' z (and exp_avg_sq, exp_avg); their groups' k, weight_sum, lr_max,
 * scheduled_lr (the warmed-up rate, for logging: acc_optimizer_get_hyperparameter) and mode. */
ACC_API ACC_NODISCARD acc_status acc_optimizer_create(acc_model *model, const char *algorithm, const acc_options *opts,
                                                   acc_optimizer **out);
/* Moves the named parameters into a new parameter group whose hyper-parameters are the
 * optimizer's, overridden by `overrides` (may be NULL). Only before the first step. */
ACC_API ACC_NODISCARD acc_status acc_optimizer_add_param_group(acc_optimizer *opt, const char *const *names,
                                                               size_t n, const acc_options *overrides);
/* The same for the trainable parameters whose names match `patterns` (as acc_model_set_requires_grad
 * matches them); *count (may be NULL) says how many moved. The transformers convention, no weight
 * decay for biases and norm weights: patterns "*.bias,*norm*.weight" with weight_decay 0. */
ACC_API ACC_NODISCARD acc_status acc_optimizer_add_param_group_matching(acc_optimizer *opt, const char *patterns,
                                                                        const acc_options *overrides,
                                                                        size_t *count);
/* The optimizer's state of the model's parameter `param`, PyTorch's optimizer.state[p][field] (for
 * instance adam's "exp_avg", or asgd's "ax", the averaged parameter that evaluation uses): a copy,
 * on the parameter's device; "step" is an int64 0-dim tensor on the CPU, nadam's mu_product and
 * asgd's eta and mu float32 0-dim tensors on the CPU. Before the parameter's first step it has no
 * state: ACC_ERR_NOT_INITIALIZED (adagrad's exists from the start). A field the optimizer does not
 * keep is ACC_ERR_INVALID_ARGUMENT naming those it keeps; so is a parameter the model lacks or the
 * optimizer does not step, and any field of lomo, which keeps none. Under sharded data parallelism each process holds slices of the state:
 * ACC_ERR_UNSUPPORTED (acc_save_state writes it whole). */
ACC_API ACC_NODISCARD acc_status acc_optimizer_state(const acc_optimizer *opt, const char *param, const char *field,
                                                     acc_tensor **out);
/* The fields acc_optimizer_state gives for `param`, sorted; none before its first step. */
ACC_API ACC_NODISCARD acc_status acc_optimizer_state_fields(const acc_optimizer *opt, const char *param,
                                                            acc_string_list **out);
ACC_API ACC_NODISCARD acc_status acc_optimizer_num_param_groups(const acc_optimizer *opt, size_t *out);
ACC_API ACC_NODISCARD acc_status acc_optimizer_get_lr(const acc_optimizer *opt, size_t group, double *out);
ACC_API ACC_NODISCARD acc_status acc_optimizer_set_lr(acc_optimizer *opt, size_t group, double lr);
/* A parameter group's numeric hyper-parameter by its name in optimizer.json, as PyTorch's
 * param_groups[group][key]: "lr", "momentum", "weight_decay", "eps", Adam's "beta1" and "beta2", ...
 * (what one_cycle and cyclic move: "momentum" or "beta1"). A key the algorithm does not have, or one
 * that is not a number (nesterov), is ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_optimizer_get_hyperparameter(const acc_optimizer *opt, size_t group,
                                                                  const char *key, double *out);
/* Applies one update from the current gradients. Once an optimizer is prepared under sharded data
 * parallelism (zero_stage 1-3) its groups hold this process's slices, which only the prepared
 * optimizer steps and gathers: this function and acc_optimizer_zero_grad on the handle passed to
 * acc_prepare_optimizer are ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_optimizer_step(acc_optimizer *opt);
/* Sets the gradients of the optimizer's parameters to none (PyTorch's set_to_none=True). */
ACC_API ACC_NODISCARD acc_status acc_optimizer_zero_grad(acc_optimizer *opt);
/* training non-zero: a schedule-free optimizer's train(), 0: its eval() (Accelerate's
 * optimizer.train() / .eval()). Such an optimizer starts in eval mode, and a
 * step in eval mode is ACC_ERR_INVALID_ARGUMENT. eval moves the parameters to the average x that
 * evaluation, acc_save_model and a final checkpoint should use; train moves them back to the point y
 * where gradients are taken. Switch the model alike (acc_model_set_training). Other optimizers have
 * no modes: ACC_OK, nothing changes. Under sharded data parallelism (ZeRO 1-3) a change of mode is a
 * collective. */
ACC_API ACC_NODISCARD acc_status acc_optimizer_set_training(acc_optimizer *opt, int training);
ACC_API void acc_optimizer_free(acc_optimizer *opt);

/* ------------------------------------------------------------------------------------------------
 * Learning-rate schedulers: the schedules of transformers' get_scheduler() with its formulas
 * (bit-identical rates), plus PyTorch's own schedulers.
 * name: "constant", "constant_with_warmup", "linear", "cosine", "cosine_with_restarts",
 * "polynomial", "inverse_sqrt", "cosine_with_min_lr", "cosine_warmup_with_min_lr",
 * "warmup_stable_decay", "reduce_lr_on_plateau" (steps with a metric: acc_scheduler_step_metric),
 * and PyTorch's "step" (StepLR), "multistep" (MultiStepLR), "exponential" (ExponentialLR),
 * "cosine_annealing" (CosineAnnealingLR: past T_max it rises again, as PyTorch's), "constant_lr"
 * (ConstantLR), "linear_lr" (LinearLR), "polynomial_lr" (PolynomialLR), each computed step by step
 * from the rate before as PyTorch's get_lr() is, "cosine_annealing_warm_restarts"
 * (CosineAnnealingWarmRestarts), "cyclic" (CyclicLR) and "one_cycle" (OneCycleLR: a step past
 * total_steps is an error; prepared, it stops at total_steps as Accelerate's AcceleratedScheduler
 * does).
 * transformers' schedules set every group's learning rate to base_lr * factor(step); step 0's is
 * applied at creation. base_lr is PyTorch's group["initial_lr"]: the group's learning rate when the
 * first scheduler was made on the optimizer (one_cycle sets it to max_lr / div_factor, cyclic to
 * base_lr), so a scheduler made after another has moved the rate starts from the same base as
 * PyTorch's; a step-by-step schedule's step 0 starts from the rate the group has then.
 * ---------------------------------------------------------------------------------------------- */

ACC_API ACC_NODISCARD acc_status acc_scheduler_create(acc_optimizer *opt, const char *name, const acc_options *opts,
                                                   acc_scheduler **out);
/* The factor of a user schedule at `step` through *factor (finite, >= 0); non-zero fails the step. */
typedef int (*acc_lr_lambda_fn)(void *user_data, int64_t step, double *factor);
/* A user schedule, as PyTorch's LambdaLR: lr = base_lr * lambda(step), called at creation for step 0
 * and at every step. A failing callback (non-zero, or a factor that is not finite or negative) fails
 * acc_scheduler_create / acc_scheduler_step with its message and leaves the learning rates as they
 * were. free_user_data (may be NULL) runs when the scheduler is gone. */
ACC_API ACC_NODISCARD acc_status acc_scheduler_create_lambda(acc_optimizer *opt, acc_lr_lambda_fn lambda,
                                                             void *user_data, acc_free_fn free_user_data,
                                                             acc_scheduler **out);
/* A user schedule, as PyTorch's MultiplicativeLR: lr = the rate before * factor(step) at every step
 * from step 1 (creation keeps the groups' rates; the factor is not called for step 0). Failures,
 * free_user_data and checkpoints as for acc_scheduler_create_lambda (scheduler.json names it
 * "multiplicative"; a resume walks the factor from step 1 to the saved step again). */
ACC_API ACC_NODISCARD acc_status acc_scheduler_create_multiplicative(acc_optimizer *opt, acc_lr_lambda_fn factor,
                                                                     void *user_data, acc_free_fn free_user_data,
                                                                     acc_scheduler **out);
/* The factor of parameter group `group`'s schedule at `step` through *factor (finite, >= 0); non-zero
 * fails the step. */
typedef int (*acc_lr_group_lambda_fn)(void *user_data, size_t group, int64_t step, double *factor);
/* As acc_scheduler_create_lambda with a function of each parameter group's own, as PyTorch's
 * LambdaLR(optimizer, [fn0, fn1, ...]): group g's lr = its base_lr * lambda(g, step), called for each
 * group in turn at creation (step 0) and at every step. `groups`, the number of functions the caller
 * has, must be the optimizer's group count (PyTorch refuses another). */
ACC_API ACC_NODISCARD acc_status acc_scheduler_create_group_lambda(acc_optimizer *opt, size_t groups,
                                                                   acc_lr_group_lambda_fn lambda, void *user_data,
                                                                   acc_free_fn free_user_data, acc_scheduler **out);
/* As acc_scheduler_create_multiplicative with a factor of each group's own, as PyTorch's
 * MultiplicativeLR(optimizer, [fn0, fn1, ...]): group g's lr = its rate before * factor(g, step). */
ACC_API ACC_NODISCARD acc_status acc_scheduler_create_group_multiplicative(acc_optimizer *opt, size_t groups,
                                                                         acc_lr_group_lambda_fn factor,
                                                                         void *user_data, acc_free_fn free_user_data,
                                                                         acc_scheduler **out);
/* PyTorch's CyclicLR with a scale_fn of the user's: each cycle's height is multiplied by scale(x),
 * x being the cycle (from 1; scale_mode "cycle", the default) or the step (scale_mode "iterations").
 * opts are the "cyclic" schedule's (ACC_OPTIONS_SCHEDULER; base_lr and max_lr needed) with
 * scale_mode, and without mode and gamma, which the function replaces. scale (a finite number
 * through *factor; non-zero fails the step, which then changes nothing) is called for each group at
 * creation (step 0) and at every step, and again on a resume for the saved step. free_user_data as
 * for acc_scheduler_create_lambda; scheduler.json names it "cyclic". */
ACC_API ACC_NODISCARD acc_status acc_scheduler_create_cyclic(acc_optimizer *opt, const acc_options *opts,
                                                             acc_lr_lambda_fn scale, void *user_data,
                                                             acc_free_fn free_user_data, acc_scheduler **out);
/* Makes the scheduler a sequence, as PyTorch's SequentialLR([this, name...], milestones): from step
 * `milestone` on, schedule `name` (with opts, as for acc_scheduler_create; NULL: its defaults)
 * takes over, counting its steps from 0 there and working from the same base rates (a
 * cosine_annealing after a warm-up starts from the base rate, not from where the warm-up ended).
 * Call it once per later schedule, before the first step and before acc_prepare, with growing
 * milestones >= 1. The sequence's steps, checkpoints and get_last_lr are the scheduler's; its
 * name in scheduler.json lists the schedules ("linear_lr,cosine_annealing@5"). Any schedule but
 * reduce_lr_on_plateau takes part (refused as PyTorch refuses it: ACC_ERR_INVALID_ARGUMENT), the
 * first one also a callback's. one_cycle and cyclic act on the others as in PyTorch, where each
 * part is made on the optimizer in turn: a one_cycle sets each group's initial_lr (max_lr /
 * div_factor), which the sequence starts from and the schedules made after it take as their
 * base. A second one_cycle, and a cyclic cycling the momentum after a one_cycle cycling it, are
 * refused (ACC_ERR_UNSUPPORTED: in PyTorch the later one rewrites the earlier one's settings in
 * the optimizer's groups). A refused call changes nothing. */
ACC_API ACC_NODISCARD acc_status acc_scheduler_then(acc_scheduler *sched, int64_t milestone, const char *name,
                                                    const acc_options *opts);
/* Makes the scheduler a chain, as PyTorch's ChainedScheduler([this, name...]): schedule `name` (with
 * opts, as for acc_scheduler_create; NULL: its defaults) is made on the same optimizer, so its step 0
 * starts from the rate the chain set, and at every step each schedule of the chain, in the order they
 * were added, sets the rates from the rates the one before left (a ConstantLR then an ExponentialLR:
 * base * factor * gamma^step until total_iters). A chainable PyTorch schedule moves the rate it is
 * handed; a closed form (transformers' schedules, a lambda, cosine_annealing_warm_restarts) sets its
 * own whatever the ones before did, as in PyTorch. Call it once per added schedule, before the first
 * step and before acc_prepare. The chain's steps, checkpoints and get_last_lr are the scheduler's; its
 * name in scheduler.json lists the schedules ("constant_lr+exponential"). reduce_lr_on_plateau is
 * refused (ACC_ERR_INVALID_ARGUMENT: ChainedScheduler steps without a metric). A chain of
 * schedules with a rule may then lead a sequence (acc_scheduler_then), as PyTorch 2 runs
 * SequentialLR([ChainedScheduler(...), ...]), and a sequence of them may lead a chain, as
 * ChainedScheduler([SequentialLR(...), ...]); a chain or sequence holding a one_cycle or cyclic
 * leads neither, nor does a nested one (ACC_ERR_UNSUPPORTED); one_cycle and cyclic are
 * taken as by acc_scheduler_then. A step that fails in one part (a one_cycle past its total_steps)
 * leaves every part where it was. A chain holds at most 1000 schedules. A refused call changes
 * nothing. */
ACC_API ACC_NODISCARD acc_status acc_scheduler_chain(acc_scheduler *sched, const char *name, const acc_options *opts);
/* Advances one step and sets the optimizer's learning rates. */
ACC_API ACC_NODISCARD acc_status acc_scheduler_step(acc_scheduler *sched);
/* A step of a "reduce_lr_on_plateau" scheduler (PyTorch's ReduceLROnPlateau.step(metric)) with the
 * metric it follows (a validation loss; NaN counts as no improvement). Other schedulers refuse a
 * metric, and a plateau scheduler refuses acc_scheduler_step (ACC_ERR_INVALID_ARGUMENT). Prepared,
 * it steps as Accelerate's AcceleratedScheduler passes the metric on: only when the optimizer
 * stepped, num_processes times per call unless batches are split (once with
 * step_scheduler_with_optimizer off). */
ACC_API ACC_NODISCARD acc_status acc_scheduler_step_metric(acc_scheduler *sched, double metric);
/* The learning rate of a group set by the last step (PyTorch's get_last_lr()). */
ACC_API ACC_NODISCARD acc_status acc_scheduler_get_last_lr(const acc_scheduler *sched, size_t group, double *out);
/* Number of steps taken so far. */
ACC_API ACC_NODISCARD acc_status acc_scheduler_get_step(const acc_scheduler *sched, int64_t *out);
ACC_API void acc_scheduler_free(acc_scheduler *sched);

/* ------------------------------------------------------------------------------------------------
 * Averaged models: PyTorch's AveragedModel (torch.optim.swa_utils) for stochastic weight averaging
 * (SWA, with the swa_lr schedule) and exponential moving averages of the weights (EMA). It keeps
 * a copy of the model's parameters and buffers (not a second model): to evaluate or save the
 * averages, write them into a model with acc_averaged_model_copy_to (e.g. a second copy of the
 * model loaded for evaluation) or exchange them with the training model's values with
 * acc_averaged_model_swap, and swap again to go on training. The arithmetic is AveragedModel's,
 * to the bit (from PyTorch 2.1 its foreach lerp for EMA, and for SWA on CUDA).
 * ---------------------------------------------------------------------------------------------- */

/* AveragedModel(model, device, multi_avg_fn, use_buffers): copies the model's parameters and buffers
 * (a prepared model's too). opts: ACC_OPTIONS_AVERAGED_MODEL or NULL (SWA). A model sharded at rest
 * (zero_stage 3) is ACC_ERR_UNSUPPORTED. */
ACC_API ACC_NODISCARD acc_status acc_averaged_model_create(const acc_model *model, const acc_options *opts,
                                                           acc_averaged_model **out);
/* update_parameters(model), after the optimizer's step: the first update copies the model's values,
 * each later one averages them in (SWA: avg + (value - avg) / (n + 1); EMA: lerp by 1 - decay);
 * buffers are copied unless use_buffers. diffusers_ema is EMAModel.step(parameters): at the n-th
 * update decay = min(decay, (1 + k) / (10 + k)) (or the use_ema_warmup rule), at least min_decay,
 * with k = n - update_after_step - 1 (decay 0 while k <= 0), and avg -= (1 - decay) * (avg - value)
 * for parameters that require gradients, avg = value for the others (and for buffers). `model` must have the parameters and buffers the averages
 * were made from (names, shapes, dtypes; ACC_ERR_INVALID_ARGUMENT naming the first that differs). */
ACC_API ACC_NODISCARD acc_status acc_averaged_model_update(acc_averaged_model *avg, const acc_model *model);
/* n_averaged: the updates so far (diffusers_ema: EMAModel's optimization_step). */
ACC_API ACC_NODISCARD acc_status acc_averaged_model_count(const acc_averaged_model *avg, int64_t *out);
/* Writes the averages into `model`'s parameters and buffers (checked as for update). */
ACC_API ACC_NODISCARD acc_status acc_averaged_model_copy_to(const acc_averaged_model *avg, acc_model *model);
/* Exchanges the averages with `model`'s own values: evaluate or acc_save_model the averaged weights,
 * then swap back (on every process of a prepared model). */
ACC_API ACC_NODISCARD acc_status acc_averaged_model_swap(acc_averaged_model *avg, acc_model *model);
/* AveragedModel.state_dict(): "n_averaged" (int64, 0-dim), then "module.<name>" for each parameter and
 * buffer (aliasing the averages). */
ACC_API ACC_NODISCARD acc_status acc_averaged_model_state_dict(const acc_averaged_model *avg,
                                                               acc_tensor_list **out);
/* Loads such a state (Python's AveragedModel.state_dict() too): every name, shape and dtype must
 * match and n_averaged must not be negative, checked before anything changes. */
ACC_API ACC_NODISCARD acc_status acc_averaged_model_load_state_dict(acc_averaged_model *avg,
                                                                    const acc_tensor_list *state);
/* Accelerate's register_for_checkpointing(averaged_model): acc_save_state writes its state dict as
 * custom_checkpoint_<i>.safetensors (i counts registered objects, acc_register_for_checkpointing's
 * too), acc_load_state checks and restores it. The accelerator keeps the averages alive. */
ACC_API ACC_NODISCARD acc_status acc_register_averaged_model(acc_accelerator *acc, acc_averaged_model *avg);
ACC_API void acc_averaged_model_free(acc_averaged_model *avg);
/* torch.optim.swa_utils.update_bn(loader, model): recomputes the running statistics of every
 * BatchNorm layer of `model` (after acc_averaged_model_swap or _copy_to put the averages in it) as
 * plain averages over one epoch of `loader`: each batch's first field, moved to the model's device,
 * runs forward in training mode without autograd (dropout draws as in training), then the layers
 * get their momentum and the model its mode back. The loader must be between epochs; the pass is its
 * next epoch. A prepared model runs unwrapped: each process averages over its own batches, as
 * update_bn on Accelerate's (unprepared) AveragedModel does. A model without BatchNorm is left alone
 * and the loader is not read. Layer-spec models: a TorchScript BatchNorm's momentum is a constant of
 * its graph, so such a model is ACC_ERR_UNSUPPORTED (PyTorch's update_bn finds no BatchNorm in a
 * scripted module and leaves its statistics as they are); so is a model sharded at rest. */
ACC_API ACC_NODISCARD acc_status acc_model_update_bn(acc_model *model, acc_dataloader *loader);

/* ------------------------------------------------------------------------------------------------
 * Datasets (map-style: a number of samples, each a tuple of tensors, the "fields")
 * ---------------------------------------------------------------------------------------------- */

/* A dataset over tensors that share their first dimension (the sample index), e.g. features
 * [N, D] and labels [N]. The dataset references the tensors (no copy). */
ACC_API ACC_NODISCARD acc_status acc_dataset_from_tensors(const acc_tensor *const *fields, size_t n,
                                                          acc_dataset **out);

/* A read-only view of a binary file as a tensor, without reading it into memory: the bytes from
 * `offset` on, as `dtype` of shape dims[0..ndim). dims[0] may be -1 to take as many rows as the
 * file holds. Writing to the tensor never changes the file. Combine such tensors with
 * acc_dataset_from_tensors for a data set larger than memory. The file must keep its size while
 * the tensor lives: its pages are read as they are used, and changes to the file show through (as
 * numpy.memmap's). A data set refuses a batch of a file cut short, before or during the batch's
 * read (ACC_ERR_IO naming it), where reading past its new end would kill the process (SIGBUS); the
 * program's own reads of the tensor (acc_tensor_to_host, operations) are not guarded. */
ACC_API ACC_NODISCARD acc_status acc_tensor_from_file_mmap(const char *path, uint64_t offset, acc_dtype dtype,
                                                           const int64_t *dims, size_t ndim, acc_tensor **out);

/* Reads an IDX file ((Fashion-)MNIST format, plain or .gz) into a tensor of its own type (uint8,
 * int8, int16, int32, float32 or float64) and shape. Missing, truncated or corrupt files, a header
 * that declares more data than the file holds (checked before anything is allocated for it) and
 * paths that are not regular files are ACC_ERR_IO with the reason. */
ACC_API ACC_NODISCARD acc_status acc_tensor_from_idx_file(const char *path, acc_tensor **out);

/* An image classification dataset from a pair of IDX files: field 0 is the images as float32 in
 * [0, 1] with a channel dimension ([N, 1, H, W]), field 1 the labels as int64 ([N]). E.g.
 * /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz. */
ACC_API ACC_NODISCARD acc_status acc_dataset_from_idx(const char *images_path, const char *labels_path,
                                                      acc_dataset **out);

/* Samples [start, start + count) of a dataset, sharing its memory. */
ACC_API ACC_NODISCARD acc_status acc_dataset_subset(acc_dataset *ds, int64_t start, int64_t count, acc_dataset **out);
/* Callbacks into the host program. They return 0 on success; any other value is an error, which the
 * library reports as ACC_ERR_IO with the message a callback may leave with acc_callback_set_error.
 * They may run on the data loader's worker threads (num_workers 0, the default, keeps them on the
 * thread calling acc_dataloader_next), several at once; a call into the loader they serve that would
 * change its epoch (next, end_epoch, set_epoch, skip_first_batches, ...) is ACC_ERR_INVALID_ARGUMENT.
 * Random numbers drawn in them (acc_tensor_rand, acc_tensor_randn, acc_random_get_state, ...) come
 * from torch's global generator with num_workers 0, as in PyTorch; on a worker thread, from that
 * worker's own generator, seeded as PyTorch seeds a worker process: base_seed + worker id, where
 * base_seed is the number each epoch draws from the global generator when it starts. So the same
 * seed gives the same draws whatever the threads' timing, the same as PyTorch's for the same
 * num_workers, and a checkpoint taken in the middle of an epoch resumes them exactly. */
/* Sample `index`: a new list of tensors (the sample's fields), handed to the library through *out. */
typedef int (*acc_sample_fn)(void *user_data, int64_t index, acc_tensor_list **out);
/* A batch made from n samples: a new list handed to the library through *out. */
typedef int (*acc_collate_fn)(void *user_data, const acc_tensor_list *const *samples, size_t n,
                              acc_tensor_list **out);
/* The next sample of a stream: a new list through *out, or *out = NULL at the end of the stream. */
typedef int (*acc_next_fn)(void *user_data, acc_tensor_list **out);
/* The stream restarts for epoch `epoch` (shuffle it here if it should be shuffled). */
typedef int (*acc_start_fn)(void *user_data, int64_t epoch);
/* Inside a callback: the message reported when the callback returns non-zero. */
ACC_API void acc_callback_set_error(const char *message);

/* A map-style dataset of `size` samples produced by `sample`. Batches stack each field of their
 * samples (or use the loader's collate callback). free_user_data (may be NULL) runs when the
 * dataset is gone. */
ACC_API ACC_NODISCARD acc_status acc_dataset_from_callback(int64_t size, acc_sample_fn sample, void *user_data,
                                                           acc_free_fn free_user_data, acc_dataset **out);
/* An iterable dataset (a stream, PyTorch's IterableDataset): each epoch calls start (may be NULL),
 * then next until it reports the end. size_hint is the number of samples, or -1 if unknown
 * (acc_dataloader_length then gives -1). A loader over a stream cannot shuffle, reads it on the
 * thread that calls acc_dataloader_next, and on several processes shards it as Accelerate's
 * IterableDatasetShard: every process reads the whole stream and keeps its slice of each round. */
ACC_API ACC_NODISCARD acc_status acc_dataset_from_iterator(acc_next_fn next, acc_start_fn start, void *user_data,
                                                           acc_free_fn free_user_data, int64_t size_hint,
                                                           acc_dataset **out);
/* The number of samples (a stream's size hint, -1 when unknown). */
ACC_API ACC_NODISCARD acc_status acc_dataset_size(const acc_dataset *ds, int64_t *out);
/* Sample `index`, one tensor per field. */
ACC_API ACC_NODISCARD acc_status acc_dataset_get(const acc_dataset *ds, int64_t index, acc_tensor_list **out);
ACC_API void acc_dataset_free(acc_dataset *ds);

/* ------------------------------------------------------------------------------------------------
 * Data loaders: batches of a dataset, in order or shuffled, fetched ahead by worker threads (num_workers).
 * ---------------------------------------------------------------------------------------------- */

/* opts: an ACC_OPTIONS_DATALOADER object or NULL (batch size 1, in order). The loader keeps the
 * dataset alive. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_create(acc_dataset *ds, const acc_options *opts,
                                                       acc_dataloader **out);
/* A loader over a batch sampler's batches: batch k holds the dataset indices
 * indices[offset_k .. offset_k + batch_sizes[k]) (the batches laid end to end), yielded in this order
 * every epoch. Sizes may vary: on several processes, with even_batches, the last round is then
 * completed with whole batches from the epoch's start, as Accelerate does for a sampler without a
 * batch_size (acc_gather_for_metrics cannot tell those repeated batches from real ones and keeps
 * them, as Accelerate's; acc_dataloader_total_batch_size is the first batch's size times the
 * processes). Batches all of one size but a shorter last one are a standard BatchSampler's: the last
 * round is completed sample by sample from the epoch's start, as Accelerate does with its batch_size. opts: an ACC_OPTIONS_DATALOADER object or NULL; batch_size, shuffle and drop_last
 * are the sampler's business and are refused. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_create_from_batches(acc_dataset *ds, const int64_t *indices,
                                                                    const size_t *batch_sizes, size_t num_batches,
                                                                    const acc_options *opts, acc_dataloader **out);
/* The next batch (one tensor per field, batch dimension first). At the end of an epoch *out is
 * set to NULL; the call after that starts the next epoch. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_next(acc_dataloader *dl, acc_tensor_list **out);
/* Batches per epoch. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_length(const acc_dataloader *dl, int64_t *out);
/* The epoch being iterated, or the next one between epochs (the first is 0). */
ACC_API ACC_NODISCARD acc_status acc_dataloader_epoch(const acc_dataloader *dl, int64_t *out);
/* Sets the epoch of the next iteration: with a seed (or use_seedable_sampler) epoch e shuffles with
 * seed + e; without one, each epoch draws a new order (on several processes from a generator synchronized
 * from process 0, as Accelerate's). Only between epochs. After acc_load_state, naming the epoch the
 * checkpoint was in resumes it where it was; naming another starts that one whole (the checkpoint's
 * position and draws are dropped; a generator of the loader's own keeps its restored state). */
ACC_API ACC_NODISCARD acc_status acc_dataloader_set_epoch(acc_dataloader *dl, int64_t epoch);
/* Batches are made by `collate` from the samples instead of by stacking. Only between epochs. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_set_collate(acc_dataloader *dl, acc_collate_fn collate, void *user_data,
                                                            acc_free_fn free_user_data);
/* The next epoch starts after its first `batches` batches (Accelerate's skip_first_batches: resume in
 * the middle of an epoch); later epochs are whole. Only between epochs. A prepared loader restored by
 * acc_load_state already starts after the batches it had done: calling this with that number, as
 * Accelerate's resume code does, changes nothing (another number replaces it). A checkpoint saved
 * after an epoch's last batch resumes at the next epoch's first batch (that number is then 0, as the
 * examples' steps % length gives); there, a loop that stays in the saved epoch may pass the batches
 * it did instead (the loader's length, or more): the next acc_dataloader_next then ends that epoch at
 * once (*out NULL), and the next epoch comes whole. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_skip_first_batches(acc_dataloader *dl, int64_t batches);
/* Samples per step over all processes (Accelerate's total_batch_size), and samples in the dataset
 * (-1 for a stream of unknown size). */
ACC_API ACC_NODISCARD acc_status acc_dataloader_total_batch_size(const acc_dataloader *dl, int64_t *out);
ACC_API ACC_NODISCARD acc_status acc_dataloader_total_dataset_length(const acc_dataloader *dl, int64_t *out);
/* 1 when the batch last returned was the last of its epoch. A stream (acc_dataset_from_iterator)
 * under a loader that is not prepared is read only when a batch is asked for, as PyTorch's
 * DataLoader reads one: asked here, it reads the next batch to answer (the stream's callbacks then run
 * one batch earlier; the batches are the same). A prepared loader reads one batch ahead, as
 * Accelerate's, and knows. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_end_of_epoch(const acc_dataloader *dl, int *out);
/* Ends the epoch being iterated before its last batch, as dropping a Python iterator does (a loop
 * left with break): batches fetched ahead are dropped, the epoch counts as done (the epoch counter
 * advances, so the next acc_dataloader_next starts the following epoch with its own shuffle), and a
 * prepared loader tells its accelerator that its data ended (the gradient state leaves the loader).
 * Between epochs (before the first batch, after the NULL that ends one, after a load_state) it only
 * drops an iterator acc_dataloader_iter made, and returns ACC_OK. On several processes every process ends the epoch at the same batch.
 * Errors: INVALID_HANDLE for a NULL or freed loader. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_end_epoch(acc_dataloader *dl);
/* Does what creating a Python iterator over the loader (`iter(loader)`) does before its first batch,
 * so that loaders read in step (Python's `zip(dl0, dl1)`) draw from torch's global generator in
 * Python's order. A loader that is not prepared takes its iterator's draw (the base seed) now instead
 * of at the epoch's first acc_dataloader_next, and with workers also its shuffle (PyTorch's worker
 * iterator asks its sampler for indices when it is made); a prepared loader's iterator does nothing
 * before its first batch (Accelerate's is a generator), so neither does this. The epoch begins at its
 * first acc_dataloader_next as before (in_epoch stays 0 until then). Called again before that, it
 * draws again, as a second iterator would; acc_dataloader_end_epoch before the first batch drops the
 * iterator (its draws stay taken). Only between epochs: in one it is ACC_ERR_INVALID_ARGUMENT (end
 * it first). Errors: INVALID_HANDLE. */
ACC_API ACC_NODISCARD acc_status acc_dataloader_iter(acc_dataloader *dl);
/* *out = 1 while an epoch has begun and not ended (after its first acc_dataloader_next and before
 * the NULL that ends it, or acc_dataloader_end_epoch), else 0. Errors: INVALID_HANDLE, INVALID_ARGUMENT
 * (out NULL). */
ACC_API ACC_NODISCARD acc_status acc_dataloader_in_epoch(const acc_dataloader *dl, int *out);
ACC_API void acc_dataloader_free(acc_dataloader *dl);

/* ------------------------------------------------------------------------------------------------
 * The Accelerator. The four-line conversion of a training loop:
 *
 *   acc_accelerator_create(opts, &acc);
 *   acc_prepare(acc, &model, &optimizer, &loader, &scheduler);   (each may be NULL)
 *   ... acc_backward(acc, loss) instead of acc_tensor_backward(loss) ...
 *
 * Prepared objects behave as Accelerate's wrappers: the model is on the accelerator's device and
 * runs under autocast for mixed precision with fp32 outputs (on a GPU under DDP or sharded data
 * parallelism its forward moves the inputs to that GPU, as PyTorch's DDP and FSDP do; targets and
 * anything else stay where the caller put them); the optimizer and scheduler only step
 * at the end of a gradient-accumulation window (the scheduler only when the optimizer really
 * stepped); the loader puts batches on the device and tells the accelerator where its epoch ends.
 * ---------------------------------------------------------------------------------------------- */

/* opts: an ACC_OPTIONS_ACCELERATOR object or NULL (defaults and the environment).
 * mixed_precision "fp16" runs with dynamic loss scaling (options scaler_init_scale 65536,
 * scaler_growth_factor 2, scaler_backoff_factor 0.5, scaler_growth_interval 2000: GradScalerKwargs);
 * a step whose gradients overflow is skipped (acc_accelerator_optimizer_step_was_skipped). It needs a
 * GPU: on the CPU, libtorch's autocast computes in bf16 only, and "fp16" is ACC_ERR_UNSUPPORTED. */
ACC_API ACC_NODISCARD acc_status acc_accelerator_create(const acc_options *opts, acc_accelerator **out);
ACC_API void acc_accelerator_free(acc_accelerator *acc);

/* The device prepared objects live on ("cpu", "cuda:0"); owned by the caller (acc_string_free). */
ACC_API ACC_NODISCARD acc_status acc_accelerator_device(const acc_accelerator *acc, char **out);
/* Accelerate's DistributedType name: "NO", "MULTI_CPU" or "MULTI_GPU"; a sharded job on several
 * processes (zero_stage 1-3) is "FSDP" when Accelerate's FSDP settings chose it, else "DEEPSPEED".
 * Static string. */
ACC_API ACC_NODISCARD acc_status acc_accelerator_distributed_type(const acc_accelerator *acc, const char **out);
/* "no", "bf16" or "fp16". Static string. */
ACC_API ACC_NODISCARD acc_status acc_accelerator_mixed_precision(const acc_accelerator *acc, const char **out);
ACC_API ACC_NODISCARD acc_status acc_accelerator_process_index(const acc_accelerator *acc, int64_t *out);
ACC_API ACC_NODISCARD acc_status acc_accelerator_num_processes(const acc_accelerator *acc, int64_t *out);
ACC_API ACC_NODISCARD acc_status acc_accelerator_local_process_index(const acc_accelerator *acc, int64_t *out);
ACC_API ACC_NODISCARD acc_status acc_accelerator_is_main_process(const acc_accelerator *acc, int *out);
ACC_API ACC_NODISCARD acc_status acc_accelerator_is_local_main_process(const acc_accelerator *acc, int *out);
ACC_API ACC_NODISCARD acc_status acc_accelerator_is_last_process(const acc_accelerator *acc, int *out);
ACC_API ACC_NODISCARD acc_status acc_accelerator_gradient_accumulation_steps(const acc_accelerator *acc, int64_t *out);
/* Whether this micro-step ends an accumulation window (gradients synchronised, optimizer steps). */
ACC_API ACC_NODISCARD acc_status acc_accelerator_sync_gradients(const acc_accelerator *acc, int *out);
/* Whether the last optimizer step was skipped (fp16 overflow). */
ACC_API ACC_NODISCARD acc_status acc_accelerator_optimizer_step_was_skipped(const acc_accelerator *acc, int *out);
/* Micro-steps counted by acc_accumulate_begin since the end of the last prepared loader
 * (Accelerate's accelerator.step: it counts on across windows; a window ends at every multiple of
 * the accumulation steps, and, with sync_with_dataloader, at a loader's end, which sets it back to 0). */
ACC_API ACC_NODISCARD acc_status acc_accelerator_step(const acc_accelerator *acc, int64_t *out);
/* The number the next automatic checkpoint gets (ProjectConfiguration.iteration): the `iteration`
 * option, plus one per acc_save_state; acc_load_state sets it past the checkpoint it loaded. */
ACC_API ACC_NODISCARD acc_status acc_accelerator_iteration(const acc_accelerator *acc, int64_t *out);

/* Placement of one prepared object: the accelerator's device_placement option, or a per-object
 * choice (Accelerate's prepare(..., device_placement=[...])). */
typedef enum acc_placement {
  ACC_PLACEMENT_DEFAULT = -1,
  ACC_PLACEMENT_NO = 0,
  ACC_PLACEMENT_YES = 1,
  ACC_PLACEMENT_MAX_ENUM = 0x7fffffff
} acc_placement;

/* Each returns a new handle to the prepared object; the handle passed in stays valid and still
 * refers to the raw object. Preparing an object twice, or a prepared one, gives the same prepared
 * object (never a double wrap). */
ACC_API ACC_NODISCARD acc_status acc_prepare_model(acc_accelerator *acc, acc_model *model, acc_placement placement,
                                                   acc_model **out);
ACC_API ACC_NODISCARD acc_status acc_prepare_optimizer(acc_accelerator *acc, acc_optimizer *opt,
                                                       acc_placement placement, acc_optimizer **out);
ACC_API ACC_NODISCARD acc_status acc_prepare_dataloader(acc_accelerator *acc, acc_dataloader *dl,
                                                        acc_placement placement, acc_dataloader **out);
/* Prepare the scheduler's optimizer first: the prepared scheduler follows the prepared optimizer. */
ACC_API ACC_NODISCARD acc_status acc_prepare_scheduler(acc_accelerator *acc, acc_scheduler *sched,
                                                       acc_scheduler **out);
/* Prepares everything given, in place, as Python's `model, opt, dl, sched = prepare(...)`: each
 * non-NULL *handle is replaced by its prepared handle and the handle passed in is freed. Any
 * pointer may be NULL (or point to NULL) to skip that object. Nothing changes if any fails. */
ACC_API ACC_NODISCARD acc_status acc_prepare(acc_accelerator *acc, acc_model **model, acc_optimizer **opt,
                                             acc_dataloader **dl, acc_scheduler **sched);
/* A new handle to the model without the accelerator's wrapper (for saving or inspection). */
ACC_API ACC_NODISCARD acc_status acc_unwrap_model(acc_accelerator *acc, acc_model *model, acc_model **out);

/* Accelerate's backward: loss / gradient_accumulation_steps, then back-propagation. */
ACC_API ACC_NODISCARD acc_status acc_backward(acc_accelerator *acc, const acc_tensor *loss);
/* acc_backward with torch's loss.backward(retain_graph=..., create_graph=...) (Accelerate's
 * backward(loss, **kwargs)): retain_graph non-zero keeps the graph for another backward through it
 * (two losses of one forward, as a GAN's discriminator and generator); create_graph records the
 * backward itself, so the gradients have a graph (higher-order derivatives), and keeps the graph as
 * torch does by default then. A second backward through a freed graph is ACC_ERR_INVALID_ARGUMENT.
 * Under DDP the gradients are averaged once per forward as PyTorch's DDP averages them (a second
 * backward of one forward needs acc_no_sync_begin, as there); under sharded data parallelism either
 * flag is ACC_ERR_UNSUPPORTED. */
ACC_API ACC_NODISCARD acc_status acc_backward_ex(acc_accelerator *acc, const acc_tensor *loss, int retain_graph,
                                                 int create_graph);
/* LOMO: the optimizers "lomo" and "adalomo" (lomo_optim's Lomo and AdaLomo) update each parameter
 * inside backward, as soon as its gradient is complete, and drop that gradient, so that no full set
 * of gradients ever exists (a model needs little more than its weights). Prepare the optimizer, then
 * per step: acc_lomo_backward(acc, loss, lr) (Accelerate's lomo_backward: the update at rate lr;
 * acc_optimizer_step and _zero_grad then do nothing, as Accelerate's) or acc_backward_lr (Accelerate's
 * backward(loss, learning_rate=lr): the loss divided by gradient_accumulation_steps first). The
 * group's lr is only what a scheduler moves: pass acc_scheduler_get_last_lr's rate, as with
 * lomo_optim. With clip_grad_norm set, each backward needs acc_lomo_grad_norm(acc, loss, &norm) on the
 * same loss first: a backward that keeps the graph and measures the gradients' total norm
 * (*total_norm, may be NULL), whose clip coefficient the following backward passes apply. Exactly one
 * LOMO optimizer must be prepared (else ACC_ERR_INVALID_ARGUMENT, as Accelerate's ValueError), and
 * while one is, acc_backward and acc_backward_ex are ACC_ERR_INVALID_ARGUMENT (their gradients would
 * never be applied). Under DDP each gradient is averaged over the processes as DDP averages it
 * before its update (every process must produce the same parameters' gradients; inside
 * acc_no_sync_begin/_end, and so LocalSGD, each process applies its own unless
 * acc_trigger_sync_in_backward came first; accumulation windows still average, as each micro-step
 * updates); join_uneven_inputs, sharded data
 * parallelism, fp16 mixed precision, a DDP comm_hook and an fp16 loss for lomo are
 * ACC_ERR_UNSUPPORTED. learning_rate: finite, >= 0. */
ACC_API ACC_NODISCARD acc_status acc_lomo_backward(acc_accelerator *acc, const acc_tensor *loss, double learning_rate);
ACC_API ACC_NODISCARD acc_status acc_backward_lr(acc_accelerator *acc, const acc_tensor *loss, double learning_rate);
ACC_API ACC_NODISCARD acc_status acc_lomo_grad_norm(acc_accelerator *acc, const acc_tensor *loss, double *total_norm);
/* Around each micro-step when accumulating gradients (Python's `with accelerator.accumulate(model)`):
 * begin decides sync_gradients; end closes the micro-step. */
ACC_API ACC_NODISCARD acc_status acc_accumulate_begin(acc_accelerator *acc);
ACC_API ACC_NODISCARD acc_status acc_accumulate_end(acc_accelerator *acc);
/* Scales the gradients of the model's parameters so that their total norm_type-norm (2.0 usually;
 * INFINITY for the largest element, -INFINITY the smallest, 0 torch's count of the gradients that
 * are not all zero) is at most max_norm (>= 0; INFINITY measures without clipping), as
 * torch.nn.utils.clip_grad_norm_; writes
 * the norm before clipping to *total_norm (may be NULL). Call it after acc_backward, when
 * acc_accelerator_sync_gradients says the optimizer is about to step. */
ACC_API ACC_NODISCARD acc_status acc_clip_grad_norm(acc_accelerator *acc, acc_model *model, double max_norm,
                                                    double norm_type, double *total_norm);
/* Clamps every gradient element of the model's parameters to [-clip_value, clip_value] (INFINITY
 * clips nothing; a negative or NaN clip_value is ACC_ERR_INVALID_ARGUMENT). */
ACC_API ACC_NODISCARD acc_status acc_clip_grad_value(acc_accelerator *acc, acc_model *model, double clip_value);
/* Divides the gradients of an optimizer's parameters (opt NULL: of every prepared optimizer) by the
 * fp16 loss scale, once per step (a second call before the step does nothing), e.g. to inspect or
 * clip them by hand. Without fp16 there is nothing to unscale and it returns ACC_OK. */
ACC_API ACC_NODISCARD acc_status acc_unscale_gradients(acc_accelerator *acc, acc_optimizer *opt);
/* Accelerate's autocast(): until acc_autocast_end, code on the calling thread (a loss, a model not
 * prepared) runs under the accelerator's mixed precision; enabled = 0 turns autocast off instead
 * (AutocastKwargs(enabled=False)), e.g. for a computation that must stay fp32 inside a prepared
 * model's region. Scopes nest; each begin needs an end on the same thread, before the accelerator
 * is freed (a scope left open keeps that thread under autocast until the thread ends). */
ACC_API ACC_NODISCARD acc_status acc_autocast_begin(acc_accelerator *acc, int enabled);
ACC_API ACC_NODISCARD acc_status acc_autocast_end(acc_accelerator *acc);
/* Accelerate's save_model: the unwrapped model's parameters and buffers, with the model's own names,
 * into `dir` as Hugging Face lays them out: model.safetensors, or, beyond max_shard_size ("10GB" when
 * NULL; "500MB", "2GiB", or bytes), model-0000k-of-0000n.safetensors shards plus
 * model.safetensors.index.json. Only the main process writes. Files are written to temporary names
 * and renamed; shards of an earlier save that this one does not produce are removed. */
ACC_API ACC_NODISCARD acc_status acc_save_model(acc_accelerator *acc, acc_model *model, const char *dir,
                                                const char *max_shard_size);
/* Accelerate's merge_fsdp_weights (`accelerate merge-weights`): the model_index-th model of a
 * checkpoint saved with state_dict_type SHARDED_STATE_DICT under zero_stage 3 (every process's
 * model_shard_<rank>.safetensors), merged without the job into `output_dir` as acc_save_model lays
 * it out (max_shard_size as there). Needs no accelerator; every shard is checked first (a missing,
 * foreign or damaged one is ACC_ERR_IO naming it). Other checkpoints hold full weights already:
 * ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_merge_sharded_checkpoint(const char *checkpoint_dir, size_t model_index,
                                                              const char *output_dir, const char *max_shard_size);

/* ------------------------------------------------------------------------------------------------
 * Checkpoints: save_state / load_state (exact resume), custom state, hooks.
 *
 * A checkpoint folder holds every model, optimizer, scheduler and data loader the accelerator
 * prepared (in prepare order: model.safetensors, model_1.safetensors, optimizer.safetensors,
 * scheduler.json, ...), the GradScaler (scaler.json, fp16), each process's RNG states
 * (random_states_<rank>.safetensors) and loader positions (dataloader_state_<rank>.json: epoch,
 * batches done, the epoch's shuffle seed or generator state), the step counter, registered objects
 * (custom_checkpoint_<i>.bin) and a manifest (accelerate_state.json). Shared files are written by the
 * main process (each node's local main with save_on_each_node), per-process files by each process.
 * ---------------------------------------------------------------------------------------------- */

/* Saves into `dir`, or with dir NULL into project_dir/checkpoints/checkpoint_<iteration>
 * (automatic_checkpoint_naming). The folder is written under a hidden temporary name and renamed into
 * place once complete (an existing folder of that name is replaced only then); with total_limit, the
 * oldest checkpoint_<i> folders beyond it are deleted after that. A crash mid-save leaves every earlier
 * checkpoint intact. Then iteration grows by one. *out_dir (may be NULL) receives the folder (free
 * with acc_string_free). A collective: every process calls it; if it fails on one, it fails on all.
 * A failure after the main process put the new folder in place (a peer gone in the last exchange)
 * says so in its message: that checkpoint is complete and has replaced the folder's earlier one. */
ACC_API ACC_NODISCARD acc_status acc_save_state(acc_accelerator *acc, const char *dir, char **out_dir);
/* Restores everything acc_save_state saved from `dir` (a leading "~" expanded, as Accelerate's
 * load_state does), or with dir NULL (automatic_checkpoint_naming only) from the complete
 * checkpoint_<i> under project_dir/checkpoints with the highest i, ours or Python Accelerate's. Every file is read and checked on every process before
 * anything changes: a missing, truncated or corrupt file, shards (SHARDED_STATE_DICT) of another
 * number of processes or sharding, a checkpoint of other objects or schedules, or tensors that do not
 * fit fail with a message naming the file (a
 * manifest of another checkpoint format: ACC_ERR_VERSION_MISMATCH), leaving models and optimizers as
 * they were. A consolidated checkpoint of another number of processes loads its weights, optimizer,
 * scheduler and scaler states, not the per-process random states and loader positions (a warning on
 * stderr says so). Prepared loaders must be between epochs (load before iterating); each resumes
 * at the batch after the saved one, in the same order. iteration becomes at least the loaded
 * checkpoint's number plus one (never lower than it was).
 * A folder Python Accelerate's save_state wrote (no accelerate_state.json, a random_states_0.pkl)
 * is read in its layout: model.safetensors or pytorch_model.bin, optimizer.bin, scheduler.bin,
 * scaler.pt, and this process's random_states_<rank>.pkl (torch's generator states and the step);
 * the objects prepared must be those it saved (same counts, algorithms and parameter groups),
 * objects registered for checkpointing are ACC_ERR_UNSUPPORTED, and loaders stay where they are.
 * *out_dir (may be NULL) receives the folder loaded. A collective. */
ACC_API ACC_NODISCARD acc_status acc_load_state(acc_accelerator *acc, const char *dir, char **out_dir);

/* A byte sink handed to a state-saving callback; valid only during that call. */
typedef struct acc_bytes acc_bytes;
ACC_API ACC_NODISCARD acc_status acc_bytes_append(acc_bytes *sink, const void *data, size_t size);
/* Writes the object's state into `out` with acc_bytes_append; returns 0, or non-zero to fail the save. */
typedef int (*acc_state_save_fn)(void *user_data, acc_bytes *out);
/* Restores the object's state from the bytes its save callback wrote; non-zero fails the load. */
typedef int (*acc_state_load_fn)(void *user_data, const void *data, size_t size);
/* Accelerate's register_for_checkpointing: the object's bytes go into custom_checkpoint_<i>.bin (i in
 * registration order) on the main process, and come back on every process at acc_load_state.
 * free_user_data (may be NULL) runs when the accelerator is gone. */
ACC_API ACC_NODISCARD acc_status acc_register_for_checkpointing(acc_accelerator *acc, acc_state_save_fn save,
                                                                acc_state_load_fn load, void *user_data,
                                                                acc_free_fn free_user_data);
/* Called with the checkpoint folder before a save writes, or a load reads; non-zero aborts it (on
 * every process), with the message set by acc_callback_set_error. A save's hooks get the folder asked
 * for, which exists then (as Accelerate makes output_dir before its hooks run): the files and folders
 * a hook writes into it become part of the new checkpoint (written beside it and put in its place
 * once complete) and are recorded in its manifest, so a later save may replace the folder and
 * total_limit may delete it; a link or other special file is refused. A load's hooks get the
 * checkpoint's folder. A save or load from inside a hook is refused. */
typedef int (*acc_checkpoint_hook_fn)(void *user_data, const char *dir);
ACC_API ACC_NODISCARD acc_status acc_register_save_state_pre_hook(acc_accelerator *acc, acc_checkpoint_hook_fn hook,
                                                                  void *user_data, acc_free_fn free_user_data);
ACC_API ACC_NODISCARD acc_status acc_register_load_state_pre_hook(acc_accelerator *acc, acc_checkpoint_hook_fn hook,
                                                                  void *user_data, acc_free_fn free_user_data);
/* The same, also giving the hook's id (1, 2, ... in registration order, both kinds together) for
 * acc_remove_state_pre_hook: what Accelerate's register_*_state_pre_hook return, a RemovableHandle. */
ACC_API ACC_NODISCARD acc_status acc_register_save_state_pre_hook_removable(acc_accelerator *acc,
                                                                            acc_checkpoint_hook_fn hook,
                                                                            void *user_data,
                                                                            acc_free_fn free_user_data,
                                                                            uint64_t *out_id);
ACC_API ACC_NODISCARD acc_status acc_register_load_state_pre_hook_removable(acc_accelerator *acc,
                                                                            acc_checkpoint_hook_fn hook,
                                                                            void *user_data,
                                                                            acc_free_fn free_user_data,
                                                                            uint64_t *out_id);
/* Accelerate's hooks with their models: hook(models, weights, output_dir) and hook(models, input_dir).
 * `models` lists the prepared models (in prepare order) whose weights the library will save or load;
 * a hook that saves or loads a model's weights its own way (acc_model_save_lora, ...) removes it
 * (Accelerate's weights.pop(i) / models.pop(i)), and the checkpoint's weight files then number the
 * models left: model.safetensors for the first, model_1.safetensors for the next, as Accelerate's. A
 * load's hooks must take out the models a save's took out (the manifest records them; another choice
 * is ACC_ERR_INVALID_ARGUMENT, as is a process whose hooks chose otherwise than process 0's). The
 * weights of a model prepared with sharded data parallelism cannot be taken out (ACC_ERR_UNSUPPORTED:
 * Accelerate's FSDP and DeepSpeed hand their hooks none). Hooks of both forms run in registration
 * order and share ids; `models` is valid during the call only (the model handles it gives are the
 * caller's, freed with acc_model_free whenever it likes). */
typedef struct acc_checkpoint_models acc_checkpoint_models;
typedef int (*acc_checkpoint_models_hook_fn)(void *user_data, acc_checkpoint_models *models, const char *dir);
/* out_id may be NULL. */
ACC_API ACC_NODISCARD acc_status acc_register_save_state_models_pre_hook(acc_accelerator *acc,
                                                                         acc_checkpoint_models_hook_fn hook,
                                                                         void *user_data, acc_free_fn free_user_data,
                                                                         uint64_t *out_id);
ACC_API ACC_NODISCARD acc_status acc_register_load_state_models_pre_hook(acc_accelerator *acc,
                                                                         acc_checkpoint_models_hook_fn hook,
                                                                         void *user_data, acc_free_fn free_user_data,
                                                                         uint64_t *out_id);
/* How many models are left to the library. */
ACC_API ACC_NODISCARD acc_status acc_checkpoint_models_count(const acc_checkpoint_models *models, size_t *out);
/* The i-th model left: a new handle to the prepared model (free it with acc_model_free) and, in
 * *index (may be NULL), its place in prepare order. */
ACC_API ACC_NODISCARD acc_status acc_checkpoint_models_get(const acc_checkpoint_models *models, size_t i,
                                                           acc_model **out, size_t *index);
/* Takes the i-th model out (the later ones move up): the library neither writes nor reads its weights. */
ACC_API ACC_NODISCARD acc_status acc_checkpoint_models_remove(acc_checkpoint_models *models, size_t i);
/* RemovableHandle.remove(): the hook runs no more and its free_user_data runs (once a save or load
 * in progress, which runs the hooks it started with, is done). Removing it again is a no-op; an id
 * this accelerator never gave is ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_remove_state_pre_hook(acc_accelerator *acc, uint64_t id);
/* Accelerate's save(): named tensors as a safetensors file, written once per machine (the main process,
 * or each node's local main with save_on_each_node). Other processes return at once. */
ACC_API ACC_NODISCARD acc_status acc_save(acc_accelerator *acc, const acc_tensor_list *tensors, const char *path);
/* A prepared model's parameters and buffers, copied to the CPU. unwrap non-zero: the model's own names;
 * zero: as the wrapper names them (a "module." prefix on several processes, like DDP). */
ACC_API ACC_NODISCARD acc_status acc_get_state_dict(acc_accelerator *acc, acc_model *model, int unwrap,
                                                    acc_tensor_list **out);

/* ------------------------------------------------------------------------------------------------
 * Running as one of several processes: printing, barriers, gradient synchronisation scopes,
 * uneven inputs, main-process-first sections, and giving memory back.
 * ---------------------------------------------------------------------------------------------- */

/* Prints text and a newline on the main process only. */
ACC_API ACC_NODISCARD acc_status acc_print(const acc_accelerator *acc, const char *text);
/* Waits until every process gets here; returns at once on one process. */
ACC_API ACC_NODISCARD acc_status acc_wait_for_everyone(acc_accelerator *acc);
/* Drops the accelerator's references to what it prepared, resets the step counter to 0 and gives
 * cached GPU memory back (Accelerate's free_memory / clear), to train something else next. */
ACC_API ACC_NODISCARD acc_status acc_free_memory(acc_accelerator *acc);

/* Gradients of a prepared model accumulate locally, without the allreduce, until acc_no_sync_end
 * (Python's `with accelerator.no_sync(model)`). acc_accumulate_begin does this by itself. */
ACC_API ACC_NODISCARD acc_status acc_no_sync_begin(acc_accelerator *acc, acc_model *model);
ACC_API ACC_NODISCARD acc_status acc_no_sync_end(acc_accelerator *acc, acc_model *model);
/* After a forward inside no_sync: the coming backward averages gradients after all (Accelerate's
 * trigger_sync_in_backward). */
ACC_API ACC_NODISCARD acc_status acc_trigger_sync_in_backward(acc_accelerator *acc, acc_model *model);
/* Accelerate's LocalSGD for a prepared model (`with LocalSGD(accelerator, model, local_sgd_steps,
 * enabled) as local_sgd:`), as a begin/step/end scope: begin enters no_sync, so each process steps
 * on its own gradients; acc_local_sgd_step after each optimizer step averages the parameters over
 * the processes every local_sgd_steps-th call (a barrier, then each parameter reduced to the mean),
 * and end averages them once more and leaves no_sync. On one process, or with enabled 0, it only
 * counts steps. Collectives: every process calls them alike. With sharding (zero_stage > 0) it is
 * ACC_ERR_UNSUPPORTED, as in Accelerate; a second begin for the same model before its end, or a step
 * or end without begin, is ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_local_sgd_begin(acc_accelerator *acc, acc_model *model,
                                                     int64_t local_sgd_steps, int enabled);
ACC_API ACC_NODISCARD acc_status acc_local_sgd_step(acc_accelerator *acc, acc_model *model);
ACC_API ACC_NODISCARD acc_status acc_local_sgd_end(acc_accelerator *acc, acc_model *model);
/* Accelerate's accelerator.profile(ProfileKwargs), as a begin/step/end scope: torch's profiler
 * records every libtorch operator (forward, backward, optimizer; with Kineto, CUDA kernels too) that
 * the calling thread and the threads it starts run between begin and end. opts: ACC_OPTIONS_PROFILE,
 * or NULL for the defaults. acc_profile_step is prof.step(): with a schedule, each call moves to the
 * next step (skip_first, then cycles of wait, warmup and active steps), and the last cycle recorded
 * is what end keeps. end stops the profiler and, with output_trace_dir, writes the Chrome trace
 * (chrome://tracing, Perfetto) output_trace_dir/profile_<process index>.json, then waits for every
 * process (a collective, as in Accelerate). step and end must come from the thread that called begin
 * (an accelerator freed elsewhere with its profile open leaves that thread's profiler running until
 * a profile begins there again, which stops it first); one profile at a time (a second begin before end is ACC_ERR_INVALID_ARGUMENT); the cuda activity
 * with the accelerator on the CPU is ACC_ERR_UNSUPPORTED. acc_profile_summary gives the last recorded cycle's
 * table (after end, or in on_trace_ready), as torch's key_averages().table(): per operator its calls, self and total CPU time (and
 * device time and FLOPs when recorded), sorted by self time; free it with acc_string_free. */
ACC_API ACC_NODISCARD acc_status acc_profile_begin(acc_accelerator *acc, const acc_options *opts);
ACC_API ACC_NODISCARD acc_status acc_profile_step(acc_accelerator *acc);
ACC_API ACC_NODISCARD acc_status acc_profile_end(acc_accelerator *acc);
ACC_API ACC_NODISCARD acc_status acc_profile_summary(acc_accelerator *acc, char **out);
/* Accelerate's ProfileKwargs(on_trace_ready=handler), for every later profile of `acc`: called as
 * torch.profiler calls it, each time a recorded cycle ends (in the acc_profile_step that ends a
 * schedule's active steps, and in acc_profile_end while recording), on that call's thread, with the
 * step at which the cycle ended. In it, acc_profile_summary gives that cycle's table and
 * acc_profile_export_chrome_trace writes its trace (what Python's handler does with `prof`). A
 * non-zero return fails that step or end (ACC_ERR_IO, with the message of acc_callback_set_error);
 * the profile goes on, or ends all the same. fn NULL removes the handler. free_user_data (may be
 * NULL) runs when the handler is replaced or the accelerator is gone. */
typedef int (*acc_trace_ready_fn)(void *user_data, int64_t step);
ACC_API ACC_NODISCARD acc_status acc_profile_on_trace_ready(acc_accelerator *acc, acc_trace_ready_fn fn,
                                                            void *user_data, acc_free_fn free_user_data);
/* The last recorded cycle's Chrome trace written to `path` by this process alone (no collective):
 * after acc_profile_end, or in an on_trace_ready handler. */
ACC_API ACC_NODISCARD acc_status acc_profile_export_chrome_trace(acc_accelerator *acc, const char *path);
/* Accelerate's join_uneven_inputs for a prepared model (torch's Join with DDP's join hook), as a
 * begin/end pair: in between, processes may run different numbers of training steps (loaders with
 * even_batches off). Each process calls end when its data has ended; end then takes part in the
 * others' buffer broadcasts and gradient averaging with zeros (averages stay divided by the number of
 * processes, as torch's default) until every process has called it, and finally every replica takes
 * the parameters and buffers of a process that trained to the end. Inside, a training forward costs
 * one small allreduce more, not waited for; the model's forward and backward must alternate (one
 * forward per backward), and no other collective (gather, reduce, ...) may run in between on some
 * processes only.
 * Not built for ddp_find_unused_parameters, for acc_trigger_sync_in_backward inside, nor for a model
 * trained by a LOMO optimizer (ACC_ERR_UNSUPPORTED). On one process both do nothing.
 * even_batches: -1 keeps the loaders as they were prepared; 0 or 1 sets even_batches of every prepared
 * map-style loader until end (between epochs only; streams and dispatched loaders keep theirs, as in
 * Accelerate). */
ACC_API ACC_NODISCARD acc_status acc_join_uneven_inputs_begin(acc_accelerator *acc, acc_model *model,
                                                              int even_batches);
ACC_API ACC_NODISCARD acc_status acc_join_uneven_inputs_end(acc_accelerator *acc, acc_model *model);
/* Python's `with accelerator.main_process_first()`: the main process runs the section first, the
 * others wait for it at begin; it waits for them at end. The local variants use the machine's main. */
ACC_API ACC_NODISCARD acc_status acc_main_process_first_begin(acc_accelerator *acc);
ACC_API ACC_NODISCARD acc_status acc_main_process_first_end(acc_accelerator *acc);
ACC_API ACC_NODISCARD acc_status acc_local_main_process_first_begin(acc_accelerator *acc);
ACC_API ACC_NODISCARD acc_status acc_local_main_process_first_end(acc_accelerator *acc);

/* ------------------------------------------------------------------------------------------------
 * Collectives. Every process must make the same calls, with the same names, in the same order.
 * Each takes a `name` (may be NULL: the call's own) that error messages use; a process that died or
 * stalls makes the others fail with ACC_ERR_ABORTED or ACC_ERR_TIMEOUT (option timeout_seconds)
 * instead of hanging. Each call is compared first (one small exchange): tensors that differ between
 * processes in shape or dtype, another collective, reduction, source or padded dim, or another name
 * at the same point (a skipped call) are ACC_ERR_INVALID_ARGUMENT naming them, on every process.
 * On one process each returns its input (a copy).
 * ---------------------------------------------------------------------------------------------- */

/* Every process's tensor (same shape everywhere), concatenated on dim 0. */
ACC_API ACC_NODISCARD acc_status acc_gather(acc_accelerator *acc, const acc_tensor *t, const char *name,
                                            acc_tensor **out);
/* acc_gather for evaluation: on the last batch of a prepared loader's epoch, only the epoch's
 * remainder of the last round is kept (its first len % total_batch_size rows, as Accelerate): the
 * samples that even_batches repeated to fill that round are dropped, and without even_batches the
 * padding that made its short batches gatherable (acc_pad_across_processes at the end of dim 0), so
 * each real sample counts once. Call it on every batch inside the loop. */
ACC_API ACC_NODISCARD acc_status acc_gather_for_metrics(acc_accelerator *acc, const acc_tensor *t, const char *name,
                                                        acc_tensor **out);
/* Every process's bytes, in rank order (read them with acc_string_list_get_bytes). */
ACC_API ACC_NODISCARD acc_status acc_gather_object(acc_accelerator *acc, const void *data, size_t size,
                                                   const char *name, acc_string_list **out);
/* Process `src`'s bytes on every process, as one item (acc_string_list_get_bytes): Accelerate's
 * broadcast_object_list for what the caller serialised. `data` and `size` are read on `src` only
 * (others may pass NULL and 0). */
ACC_API ACC_NODISCARD acc_status acc_broadcast_object(acc_accelerator *acc, const void *data, size_t size,
                                                      int64_t src, const char *name, acc_string_list **out);
/* ACC_REDUCTION_SUM or _MEAN over processes; ACC_REDUCTION_NONE returns the input unchanged. */
ACC_API ACC_NODISCARD acc_status acc_reduce(acc_accelerator *acc, const acc_tensor *t, acc_reduction op,
                                            const char *name, acc_tensor **out);
/* Process `src`'s tensor on every process (a new tensor). */
ACC_API ACC_NODISCARD acc_status acc_broadcast(acc_accelerator *acc, const acc_tensor *t, int64_t src,
                                               const char *name, acc_tensor **out);
/* Pads dimension `dim` to its largest size across processes with `value`, at the end or, with
 * pad_first, at the start. A `dim` the tensor does not have (a 0-d tensor's any) pads nothing: the
 * tensor as it is, as Accelerate's; where processes pad different dimensions (or some none), each
 * of them fails at that call, naming both. */
ACC_API ACC_NODISCARD acc_status acc_pad_across_processes(acc_accelerator *acc, const acc_tensor *t, int64_t dim,
                                                          double value, int pad_first, const char *name,
                                                          acc_tensor **out);
/* This process's share [*start, *end) of n items; with apply_padding, *padding copies of the last
 * of the n items make every share equally long (as Accelerate's, a share that is empty because n is
 * less than the number of processes too). No communication. */
ACC_API ACC_NODISCARD acc_status acc_split_between_processes(const acc_accelerator *acc, int64_t n, int apply_padding,
                                                             int64_t *start, int64_t *end, int64_t *padding);
/* Raises this process's trigger; acc_check_trigger (a collective) tells every process whether any
 * raised it, and lowers it (e.g. for early stopping). */
ACC_API ACC_NODISCARD acc_status acc_set_trigger(acc_accelerator *acc);
ACC_API ACC_NODISCARD acc_status acc_check_trigger(acc_accelerator *acc, int *out);

/* ------------------------------------------------------------------------------------------------
 * Experiment tracking: Accelerate's log_with / init_trackers / log / end_training.
 *
 * The accelerator option log_with names the built-in trackers: "tensorboard" (event files that
 * TensorBoard reads), "jsonl" (metrics.jsonl), "csv" (metrics.csv), "mlflow" (MLflow's file store,
 * which `mlflow ui` and MlflowClient read), "dvclive" (DVCLive's folder and dvc.yaml, which `dvc
 * metrics show` and `dvc plots show` read), "trackio" (trackio's project database, which `trackio
 * show` reads), "wandb" (the offline run that wandb.init(mode="offline") writes, which `wandb sync`
 * uploads), "clearml" (the offline session ClearML's SDK writes, which Task.import_offline_session
 * sends to a server), "all" (all but dvclive, trackio, wandb and clearml), or a comma-separated list; an
 * unknown name makes
 * acc_accelerator_create fail with ACC_ERR_INVALID_ARGUMENT. They write into
 * <logging_dir>/<project_name>/ (logging_dir defaults to project_dir; one of them must be set), and
 * mlflow into the folder MLFLOW_TRACKING_URI names (a path or a file: URI; another scheme is
 * ACC_ERR_UNSUPPORTED), else <logging_dir>/mlruns: the experiment MLFLOW_EXPERIMENT_NAME or the
 * project name, a new run (or MLFLOW_RUN_ID's) tagged with MLFLOW_TAGS (a JSON object), the
 * configuration's top-level keys as parameters, numbers as metrics (texts and images are skipped);
 * a metric or parameter name MLflow refuses is ACC_ERR_INVALID_ARGUMENT. dvclive writes where
 * dvclive.Live() writes, relative to the working folder: ./dvclive (init_kwargs' "dir") with
 * plots/metrics/<name>.tsv per name, metrics.json and params.yaml, and ./dvc.yaml ("dvcyaml"; false
 * for none; one holding entries of the user's is ACC_ERR_UNSUPPORTED); a run empties the folder of
 * the last one unless it resumes ("resume" or DVCLIVE_RESUME); saving a DVC experiment is not built:
 * from inside a Git or DVC repository, give "save_dvc_exp": false (else ACC_ERR_UNSUPPORTED).
 * trackio writes <TRACKIO_DIR>/<project>.db (default $HF_HOME/trackio), an SQLite database: a row
 * per log call (texts as strings, groups nested) and the run's configuration, as trackio.init() and
 * Run.log() store them; logging to a Space or a trackio server is ACC_ERR_UNSUPPORTED.
 * wandb writes <dir>/wandb/offline-run-<local time>-<run id>/ (dir: init_kwargs' "dir", else
 * WANDB_DIR, else the working folder): run-<run id>.wandb, W&B's transaction log of the run, its
 * configuration and one history row per step (steps as run.log makes them: a call without a step
 * is a step of wandb's own count; "commit" in log_kwargs), media under files/media/, and the
 * wandb/latest-run link; mode "disabled" (init_kwargs or WANDB_MODE) writes nothing; uploading
 * while training (mode "online" or "shared") is ACC_ERR_UNSUPPORTED.
 * clearml writes <CLEARML_CACHE_DIR, default ~/.clearml/cache>/offline/offline-<32 hex>/: task.json
 * (project and task names from init_kwargs "project_name" / "task_name", else CLEARML_PROJECT /
 * CLEARML_TASK, else the project name; the configuration as "General"), metrics.jsonl (numbers with
 * a step as scalars, titled as Accelerate's ClearMLTracker titles them, without one as single
 * values; texts and groups dropped, as it drops them) and images under data/, zipped beside it
 * (<folder>.zip) when the run ends; CLEARML_OFFLINE_MODE
 * set off is ACC_ERR_UNSUPPORTED (reporting to a server while training is not built).
 * The program adds its own trackers with acc_add_tracker. Only the main process writes or calls
 * tracker callbacks; the other processes check the same arguments and write nothing, so calls made
 * on every process or on the main process alone both work.
 * File trackers write on background threads: acc_log only queues the values. A write error is
 * reported (ACC_ERR_IO) by the next acc_log or by acc_end_training.
 * ---------------------------------------------------------------------------------------------- */

/* Callbacks of a tracker implemented by the program; each returns 0, or non-zero to fail the call
 * that triggered it (ACC_ERR_IO, with the message left by acc_callback_set_error). They run on the
 * thread calling the acc_* function, on the main process only. Every argument is borrowed for the
 * duration of the call. */
/* A run starts: the project name and its hyper-parameters as a JSON object ("{}" when none). */
typedef int (*acc_tracker_init_fn)(void *user_data, const char *project_name, const char *config_json);
/* n values by name at `step` (always >= 0: the step the library assigned). */
typedef int (*acc_tracker_log_fn)(void *user_data, const char *const *names, const double *values, size_t n,
                                  int64_t step);
/* The run ends (acc_end_training, a new acc_init_trackers, or the accelerator being freed). */
typedef int (*acc_tracker_finish_fn)(void *user_data);
/* n texts (UTF-8) by name at `step`: one acc_log_text call (acc_tracker_set_log_text). */
typedef int (*acc_tracker_log_text_fn)(void *user_data, const char *const *names, const char *const *texts, size_t n,
                                       int64_t step);

/* n images by name at `step` (acc_log_images), each a PNG file in memory: pngs[i] holds png_sizes[i]
 * bytes, as tensorboard writes them. */
typedef int (*acc_tracker_log_images_fn)(void *user_data, const char *const *names,
                                         const unsigned char *const *pngs, const size_t *png_sizes, size_t n,
                                         int64_t step);

/* One histogram of acc_log_histogram, named `name`, at `step`, as tensorboard writes it (TensorBoard's
 * HistogramProto): the values' minimum, maximum, count, sum and sum of squares, and n_buckets buckets,
 * bucket i holding the bucket_counts[i] values above bucket_limits[i - 1] up to its right edge
 * bucket_limits[i] (ascending; the first bucket, empty, ends where the values begin). The arrays are
 * valid during the call only. */
typedef int (*acc_tracker_log_histogram_fn)(void *user_data, const char *name, double min, double max, double num,
                                            double sum, double sum_squares, const double *bucket_limits,
                                            const double *bucket_counts, size_t n_buckets, int64_t step);

/* Adds a tracker of the program under `name` (not one of the built-in names in use, not already
 * added). Any callback may be NULL. Added during a run, its init callback runs at once. The
 * accelerator owns user_data from here on: free_user_data (may be NULL) runs when the accelerator is
 * gone, and also when this call fails. */
ACC_API ACC_NODISCARD acc_status acc_add_tracker(acc_accelerator *acc, const char *name, acc_tracker_init_fn init,
                                                 acc_tracker_log_fn log, acc_tracker_finish_fn finish,
                                                 void *user_data, acc_free_fn free_user_data);
/* Accelerate's init_trackers: starts a run named project_name (a folder name: no "..", not absolute)
 * with config_json, a JSON object of hyper-parameters (NULL or "" for none; nested objects are shown
 * by TensorBoard as "outer/inner"). TensorBoard shows them in its HPARAMS and TEXT dashboards; jsonl
 * and csv write them to hparams.json. A run already open is ended first. Invalid JSON or a non-object
 * is ACC_ERR_INVALID_ARGUMENT; a folder that cannot be created is ACC_ERR_IO. If a tracker cannot start,
 * the run does not start (the trackers that did are finished). */
ACC_API ACC_NODISCARD acc_status acc_init_trackers(acc_accelerator *acc, const char *project_name,
                                                   const char *config_json);
/* acc_init_trackers with Accelerate's init_kwargs: init_kwargs_json (NULL or "" for none) is a JSON
 * object from tracker names to objects of the keyword arguments their classes take, e.g.
 * {"mlflow": {"run_name": "baseline", "tags": {"team": "vision"}}, "tensorboard": {"flush_secs": 30}}.
 * mlflow takes run_name, run_id (a run to resume), tags, description, logging_dir (a new
 * experiment's artifact location) and nested_run; tensorboard takes SummaryWriter's flush_secs and
 * filename_suffix (and max_queue and comment, which change nothing here) and purge_step (a
 * SessionLog START at that step, from which TensorBoard drops the earlier files' values); dvclive takes dvclive.Live's dir, resume, dvcyaml, save_dvc_exp, exp_name,
 * exp_message and cache_images (report and monitor_system other than null and false are
 * ACC_ERR_UNSUPPORTED); trackio takes trackio.init's name, group, config, resume ("never", "allow",
 * "must") and the arguments without effect on a local run (private, embed, settings, the monitors'
 * intervals, webhook_url, webhook_min_level; space_id, server_url, dataset_id, bucket_id,
 * space_storage and auto_log_gpu / auto_log_cpu true are ACC_ERR_UNSUPPORTED); jsonl, csv and the
 * program's trackers take none. A tracker name not in use,
 * a key a tracker does not take, or a value of the wrong type is ACC_ERR_INVALID_ARGUMENT, checked on
 * every process before any tracker starts (and before a run already open ends). */
ACC_API ACC_NODISCARD acc_status acc_init_trackers_ex(acc_accelerator *acc, const char *project_name,
                                                      const char *config_json, const char *init_kwargs_json);
/* Accelerate's log: n values by name (non-empty, distinct names; arrays borrowed) at `step`, or at
 * the step after the last one logged when step < 0 (0 for the first call of a run). n may be 0 (the
 * step still advances). Before acc_init_trackers or after acc_end_training: ACC_ERR_NOT_INITIALIZED.
 * If a tracker fails, the others still receive the values, and the first failure is returned. */
ACC_API ACC_NODISCARD acc_status acc_log(acc_accelerator *acc, const char *const *names, const double *values,
                                         size_t n, int64_t step);
/* acc_log with Accelerate's log_kwargs: log_kwargs_json (NULL or "" for none) is a JSON object from
 * tracker names to the keyword arguments of their log, e.g. {"tensorboard": {"walltime": 1700000000.5},
 * "mlflow": {"timestamp": 1700000000500}}. tensorboard takes add_scalar's walltime (the events'
 * time, seconds), new_style (a tensor summary of the scalars plugin) and double_precision (with
 * new_style, the value as a double); mlflow takes log_metrics' timestamp (milliseconds) and
 * synchronous (the lines are written by the tracker's thread either way; run_id, model_id and
 * dataset are ACC_ERR_UNSUPPORTED); dvclive takes log_metric's plot (false: metrics.json only, no
 * table row) and timestamp (true: a first column of milliseconds since 1970); jsonl, csv and the program's trackers take
 * none. A tracker not in use, a key it does not take or a value of the wrong type is
 * ACC_ERR_INVALID_ARGUMENT, on every process, and the call takes no step. */
ACC_API ACC_NODISCARD acc_status acc_log_ex(acc_accelerator *acc, const char *const *names, const double *values,
                                            size_t n, int64_t step, const char *log_kwargs_json);
/* Accelerate's log of a dict value ({main_tag: {name: value, ...}}; TensorBoard's add_scalars): n
 * values by name under one main tag, with acc_log's rules for names and steps. tensorboard writes
 * each as add_scalars does, into an event file of its own run folder, "<main_tag>_<name>" inside the
 * run's (a '/' in main_tag becomes '_'), tagged main_tag, so TensorBoard draws them in one chart;
 * jsonl, csv and the program's trackers get them as values named "<main_tag>/<name>". A name with a
 * ".." part (which would lead out of the run's folder) is ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_log_scalars(acc_accelerator *acc, const char *main_tag, const char *const *names,
                                                 const double *values, size_t n, int64_t step);
/* acc_log_scalars with Accelerate's log_kwargs (acc_log_ex's rules): tensorboard takes add_scalars'
 * walltime alone; mlflow and dvclive what they take with acc_log_ex. */
ACC_API ACC_NODISCARD acc_status acc_log_scalars_ex(acc_accelerator *acc, const char *main_tag,
                                                    const char *const *names, const double *values, size_t n,
                                                    int64_t step, const char *log_kwargs_json);
/* acc_log of a single value. */
ACC_API ACC_NODISCARD acc_status acc_log_scalar(acc_accelerator *acc, const char *name, double value, int64_t step);
/* Accelerate's log of str values: n texts (valid UTF-8, else ACC_ERR_INVALID_ARGUMENT) by name, with
 * acc_log's rules for names and steps (a call advances the step as acc_log's does). tensorboard
 * writes each as torch's SummaryWriter.add_text does, under "<name>/text_summary" in the TEXT
 * dashboard; jsonl adds "texts": {name: text} to the line; csv a column per name, quoted as RFC 4180
 * quotes (line breaks kept). A tracker of the program gets them only through its text callback
 * (acc_tracker_set_log_text): its log callback sees numbers alone. */
ACC_API ACC_NODISCARD acc_status acc_log_text(acc_accelerator *acc, const char *const *names, const char *const *texts,
                                              size_t n, int64_t step);
/* acc_log_text with Accelerate's log_kwargs (acc_log_ex's rules): tensorboard takes add_text's
 * walltime alone; mlflow (which skips texts) and dvclive what they take with acc_log_ex. */
ACC_API ACC_NODISCARD acc_status acc_log_text_ex(acc_accelerator *acc, const char *const *names,
                                                 const char *const *texts, size_t n, int64_t step,
                                                 const char *log_kwargs_json);
/* Accelerate's TensorBoardTracker.log_images: n images (tensors, borrowed) by name, with acc_log's
 * rules for names and steps. tensorboard writes each as torch's SummaryWriter.add_images does: an
 * event per image, tagged with its name, holding a PNG (the IMAGES dashboard). `dataformats` (NULL:
 * "NCHW"; case ignored) orders the tensor's dimensions as torch's does: any order of NCHW for a batch
 * of 1 or 3 channels, shown as a grid of up to 8 images a row; of CHW for one image of 1, 3 or 4
 * (RGBA) channels; of HW for one gray image. A uint8 tensor is taken as 0..255, any other real dtype
 * as 0..1 (times 255, clipped to 0..255, the fraction dropped, NaN as 0); gray is written as RGB.
 * Any device. A layout the tensor does not have, an empty or complex tensor, or a side past PNG's
 * 2^31 - 1 pixels is ACC_ERR_INVALID_ARGUMENT on every process, and a call that fails takes no step;
 * a PNG past 2 GiB, which no TensorBoard event holds, fails on the main process alone. Only the
 * trackers that show images get them: tensorboard, trackio (trackio.Image files under
 * <TRACKIO_DIR>/media) and the program's trackers given an image callback (acc_tracker_set_log_images);
 * jsonl, csv, mlflow and dvclive do not (the step advances all the same). */
ACC_API ACC_NODISCARD acc_status acc_log_images(acc_accelerator *acc, const char *const *names,
                                                const acc_tensor *const *images, size_t n, int64_t step,
                                                const char *dataformats);
/* torch's SummaryWriter.add_histogram(name, values, step, bins, max_bins), with acc_log's rules for
 * names and steps: tensorboard writes the histogram of the tensor's values (any shape, real dtype, any
 * device; read as float64) as an event TensorBoard's HISTOGRAMS and DISTRIBUTIONS dashboards show,
 * computed as torch computes it. bins: NULL or "tensorflow" for SummaryWriter's default bins (0 and
 * +-1e-12 * 1.1^k up to 1e20), or a number of equal-width bins over [min, max] in decimal ("64"); numpy's
 * named strategies ("auto", "fd", ...) are ACC_ERR_UNSUPPORTED. max_bins: 0 for no limit, else bins are
 * merged in groups until at most about that many remain (torch's max_bins). An empty, complex or
 * non-numeric tensor is ACC_ERR_INVALID_ARGUMENT on every process; on the main process, so are values
 * of which none falls in a bin (all NaN, or beyond +-1e20) and, with equal-width bins, a non-finite
 * minimum or maximum (np.histogram's range). Only tensorboard, trackio (a trackio.Histogram: the
 * edges and counts of the bins from the first to the last holding values) and the program's trackers
 * given a histogram callback (acc_tracker_set_log_histogram) take histograms (jsonl, csv, mlflow and
 * dvclive do not; the step advances all the same). */
ACC_API ACC_NODISCARD acc_status acc_log_histogram(acc_accelerator *acc, const char *name, const acc_tensor *values,
                                                   int64_t step, const char *bins, int64_t max_bins);
/* Gives the tracker `name` (one added with acc_add_tracker; a built-in one is ACC_ERR_INVALID_ARGUMENT)
 * a callback for acc_log_text's texts, called with its user_data; NULL removes it. */
ACC_API ACC_NODISCARD acc_status acc_tracker_set_log_text(acc_accelerator *acc, const char *name,
                                                          acc_tracker_log_text_fn log_text);
/* Gives the tracker `name` (one added with acc_add_tracker) a callback for acc_log_images' images, as
 * PNGs, called with its user_data; NULL removes it (the tracker then gets no images). */
ACC_API ACC_NODISCARD acc_status acc_tracker_set_log_images(acc_accelerator *acc, const char *name,
                                                            acc_tracker_log_images_fn log_images);
/* Gives the tracker `name` (one added with acc_add_tracker) a callback for acc_log_histogram's
 * histograms, called with its user_data; NULL removes it (the tracker then gets no histograms, and
 * none is computed for it). */
ACC_API ACC_NODISCARD acc_status acc_tracker_set_log_histogram(acc_accelerator *acc, const char *name,
                                                               acc_tracker_log_histogram_fn log_histogram);
/* MLflow's log_artifact / log_artifacts (Accelerate's get_tracker("mlflow").log_artifact(s)): the
 * file or folder at local_path kept with tracker `tracker`'s current run under artifact_path (NULL or
 * "" for the run's artifact root; relative, without ".."). A file is copied as
 * <artifact_path>/<its name>, a folder's files at their paths inside it (merged with what is there),
 * each through a temporary renamed into place. Only mlflow keeps artifacts (the others:
 * ACC_ERR_UNSUPPORTED), into a run whose artifact location is a local folder (a file: URI; another,
 * such as s3://, is ACC_ERR_UNSUPPORTED). Outside a run: ACC_ERR_NOT_INITIALIZED. The main process
 * copies (local_path is read there); the others check the arguments alone. A path that is neither a
 * file nor a folder, or a folder holding a FIFO or a device, is ACC_ERR_INVALID_ARGUMENT before
 * anything is copied; a copy that fails is ACC_ERR_IO naming the file. */
ACC_API ACC_NODISCARD acc_status acc_tracker_log_artifact(acc_accelerator *acc, const char *tracker,
                                                          const char *local_path, const char *artifact_path);
/* Accelerate's end_training: every tracker finishes; the files are complete on disk when it returns.
 * Without a run open it does nothing. Freeing the accelerator ends an open run too (errors lost). */
ACC_API ACC_NODISCARD acc_status acc_end_training(acc_accelerator *acc);
/* The names of the trackers: log_with's, then those added, in order. */
ACC_API ACC_NODISCARD acc_status acc_tracker_names(const acc_accelerator *acc, acc_string_list **out);
/* Where tracker `name` writes in the current or last run: the event file (tensorboard), metrics.jsonl
 * or metrics.csv, the run's folder in MLflow's store (mlflow), DVCLive's folder (dvclive), the
 * project's database (trackio), the offline run's folder (wandb), the offline session's folder
 * (clearml); "" for a tracker of the program, before the
 * first run, with wandb's mode "disabled" and on other processes than the main one. Free *out with acc_string_free. An unknown name is ACC_ERR_INVALID_ARGUMENT. */
ACC_API ACC_NODISCARD acc_status acc_tracker_path(const acc_accelerator *acc, const char *name, char **out);

/* ------------------------------------------------------------------------------------------------
 * Progress display for training loops (each machine's first process shows it, as Accelerate's tqdm;
 * elsewhere it is silent). On a
 * terminal, stdout gets one line redrawn in place: description, percentage, a bar, count/total,
 * elapsed<remaining time, rate and the postfix. When stdout is not a terminal (a log file, a pipe,
 * TERM=dumb), it prints plain lines instead, one per 10% of the total (every 30 s when the total is
 * unknown) and one on close.
 * ---------------------------------------------------------------------------------------------- */

typedef struct acc_progress acc_progress;
/* A display for `total` steps (<= 0: unknown) labelled `description` (may be NULL). It shows on the
 * accelerator's main process only and does not keep the accelerator alive. */
ACC_API ACC_NODISCARD acc_status acc_progress_create(const acc_accelerator *acc, int64_t total,
                                                     const char *description, acc_progress **out);
/* Advances by n (>= 0) steps. */
ACC_API ACC_NODISCARD acc_status acc_progress_update(acc_progress *p, int64_t n);
/* Text shown after the counters from the next display on, e.g. "loss 0.412" (copied). */
ACC_API ACC_NODISCARD acc_status acc_progress_set_postfix(acc_progress *p, const char *text);
/* Shows the final state and ends the display; later updates are ignored. */
ACC_API ACC_NODISCARD acc_status acc_progress_close(acc_progress *p);
/* Closes the display if needed and releases it. NULL is allowed. */
ACC_API void acc_progress_free(acc_progress *p);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACCELERATE_H */
