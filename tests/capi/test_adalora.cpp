// PEFT's AdaLoRA (acc_model_add_adalora, acc_model_adalora_loss,
// acc_model_adalora_update_and_allocate). Checked against PEFT's layers, regularization and rank
// allocator restated in lora_adalora_case.py (the "adalora" case of export_lora_cases.py) on a
// TorchScript model with a strided Conv2d, two nn.Linear layers and transformers' Conv1D: the draws
// and the stream after them, the outputs in evaluation and in training (lora_dropout), the
// regularized loss and its gradients, eight AdamW steps through every phase of the budget's
// schedule (warm-up, pruning every deltaT steps, the last pruning, the final phase), the merged
// weights, PEFT's files with the rank pattern (each layer's kept entries only) and PEFT's draws when
// loading them, bit for bit; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::float_values;
using acc_test::tensor_names;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* adalora_model() { return eager_data_model("adalora_model.pt"); }

acc_options* adalora_options(const json& c, bool init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_ADALORA, &o), ACC_OK);
  for (const char* key : {"init_r", "target_r", "tinit", "tfinal", "total_step", "deltaT"})
    EXPECT_EQ(acc_options_set_int(o, key, c[key].get<int64_t>()), ACC_OK) << key;
  for (const char* key : {"lora_alpha", "lora_dropout", "orth_reg_weight"})
    EXPECT_EQ(acc_options_set_double(o, key, c[key].get<double>()), ACC_OK) << key;
  EXPECT_EQ(acc_options_set_bool(o, "init_lora_weights", init), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, bool init) {
  return adapted_case_model("adalora_model.pt", acc_model_add_adalora, c["targets"].get<std::string>(),
                            adalora_options(c, init), c["seed"].get<uint64_t>(), 4);
}

// The MSE of the model's training-mode output against the case's target, regularized as PEFT's
// AdaLoraModel does; `output` receives the model's output.
acc_tensor* regularized_loss(acc_model* m, const json& c, acc_tensor** output) {
  acc_tensor *x = acc_test::from_json(c["input"]), *target = acc_test::from_json(c["target"]), *mse = nullptr,
             *loss = nullptr;
  EXPECT_EQ(acc_model_forward1(m, x, 0, output), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_loss_mse(*output, target, ACC_REDUCTION_MEAN, &mse), ACC_OK);
  EXPECT_EQ(acc_model_adalora_loss(m, mse, &loss), ACC_OK) << acc_last_error_message();
  for (acc_tensor* t : {x, target, mse}) acc_tensor_free(t);
  return loss;
}

// PEFT's training loop from its start (init_lora_weights): the regularized loss, backward, AdamW,
// update_and_allocate(step), zero_grad, for every step of the schedule; the losses.
std::vector<double> train_through_the_schedule(acc_model* m, const json& c) {
  acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
  EXPECT_EQ(acc_model_set_training(m, 1), ACC_OK);
  EXPECT_EQ(acc_set_seed(c["train_seed"].get<uint64_t>()), ACC_OK);
  std::vector<double> losses;
  for (int64_t step = 0; step < c["total_step"].get<int64_t>(); ++step) {
    acc_tensor* y = nullptr;
    acc_tensor* loss = regularized_loss(m, c, &y);
    if (!loss) break;
    losses.push_back(acc_test::item(loss));
    EXPECT_EQ(acc_tensor_backward(loss), ACC_OK);
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK);
    EXPECT_EQ(acc_model_adalora_update_and_allocate(m, step), ACC_OK) << step << ": " << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    acc_tensor_free(y);
    acc_tensor_free(loss);
  }
  acc_optimizer_free(opt);
  return losses;
}

}  // namespace

TEST(Adalora, DrawsComputesRegularizesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("adalora");
  acc_model* base = adalora_model();
  const auto base_output = eval_outputs(base, c);
  acc_model* m = adapted(c, /*init=*/true);
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));  // A, E, B, ranknum per layer, then normals
  expect_params(m, c["initial"]);
  EXPECT_EQ(eval_outputs(m, c), base_output);  // E zero: the model starts unchanged
  EXPECT_EQ(acc_test::parameter_names(m),
            (std::vector<std::string>{"conv.weight",  "conv.bias",   "conv.lora_A",  "conv.lora_B", "conv.lora_E",
                                      "conv.ranknum", "fc1.weight",  "fc1.bias",     "fc1.lora_A",  "fc1.lora_B",
                                      "fc1.lora_E",   "fc1.ranknum", "proj.weight",  "proj.bias",   "proj.lora_A",
                                      "proj.lora_B",  "proj.lora_E", "proj.ranknum", "head.weight", "head.bias",
                                      "head.lora_A",  "head.lora_B", "head.lora_E",  "head.ranknum"}));
  EXPECT_EQ(param(m, "fc1.ranknum"), std::vector<float>{4.0f});
  acc_model_free(m);

  // init_lora_weights false: torch.randn's; the case's chosen tensors are those.
  m = adapted(c, /*init=*/false);
  expect_params(m, c["chosen"]);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
  // Training mode (lora_dropout on each layer's input), the loss regularized, and its gradients.
  ACC_ASSERT_OK(acc_model_set_training(m, 1));
  ACC_ASSERT_OK(acc_set_seed(c["train_seed"].get<uint64_t>()));
  acc_tensor* y = nullptr;
  acc_tensor* loss = regularized_loss(m, c, &y);
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(to_floats(y), float_values(c["train_output"]));
  EXPECT_EQ(acc_test::item(loss), c["total_loss"].get<double>());
  ACC_ASSERT_OK(acc_tensor_backward(loss));
  for (const auto& item : c["grads"].items()) {
    acc_tensor *p = nullptr, *g = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(m, item.key().c_str(), &p));
    ACC_ASSERT_OK(acc_tensor_grad(p, &g));
    ASSERT_NE(g, nullptr) << item.key();
    EXPECT_EQ(to_floats(g), float_values(item.value())) << item.key();
    acc_tensor_free(p);
    acc_tensor_free(g);
  }
  acc_tensor* ranknum = nullptr;
  acc_tensor* ranknum_grad = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "head.ranknum", &ranknum));
  ACC_ASSERT_OK(acc_tensor_grad(ranknum, &ranknum_grad));
  EXPECT_EQ(ranknum_grad, nullptr);  // frozen
  for (acc_tensor* t : {y, loss, ranknum}) acc_tensor_free(t);
  ACC_ASSERT_OK(acc_model_zero_grad(m));
  // Disabled: the base model's outputs.
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(eval_outputs(m, c), base_output);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
  // save_model writes the merged weights (no A, B, E or ranknum); PEFT's merge: W plus the delta.
  expect_saved_model_merged(m, c["merged"], 8, "adalora_saved_model");
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  for (const auto& item : c["merged"].items())
    EXPECT_EQ(param(m, item.key()), float_values(item.value())) << item.key();
  acc_model_free(m);
  acc_model_free(base);
}

TEST(Adalora, TrainsAndPrunesThroughTheScheduleAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("adalora");
  acc_model* m = adapted(c, /*init=*/true);
  EXPECT_EQ(train_through_the_schedule(m, c), c["losses"].get<std::vector<double>>());
  expect_params(m, c["trained"]);
  EXPECT_EQ(eval_outputs(m, c), float_values(c["trained_output"]));
  // The final phase: each further step applies the last pattern again (E's pruned entries stay zero).
  ACC_EXPECT_ERROR(acc_model_adalora_update_and_allocate(m, -1), ACC_ERR_INVALID_ARGUMENT, "must not be negative");
  acc_model_free(m);
}

