// LoRA on a GPU through the C API: trainable token rows (trainable_token_indices) on a model moved
// to CUDA after the adapters were added train as on the CPU, the embedding's own weight untouched;
// QLoRA's 4-bit layers and LLM.int8 layers quantise and train on CUDA as on the CPU.
#include <cmath>
#include <initializer_list>
#include <string>
#include <tuple>
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

namespace {

// A layer spec saved as TorchScript (linear 64->32, relu, linear 32->8), loaded on `device`, its
// linear layers quantised as `config` (a BitsAndBytesConfig) asks, the last one too, LoRA r=4 on
// both, three SGD steps on an MSE loss in the given mode.
acc_model* quantised_and_trained(const std::string& file, const char* device, const std::string& config,
                                 int training = 1) {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript(file.c_str(), &m), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_model_to(m, device, ACC_DTYPE_UNDEFINED), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_model_quantize(m, config.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_model_set_training(m, training), ACC_OK);
  EXPECT_EQ(acc_set_seed(7), ACC_OK);
  acc_options* lora = acc_test::lora_options(4, 8);
  EXPECT_EQ(acc_model_add_lora(m, "0,2", lora, nullptr), ACC_OK) << acc_last_error_message();
  acc_options_free(lora);
  acc_options* sgd = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &sgd), ACC_OK);
  EXPECT_EQ(acc_options_set_double(sgd, "lr", 0.1), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(m, "sgd", sgd, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(sgd);
  for (int step = 0; step < 3 && opt; ++step) {
    std::vector<float> values = acc_gpu::uniform(5 * 64, 11 + step);
    for (size_t row = 0; row < 5; ++row) values[row * 64 + 9] *= 20.0f;  // an outlier column for LLM.int8
    acc_tensor* x = acc_gpu::floats_on(values, {5, 64}, device);
    acc_tensor* y = acc_gpu::floats_on(acc_gpu::uniform(5 * 8, 21 + step), {5, 8}, device);
    acc_tensor *out = nullptr, *loss = nullptr;
    EXPECT_EQ(acc_model_forward1(m, x, 0, &out), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    EXPECT_EQ(acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    for (acc_tensor* t : {x, y, out, loss}) acc_tensor_free(t);
  }
  acc_optimizer_free(opt);
  return m;
}

std::string saved_spec(const char* name) {
  const std::string file = acc_gpu::work_dir(name) + "/model.pt";
  acc_model* spec = nullptr;
  EXPECT_EQ(acc_set_seed(5), ACC_OK);
  EXPECT_EQ(acc_model_from_spec(R"([{"type":"linear","in_features":64,"out_features":32},{"type":"relu"},
    {"type":"linear","in_features":32,"out_features":8}])",
                                &spec),
            ACC_OK);
  EXPECT_EQ(acc_model_save_torchscript(spec, file.c_str()), ACC_OK) << acc_last_error_message();
  acc_model_free(spec);
  return file;
}

// The state-dict entries `names` of both models, equal bit for bit (exact operations).
void expect_same_entries(acc_model* cpu, acc_model* cuda, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    acc_tensor *a = nullptr, *b = nullptr;
    ASSERT_EQ(acc_model_parameter(cpu, name, &a), ACC_OK) << name << ": " << acc_last_error_message();
    ASSERT_EQ(acc_model_parameter(cuda, name, &b), ACC_OK) << name;
    acc_tensor *fa = acc_gpu::to(a, "cpu", ACC_DTYPE_FLOAT32), *fb = acc_gpu::to(b, "cpu", ACC_DTYPE_FLOAT32);
    EXPECT_EQ(acc_test::to_floats(fb), acc_test::to_floats(fa)) << name;
    for (acc_tensor* t : {a, b, fa, fb}) acc_tensor_free(t);
  }
}

}  // namespace

TEST(GpuFourBit, QloraTrainsOnCudaAsOnTheCpu) {
  ACC_REQUIRE_CUDA();
  const std::string file = saved_spec("four_bit");
  const char* config = R"({"load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "llm_int8_skip_modules": []})";
  acc_model* cpu = quantised_and_trained(file, "cpu", config);
  acc_model* cuda = quantised_and_trained(file, "cuda:0", config);
  // The same codes and maxima, the adapters up to CUDA's rounding of the products.
  expect_same_entries(cpu, cuda, {"0.weight", "0.weight.absmax", "2.weight", "2.weight.absmax"});
  for (const char* name : {"0.lora_A.weight", "0.lora_B.weight", "2.lora_B.weight"})
    EXPECT_LT(max_difference(parameter(cuda, name), parameter(cpu, name)), 1e-5) << name;
  EXPECT_GT(max_difference(parameter(cuda, "2.lora_B.weight"), std::vector<float>(8 * 4, 0.0f)), 1e-4);
  acc_model_free(cpu);
  acc_model_free(cuda);
}

