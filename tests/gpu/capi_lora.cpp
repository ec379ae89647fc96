// LoRA on a GPU through the C API: trainable token rows (trainable_token_indices) on a model moved
// to CUDA after the adapters were added train as on the CPU, the embedding's own weight untouched.
#include <cmath>
#include <string>
#include <vector>

#include "gpu_support.h"

using acc_gpu::parameter;

namespace {

const char* const kTiedLm = R"([{"type":"embedding","num_embeddings":10,"embedding_dim":6},
  {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},{"type":"tied_linear","tie_to":0}])";

// The tied LM with LoRA on layer 1 and rows 7, 2, 9 trained for three SGD steps on `device`.
acc_model* trained(const char* device) {
  EXPECT_EQ(acc_set_seed(3), ACC_OK);
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(kTiedLm, &m), ACC_OK) << acc_last_error_message();
  acc_options* lora = acc_test::lora_options(2, 4);
  EXPECT_EQ(acc_options_set(lora, "trainable_token_indices", "7,2,9"), ACC_OK);
  EXPECT_EQ(acc_model_add_lora(m, "1", lora, nullptr), ACC_OK) << acc_last_error_message();
  acc_options_free(lora);
  EXPECT_EQ(acc_model_to(m, device, ACC_DTYPE_UNDEFINED), ACC_OK) << acc_last_error_message();
  acc_options* sgd = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &sgd), ACC_OK);
  EXPECT_EQ(acc_options_set_double(sgd, "lr", 0.5), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(m, "sgd", sgd, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(sgd);
  for (int step = 0; step < 3 && opt; ++step) {
    std::vector<int64_t> ids, next;
    for (int i = 0; i < 12; ++i) {
      ids.push_back((7 * i + 3 * step) % 10);
      next.push_back((ids.back() * 3 + 1) % 10);
    }
    acc_tensor* x = acc_gpu::longs_on(ids, {3, 4}, device);
    acc_tensor* y = acc_gpu::longs_on(next, {12}, device);
    acc_tensor *out = nullptr, *flat = nullptr, *loss = nullptr;
    const int64_t dims[] = {-1, 10};
    EXPECT_EQ(acc_model_forward1(m, x, 0, &out), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_tensor_reshape(out, dims, 2, &flat), ACC_OK);
    EXPECT_EQ(acc_loss_cross_entropy(flat, y, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK);
    EXPECT_EQ(acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    for (acc_tensor* t : {x, y, out, flat, loss}) acc_tensor_free(t);
  }
  acc_optimizer_free(opt);
  return m;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

}  // namespace

TEST(GpuLora, TrainableTokensTrainOnCudaAsOnTheCpu) {
  ACC_REQUIRE_CUDA();
  acc_model* cpu = trained("cpu");
  acc_model* cuda = trained("cuda:0");
  const char* delta = "0.token_adapter.trainable_tokens_delta";
  // The same arithmetic up to CUDA's rounding of the products.
  EXPECT_LT(max_difference(parameter(cuda, delta), parameter(cpu, delta)), 1e-5);
  EXPECT_LT(max_difference(parameter(cuda, "1.lora_B.weight"), parameter(cpu, "1.lora_B.weight")), 1e-5);
  EXPECT_EQ(parameter(cuda, "0.weight"), parameter(cpu, "0.weight")) << "the embedding's own weight trained";
  // The rows started as the embedding's rows 7, 2, 9 and trained away from them.
  const std::vector<float> weight = parameter(cuda, "0.weight");
  std::vector<float> start;
  for (int row : {7, 2, 9}) start.insert(start.end(), weight.begin() + row * 6, weight.begin() + row * 6 + 6);
  EXPECT_GT(max_difference(parameter(cuda, delta), start), 1e-3);
  acc_model_free(cpu);
  acc_model_free(cuda);
}