TEST(Adalora, PeftFilesHoldTheKeptRanksAndLoadAsPeftDraws) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("adalora");
  acc_model* m = adapted(c, /*init=*/true);
  // Before any pruning: no pattern, every entry saved.
  const std::string dir = acc_test::temp_path("adalora_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "ADALORA");
  EXPECT_TRUE(config["rank_pattern"].is_null());
  (void)train_through_the_schedule(m, c);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "ADALORA");
  for (const char* key : {"init_r", "target_r", "tinit", "tfinal", "total_step", "deltaT"})
    EXPECT_EQ(config[key], c[key]) << key;
  EXPECT_EQ(config["lora_alpha"], c["lora_alpha"]);
  EXPECT_EQ(config["orth_reg_weight"], c["orth_reg_weight"]);
  EXPECT_EQ(config["beta1"], 0.85);
  EXPECT_EQ(config["init_lora_weights"], true);
  EXPECT_EQ(config["rank_pattern"], c["rank_pattern"]);
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  EXPECT_EQ(tensor_names(saved).size(), 12u);  // A, B, E per layer; no ranknum
  expect_list_holds(saved, c["saved"], "base_model.model.");
  acc_tensor_list_free(saved);
  // Loaded into a fresh model: each layer at its kept rank (ranknum init_r: the same scaling), drawn
  // as PEFT's from_pretrained draws (at init_r, then again at each kept rank), the same outputs.
  acc_model* fresh = adalora_model();
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw_after_load"]));
  EXPECT_EQ(eval_outputs(fresh, c), float_values(c["trained_output"]));
  EXPECT_EQ(param(fresh, "head.ranknum"), std::vector<float>{4.0f});
  // Saved again: the same files' tensors (the kept ranks are the tensors' own).
  const std::string again = acc_test::temp_path("adalora_adapter_again");
  fs::remove_all(again);
  ACC_ASSERT_OK(acc_model_save_lora(fresh, again.c_str()));
  EXPECT_EQ(json::parse(acc_test::read_file(again + "/adapter_config.json"))["rank_pattern"], c["rank_pattern"]);
  EXPECT_EQ(acc_test::read_file(again + "/adapter_model.safetensors"),
            acc_test::read_file(dir + "/adapter_model.safetensors"));
  acc_model_free(fresh);

  // As PEFT's allocator names the pattern before its save strips the adapter's name.
  {
    json j = config;
    j["rank_pattern"] = json::object();
    for (const auto& item : c["rank_pattern"].items()) j["rank_pattern"][item.key() + ".default"] = item.value();
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = adalora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), float_values(c["trained_output"]));
  acc_model_free(fresh);
  // A pattern that does not fit the tensors, or of the wrong length, is refused before anything changes.
  for (const auto& [edit, code, message] : std::vector<std::tuple<std::function<void(json&)>, acc_status, std::string>>{
           {[](json& j) {
              j["rank_pattern"]["fc1.lora_E"] = {true, true, true, true};
            },
            ACC_ERR_INVALID_ARGUMENT, "fc1.lora_A' has shape [3, 12]"},
           {[](json& j) {
              j["rank_pattern"]["fc1.lora_E"] = {true, true};
            },
            ACC_ERR_IO, "list of init_r = 4 flags"},
           {[](json& j) {
              j["rank_pattern"]["nowhere.lora_E"] = {true, true, true, true};
            },
            ACC_ERR_INVALID_ARGUMENT, "names 'nowhere'"},
           {[](json& j) { j["total_step"] = nullptr; }, ACC_ERR_IO, "needs total_step"},
           {[](json& j) { j["use_dora"] = true; }, ACC_ERR_IO, "'use_dora' is true"},
           {[](json& j) {
              j["loftq_config"] = {{"loftq_bits", 4}};
            },
            ACC_ERR_IO, "does not support LoftQ"}}) {
    json j = config;
    edit(j);
    std::ofstream(dir + "/adapter_config.json") << j.dump();
    fresh = adalora_model();
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), code, message);
    size_t n = 1;
    ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
    EXPECT_EQ(n, 0u);
    acc_model_free(fresh);
  }
  // use_rslora and lora_bias, which PEFT's AdaLoRA layers ignore: read as PEFT reads them.
  {
    json j = config;
    j["use_rslora"] = true;
    j["lora_bias"] = true;
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = adalora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), float_values(c["trained_output"]));
  acc_model_free(fresh);
  acc_model_free(m);
}

// What PEFT's AdaLoraConfig takes beyond the common ranges: a lora_alpha not above 0 scales by the
// rank (0 and -1 alike); step settings up to JSON's exact integers (2^53), which its files read back.
TEST(Adalora, TakesWhatPeftTakes) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("adalora");
  std::vector<std::vector<float>> outputs;
  for (double alpha : {0.0, -1.0}) {
    acc_options* o = adalora_options(c, /*init=*/false);
    ACC_ASSERT_OK(acc_options_set_double(o, "lora_alpha", alpha));
    acc_model* m = adapted_case_model("adalora_model.pt", acc_model_add_adalora, c["targets"].get<std::string>(), o,
                                      c["seed"].get<uint64_t>(), 4);
    outputs.push_back(eval_outputs(m, c));
    acc_model_free(m);
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  acc_options* o = adalora_options(c, /*init=*/false);
  for (const char* key : {"total_step", "tinit", "tfinal", "deltaT"})
    ACC_EXPECT_ERROR(acc_options_set_int(o, key, (int64_t{1} << 53) + 1), ACC_ERR_INVALID_ARGUMENT, key);
  ACC_ASSERT_OK(acc_options_set_int(o, "total_step", int64_t{1} << 53));
  acc_model* m = adalora_model();
  ACC_ASSERT_OK(acc_model_add_adalora(m, c["targets"].get<std::string>().c_str(), o, nullptr));
  acc_options_free(o);
  const std::string dir = acc_test::temp_path("adalora_long_schedule");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  acc_model* fresh = adalora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), eval_outputs(m, c));
  acc_model_free(fresh);
  acc_model_free(m);
}