// PEFT's replace_lora_weights_loftq on CUDA, where PEFT computes it: B A, LoftQ's approximation of
// each 4-bit layer's quantisation error, the CPU's up to the SVD's rounding (the factors themselves
// may differ in the signs of singular vectors).
TEST(GpuFourBit, ReplaceLoraWeightsLoftqOnCudaAsOnTheCpu) {
  ACC_REQUIRE_CUDA();
  const std::string file = saved_spec("four_bit_loftq");
  const std::string weights = acc_gpu::work_dir("four_bit_loftq") + "/model.safetensors";
  {
    acc_model* m = nullptr;
    ASSERT_EQ(acc_model_load_torchscript(file.c_str(), &m), ACC_OK);
    acc_tensor_list* state = nullptr;
    ASSERT_EQ(acc_model_state_dict(m, &state), ACC_OK);
    ASSERT_EQ(acc_tensor_list_save_safetensors(state, weights.c_str()), ACC_OK) << acc_last_error_message();
    acc_tensor_list_free(state);
    acc_model_free(m);
  }
  const char* config = R"({"load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "llm_int8_skip_modules": []})";
  auto product = [&](const char* device, const char* layer, int64_t out, int64_t in) {
    acc_model* m = nullptr;
    EXPECT_EQ(acc_model_load_torchscript(file.c_str(), &m), ACC_OK);
    EXPECT_EQ(acc_model_to(m, device, ACC_DTYPE_UNDEFINED), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_model_quantize(m, config, nullptr), ACC_OK) << acc_last_error_message();
    acc_options* lora = acc_test::lora_options(4, 8);
    EXPECT_EQ(acc_model_add_lora(m, "0,2", lora, nullptr), ACC_OK) << acc_last_error_message();
    acc_options_free(lora);
    size_t count = 0;
    EXPECT_EQ(acc_model_replace_lora_weights_loftq(m, weights.c_str(), nullptr, nullptr, nullptr, &count), ACC_OK)
        << acc_last_error_message();
    EXPECT_EQ(count, 2u);
    const std::vector<float> b = parameter(m, (std::string(layer) + ".lora_B.weight").c_str());
    const std::vector<float> a = parameter(m, (std::string(layer) + ".lora_A.weight").c_str());
    std::vector<float> ba(static_cast<size_t>(out * in), 0.0f);
    for (int64_t i = 0; i < out; ++i)
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t j = 0; j < in; ++j) ba[i * in + j] += b[i * 4 + k] * a[k * in + j];
    acc_model_free(m);
    return ba;
  };
  for (const auto& [layer, out, in] : {std::tuple<const char*, int64_t, int64_t>{"0", 32, 64}, {"2", 8, 32}}) {
    const std::vector<float> cpu = product("cpu", layer, out, in), cuda = product("cuda:0", layer, out, in);
    EXPECT_LT(max_difference(cuda, cpu), 1e-4) << layer;
    EXPECT_GT(max_difference(cpu, std::vector<float>(cpu.size(), 0.0f)), 1e-4) << layer << ": no correction";
  }
}

// LLM.int8 on CUDA: bitsandbytes multiplies in int8 there in training too (MatMul8bitLt), as the
// CPU does in evaluation mode; the codes and scales are the CPU's, the adapters trained through the
// int8 product (outlier column included) the same up to rounding.
TEST(GpuEightBit, Int8LayersTrainOnCudaAsTheCpuInItsInt8Mode) {
  ACC_REQUIRE_CUDA();
  const std::string file = saved_spec("eight_bit");
  const char* config = R"({"load_in_8bit": true, "llm_int8_skip_modules": []})";
  acc_model* cpu = quantised_and_trained(file, "cpu", config, /*training=*/0);
  acc_model* cuda = quantised_and_trained(file, "cuda:0", config);
  expect_same_entries(cpu, cuda, {"0.weight", "0.SCB", "2.weight", "2.SCB"});
  for (const char* name : {"0.lora_A.weight", "0.lora_B.weight", "2.lora_B.weight"})
    EXPECT_LT(max_difference(parameter(cuda, name), parameter(cpu, name)), 1e-5) << name;
  EXPECT_GT(max_difference(parameter(cuda, "2.lora_B.weight"), std::vector<float>(8 * 4, 0.0f)), 1e-4);
  acc_model_free(cpu);
  acc_model_free(cuda);
}
