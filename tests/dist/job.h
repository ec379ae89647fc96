// The job's accelerator, created once per process by test_dist.cpp's environment and shared by every
// multi-process test file (a process joins the process group once).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../capi/support.h"
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

// A small network of 3 inputs and 2 outputs.
inline const char* const kDistNet = R"([{"type":"linear","in_features":3,"out_features":4},{"type":"tanh"},
                                       {"type":"linear","in_features":4,"out_features":2}])";

namespace acc_test {

// Floats recorded by Python's float.hex() in a fixture.
inline std::vector<float> hex_floats(const nlohmann::json& values) {
  std::vector<float> out;
  for (const auto& v : values) out.push_back(static_cast<float>(std::strtod(v.get<std::string>().c_str(), nullptr)));
  return out;
}

// Whether this libtorch's Reducer needs a static graph's first step to average gradients (2.x:
// no no_sync micro-step before it; the library refuses one).
inline bool static_graph_needs_an_averaging_first_step() {
  return nlohmann::json::parse(acc_build_info())["libtorch"].get<std::string>().rfind("1.", 0) != 0;
}

}  // namespace acc_test

// A parameter's values.
inline std::vector<float> weights(acc_model* m, const char* name) {
  acc_tensor* w = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name, &w), ACC_OK);
  auto v = acc_test::to_floats(w);
  acc_tensor_free(w);
  return v;
}

// One step of `model` on `rows` rows of inputs x (3 features) and targets y (2): forward, MSE,
// backward through `acc` (null: a plain backward), then opt's step and zero_grad (opt null: none).
inline void train_step(acc_model* model, acc_optimizer* opt, const std::vector<float>& x, const std::vector<float>& y,
                       int64_t rows, acc_accelerator* acc) {
  acc_tensor* xt = acc_test::floats(x, {rows, 3});
  acc_tensor* yt = acc_test::floats(y, {rows, 2});
  acc_tensor *out = nullptr, *loss = nullptr;
  ASSERT_EQ(acc_model_forward1(model, xt, ACC_FORWARD_DEFAULT, &out), ACC_OK) << acc_last_error_message();
  yt = acc_test::on_device_of(out, yt);
  ASSERT_EQ(acc_loss_mse(out, yt, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  ASSERT_EQ(acc ? acc_backward(acc, loss) : acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
  if (opt) ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
  if (opt) ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
  for (acc_tensor* t : {xt, yt, out, loss}) acc_tensor_free(t);
}
