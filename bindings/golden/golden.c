/* golden.c — the golden scenario through the C API (see README.md): writes the reference that the
 * Java, C# and Go tests must reproduce bit for bit.  Usage: acc_golden OUT_FILE
 * The checkpoint goes to OUT_FILE.ckpt: every rank of a launch gets the same OUT_FILE, and each
 * test its own. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelerate.h"

#define CHECK(expr)                                                                          \
  do {                                                                                       \
    acc_status s_ = (expr);                                                                  \
    if (s_ != ACC_OK) {                                                                      \
      fprintf(stderr, "%s failed: %s: %s\n", #expr, acc_status_name(s_), acc_last_error_message()); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

enum { N = 64, D = 8, C = 3, EPOCHS = 2, STEPS_BEFORE_SAVE = 2 };
static const char *kSpec =
    "[{\"type\":\"linear\",\"in_features\":8,\"out_features\":16},{\"type\":\"relu\"},"
    "{\"type\":\"linear\",\"in_features\":16,\"out_features\":3}]";

/* The registered custom state: the step counter, as 8 little-endian bytes. It numbers the lines, so
 * a resume that did not restore it prints other labels. */
static int64_t g_steps = 0;

static int save_steps(void *user_data, acc_bytes *out) {
  unsigned char b[8];
  int i;
  (void)user_data;
  for (i = 0; i < 8; ++i) b[i] = (unsigned char)((uint64_t)g_steps >> (8 * i));
  return acc_bytes_append(out, b, sizeof b) == ACC_OK ? 0 : 1;
}

static int load_steps(void *user_data, const void *data, size_t size) {
  const unsigned char *b = data;
  uint64_t v = 0;
  int i;
  (void)user_data;
  if (size != 8) {
    acc_callback_set_error("the step counter's state is not 8 bytes");
    return 1;
  }
  for (i = 0; i < 8; ++i) v |= (uint64_t)b[i] << (8 * i);
  g_steps = (int64_t)v;
  return 0;
}

static void put_floats(FILE *f, const char *label, const acc_tensor *t) {
  int64_t n = 0;
  float *v;
  int64_t i;
  CHECK(acc_tensor_numel(t, &n));
  v = malloc(sizeof(float) * (size_t)(n ? n : 1));
  CHECK(acc_tensor_to_host(t, v, sizeof(float) * (size_t)n));
  fprintf(f, "%s %" PRId64, label, n);
  for (i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &v[i], 4);
    fprintf(f, " %08" PRIx32, bits);
  }
  fprintf(f, "\n");
  free(v);
}

typedef struct {
  acc_model *model;
  acc_optimizer *opt;
  acc_dataloader *dl;
  acc_scheduler *sched;
} objects;

/* Creates the model, optimizer, scheduler and loader and prepares them; the same for the first run
 * and for the resumed one. */
static objects make_objects(acc_accelerator *acc, acc_dataset *ds) {
  acc_options *lo = NULL, *oo = NULL, *so = NULL;
  objects o = {NULL, NULL, NULL, NULL};
  CHECK(acc_options_create(ACC_OPTIONS_DATALOADER, &lo));
  CHECK(acc_options_set_int(lo, "batch_size", 8));
  CHECK(acc_options_set_bool(lo, "shuffle", 1));
  CHECK(acc_options_set_int(lo, "seed", 7));
  CHECK(acc_dataloader_create(ds, lo, &o.dl));
  CHECK(acc_model_from_spec(kSpec, &o.model));
  CHECK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo));
  CHECK(acc_options_set_double(oo, "lr", 0.01));
  CHECK(acc_optimizer_create(o.model, "adamw", oo, &o.opt));
  CHECK(acc_options_create(ACC_OPTIONS_SCHEDULER, &so));
  CHECK(acc_options_set_int(so, "num_warmup_steps", 2));
  CHECK(acc_options_set_int(so, "num_training_steps", 32));
  CHECK(acc_scheduler_create(o.opt, "linear", so, &o.sched));
  CHECK(acc_prepare(acc, &o.model, &o.opt, &o.dl, &o.sched));
  acc_options_free(lo); acc_options_free(oo); acc_options_free(so);
  return o;
}

