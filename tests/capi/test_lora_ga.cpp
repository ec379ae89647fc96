// LoRA-GA, PEFT's gradient-based start (preprocess_loraga, then init_lora_weights "lora_ga"), against
// PEFT restated (lora_cases.json "lora_ga", tests/data/lora_ga_case.py): every direction and scale,
// a rank_pattern; each layer's A and B, the residual weight, the global generator after (svd_lowrank's
// and randperm's draws); files read back; and what it refuses.
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using namespace lora_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

acc_model* ga_model() { return data_model("lora_ga_model.pt"); }

int requires_grad(acc_model* m, const char* name) {
  acc_tensor* p = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name, &p), ACC_OK) << acc_last_error_message();
  int out = -1;
  EXPECT_EQ(acc_tensor_requires_grad(p, &out), ACC_OK);
  acc_tensor_free(p);
  return out;
}

acc_options* ga_options(const json& config) {
  acc_options* o = case_lora_options(config);
  EXPECT_EQ(acc_options_set(o, "lora_ga_direction", config["direction"].get<std::string>().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "lora_ga_scale", config["scale"].get<std::string>().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "lora_ga_stable_gamma", config["stable_gamma"].get<int64_t>()), ACC_OK);
  return o;
}

// PEFT's train_step: MSE on batches of 6 rows, a backward each, gradients accumulating.
void train_steps(acc_model* m, const json& x, const json& y) {
  const std::vector<float> xs = acc_test::float_values(x), ys = acc_test::float_values(y);
  for (size_t row = 0; row < 18; row += 6) {
    acc_tensor* xb = acc_test::floats({xs.begin() + row * 10, xs.begin() + (row + 6) * 10}, {6, 10});
    acc_tensor* yb = acc_test::floats({ys.begin() + row * 6, ys.begin() + (row + 6) * 6}, {6, 6});
    acc_tensor* out = nullptr;
    ASSERT_EQ(acc_model_forward1(m, xb, 0, &out), ACC_OK) << acc_last_error_message();
    acc_tensor* loss = nullptr;
    ASSERT_EQ(acc_loss_mse(out, yb, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    ASSERT_EQ(acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
    for (acc_tensor* t : {xb, yb, out, loss}) acc_tensor_free(t);
  }
}

}  // namespace

TEST(LoraGa, EveryDirectionAndScaleStartsAsPefts) {
  const json all = lora_case("lora_ga");
  for (const json& c : all["cases"]) {
    const json& config = c["config"];
    SCOPED_TRACE(config.dump());
    acc_model* m = ga_model();
    ASSERT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
    acc_options* o = ga_options(config);
    ASSERT_EQ(acc_model_begin_lora_ga(m, joined(config["targets"]).c_str(), o), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    train_steps(m, all["x"], all["y"]);
    size_t count = 0;
    ASSERT_EQ(acc_model_add_lora_ga(m, &count), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(count, c["layers"].size());
    for (const auto& [name, layer] : c["layers"].items()) {
      EXPECT_EQ(param(m, name + ".lora_A.weight"), acc_test::float_values(layer["lora_A"])) << name;
      EXPECT_EQ(param(m, name + ".lora_B.weight"), acc_test::float_values(layer["lora_B"])) << name;
      EXPECT_EQ(param(m, name + ".weight"), acc_test::float_values(layer["weight"])) << name;
    }
    EXPECT_EQ(acc_test::next_global_draws(), acc_test::float_values(c["next_draw"]));
    int training = 0;
    ASSERT_EQ(acc_model_is_training(m, &training), ACC_OK);
    EXPECT_EQ(training, 1);
    acc_model_free(m);
  }
}

// The files PEFT writes; read back, the adapters take the file's values and the weights stay as
// they are (PEFT's lora_ga_init falls back to true without gradients).
TEST(LoraGa, SavedAdaptersLoadIntoTheResidualModel) {
  const json all = lora_case("lora_ga");
  const json& c = all["cases"][0];
  acc_model* m = ga_model();
  acc_options* o = ga_options(c["config"]);
  ASSERT_EQ(acc_model_begin_lora_ga(m, joined(c["config"]["targets"]).c_str(), o), ACC_OK);
  acc_options_free(o);
  train_steps(m, all["x"], all["y"]);
  ASSERT_EQ(acc_model_add_lora_ga(m, nullptr), ACC_OK) << acc_last_error_message();
  const std::string dir = acc_test::temp_path("lora_ga_adapters");
  fs::remove_all(dir);
  ASSERT_EQ(acc_model_save_lora(m, dir.c_str()), ACC_OK) << acc_last_error_message();
  const json written = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(written["init_lora_weights"], "lora_ga");
  EXPECT_EQ(written["lora_ga_config"]["direction"], "ArB2r");
  acc_model* residual = ga_model();
  acc_tensor_list* state = nullptr;  // the residual weights (and the adapters, which it lacks yet)
  ASSERT_EQ(acc_model_state_dict(m, &state), ACC_OK);
  ASSERT_EQ(acc_model_load_state_dict(residual, state, 0), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(state);
  ASSERT_EQ(acc_model_load_lora(residual, dir.c_str()), ACC_OK) << acc_last_error_message();
  for (const char* name : {"fc1.lora_A.weight", "fc2.lora_B.weight", "fc3.weight"})
    EXPECT_EQ(param(residual, name), param(m, name)) << name;
  EXPECT_EQ(outputs_on(residual, acc_test::from_json(all["x"])), outputs_on(m, acc_test::from_json(all["x"])));
  acc_model_free(residual);
  acc_model_free(m);
}

TEST(LoraGa, RefusesWhatItCannotStartFrom) {
  acc_model* m = ga_model();
  ACC_EXPECT_ERROR(acc_model_add_lora_ga(m, nullptr), ACC_ERR_INVALID_ARGUMENT, "acc_model_begin_lora_ga first");
  acc_options* wide = lora_options(4, 4);  // fc3 is 12 -> 6: 2 r = 8 > 6
  ACC_EXPECT_ERROR(acc_model_begin_lora_ga(m, "fc3", wide), ACC_ERR_INVALID_ARGUMENT, "exceeds half");
  acc_options_free(wide);
  ACC_EXPECT_ERROR(acc_model_begin_lora_ga(m, "nothing", nullptr), ACC_ERR_INVALID_ARGUMENT, "matches no");
  acc_options* o = lora_options(2, 4);
  ASSERT_EQ(acc_model_begin_lora_ga(m, "fc1", o), ACC_OK) << acc_last_error_message();
  ACC_EXPECT_ERROR(acc_model_begin_lora_ga(m, "fc1", o), ACC_ERR_INVALID_ARGUMENT, "already");
  // No backward ran: the adapters start as with init true (PEFT's fallback), the weight unchanged.
  const auto before = param(m, "fc1.weight");
  size_t count = 0;
  ASSERT_EQ(acc_model_add_lora_ga(m, &count), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(param(m, "fc1.weight"), before);
  for (float v : param(m, "fc1.lora_B.weight")) EXPECT_EQ(v, 0.0f);
  ACC_EXPECT_ERROR(acc_model_begin_lora_ga(m, "fc2", o), ACC_ERR_INVALID_ARGUMENT, "already has adapters");
  acc_options_free(o);
  acc_model_free(m);
}

// Between begin and add the trainable set is the estimate's: adapters, freezing and an optimizer
// are refused (the add gives every parameter its requires_grad back, which would unfreeze an
// adapted layer's weight), and an optimizer made before the begin refuses it.
TEST(LoraGa, TheEstimateHoldsTheTrainableSetUntilTheAdd) {
  acc_model* m = ga_model();
  acc_options* o = lora_options(2, 4);
  ASSERT_EQ(acc_model_begin_lora_ga(m, "fc1", o), ACC_OK) << acc_last_error_message();
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "fc3", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "LoRA-GA's gradients are being estimated");
  ACC_EXPECT_ERROR(acc_model_set_requires_grad(m, "fc2.*", 0, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "LoRA-GA's gradients are being estimated");
  acc_optimizer* opt = nullptr;
  ACC_EXPECT_ERROR(acc_optimizer_create(m, "sgd", nullptr, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "create the optimizer after acc_model_add_lora_ga");
  EXPECT_EQ(opt, nullptr);
  ASSERT_EQ(acc_model_add_lora_ga(m, nullptr), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(requires_grad(m, "fc1.lora_A.weight"), 1);
  EXPECT_EQ(requires_grad(m, "fc1.weight"), 0);
  acc_model_free(m);

  acc_model* prepared_for = ga_model();
  ASSERT_EQ(acc_optimizer_create(prepared_for, "sgd", nullptr, &opt), ACC_OK);
  ACC_EXPECT_ERROR(acc_model_begin_lora_ga(prepared_for, "fc1", o), ACC_ERR_INVALID_ARGUMENT,
                   "the model has an optimizer");
  acc_optimizer_free(opt);
  acc_model_free(prepared_for);
  acc_options_free(o);
}

// A gradient that is not finite is refused naming the layer (PEFT's SVD fails without saying where);
// the estimate ends and the model is as it was.
TEST(LoraGa, ANonFiniteGradientIsRefusedNamingTheLayer) {
  acc_model* m = ga_model();
  const auto before = param(m, "fc2.weight");
  acc_options* o = lora_options(2, 4);
  ASSERT_EQ(acc_model_begin_lora_ga(m, "fc2", o), ACC_OK) << acc_last_error_message();
  std::vector<float> xs(60, 1.0f), ys(36, 0.0f);
  xs[7] = std::numeric_limits<float>::quiet_NaN();
  acc_tensor* xb = acc_test::floats(xs, {6, 10});
  acc_tensor* yb = acc_test::floats(ys, {6, 6});
  acc_tensor *out = nullptr, *loss = nullptr;
  ASSERT_EQ(acc_model_forward1(m, xb, 0, &out), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(acc_loss_mse(out, yb, ACC_REDUCTION_MEAN, &loss), ACC_OK);
  ASSERT_EQ(acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
  ACC_EXPECT_ERROR(acc_model_add_lora_ga(m, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "lora_ga on 'fc2': the gradient estimated over the backward passes holds inf or NaN");
  EXPECT_EQ(param(m, "fc2.weight"), before);
  EXPECT_EQ(requires_grad(m, "fc2.weight"), 1);
  ACC_EXPECT_ERROR(acc_model_add_lora_ga(m, nullptr), ACC_ERR_INVALID_ARGUMENT, "acc_model_begin_lora_ga first");
  for (acc_tensor* t : {xb, yb, out, loss}) acc_tensor_free(t);
  acc_options_free(o);
  acc_model_free(m);
}
