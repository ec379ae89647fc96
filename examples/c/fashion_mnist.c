/* fashion_mnist.c — the main job: a small CNN trained on Fashion-MNIST through the C API only,
 * with Accelerate's conversion (create an accelerator, prepare, acc_backward).
 *
 *   fashion_mnist [--epochs N] [--batch-size N] [--lr X] [--train-samples N] [--test-samples N]
 *                 [--data DIR] [--save FILE.pt] [--min-accuracy PCT] [--project-dir DIR]
 *                 [--checkpoint-every STEPS] [--resume]
 *
 * Reads the IDX files of Debian's dataset-fashion-mnist package; shows a progress bar and prints one
 * line per epoch (loss, samples/s) on the main process, evaluates on the test split and saves the
 * weights as TorchScript. Metrics go to TensorBoard and JSONL under --project-dir (default
 * fashion_mnist_project; "" disables tracking): `tensorboard --logdir fashion_mnist_project`.
 * --checkpoint-every saves the whole training state every STEPS steps into
 * <project-dir>/checkpoints/checkpoint_<i> (the last two are kept); --resume continues from the newest
 * one, exactly where it was: the same batches, weights, optimizer moments, schedule and RNG.
 * Exits 3 when the test accuracy is below --min-accuracy. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "accelerate.h"

#define CHECK(expr)                                                                              \
  do {                                                                                           \
    acc_status status_ = (expr);                                                                 \
    if (status_ != ACC_OK) {                                                                     \
      fprintf(stderr, "error: %s: %s\n  at %s:%d: %s\n", acc_status_name(status_),               \
              acc_last_error_message(), __FILE__, __LINE__, #expr);                              \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static const char *kModel =
    "[{\"type\":\"conv2d\",\"in_channels\":1,\"out_channels\":32,\"kernel_size\":3,\"padding\":1},"
    " {\"type\":\"relu\"}, {\"type\":\"maxpool2d\",\"kernel_size\":2},"
    " {\"type\":\"conv2d\",\"in_channels\":32,\"out_channels\":64,\"kernel_size\":3,\"padding\":1},"
    " {\"type\":\"relu\"}, {\"type\":\"maxpool2d\",\"kernel_size\":2},"
    " {\"type\":\"flatten\"},"
    " {\"type\":\"linear\",\"in_features\":3136,\"out_features\":128}, {\"type\":\"relu\"},"
    " {\"type\":\"dropout\",\"p\":0.25},"
    " {\"type\":\"linear\",\"in_features\":128,\"out_features\":10}]";

struct args {
  int epochs, batch_size;
  double lr, min_accuracy;
  long train_samples, test_samples;
  const char *data, *save, *project_dir;
  long checkpoint_every;
  int resume;
};

/* A command-line value that must be a whole number / a number: anything else is a usage error. */
static long whole_number(const char *flag, const char *v) {
  char *end = NULL;
  long n;
  errno = 0;
  n = strtol(v, &end, 10);
  if (!*v || *end || errno) { fprintf(stderr, "%s takes a whole number, got '%s'\n", flag, v); exit(2); }
  return n;
}
static double number(const char *flag, const char *v) {
  char *end = NULL;
  double x;
  errno = 0;
  x = strtod(v, &end);
  if (!*v || *end || errno || !isfinite(x)) { fprintf(stderr, "%s takes a finite number, got '%s'\n", flag, v); exit(2); }
  return x;
}

static const char kUsage[] =
    "usage: fashion_mnist [--epochs N] [--batch-size N] [--lr X] [--train-samples N] [--test-samples N]\n"
    "                     [--data DIR] [--save FILE] [--min-accuracy PERCENT] [--project-dir DIR]\n"
    "                     [--checkpoint-every STEPS] [--resume]\n";

/* A whole number in [least, most] for `flag`, else a usage error. */
static long whole_number_in(const char *flag, const char *v, long least, long most) {
  const long n = whole_number(flag, v);
  if (n < least || n > most) {
    fprintf(stderr, "%s must be from %ld to %ld, got %ld\n", flag, least, most, n);
    exit(2);
  }
  return n;
}