static void free_objects(objects *o) {
  acc_dataloader_free(o->dl); acc_model_free(o->model); acc_optimizer_free(o->opt); acc_scheduler_free(o->sched);
}

/* Trains on up to max_batches batches (-1: to the end of the epoch), printing each step's loss, its
 * gather and its reduce. Returns 0 when the epoch ended. */
static int train(FILE *f, acc_accelerator *acc, const objects *o, int64_t max_batches) {
  int64_t done;
  for (done = 0; max_batches < 0 || done < max_batches; ++done) {
    acc_tensor_list *batch = NULL;
    acc_tensor *bx = NULL, *by = NULL, *logits = NULL, *loss = NULL, *all = NULL, *total = NULL;
    double value = 0;
    uint64_t bits;
    char label[64];
    CHECK(acc_dataloader_next(o->dl, &batch));
    if (!batch) return 0;
    CHECK(acc_tensor_list_get(batch, 0, &bx));
    CHECK(acc_tensor_list_get(batch, 1, &by));
    CHECK(acc_accumulate_begin(acc));
    CHECK(acc_model_forward1(o->model, bx, ACC_FORWARD_DEFAULT, &logits));
    CHECK(acc_loss_cross_entropy(logits, by, ACC_REDUCTION_MEAN, 0.0, &loss));
    CHECK(acc_backward(acc, loss));
    CHECK(acc_optimizer_step(o->opt));
    CHECK(acc_scheduler_step(o->sched));
    CHECK(acc_optimizer_zero_grad(o->opt));
    CHECK(acc_accumulate_end(acc));
    CHECK(acc_tensor_item(loss, &value));
    memcpy(&bits, &value, 8);
    fprintf(f, "loss %" PRId64 " %016" PRIx64 "\n", g_steps, bits);
    CHECK(acc_gather(acc, loss, "loss", &all));
    snprintf(label, sizeof label, "gather %" PRId64, g_steps);
    put_floats(f, label, all);
    CHECK(acc_reduce(acc, logits, ACC_REDUCTION_SUM, "logits", &total));
    snprintf(label, sizeof label, "reduce %" PRId64, g_steps);
    put_floats(f, label, total);
    ++g_steps;
    acc_tensor_free(bx); acc_tensor_free(by); acc_tensor_free(logits); acc_tensor_free(loss);
    acc_tensor_free(all); acc_tensor_free(total);
    acc_tensor_list_free(batch);
  }
  return 1;
}

static void put_params(FILE *f, acc_model *model) {
  acc_string_list *names = NULL;
  size_t nnames = 0, k;
  CHECK(acc_model_parameter_names(model, &names));
  CHECK(acc_string_list_size(names, &nnames));
  for (k = 0; k < nnames; ++k) {
    const char *name = NULL;
    acc_tensor *p = NULL;
    char label[256];
    CHECK(acc_string_list_get(names, k, &name));
    CHECK(acc_model_parameter(model, name, &p));
    snprintf(label, sizeof label, "param %s", name);
    put_floats(f, label, p);
    acc_tensor_free(p);
  }
  acc_string_list_free(names);
}

/* The registered state's file as the checkpoint holds it, in hex: the languages must write the same
 * bytes, not only read back their own. */
static void put_file_hex(FILE *f, const char *label, const char *path) {
  FILE *in = fopen(path, "rb");
  int c;
  if (!in) { perror(path); exit(1); }
  fprintf(f, "%s ", label);
  while ((c = fgetc(in)) != EOF) fprintf(f, "%02x", c);
  fprintf(f, "\n");
  fclose(in);
}

/* The rest of the epoch after the checkpoint and the weights it ends with, as one string. */
static char *finish_epoch(acc_accelerator *acc, const objects *o) {
  char *text = NULL;
  size_t size = 0;
  FILE *m = open_memstream(&text, &size);
  if (!m) { perror("open_memstream"); exit(1); }
  train(m, acc, o, -1);
  put_params(m, o->model);
  fclose(m);
  return text;
}

