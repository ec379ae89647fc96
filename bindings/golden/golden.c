/* golden.c — the golden scenario through the C API (see README.md): writes the reference that the
 * Java, C# and Go tests must reproduce bit for bit.  Usage: acc_golden OUT_FILE */
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

enum { N = 64, D = 8, C = 3, EPOCHS = 2 };
static const char *kSpec =
    "[{\"type\":\"linear\",\"in_features\":8,\"out_features\":16},{\"type\":\"relu\"},"
    "{\"type\":\"linear\",\"in_features\":16,\"out_features\":3}]";

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

int main(int argc, char **argv) {
  float x[N * D];
  int64_t y[N], i, j, rank = 0, steps = 0;
  const int64_t xdims[2] = {N, D}, ydims[1] = {N};
  acc_options *ao = NULL, *lo = NULL, *oo = NULL, *so = NULL;
  acc_accelerator *acc = NULL;
  acc_tensor *xt = NULL, *yt = NULL;
  const acc_tensor *fields[2];
  acc_dataset *ds = NULL;
  acc_dataloader *dl = NULL;
  acc_model *model = NULL;
  acc_optimizer *opt = NULL;
  acc_scheduler *sched = NULL;
  acc_string_list *names = NULL;
  size_t nnames = 0, k;
  char path[4096];
  FILE *f;
  int epoch;
  if (argc != 2) { fprintf(stderr, "usage: %s OUT_FILE\n", argv[0]); return 2; }

  for (i = 0; i < N; ++i) {
    for (j = 0; j < D; ++j) x[i * D + j] = (float)((i * 7 + j * 3) % 17 - 8) / 16.0f;
    y[i] = (i * 5) % C;
  }
  CHECK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &ao));
  CHECK(acc_options_set_bool(ao, "cpu", 1));
  CHECK(acc_options_set_int(ao, "seed", 1234));
  CHECK(acc_accelerator_create(ao, &acc));
  CHECK(acc_accelerator_process_index(acc, &rank));
  CHECK(acc_tensor_from_host(x, sizeof x, xdims, 2, ACC_DTYPE_FLOAT32, &xt));
  CHECK(acc_tensor_from_host(y, sizeof y, ydims, 1, ACC_DTYPE_INT64, &yt));
  fields[0] = xt;
  fields[1] = yt;
  CHECK(acc_dataset_from_tensors(fields, 2, &ds));
  CHECK(acc_options_create(ACC_OPTIONS_DATALOADER, &lo));
  CHECK(acc_options_set_int(lo, "batch_size", 8));
  CHECK(acc_options_set_bool(lo, "shuffle", 1));
  CHECK(acc_options_set_int(lo, "seed", 7));
  CHECK(acc_dataloader_create(ds, lo, &dl));
  CHECK(acc_model_from_spec(kSpec, &model));
  CHECK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo));
  CHECK(acc_options_set_double(oo, "lr", 0.01));
  CHECK(acc_optimizer_create(model, "adamw", oo, &opt));
  CHECK(acc_options_create(ACC_OPTIONS_SCHEDULER, &so));
  CHECK(acc_options_set_int(so, "num_warmup_steps", 2));
  CHECK(acc_options_set_int(so, "num_training_steps", 20));
  CHECK(acc_scheduler_create(opt, "linear", so, &sched));
  CHECK(acc_prepare(acc, &model, &opt, &dl, &sched));

  snprintf(path, sizeof path, "%s.rank%" PRId64, argv[1], rank);
  f = fopen(path, "w");
  if (!f) { perror(path); return 1; }
  for (epoch = 0; epoch < EPOCHS; ++epoch) {
    acc_tensor_list *batch = NULL;
    for (;;) {
      acc_tensor *bx = NULL, *by = NULL, *logits = NULL, *loss = NULL, *all = NULL, *total = NULL;
      double value = 0;
      uint64_t bits;
      char label[64];
      CHECK(acc_dataloader_next(dl, &batch));
      if (!batch) break;
      CHECK(acc_tensor_list_get(batch, 0, &bx));
      CHECK(acc_tensor_list_get(batch, 1, &by));
      CHECK(acc_accumulate_begin(acc));
      CHECK(acc_model_forward1(model, bx, ACC_FORWARD_DEFAULT, &logits));
      CHECK(acc_loss_cross_entropy(logits, by, ACC_REDUCTION_MEAN, 0.0, &loss));
      CHECK(acc_backward(acc, loss));
      CHECK(acc_optimizer_step(opt));
      CHECK(acc_scheduler_step(sched));
      CHECK(acc_optimizer_zero_grad(opt));
      CHECK(acc_accumulate_end(acc));
      CHECK(acc_tensor_item(loss, &value));
      memcpy(&bits, &value, 8);
      fprintf(f, "loss %" PRId64 " %016" PRIx64 "\n", steps, bits);
      CHECK(acc_gather(acc, loss, "loss", &all));
      snprintf(label, sizeof label, "gather %" PRId64, steps);
      put_floats(f, label, all);
      CHECK(acc_reduce(acc, logits, ACC_REDUCTION_SUM, "logits", &total));
      snprintf(label, sizeof label, "reduce %" PRId64, steps);
      put_floats(f, label, total);
      ++steps;
      acc_tensor_free(bx); acc_tensor_free(by); acc_tensor_free(logits); acc_tensor_free(loss);
      acc_tensor_free(all); acc_tensor_free(total);
      acc_tensor_list_free(batch);
    }
  }
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
  fclose(f);
  acc_string_list_free(names);
  acc_tensor_free(xt); acc_tensor_free(yt);
  acc_dataset_free(ds); acc_dataloader_free(dl); acc_model_free(model); acc_optimizer_free(opt);
  acc_scheduler_free(sched);
  acc_options_free(ao); acc_options_free(lo); acc_options_free(oo); acc_options_free(so);
  acc_accelerator_free(acc);
  return 0;
}