static int is_folder(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Checked before training, so that a path that cannot take the model does not cost the run: its
 * folder exists, and it is not a folder itself. */
static void check_save_path(const char *path) {
  char folder[4096];
  const char *slash = strrchr(path, '/');
  if (!*path) return; /* "": do not save */
  if (is_folder(path)) { fprintf(stderr, "--save %s is a folder; give a file name\n", path); exit(2); }
  if (!slash) return; /* the current folder */
  snprintf(folder, sizeof folder, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  if (!is_folder(folder)) { fprintf(stderr, "--save %s: %s is not an existing folder\n", path, folder); exit(2); }
}

/* A run that saves checkpoints into a project folder that holds an earlier run's would fail at its
 * first save (Accelerate refuses to write over checkpoint_<i>): refused here, before training. */
static void check_no_earlier_checkpoints(const char *project_dir) {
  char folder[4096];
  DIR *dir;
  struct dirent *entry;
  int found = 0;
  snprintf(folder, sizeof folder, "%s/checkpoints", project_dir);
  if (!(dir = opendir(folder))) return;
  while (!found && (entry = readdir(dir))) found = strncmp(entry->d_name, "checkpoint_", 11) == 0;
  closedir(dir);
  if (found) {
    fprintf(stderr, "%s holds the checkpoints of an earlier run: pass --resume to continue it, or choose another "
            "--project-dir\n", folder);
    exit(2);
  }
}

static struct args parse_args(int argc, char **argv) {
  struct args a = {3, 64, 2e-3, 0.0, 0, 0, "/usr/share/datasets/fashion-mnist", "fashion_mnist.pt",
                    "fashion_mnist_project", 0, 0};
  int i;
  for (i = 1; i < argc; i += 2) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(kUsage, stdout); exit(0); }
    if (!strcmp(argv[i], "--resume")) { a.resume = 1; --i; continue; } /* a flag without a value */
    if (!v) { /* a stray word, or a flag at the end without its value */
      fprintf(stderr, strncmp(argv[i], "--", 2) ? "unknown argument %s\n%s" : "%s needs a value\n%s", argv[i], kUsage);
      exit(2);
    }
    if (!strcmp(argv[i], "--epochs")) a.epochs = (int)whole_number_in(argv[i], v, 1, INT_MAX);
    else if (!strcmp(argv[i], "--batch-size")) a.batch_size = (int)whole_number_in(argv[i], v, 1, INT_MAX);
    else if (!strcmp(argv[i], "--lr")) a.lr = number(argv[i], v);
    else if (!strcmp(argv[i], "--train-samples")) a.train_samples = whole_number_in(argv[i], v, 0, LONG_MAX);
    else if (!strcmp(argv[i], "--test-samples")) a.test_samples = whole_number_in(argv[i], v, 0, LONG_MAX);
    else if (!strcmp(argv[i], "--data")) a.data = v;
    else if (!strcmp(argv[i], "--save")) a.save = v;
    else if (!strcmp(argv[i], "--min-accuracy")) a.min_accuracy = number(argv[i], v);
    else if (!strcmp(argv[i], "--project-dir")) a.project_dir = v;
    else if (!strcmp(argv[i], "--checkpoint-every")) a.checkpoint_every = whole_number_in(argv[i], v, 0, LONG_MAX);
    else { fprintf(stderr, "unknown argument %s\n%s", argv[i], kUsage); exit(2); }
  }
  if ((a.checkpoint_every > 0 || a.resume) && !*a.project_dir) {
    fprintf(stderr, "--checkpoint-every and --resume need a --project-dir\n");
    exit(2);
  }
  check_save_path(a.save);
  if (a.checkpoint_every > 0 && !a.resume) check_no_earlier_checkpoints(a.project_dir);
  return a;
}

/* The step counter travels in the checkpoint as a registered object (Accelerate's
 * register_for_checkpointing): its bytes are saved and loaded by these two callbacks. */
static int save_step(void *step, acc_bytes *out) { return acc_bytes_append(out, step, sizeof(int64_t)) != ACC_OK; }
static int load_step(void *step, const void *data, size_t size) {
  if (size != sizeof(int64_t)) {
    acc_callback_set_error("the step counter's state has the wrong size");
    return 1;
  }
  memcpy(step, data, size);
  return 0;
}

