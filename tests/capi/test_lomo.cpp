// LOMO through the C API (acc_lomo_backward, acc_backward_lr, acc_lomo_grad_norm): what a user
// relies on beyond the arithmetic (tests/interop/lomo_against_python.py compares that with
// lomo_optim bit for bit): Lomo without weight decay is SGD applied inside backward, no gradient is
// left behind, the prepared optimizer's step does nothing, AdaLomo's state is readable, and every
// misuse is refused with a message.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support.h"

namespace fs = std::filesystem;
using acc_test::floats;
using acc_test::to_floats;

namespace {

const char* kSpec = R"([{"type":"linear","in_features":3,"out_features":5},{"type":"tanh"},
                        {"type":"linear","in_features":5,"out_features":2}])";
const char* kNames[] = {"0.weight", "0.bias", "2.weight", "2.bias"};

acc_options* options(acc_options_kind kind, const std::map<std::string, std::string>& values) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(kind, &o), ACC_OK);
  for (const auto& [key, value] : values) EXPECT_EQ(acc_options_set(o, key.c_str(), value.c_str()), ACC_OK) << key;
  return o;
}

acc_model* seeded_model() {
  EXPECT_EQ(acc_set_seed(5), ACC_OK);
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(kSpec, &m), ACC_OK) << acc_last_error_message();
  return m;
}

acc_optimizer* optimizer(acc_model* model, const char* algorithm, const std::map<std::string, std::string>& values) {
  acc_options* o = options(ACC_OPTIONS_OPTIMIZER, values);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(model, algorithm, o, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return opt;
}

// The MSE loss of the model on batch `step` (a fresh graph each call).
acc_tensor* loss_of(acc_model* model, int step) {
  std::vector<float> x, y;
  for (int i = 0; i < 12; ++i) x.push_back(static_cast<float>(((i * 7 + step * 3) % 11) - 5) / 4.0f);
  for (int i = 0; i < 8; ++i) y.push_back(static_cast<float>(((i * 5 + step) % 7) - 3) / 3.0f);
  acc_tensor* input = floats(x, {4, 3});
  acc_tensor* target = floats(y, {4, 2});
  acc_tensor* out = nullptr;
  acc_tensor* loss = nullptr;
  EXPECT_EQ(acc_model_forward1(model, input, 0, &out), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_loss_mse(out, target, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  acc_tensor_free(input);
  acc_tensor_free(target);
  acc_tensor_free(out);
  return loss;
}

std::map<std::string, std::vector<float>> weights(const acc_model* model) {
  std::map<std::string, std::vector<float>> w;
  for (const char* name : kNames) {
    acc_tensor* p = nullptr;
    EXPECT_EQ(acc_model_parameter(model, name, &p), ACC_OK);
    w[name] = to_floats(p);
    acc_tensor_free(p);
  }
  return w;
}

size_t gradients_held(const acc_model* model) {
  size_t held = 0;
  for (const char* name : kNames) {
    acc_tensor* p = nullptr;
    acc_tensor* g = nullptr;
    EXPECT_EQ(acc_model_parameter(model, name, &p), ACC_OK);
    EXPECT_EQ(acc_tensor_grad(p, &g), ACC_OK);
    held += g != nullptr;
    acc_tensor_free(g);
    acc_tensor_free(p);
  }
  return held;
}

}  // namespace

// Without weight decay or clipping, Lomo's update is SGD's p - lr * g, op for op: a prepared Lomo
// driven by acc_lomo_backward follows plain SGD (backward, then step) bit for bit, leaves no
// gradient behind, and the prepared optimizer's step and zero_grad change nothing.
TEST(Lomo, WithoutWeightDecayItIsSgdAppliedInsideBackward) {
  acc_model* lomo_model = seeded_model();
  acc_model* sgd_model = seeded_model();
  ASSERT_EQ(weights(lomo_model), weights(sgd_model));
  acc_optimizer* lomo = optimizer(lomo_model, "lomo", {});
  acc_optimizer* sgd = optimizer(sgd_model, "sgd", {{"lr", "0.2"}});
  acc_accelerator* acc = acc_test::make_accelerator({});
  ACC_ASSERT_OK(acc_prepare(acc, &lomo_model, &lomo, nullptr, nullptr));
  for (int step = 0; step < 4; ++step) {
    const double lr = 0.2;
    acc_tensor* loss = loss_of(lomo_model, step);
    ACC_ASSERT_OK(acc_lomo_backward(acc, loss, lr));
    EXPECT_EQ(gradients_held(lomo_model), 0u) << "each gradient is dropped once applied";
    const auto updated = weights(lomo_model);
    ACC_ASSERT_OK(acc_optimizer_step(lomo));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(lomo));
    EXPECT_EQ(weights(lomo_model), updated) << "the prepared LOMO optimizer's step does nothing";
    acc_tensor_free(loss);

    acc_tensor* sgd_loss = loss_of(sgd_model, step);
    ACC_ASSERT_OK(acc_tensor_backward(sgd_loss));
    ACC_ASSERT_OK(acc_optimizer_step(sgd));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(sgd));
    acc_tensor_free(sgd_loss);
    EXPECT_EQ(weights(lomo_model), weights(sgd_model)) << "step " << step;
  }
  acc_optimizer_free(lomo);
  acc_optimizer_free(sgd);
  acc_model_free(lomo_model);
  acc_model_free(sgd_model);
  acc_accelerator_free(acc);
}

