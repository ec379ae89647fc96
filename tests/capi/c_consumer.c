/* A plain C11 program over accelerate.h: proves the header is clean C (built with -std=c11
 * -Wall -Wextra -Werror -pedantic) and that a C consumer links with -laccelerate alone. */
#include <stdio.h>
#include <string.h>

#include "accelerate.h"

#define CHECK(expr)                                                                         \
  do {                                                                                      \
    acc_status s_ = (expr);                                                                 \
    if (s_ != ACC_OK) {                                                                     \
      fprintf(stderr, "%s failed: %s: %s\n", #expr, acc_status_name(s_), acc_last_error_message()); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(void) {
  acc_model *model = NULL;
  acc_optimizer *opt = NULL;
  acc_tensor *x = NULL, *y = NULL, *target = NULL, *loss = NULL;
  const float xs[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float ts[2] = {1.0f, -1.0f};
  const int64_t x_dims[2] = {2, 2}, t_dims[2] = {2, 1};
  double first = 0.0, last = 0.0;
  int step;

  CHECK(acc_check_abi(ACC_ABI_VERSION));
  CHECK(acc_set_seed(0));
  CHECK(acc_model_from_spec("[{\"type\":\"linear\",\"in_features\":2,\"out_features\":1}]", &model));
  CHECK(acc_optimizer_create(model, "sgd", NULL, &opt));
  CHECK(acc_optimizer_set_lr(opt, 0, 0.02));
  CHECK(acc_tensor_from_host(xs, sizeof xs, x_dims, 2, ACC_DTYPE_FLOAT32, &x));
  CHECK(acc_tensor_from_host(ts, sizeof ts, t_dims, 2, ACC_DTYPE_FLOAT32, &target));
  for (step = 0; step < 50; ++step) {
    CHECK(acc_optimizer_zero_grad(opt));
    CHECK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &y));
    CHECK(acc_loss_mse(y, target, ACC_REDUCTION_MEAN, &loss));
    CHECK(acc_tensor_item(loss, step == 0 ? &first : &last));
    CHECK(acc_tensor_backward(loss));
    CHECK(acc_optimizer_step(opt));
    acc_tensor_free(y);
    acc_tensor_free(loss);
  }
  if (acc_tensor_from_host(xs, 3, x_dims, 2, ACC_DTYPE_FLOAT32, &y) != ACC_ERR_INVALID_ARGUMENT ||
      strstr(acc_last_error_message(), "nbytes") == NULL) {
    fprintf(stderr, "a bad nbytes was not reported\n");
    return 1;
  }
  acc_tensor_free(x);
  acc_tensor_free(target);
  acc_optimizer_free(opt);
  acc_model_free(model);
  printf("c consumer: loss %.4f -> %.4f\n", first, last);
  return last < first ? 0 : 1;
}
