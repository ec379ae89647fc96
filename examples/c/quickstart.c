/* quickstart.c — the C API in one page: build a model from a layer spec, train it with AdamW and
 * a linear warm-up schedule on a toy problem, evaluate, save it as TorchScript. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelerate.h"

#define CHECK(expr)                                                                              \
  do {                                                                                           \
    acc_status status_ = (expr);                                                                 \
    if (status_ != ACC_OK) {                                                                     \
      fprintf(stderr, "%s: %s\n  at %s\n", acc_status_name(status_), acc_last_error_message(), #expr); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

enum { N = 512, FEATURES = 2, STEPS = 200 };

int main(int argc, char **argv) {
  const char *save_path = argc > 1 ? argv[1] : NULL;
  static float xs[N * FEATURES];
  static int64_t labels[N];
  const int64_t x_dims[2] = {N, FEATURES}, y_dims[1] = {N};
  acc_model *model = NULL;
  acc_options *opts = NULL, *sched_opts = NULL;
  acc_optimizer *opt = NULL;
  acc_scheduler *sched = NULL;
  acc_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL, *pred = NULL;
  double loss_value = 0.0;
  int64_t correct = 0;
  int i, step;

  if (argc > 2 || (save_path && (!strcmp(save_path, "--help") || !strcmp(save_path, "-h")))) {
    fputs("usage: quickstart [MODEL.pt]  (trains a small classifier; saves it as TorchScript if a file is named)\n",
          argc > 2 ? stderr : stdout);
    return argc > 2 ? 2 : 0;
  }

  /* Two interleaved spirals would be harder; two rings are enough to need a hidden layer. */
  srand(1);
  for (i = 0; i < N; ++i) {
    double angle = 6.283185307 * rand() / RAND_MAX, radius = (i % 2) ? 2.0 : 0.5;
    xs[2 * i] = (float)(radius * cos(angle) + 0.1 * rand() / RAND_MAX);
    xs[2 * i + 1] = (float)(radius * sin(angle) + 0.1 * rand() / RAND_MAX);
    labels[i] = i % 2;
  }
  CHECK(acc_tensor_from_host(xs, sizeof xs, x_dims, 2, ACC_DTYPE_FLOAT32, &x));
  CHECK(acc_tensor_from_host(labels, sizeof labels, y_dims, 1, ACC_DTYPE_INT64, &y));

  CHECK(acc_set_seed(42));
  CHECK(acc_model_from_spec("[{\"type\":\"linear\",\"in_features\":2,\"out_features\":32},"
                            " {\"type\":\"relu\"},"
                            " {\"type\":\"linear\",\"in_features\":32,\"out_features\":2}]",
                            &model));

  CHECK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opts));
  CHECK(acc_options_set_double(opts, "lr", 0.05));
  CHECK(acc_optimizer_create(model, "adamw", opts, &opt));
  CHECK(acc_options_create(ACC_OPTIONS_SCHEDULER, &sched_opts));
  CHECK(acc_options_set_int(sched_opts, "num_warmup_steps", 10));
  CHECK(acc_options_set_int(sched_opts, "num_training_steps", STEPS));
  CHECK(acc_scheduler_create(opt, "linear", sched_opts, &sched));

  for (step = 0; step < STEPS; ++step) {
    CHECK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
    CHECK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    CHECK(acc_tensor_backward(loss));
    CHECK(acc_optimizer_step(opt));
    CHECK(acc_scheduler_step(sched));
    CHECK(acc_optimizer_zero_grad(opt));
    CHECK(acc_tensor_item(loss, &loss_value));
    acc_tensor_free(logits);
    acc_tensor_free(loss);
    if (step % 50 == 0) printf("step %3d  loss %.4f\n", step, loss_value);
  }

  CHECK(acc_model_set_training(model, 0));
  CHECK(acc_model_forward1(model, x, ACC_FORWARD_NO_GRAD, &logits));
  CHECK(acc_tensor_argmax(logits, 1, 0, &pred));
  CHECK(acc_tensor_count_equal(pred, y, &correct));
  printf("final loss %.4f, accuracy %.1f%%\n", loss_value, 100.0 * (double)correct / N);
  if (save_path) CHECK(acc_model_save_torchscript(model, save_path));

  acc_tensor_free(pred);
  acc_tensor_free(logits);
  acc_tensor_free(x);
  acc_tensor_free(y);
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);
  acc_options_free(sched_opts);
  acc_options_free(opts);
  acc_model_free(model);
  return correct > N * 9 / 10 ? 0 : 2;
}