// acc_backward_lr is Accelerate's backward(loss, learning_rate=...): the loss over the accumulation
// steps, then the fused update (no gradients accumulate: each micro-step updates). Halving the
// loss halves Lomo's step exactly, so two accumulation steps at rate 2r are one step at rate r.
TEST(Lomo, BackwardWithRateDividesTheLossByTheAccumulationSteps) {
  acc_model* a = seeded_model();
  acc_model* b = seeded_model();
  acc_optimizer* opt_a = optimizer(a, "lomo", {});
  acc_optimizer* opt_b = optimizer(b, "lomo", {});
  acc_accelerator* accumulating = acc_test::make_accelerator({{"gradient_accumulation_steps", "2"}});
  acc_accelerator* plain = acc_test::make_accelerator({});
  ACC_ASSERT_OK(acc_prepare(accumulating, &a, &opt_a, nullptr, nullptr));
  ACC_ASSERT_OK(acc_prepare(plain, &b, &opt_b, nullptr, nullptr));
  for (int step = 0; step < 3; ++step) {
    acc_tensor* la = loss_of(a, step);
    acc_tensor* lb = loss_of(b, step);
    ACC_ASSERT_OK(acc_backward_lr(accumulating, la, 0.5));
    ACC_ASSERT_OK(acc_backward_lr(plain, lb, 0.25));
    acc_tensor_free(la);
    acc_tensor_free(lb);
    EXPECT_EQ(weights(a), weights(b)) << "step " << step;
  }
  acc_optimizer_free(opt_a);
  acc_optimizer_free(opt_b);
  acc_model_free(a);
  acc_model_free(b);
  acc_accelerator_free(accumulating);
  acc_accelerator_free(plain);
}