TEST(Adalora, RefusesWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("adalora");
  acc_model* m = adalora_model();
  // total_step is required (PEFT's None), and the schedule needs a pruning phase.
  ACC_EXPECT_ERROR(acc_model_add_adalora(m, "fc1", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "needs total_step");
  acc_options* o = adalora_options(c, true);
  ACC_ASSERT_OK(acc_options_set_int(o, "tinit", 6));
  ACC_EXPECT_ERROR(acc_model_add_adalora(m, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT, "no steps to prune");
  ACC_ASSERT_OK(acc_options_set_int(o, "tinit", 1));
  ACC_ASSERT_OK(acc_options_set_double(o, "beta1", 1.0));
  ACC_EXPECT_ERROR(acc_model_add_adalora(m, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT, "beta1 must lie in (0, 1)");
  ACC_ASSERT_OK(acc_options_set_double(o, "beta1", 0.85));
  // Without AdaLoRA adapters the two steps of its training are refused.
  acc_tensor* zero = nullptr;
  ACC_ASSERT_OK(acc_tensor_zeros(nullptr, 0, ACC_DTYPE_FLOAT32, nullptr, &zero));
  acc_tensor* out = nullptr;
  ACC_EXPECT_ERROR(acc_model_adalora_loss(m, zero, &out), ACC_ERR_INVALID_ARGUMENT, "no AdaLoRA adapters");
  ACC_EXPECT_ERROR(acc_model_adalora_update_and_allocate(m, 0), ACC_ERR_INVALID_ARGUMENT, "no AdaLoRA adapters");
  // The layers PEFT's AdaLoRA does not take.
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_adalora(lm, "embed", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "AdaLoRA cannot adapt 'embed'");
  acc_model_free(lm);
  // Without a gradient (before a backward) the allocator has nothing to read.
  ACC_ASSERT_OK(acc_model_add_adalora(m, "fc1,head", o, nullptr));
  ACC_EXPECT_ERROR(acc_model_adalora_update_and_allocate(m, 0), ACC_ERR_INVALID_ARGUMENT,
                   "reads the gradient of 'fc1.lora_A'");
  // After its last pruning's step without any pattern: refused.
  ACC_EXPECT_ERROR(acc_model_adalora_update_and_allocate(m, 7), ACC_ERR_INVALID_ARGUMENT, "has not happened");
  expect_no_weighted_adapter(m, "AdaLoRA");
  acc_tensor_free(zero);
  acc_options_free(o);
  acc_model_free(m);

  // target_r not below init_r: the budget cannot prune (PEFT's kthvalue fails).
  m = adalora_model();
  o = adalora_options(c, false);
  ACC_ASSERT_OK(acc_options_set_int(o, "target_r", c["init_r"].get<int64_t>()));
  ACC_ASSERT_OK(acc_model_add_adalora(m, c["targets"].get<std::string>().c_str(), o, nullptr));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_model_set_training(m, 1));
  for (int64_t step = 0; step < 3; ++step) {
    acc_tensor* y = nullptr;
    acc_tensor* loss = regularized_loss(m, c, &y);
    ACC_ASSERT_OK(acc_tensor_backward(loss));
    const acc_status status = acc_model_adalora_update_and_allocate(m, step);
    if (step < 2)
      EXPECT_EQ(status, ACC_OK) << acc_last_error_message();
    else
      EXPECT_TRUE(status == ACC_ERR_INVALID_ARGUMENT &&
                  std::string(acc_last_error_message()).find("target_r must lie below init_r") != std::string::npos)
          << acc_last_error_message();
    ACC_ASSERT_OK(acc_model_zero_grad(m));
    acc_tensor_free(y);
    acc_tensor_free(loss);
  }
  acc_model_free(m);
}

TEST(Adalora, SpecModelTrainsAndMerges) {
  expect_spec_adapters_train_and_merge(acc_model_add_adalora, ACC_OPTIONS_ADALORA,
                                       {{"total_step", 5}, {"init_r", 4}, {"target_r", 2}}, "0,linear1,linear2", 3);
}

// Adapters pruned in memory keep init_r rows (E zeroed): named adapters set aside and brought back
// keep them so; a file's tensors loaded into adapters bring the file's pattern; a model loaded from
// a pruned file (its kept rows only) prunes further and saves a pattern over init_r that loads back.
TEST(Adalora, PrunedAdaptersSwitchReloadAndPruneFurther) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("adalora");
  acc_model* m = adapted(c, /*init=*/true);
  const std::string unpruned = acc_test::temp_path("adalora_unpruned"), pruned = acc_test::temp_path("adalora_pruned");
  for (const auto& dir : {unpruned, pruned}) fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, unpruned.c_str()));
  (void)train_through_the_schedule(m, c);
  ACC_ASSERT_OK(acc_model_save_lora(m, pruned.c_str()));
  const auto trained = float_values(c["trained_output"]);
  // A second named adapter, and switching to it and back: the pruned one is as it was.
  acc_options* o = adalora_options(c, true);
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "other", "fc1,head", o, nullptr));
  acc_options_free(o);
  EXPECT_EQ(eval_outputs(m, c), trained);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "other"));
  ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
  EXPECT_EQ(eval_outputs(m, c), trained);
  expect_params(m, c["trained"]);
  // The unpruned file loaded into the pruned adapters: its tensors and its pattern (none).
  ACC_ASSERT_OK(acc_model_load_lora(m, unpruned.c_str()));
  const std::string again = acc_test::temp_path("adalora_reloaded");
  fs::remove_all(again);
  ACC_ASSERT_OK(acc_model_save_lora(m, again.c_str()));
  EXPECT_TRUE(json::parse(acc_test::read_file(again + "/adapter_config.json"))["rank_pattern"].is_null());
  EXPECT_EQ(acc_test::read_file(again + "/adapter_model.safetensors"),
            acc_test::read_file(unpruned + "/adapter_model.safetensors"));
  acc_model_free(m);

  // Loaded from the pruned file (each layer its kept rows) and pruned further: the pattern saved is
  // over init_r (entries pruned before stay pruned), and what it saves loads back with its outputs.
  acc_model* f = adalora_model();
  ACC_ASSERT_OK(acc_model_load_lora(f, pruned.c_str()));
  acc_optimizer* opt = acc_test::optimizer(f, "adamw", 1e-2);
  ACC_ASSERT_OK(acc_model_set_training(f, 1));
  for (int64_t step = 0; step < 3; ++step) {
    acc_tensor* y = nullptr;
    acc_tensor* loss = regularized_loss(f, c, &y);
    ACC_ASSERT_OK(acc_tensor_backward(loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    // Steps past tinit prune (deltaT 2): step 2 takes the budget from 16 ranks to 12.
    ACC_ASSERT_OK(acc_model_adalora_update_and_allocate(f, step));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(y);
    acc_tensor_free(loss);
  }
  acc_optimizer_free(opt);
  const std::string further = acc_test::temp_path("adalora_further");
  fs::remove_all(further);
  ACC_ASSERT_OK(acc_model_save_lora(f, further.c_str()));
  const json saved = json::parse(acc_test::read_file(further + "/adapter_config.json"));
  for (const auto& item : c["rank_pattern"].items()) {
    const auto now = saved["rank_pattern"][item.key()].get<std::vector<bool>>();
    const auto before = item.value().get<std::vector<bool>>();
    ASSERT_EQ(now.size(), before.size()) << item.key();
    for (size_t i = 0; i < now.size(); ++i) EXPECT_TRUE(!now[i] || before[i]) << item.key() << " entry " << i;
  }
  acc_model* back = adalora_model();
  ACC_ASSERT_OK(acc_model_load_lora(back, further.c_str()));
  EXPECT_EQ(eval_outputs(back, c), eval_outputs(f, c));
  acc_model_free(back);
  acc_model_free(f);
}