static acc_dataset *load_split(const struct args *a, const char *split, long limit) {
  char images[1024], labels[1024];
  acc_dataset *ds = NULL, *subset = NULL;
  int64_t size = 0;
  snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", a->data, split);
  snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", a->data, split);
  CHECK(acc_dataset_from_idx(images, labels, &ds));
  CHECK(acc_dataset_size(ds, &size));
  if (limit <= 0 || limit >= size) return ds;
  CHECK(acc_dataset_subset(ds, 0, limit, &subset));
  acc_dataset_free(ds);
  return subset;
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sums values over the job's processes (a no-op on one process). */
static void sum_across_processes(acc_accelerator *acc, double *values, int64_t count) {
  const int64_t dims[1] = {count};
  acc_tensor *local = NULL, *total = NULL;
  CHECK(acc_tensor_from_host(values, sizeof(double) * (size_t)count, dims, 1, ACC_DTYPE_FLOAT64, &local));
  CHECK(acc_reduce(acc, local, ACC_REDUCTION_SUM, "sum_across_processes", &total));
  CHECK(acc_tensor_to_host(total, values, sizeof(double) * (size_t)count));
  acc_tensor_free(local);
  acc_tensor_free(total);
}

/* Test accuracy in percent over every process's share of the test split. */
static double evaluate(acc_accelerator *acc, acc_model *model, acc_dataloader *loader) {
  acc_tensor_list *batch = NULL;
  int64_t correct = 0, seen = 0, n = 0, hits = 0;
  double counts[2];
  CHECK(acc_model_set_training(model, 0));
  for (;;) {
    acc_tensor *x = NULL, *y = NULL, *logits = NULL, *pred = NULL;
    CHECK(acc_dataloader_next(loader, &batch));
    if (!batch) break;
    CHECK(acc_tensor_list_get(batch, 0, &x));
    CHECK(acc_tensor_list_get(batch, 1, &y));
    CHECK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &logits));
    CHECK(acc_tensor_argmax(logits, 1, 0, &pred));
    CHECK(acc_tensor_count_equal(pred, y, &hits));
    CHECK(acc_tensor_numel(y, &n));
    correct += hits;
    seen += n;
    acc_tensor_free(x); acc_tensor_free(y); acc_tensor_free(logits); acc_tensor_free(pred);
    acc_tensor_list_free(batch);
  }
  CHECK(acc_model_set_training(model, 1));
  counts[0] = (double)correct;
  counts[1] = (double)seen;
  sum_across_processes(acc, counts, 2);
  return counts[1] > 0 ? 100.0 * counts[0] / counts[1] : 0.0;
}

