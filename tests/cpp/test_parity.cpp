// The same fp32 training steps through the C API and through plain libtorch, with the same seed,
// must give bit-identical weights: the C API adds no arithmetic of its own.
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "accelerate.h"
#include "optim/python_rules.h"

namespace {

constexpr int64_t kBatch = 16, kIn = 8, kHidden = 16, kOut = 4;
constexpr int kSteps = 25;

struct Data {
  at::Tensor x, y;
};

Data make_data() {
  torch::manual_seed(123);
  return {torch::randn({kSteps, kBatch, kIn}), torch::randint(0, kOut, {kSteps, kBatch})};
}

std::vector<at::Tensor> train_with_libtorch(const Data& data) {
  torch::manual_seed(5);
  torch::nn::Sequential net(torch::nn::Linear(kIn, kHidden), torch::nn::ReLU(), torch::nn::Linear(kHidden, kOut));
  // AdamW as PyTorch's Python steps it, the library's rule: from 2.0 torch::optim's C++ AdamW rounds
  // its first moment otherwise (optim/python_rules.h; the optimizer tests hold the rule to PyTorch's).
  acc::PythonAdamW opt(net->parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.05));
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(data.x[s]), data.y[s]);
    loss.backward();
    opt.step();
  }
  std::vector<at::Tensor> out;
  for (auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

#define OK(expr) ASSERT_EQ((expr), ACC_OK) << #expr << ": " << acc_last_error_message()

void train_with_capi(const Data& data, std::vector<at::Tensor>& out) {
  OK(acc_set_seed(5));
  acc_model* model = nullptr;
  OK(acc_model_from_spec(R"([{"type":"linear","in_features":8,"out_features":16},{"type":"relu"},
                             {"type":"linear","in_features":16,"out_features":4}])",
                         &model));
  acc_options* opts = nullptr;
  OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opts));
  OK(acc_options_set_double(opts, "lr", 0.01));
  OK(acc_options_set_double(opts, "weight_decay", 0.05));
  acc_optimizer* opt = nullptr;
  OK(acc_optimizer_create(model, "adamw", opts, &opt));
  for (int s = 0; s < kSteps; ++s) {
    at::Tensor xs = data.x[s].contiguous(), ys = data.y[s].contiguous();
    acc_tensor *x = nullptr, *y = nullptr, *logits = nullptr, *loss = nullptr;
    OK(acc_tensor_from_host(xs.data_ptr(), xs.nbytes(), xs.sizes().data(), 2, ACC_DTYPE_FLOAT32, &x));
    OK(acc_tensor_from_host(ys.data_ptr(), ys.nbytes(), ys.sizes().data(), 1, ACC_DTYPE_INT64, &y));
    OK(acc_optimizer_zero_grad(opt));
    OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
    OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    OK(acc_tensor_backward(loss));
    OK(acc_optimizer_step(opt));
    for (acc_tensor* t : {x, y, logits, loss}) acc_tensor_free(t);
  }
  for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
    acc_tensor* p = nullptr;
    OK(acc_model_parameter(model, name, &p));
    at::Tensor host = at::empty({0});
    int64_t numel = 0;
    OK(acc_tensor_numel(p, &numel));
    host = at::empty({numel});
    OK(acc_tensor_to_host(p, host.data_ptr(), host.nbytes()));
    out.push_back(host);
    acc_tensor_free(p);
  }
  acc_options_free(opts);
  acc_optimizer_free(opt);
  acc_model_free(model);
}

}  // namespace

TEST(Parity, CApiTrainingIsBitIdenticalToLibtorch) {
  const Data data = make_data();
  auto reference = train_with_libtorch(data);
  std::vector<at::Tensor> ours;
  train_with_capi(data, ours);
  ASSERT_EQ(ours.size(), reference.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(torch::equal(ours[i], reference[i].flatten())) << "parameter " << i << " differs; max diff "
                                                               << (ours[i] - reference[i].flatten()).abs().max();
  }
  // And training did move the weights (the comparison is not between two initial states).
  torch::manual_seed(5);
  torch::nn::Linear fresh(kIn, kHidden);
  EXPECT_FALSE(torch::equal(fresh->weight.flatten(), ours[0]));
}
