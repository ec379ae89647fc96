// PEFT's DeLoRA (acc_model_add_delora): a normalised low-rank delta of trained strength, scaled by
// the weight's column norms at the start. Checked against PEFT's layer restated in
// lora_delora_case.py (the "delora" case of export_lora_cases.py) on three nn.Linear layers: r 2 with
// fc2's 3 by rank_pattern, head's lambda 4 by lambda_pattern, B drawn, dropout, a 3-D input
// ("patterns"); B zeros with delora_only biases ("zeros"). The draws and the stream after them, the
// norms, the outputs in evaluation and in training (also under bf16 autocast, enabled and disabled),
// the gradients, three AdamW steps and the merged weights (merge and save_model), bit for bit; PEFT's
// files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::float_values;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* delora_model() { return eager_data_model("delora_model.pt"); }

acc_options* delora_options(const json& c) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DELORA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "delora_lambda", c["delora_lambda"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "rank_pattern", c["rank_pattern"].dump().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "lambda_pattern", c["lambda_pattern"].dump().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "module_dropout", c["module_dropout"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", c["init_weights"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "bias", c["bias"].get<std::string>().c_str()), ACC_OK);
  return o;
}

acc_model* adapted(const json& c) {
  return adapted_case_model("delora_model.pt", acc_model_add_delora, c["targets"].get<std::string>(), delora_options(c),
                            c["seed"].get<uint64_t>(), 3);
}

// The model's state entries named in `tensors` hold their values.
void expect_state_holds(acc_model* m, const json& tensors) {
  acc_tensor_list* state = nullptr;
  ASSERT_EQ(acc_model_state_dict(m, &state), ACC_OK);
  expect_list_holds(state, tensors, "");
  acc_tensor_list_free(state);
}

}  // namespace

TEST(Delora, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json delora = lora_case("delora");
  acc_model* base = delora_model();
  for (const char* variant : {"patterns", "zeros"}) {
    SCOPED_TRACE(variant);
    const json& c = delora[variant];
    const auto base_output = eval_outputs(base, c);
    acc_model* m = adapted(c);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    expect_params(m, c["chosen"]);
    expect_state_holds(m, c["w_norm"]);  // the norms: buffers of the model's state
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    if (c["init_weights"].get<bool>()) EXPECT_EQ(eval_outputs(m, c), base_output);  // B zeros
    expect_autocast_outputs(m, c["input"], c);
    expect_autocast_step(m, c, c["train_seed"].get<uint64_t>());
    expect_case_step_disabling_and_merges(m, c, base_output, 6, std::string("delora_saved_model_") + variant);
    expect_case_training(adapted(c), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
  }
  acc_model_free(base);
}

TEST(Delora, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("delora")["patterns"];
  acc_model* m = adapted(c);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("delora_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "DELORA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["delora_lambda"], 15.0);
  EXPECT_EQ(config["rank_pattern"], c["rank_pattern"]);
  EXPECT_EQ(config["lambda_pattern"], c["lambda_pattern"]);
  EXPECT_EQ(config["module_dropout"], 0.25);
  EXPECT_EQ(config["init_weights"], false);
  EXPECT_EQ(config["bias"], "none");
  acc_tensor_list* saved = adapter_file_tensors(dir);
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 12u);  // A, B, lambda and the norms of three layers
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  expect_list_holds(saved, c["w_norm"], "base_model.model.");
  acc_tensor_list_free(saved);
  acc_model* fresh = delora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // The file's norms are the ones used: zeroed there, the branches compute nothing.
  for (const char* layer : {"fc1", "fc2", "head"})
    zero_adapter_tensor(dir, std::string("base_model.model.") + layer + ".delora_w_norm");
  acc_model* plain = delora_model();
  const auto base_output = eval_outputs(plain, c);
  acc_model_free(plain);
  fresh = delora_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), base_output);
  acc_model_free(fresh);
  // A file lacking the norms is refused, naming them; nothing changes.
  replace_adapter_tensor(dir, "base_model.model.fc2.delora_w_norm", nullptr);
  fresh = delora_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "lacks base_model.model.fc2.delora_w_norm");
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);

  // What PEFT's DeLoRA refuses: transformers' Conv1D and embeddings (its TypeError).
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_delora(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "DeLoRA cannot adapt 'c_fc'");
  ACC_EXPECT_ERROR(acc_model_add_delora(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "DeLoRA cannot adapt 'embed'");
  acc_model_free(lm);
  // A strength of either sign, as PEFT takes it (its fill_), in the options and in files.
  acc_options* o = delora_options(c);
  EXPECT_EQ(acc_options_set_string(o, "lambda_pattern", "{\"fc2\": -1}"), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "delora_lambda", -3), ACC_OK);
  acc_model* other = delora_model();
  ACC_ASSERT_OK(acc_model_add_delora(other, "fc1,fc2", o, nullptr));
  EXPECT_EQ(param(other, "fc1.delora_lambda"), std::vector<float>{-3.0f});
  EXPECT_EQ(param(other, "fc2.delora_lambda"), std::vector<float>{-1.0f});
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(other, dir.c_str()));
  acc_model* negative = delora_model();
  ACC_ASSERT_OK(acc_model_load_lora(negative, dir.c_str()));
  EXPECT_EQ(eval_outputs(negative, c), eval_outputs(other, c));
  acc_model_free(negative);
  acc_model_free(other);
  acc_options_free(o);
  expect_no_weighted_adapter(m, "DeLoRA");
  acc_model_free(m);
}

TEST(Delora, SpecModelTrainsAndMerges) {  // (B zeros: the layer exactly unchanged at the start)
  expect_spec_adapters_train_and_merge(acc_model_add_delora, ACC_OPTIONS_DELORA, {{"r", 2}}, "linear1,linear2", 2);
}