// clip_grad_norm needs the measuring pass first; it measures without changing anything, and the
// backward after it updates with gradients scaled to at most that norm.
TEST(Lomo, ClippingByNormMeasuresFirstAndRefusesWithoutIt) {
  acc_model* model = seeded_model();
  acc_optimizer* opt = optimizer(model, "lomo", {{"clip_grad_norm", "1e-3"}});
  acc_accelerator* acc = acc_test::make_accelerator({});
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  const auto before = weights(model);
  acc_tensor* loss = loss_of(model, 0);
  ACC_EXPECT_ERROR(acc_lomo_backward(acc, loss, 0.1), ACC_ERR_INVALID_ARGUMENT,
                   "no grad_norm pass came first: measure the gradients (acc_lomo_grad_norm)");
  EXPECT_EQ(weights(model), before) << "a refused backward changes nothing";
  double norm = 0;
  ACC_ASSERT_OK(acc_lomo_grad_norm(acc, loss, &norm));
  EXPECT_GT(norm, 1e-2) << "the test needs gradients that the bound clips";
  EXPECT_EQ(weights(model), before) << "measuring changes nothing";
  EXPECT_EQ(gradients_held(model), 0u);
  ACC_ASSERT_OK(acc_lomo_backward(acc, loss, 0.1));  // the graph was kept for it
  const auto after = weights(model);
  double moved = 0;
  for (const auto& [name, values] : after)
    for (size_t i = 0; i < values.size(); ++i)
      moved += (values[i] - before.at(name)[i]) * (values[i] - before.at(name)[i]);
  EXPECT_NEAR(std::sqrt(moved), 0.1 * 1e-3, 1e-6) << "the update is lr times the clipped gradient";
  acc_tensor_free(loss);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

// AdaLomo's factored second moments are readable as Adafactor's are, and follow the parameter's shape.
TEST(Lomo, AdaLomoKeepsFactoredMomentsPerParameter) {
  acc_model* model = seeded_model();
  acc_optimizer* opt = optimizer(model, "adalomo", {{"weight_decay", "0.01"}});
  acc_accelerator* acc = acc_test::make_accelerator({});
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  acc_tensor* state = nullptr;
  EXPECT_EQ(acc_optimizer_state(opt, "0.weight", "exp_avg_sq_row", &state), ACC_ERR_NOT_INITIALIZED);
  acc_tensor* loss = loss_of(model, 0);
  ACC_ASSERT_OK(acc_backward_lr(acc, loss, 0.01));
  acc_tensor_free(loss);
  const std::map<std::string, std::pair<const char*, size_t>> expected = {
      {"0.weight", {"exp_avg_sq_row", 5}}, {"0.bias", {"exp_avg_sq", 5}}, {"2.weight", {"exp_avg_sq_col", 5}}};
  for (const auto& [param, field] : expected) {
    ACC_ASSERT_OK(acc_optimizer_state(opt, param.c_str(), field.first, &state));
    const std::vector<float> values = to_floats(state);
    EXPECT_EQ(values.size(), field.second) << param;
    for (float v : values) EXPECT_GT(v, 0.0f) << param << ": a mean of squares";
    acc_tensor_free(state);
  }
  double step_num = 0;
  ACC_ASSERT_OK(acc_optimizer_get_hyperparameter(opt, 0, "step_num", &step_num));
  EXPECT_EQ(step_num, 1);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(Lomo, MisuseIsRefusedWithAReason) {
  acc_model* model = seeded_model();
  acc_optimizer* opt = optimizer(model, "lomo", {{"lr", "0.1"}});
  acc_optimizer* bad = nullptr;
  acc_options* o = options(ACC_OPTIONS_OPTIMIZER, {{"clip_grad_norm", "0"}});
  ACC_EXPECT_ERROR(acc_optimizer_create(model, "lomo", o, &bad), ACC_ERR_INVALID_ARGUMENT, "'clip_grad_norm'");
  acc_options_free(o);
  o = options(ACC_OPTIONS_OPTIMIZER, {{"momentum", "0.9"}});
  ACC_EXPECT_ERROR(acc_optimizer_create(model, "lomo", o, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "option 'momentum' does not apply to the lomo optimizer");
  acc_options_free(o);
  const char* biases[] = {"0.bias"};
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, biases, 1, nullptr), ACC_ERR_UNSUPPORTED,
                   "the lomo optimizer has one parameter group");
  acc_tensor* loss = loss_of(model, 0);
  ACC_ASSERT_OK(acc_tensor_backward(loss));
  ACC_EXPECT_ERROR(acc_optimizer_step(opt), ACC_ERR_INVALID_ARGUMENT, "a LOMO optimizer has no step of its own");
  acc_tensor* state = nullptr;
  ACC_EXPECT_ERROR(acc_optimizer_state(opt, "0.weight", "exp_avg", &state), ACC_ERR_INVALID_ARGUMENT,
                   "the lomo optimizer keeps no state");
  acc_tensor_free(loss);

  acc_accelerator* acc = acc_test::make_accelerator({{"python_state_files", "true"}});
  loss = loss_of(model, 0);
  ACC_EXPECT_ERROR(acc_lomo_backward(acc, loss, 0.1), ACC_ERR_INVALID_ARGUMENT,
                   "no LOMO optimizer (lomo or adalomo) is prepared");
  ACC_EXPECT_ERROR(acc_backward_lr(acc, loss, 0.1), ACC_ERR_INVALID_ARGUMENT,
                   "backward with a learning rate is LOMO's");
  ACC_EXPECT_ERROR(acc_lomo_grad_norm(acc, loss, nullptr), ACC_ERR_INVALID_ARGUMENT, "no LOMO optimizer");
  acc_tensor_free(loss);
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
  const auto before = weights(model);
  loss = loss_of(model, 1);
  ACC_EXPECT_ERROR(acc_backward(acc, loss), ACC_ERR_INVALID_ARGUMENT, "a LOMO optimizer is prepared");
  ACC_EXPECT_ERROR(acc_lomo_backward(acc, loss, -0.1), ACC_ERR_INVALID_ARGUMENT, "a finite number >= 0");
  ACC_EXPECT_ERROR(acc_lomo_backward(acc, loss, NAN), ACC_ERR_INVALID_ARGUMENT, "a finite number >= 0");
  ACC_EXPECT_ERROR(acc_lomo_grad_norm(acc, loss, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "does not have (set it when creating the optimizer)");
  EXPECT_EQ(weights(model), before) << "nothing refused changed the weights";
  EXPECT_EQ(gradients_held(model), 0u);
  const fs::path dir = fs::temp_directory_path() / ("acc_lomo_python_" + std::to_string(getpid()));
  ACC_EXPECT_ERROR(acc_save_state(acc, dir.c_str(), nullptr), ACC_ERR_UNSUPPORTED,
                   "lomo_optim keeps its moments and counts outside state_dict");
  EXPECT_FALSE(fs::exists(dir));
  // A second LOMO optimizer prepared: Accelerate would run backward through the loss twice.
  acc_model* other = seeded_model();
  acc_optimizer* second = optimizer(other, "adalomo", {});
  ACC_ASSERT_OK(acc_prepare(acc, &other, &second, nullptr, nullptr));
  ACC_EXPECT_ERROR(acc_lomo_backward(acc, loss, 0.1), ACC_ERR_INVALID_ARGUMENT, "two LOMO optimizers are prepared");
  acc_tensor_free(loss);
  acc_optimizer_free(second);
  acc_model_free(other);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

namespace {

// Linear, then a transformer encoder layer (checkpointed or not), then a linear head.
std::string stack_spec(bool checkpoint) {
  const std::string c = checkpoint ? R"(,"checkpoint":true)" : "";
  return R"([{"type":"linear","in_features":3,"out_features":16)" + c + R"(},
             {"type":"transformer_encoder_layer","d_model":16,"nhead":2,"dim_feedforward":32,"dropout":0.0,
              "batch_first":true)" +
         c + R"(},
             {"type":"linear","in_features":16,"out_features":2}])";
}

std::map<std::string, std::vector<float>> all_parameters(const acc_model* model) {
  acc_tensor_list* list = nullptr;
  EXPECT_EQ(acc_model_state_dict(model, &list), ACC_OK);
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(list, &n), ACC_OK);
  std::map<std::string, std::vector<float>> out;
  for (size_t i = 0; i < n; ++i) {
    acc_tensor* t = nullptr;
    const char* name = nullptr;
    EXPECT_EQ(acc_tensor_list_get(list, i, &t), ACC_OK);
    EXPECT_EQ(acc_tensor_list_name(list, i, &name), ACC_OK);
    out[name] = to_floats(t);
    acc_tensor_free(t);
  }
  acc_tensor_list_free(list);
  return out;
}

// One LOMO step of `model` (prepared with a fresh accelerator) on a [2, 4, 3] batch.
void lomo_step(acc_model** model, const char* algorithm) {
  acc_optimizer* opt = optimizer(*model, algorithm, {});
  acc_accelerator* acc = acc_test::make_accelerator({});
  ASSERT_EQ(acc_prepare(acc, model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  std::vector<float> x(24), y(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 5 % 9) - 4) / 3.0f;
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3) - 1.0f;
  acc_tensor* input = floats(x, {2, 4, 3});
  acc_tensor* target = floats(y, {2, 4, 2});
  acc_tensor *out = nullptr, *loss = nullptr;
  ASSERT_EQ(acc_model_forward1(*model, input, 0, &out), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_loss_mse(out, target, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  ACC_ASSERT_OK(acc_lomo_backward(acc, loss, 0.05));
  for (acc_tensor* t : {input, target, out, loss}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  acc_accelerator_free(acc);
}

}  // namespace

// Activation checkpointing recomputes a layer's forward inside backward, after later layers were
// updated: the layer's own parameters are not yet, so the step is bit for bit the one without it.
TEST(Lomo, ActivationCheckpointingGivesTheSameUpdate) {
  for (const char* algorithm : {"lomo", "adalomo"}) {
    SCOPED_TRACE(algorithm);
    acc_model *plain = nullptr, *checkpointed = nullptr;
    ASSERT_EQ(acc_set_seed(3), ACC_OK);
    ASSERT_EQ(acc_model_from_spec(stack_spec(false).c_str(), &plain), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_set_seed(3), ACC_OK);
    ASSERT_EQ(acc_model_from_spec(stack_spec(true).c_str(), &checkpointed), ACC_OK) << acc_last_error_message();
    const auto initial = all_parameters(plain);
    ASSERT_EQ(all_parameters(checkpointed), initial);
    lomo_step(&plain, algorithm);
    lomo_step(&checkpointed, algorithm);
    const auto updated = all_parameters(plain);
    EXPECT_EQ(all_parameters(checkpointed), updated);
    for (const auto& [name, values] : updated) EXPECT_NE(values, initial.at(name)) << name << " did not move";
    acc_model_free(plain);
    acc_model_free(checkpointed);
  }
}

// LoRA: only the adapters train (the base is frozen), and the frozen weights never change.
TEST(Lomo, TrainsOnlyTheAdaptersOfALoraModel) {
  ASSERT_EQ(acc_set_seed(3), ACC_OK);
  acc_model* model = nullptr;
  ASSERT_EQ(acc_model_from_spec(stack_spec(false).c_str(), &model), ACC_OK);
  acc_options* o = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_LORA, &o), ACC_OK);
  ASSERT_EQ(acc_options_set(o, "r", "2"), ACC_OK);
  ASSERT_EQ(acc_options_set(o, "init_lora_weights", "gaussian"), ACC_OK);
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_add_lora(model, "0,2", o, &count));
  acc_options_free(o);
  ASSERT_EQ(count, 2u);
  const auto initial = all_parameters(model);
  lomo_step(&model, "adalomo");
  const auto updated = all_parameters(model);
  size_t moved = 0;
  for (const auto& [name, values] : updated) {
    const bool adapter = name.find("lora_") != std::string::npos;
    if (adapter)
      moved += values != initial.at(name);
    else
      EXPECT_EQ(values, initial.at(name)) << name << ": a frozen base weight moved";
  }
  EXPECT_GT(moved, 0u) << "no adapter moved";
  acc_model_free(model);
}