int main(int argc, char **argv) {
  float x[N * D];
  int64_t y[N], i, j, rank = 0;
  const int64_t xdims[2] = {N, D}, ydims[1] = {N};
  acc_options *ao = NULL;
  acc_accelerator *acc = NULL;
  acc_tensor *xt = NULL, *yt = NULL;
  const acc_tensor *fields[2];
  acc_dataset *ds = NULL;
  objects first, resumed;
  char path[4096], ckpt[4096];
  char *continued_text, *resumed_text;
  FILE *f;
  int epoch;
  if (argc != 2) { fprintf(stderr, "usage: %s OUT_FILE\n", argv[0]); return 2; }
  snprintf(ckpt, sizeof ckpt, "%s.ckpt", argv[1]);

  for (i = 0; i < N; ++i) {
    for (j = 0; j < D; ++j) x[i * D + j] = (float)((i * 7 + j * 3) % 17 - 8) / 16.0f;
    y[i] = (i * 5) % C;
  }
  CHECK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &ao));
  CHECK(acc_options_set_bool(ao, "cpu", 1));
  CHECK(acc_options_set_int(ao, "seed", 1234));
  CHECK(acc_accelerator_create(ao, &acc));
  CHECK(acc_accelerator_process_index(acc, &rank));
  CHECK(acc_register_for_checkpointing(acc, save_steps, load_steps, NULL, NULL));
  CHECK(acc_tensor_from_host(x, sizeof x, xdims, 2, ACC_DTYPE_FLOAT32, &xt));
  CHECK(acc_tensor_from_host(y, sizeof y, ydims, 1, ACC_DTYPE_INT64, &yt));
  fields[0] = xt;
  fields[1] = yt;
  CHECK(acc_dataset_from_tensors(fields, 2, &ds));
  first = make_objects(acc, ds);

  snprintf(path, sizeof path, "%s.rank%" PRId64, argv[1], rank);
  f = fopen(path, "w");
  if (!f) { perror(path); return 1; }
  for (epoch = 0; epoch < EPOCHS; ++epoch) train(f, acc, &first, -1);
  put_params(f, first.model);

  /* A checkpoint in the middle of the next epoch, then the rest of that epoch twice: uninterrupted,
   * and on fresh objects (initialised from a scrambled RNG) restored from the checkpoint. */
  train(f, acc, &first, STEPS_BEFORE_SAVE);
  CHECK(acc_save_state(acc, ckpt, NULL));
  fprintf(f, "saved at step %" PRId64 "\n", g_steps);
  snprintf(path, sizeof path, "%s/custom_checkpoint_0.bin", ckpt);
  put_file_hex(f, "custom_checkpoint_0.bin", path);
  snprintf(path, sizeof path, "%s.rank%" PRId64, argv[1], rank);
  continued_text = finish_epoch(acc, &first);
  fprintf(f, "continued\n%s", continued_text);

  CHECK(acc_free_memory(acc));
  CHECK(acc_set_seed(98765));
  g_steps = -1;
  resumed = make_objects(acc, ds);
  CHECK(acc_load_state(acc, ckpt, NULL));
  fprintf(f, "resumed at step %" PRId64 "\n", g_steps);
  resumed_text = finish_epoch(acc, &resumed);
  fprintf(f, "resumed\n%s", resumed_text);
  fclose(f);
  if (strcmp(continued_text, resumed_text) != 0) {
    fprintf(stderr, "rank %" PRId64 ": the resumed run differs from the uninterrupted one (see %s)\n", rank, path);
    return 1;
  }
  free(continued_text);
  free(resumed_text);

  free_objects(&first);
  free_objects(&resumed);
  acc_tensor_free(xt); acc_tensor_free(yt);
  acc_dataset_free(ds);
  acc_options_free(ao);
  acc_accelerator_free(acc);
  return 0;
}
