// CorDA, PEFT's data-driven decomposition (preprocess_corda, then init_lora_weights "corda"), against
// PEFT restated (lora_cases.json "corda", tests/data/lora_corda_case.py): each layer's A and B, the
// residual weight, DoRA's magnitude, the global generator after (the loader's draws before the
// adapters'); the model computing as before; and what it refuses.
#include <filesystem>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using namespace lora_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

acc_options* corda_options(const json& config) {
  acc_options* o = case_lora_options(config);
  EXPECT_EQ(acc_options_set(o, "corda_method", config["corda_method"].get<std::string>().c_str()), ACC_OK);
  return o;
}

// The case's model after acc_model_add_lora_corda over its loader (seeded first, as PEFT's run).
acc_model* corda_model(const json& c, const char* file, acc_dataloader* dl) {
  acc_model* m = data_model(file);
  EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  acc_options* o = corda_options(c["config"]);
  size_t count = 0;
  EXPECT_EQ(acc_model_add_lora_corda(m, joined(c["config"]["targets"]).c_str(), o, dl, 1, &count), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(count, c["layers"].size());
  acc_options_free(o);
  return m;
}

void expect_peft(acc_model* m, const json& c) {
  for (const auto& [name, layer] : c["layers"].items()) {
    EXPECT_EQ(param(m, name + ".lora_A.weight"), acc_test::float_values(layer["lora_A"])) << name;
    EXPECT_EQ(param(m, name + ".lora_B.weight"), acc_test::float_values(layer["lora_B"])) << name;
    EXPECT_EQ(param(m, name + ".weight"), acc_test::float_values(layer["weight"])) << name;
    if (layer.contains("magnitude"))
      EXPECT_EQ(param(m, name + ".lora_magnitude_vector"), acc_test::float_values(layer["magnitude"])) << name;
  }
  EXPECT_EQ(acc_test::next_global_draws(), acc_test::float_values(c["next_draw"]));
}

}  // namespace

TEST(LoraCorda, InstructionPreviewedStartIsPeftsOnSequences) {
  const json c = lora_case("corda")["lm"];
  acc_dataloader* dl = loader_over({c["ids"]}, 1, true);
  acc_model* m = corda_model(c, "corda_lm_model.pt", dl);
  expect_peft(m, c);
  int in_epoch = 1;
  ASSERT_EQ(acc_dataloader_in_epoch(dl, &in_epoch), ACC_OK);
  EXPECT_EQ(in_epoch, 0);
  // The configuration PEFT writes: init_lora_weights corda and its corda_config; such files are
  // refused on loading (their residual weights cannot be rebuilt).
  const std::string dir = acc_test::temp_path("corda_adapters");
  fs::remove_all(dir);
  ASSERT_EQ(acc_model_save_lora(m, dir.c_str()), ACC_OK) << acc_last_error_message();
  const json written = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(written["init_lora_weights"], "corda");
  EXPECT_EQ(written["corda_config"]["corda_method"], "ipm");
  acc_model* fresh = data_model("corda_lm_model.pt");
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "corda");
  acc_model_free(fresh);
  acc_model_free(m);
  acc_dataloader_free(dl);
}

// The model starts computing as before: the residual plus scaling B A is the weight, to rounding.
TEST(LoraCorda, KnowledgePreservedStartWithDoraKeepsTheOutputs) {
  const json c = lora_case("corda")["mlp"];
  acc_model* base = data_model("corda_mlp_model.pt");
  acc_tensor* x = acc_test::from_json(c["x"]);
  acc_tensor* y0 = nullptr;
  ASSERT_EQ(acc_model_forward1(base, x, ACC_FORWARD_NO_GRAD, &y0), ACC_OK);
  acc_dataloader* dl = loader_over({c["x"]}, 6, false);
  acc_model* m = corda_model(c, "corda_mlp_model.pt", dl);
  expect_peft(m, c);
  acc_tensor* y1 = nullptr;
  ASSERT_EQ(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y1), ACC_OK) << acc_last_error_message();
  EXPECT_LT(acc_test::max_difference(acc_test::to_floats(y0), acc_test::to_floats(y1)), 1e-4f);
  for (acc_tensor* t : {x, y0, y1}) acc_tensor_free(t);
  for (acc_model* model : {base, m}) acc_model_free(model);
  acc_dataloader_free(dl);
}

TEST(LoraCorda, RefusesWhatItCannotStartFrom) {
  const json c = lora_case("corda")["mlp"];
  acc_dataloader* dl = loader_over({c["x"]}, 6, false);
  acc_model* m = data_model("corda_mlp_model.pt");
  acc_options* o = lora_options(2, 4);
  ASSERT_EQ(acc_options_set(o, "init_lora_weights", "corda"), ACC_OK);
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT, "acc_model_add_lora_corda");
  ACC_EXPECT_ERROR(acc_model_add_lora_corda(m, "fc1", o, dl, 2, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "first 2 field(s)");
  ACC_EXPECT_ERROR(acc_model_add_lora_corda(m, "nothing", o, dl, 1, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "matches no");
  acc_options* wide = lora_options(11, 4);  // fc1 is 10 -> 12
  ACC_EXPECT_ERROR(acc_model_add_lora_corda(m, "fc1", wide, dl, 1, nullptr), ACC_ERR_INVALID_ARGUMENT, "r 11");
  acc_options_free(wide);
  size_t count = 1;  // every refusal left the model without adapters

  ASSERT_EQ(acc_model_lora_count(m, &count), ACC_OK);
  EXPECT_EQ(count, 0u);
  acc_tensor_list* batch = nullptr;
  ASSERT_EQ(acc_dataloader_next(dl, &batch), ACC_OK);
  acc_tensor_list_free(batch);
  ACC_EXPECT_ERROR(acc_model_add_lora_corda(m, "fc1", o, dl, 1, nullptr), ACC_ERR_INVALID_ARGUMENT, "in an epoch");
  ASSERT_EQ(acc_dataloader_end_epoch(dl), ACC_OK);
  ACC_EXPECT_ERROR(acc_model_add_lora_corda(m, "fc1", o, nullptr, 1, nullptr), ACC_ERR_INVALID_HANDLE, "dl");
  acc_options_free(o);
  acc_model_free(m);
  acc_dataloader_free(dl);
}
