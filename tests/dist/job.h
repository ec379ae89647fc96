// The job's accelerator, created once per process by test_dist.cpp's environment and shared by every
// multi-process test file (a process joins the process group once).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "accelerate.h"

extern acc_accelerator* g_acc;
extern int64_t g_rank, g_world;

// Two copies of a layer-spec model made from the same seed, each with its SGD optimizer: `local`
// computes a reference on this process alone, `model` is for the accelerator to prepare.
struct TwinModels {
  acc_model* local = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* local_opt = nullptr;
  acc_optimizer* opt = nullptr;

  TwinModels(const char* spec, uint64_t seed, double local_lr, double lr) {
    make(spec, seed, local_lr, &local, &local_opt);
    make(spec, seed, lr, &model, &opt);
  }
  ~TwinModels() {
    for (acc_optimizer* o : {local_opt, opt}) acc_optimizer_free(o);
    for (acc_model* m : {local, model}) acc_model_free(m);
  }
  TwinModels(const TwinModels&) = delete;
  TwinModels& operator=(const TwinModels&) = delete;

 private:
  static void make(const char* spec, uint64_t seed, double lr, acc_model** m, acc_optimizer** o) {
    EXPECT_EQ(acc_set_seed(seed), ACC_OK);
    EXPECT_EQ(acc_model_from_spec(spec, m), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_create(*m, "sgd", nullptr, o), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_set_lr(*o, 0, lr), ACC_OK);
  }
};