int main(int argc, char **argv) {
  struct args a = parse_args(argc, argv);
  acc_options *acc_opts = NULL, *loader_opts = NULL, *opt_opts = NULL, *sched_opts = NULL;
  acc_accelerator *acc = NULL;
  acc_dataset *train = NULL, *test = NULL;
  acc_dataloader *train_loader = NULL, *test_loader = NULL;
  acc_model *model = NULL, *unwrapped = NULL;
  acc_optimizer *opt = NULL;
  acc_scheduler *sched = NULL;
  int64_t steps_per_epoch = 0, batches_per_process = 0, train_size = 0, processes = 1;
  char *device = NULL, line[256];
  acc_progress *progress = NULL;
  int64_t global_step = 0;
  double accuracy;
  int epoch, first_epoch = 0;

  /* 1. The accelerator: settings from the program, else from accelerate-launch's environment. */
  CHECK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &acc_opts));
  CHECK(acc_options_set_int(acc_opts, "seed", 42));
  if (*a.project_dir) { /* Accelerate's log_with + project_dir */
    CHECK(acc_options_set(acc_opts, "log_with", "tensorboard,jsonl"));
    CHECK(acc_options_set(acc_opts, "project_dir", a.project_dir));
    CHECK(acc_options_set_bool(acc_opts, "automatic_checkpoint_naming", 1)); /* ProjectConfiguration */
    CHECK(acc_options_set_int(acc_opts, "total_limit", 2));
  }
  CHECK(acc_accelerator_create(acc_opts, &acc));
  CHECK(acc_accelerator_device(acc, &device));

  /* Data, model, optimizer and schedule, as a plain single-device program would make them. */
  train = load_split(&a, "train", a.train_samples);
  test = load_split(&a, "t10k", a.test_samples);
  CHECK(acc_dataset_size(train, &train_size));
  CHECK(acc_options_create(ACC_OPTIONS_DATALOADER, &loader_opts));
  CHECK(acc_options_set_int(loader_opts, "batch_size", a.batch_size));
  CHECK(acc_options_set_bool(loader_opts, "shuffle", 1));
  CHECK(acc_dataloader_create(train, loader_opts, &train_loader));
  CHECK(acc_options_set_int(loader_opts, "batch_size", 1000));
  CHECK(acc_options_set_bool(loader_opts, "shuffle", 0));
  CHECK(acc_dataloader_create(test, loader_opts, &test_loader));
  CHECK(acc_dataloader_length(train_loader, &steps_per_epoch));

  CHECK(acc_model_from_spec(kModel, &model));
  CHECK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opt_opts));
  CHECK(acc_options_set_double(opt_opts, "lr", a.lr));
  CHECK(acc_optimizer_create(model, "adamw", opt_opts, &opt));
  CHECK(acc_options_create(ACC_OPTIONS_SCHEDULER, &sched_opts));
  CHECK(acc_options_set_int(sched_opts, "num_warmup_steps", steps_per_epoch / 10));
  CHECK(acc_options_set_int(sched_opts, "num_training_steps", steps_per_epoch * a.epochs));
  CHECK(acc_scheduler_create(opt, "cosine", sched_opts, &sched));

  /* 2. Prepare: everything moves to the accelerator's device and gets Accelerate's semantics. */
  CHECK(acc_prepare(acc, &model, &opt, &train_loader, &sched));
  CHECK(acc_prepare(acc, NULL, NULL, &test_loader, NULL));
  CHECK(acc_accelerator_num_processes(acc, &processes));
  /* The schedule is sized in batches of the whole data set, as in Accelerate (a prepared scheduler
   * steps once per process); each process iterates its own shard. */
  CHECK(acc_dataloader_length(train_loader, &batches_per_process));
  snprintf(line, sizeof line, "training on %lld process(es), %s: %lld samples, %lld steps per epoch", (long long)processes,
           device, (long long)train_size, (long long)batches_per_process);
  CHECK(acc_print(acc, line));
  CHECK(acc_register_for_checkpointing(acc, save_step, load_step, &global_step, NULL));
  if (a.resume) { /* after prepare, before iterating: everything continues where the checkpoint was */
    char *from = NULL;
    int64_t loader_epoch = 0;
    CHECK(acc_load_state(acc, NULL, &from));
    CHECK(acc_dataloader_epoch(train_loader, &loader_epoch));
    first_epoch = (int)loader_epoch;
    snprintf(line, sizeof line, "resumed from %s (epoch %d, step %lld)", from, first_epoch + 1, (long long)global_step);
    CHECK(acc_print(acc, line));
    acc_string_free(from);
  }
  /* 3. Trackers (the main process writes): the hyper-parameters once, then metrics by step. */
  snprintf(line, sizeof line, "{\"epochs\": %d, \"batch_size\": %d, \"lr\": %g, \"processes\": %lld}", a.epochs,
           a.batch_size, a.lr, (long long)processes);
  CHECK(acc_init_trackers(acc, "fashion_mnist", line));

  for (epoch = first_epoch; epoch < a.epochs; ++epoch) {
    double start = seconds(), loss_value = 0.0, totals[3] = {0.0, 0.0, 0.0}; /* loss sum, batches, samples */
    int64_t n = 0;
    acc_tensor_list *batch = NULL;
    snprintf(line, sizeof line, "epoch %d/%d", epoch + 1, a.epochs);
    CHECK(acc_progress_create(acc, batches_per_process, line, &progress));
    for (;;) {
      acc_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL;
      CHECK(acc_dataloader_next(train_loader, &batch));
      if (!batch) break;
      CHECK(acc_tensor_list_get(batch, 0, &x));
      CHECK(acc_tensor_list_get(batch, 1, &y));
      if (global_step == 0) { /* the first batch as a grid in TensorBoard's IMAGES tab */
        const char *samples = "train/first_batch";
        CHECK(acc_log_images(acc, &samples, (const acc_tensor *const *)&x, 1, 0, "NCHW"));
      }
      CHECK(acc_accumulate_begin(acc));
      CHECK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
      CHECK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
      /* 4. acc_backward instead of the loss's own backward. */
      CHECK(acc_backward(acc, loss));
      CHECK(acc_optimizer_step(opt));
      CHECK(acc_scheduler_step(sched));
      CHECK(acc_optimizer_zero_grad(opt));
      CHECK(acc_accumulate_end(acc));
      CHECK(acc_tensor_item(loss, &loss_value));
      CHECK(acc_tensor_numel(y, &n));
      totals[0] += loss_value;
      totals[1] += 1.0;
      totals[2] += (double)n;
      if (global_step % 10 == 0) { /* this process's loss, as Accelerate's examples log it */
        CHECK(acc_log_scalar(acc, "train/loss", loss_value, global_step));
        snprintf(line, sizeof line, "loss %.4f", loss_value);
        CHECK(acc_progress_set_postfix(progress, line));
      }
      ++global_step;
      CHECK(acc_progress_update(progress, 1));
      if (a.checkpoint_every > 0 && global_step % a.checkpoint_every == 0) {
        char *dir = NULL;
        CHECK(acc_save_state(acc, NULL, &dir)); /* every process takes part */
        acc_string_free(dir);
      }
      acc_tensor_free(x); acc_tensor_free(y); acc_tensor_free(logits); acc_tensor_free(loss);
      acc_tensor_list_free(batch);
    }
    CHECK(acc_progress_close(progress));
    acc_progress_free(progress);
    progress = NULL;
    sum_across_processes(acc, totals, 3);
    {
      const char *names[] = {"epoch/loss", "epoch/samples_per_s"};
      double values[2];
      values[0] = totals[1] > 0 ? totals[0] / totals[1] : 0.0;
      values[1] = totals[2] / (seconds() - start);
      snprintf(line, sizeof line, "epoch %d/%d  loss %.4f  %.0f samples/s", epoch + 1, a.epochs, values[0], values[1]);
      CHECK(acc_print(acc, line));
      CHECK(acc_log(acc, names, values, 2, global_step));
    }
    { /* the first convolution's weights, as TensorBoard's HISTOGRAMS tab shows them epoch by epoch */
      acc_tensor *weight = NULL;
      int64_t count = 0;
      CHECK(acc_model_parameter(model, "0.weight", &weight));
      CHECK(acc_tensor_numel(weight, &count));
      if (count > 0) /* (sharded at rest under ZeRO-3, a process holds none of it between steps) */
        CHECK(acc_log_histogram(acc, "conv1/weight", weight, global_step, NULL, 0));
      acc_tensor_free(weight);
    }
  }

  accuracy = evaluate(acc, model, test_loader);
  snprintf(line, sizeof line, "test accuracy %.2f%%", accuracy);
  CHECK(acc_print(acc, line));
  CHECK(acc_log_scalar(acc, "test/accuracy", accuracy, global_step));
  CHECK(acc_end_training(acc)); /* the trackers' files are complete from here on */
  if (a.save && *a.save) {
    int main_process = 0;
    CHECK(acc_accelerator_is_main_process(acc, &main_process));
    CHECK(acc_unwrap_model(acc, model, &unwrapped));
    /* One file for the job, written by the main process (Accelerate's recipe); acc_save_model below
     * writes once per machine by itself. */
    if (main_process) CHECK(acc_model_save_torchscript(unwrapped, a.save));
    snprintf(line, sizeof line, "saved the trained model to %s (TorchScript)", a.save);
    CHECK(acc_print(acc, line));
    /* The weights as Hugging Face saves them: safetensors that Python loads as they are. */
    CHECK(acc_save_model(acc, model, "fashion_mnist_model", NULL));
    CHECK(acc_print(acc, "saved the weights to fashion_mnist_model/model.safetensors"));
  }

  acc_string_free(device);
  acc_model_free(unwrapped);
  acc_model_free(model);
  acc_optimizer_free(opt);
  acc_scheduler_free(sched);
  acc_dataloader_free(train_loader);
  acc_dataloader_free(test_loader);
  acc_dataset_free(train);
  acc_dataset_free(test);
  acc_options_free(acc_opts);
  acc_options_free(loader_opts);
  acc_options_free(opt_opts);
  acc_options_free(sched_opts);
  acc_accelerator_free(acc);
  return accuracy >= a.min_accuracy ? 0 : 3;
}
