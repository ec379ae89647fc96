// PEFT's RoAd (acc_model_add_road): each adapted layer's output rotated pair by pair and scaled by
// trained angles and scales. Checked against PEFT's layer restated in lora_road_case.py (the "road"
// case of export_lora_cases.py) on three nn.Linear layers: road_1 with group_size 4 and drawn values
// on a 3-D input, road_4 drawn, road_2 with group_size 2 starting as the identity. The draws and the
// stream after them, the outputs in evaluation and in training (also under bf16 autocast, enabled
// and disabled), the gradients, three AdamW steps and the merged weights and biases (merge and
// save_model), bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* road_model() { return eager_data_model("road_model.pt"); }

acc_options* road_options(const json& c) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_ROAD, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "variant", c["variant"].get<std::string>().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "group_size", c["group_size"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", c["init_weights"].get<bool>()), ACC_OK);
  return o;
}

acc_model* adapted(const json& c) {
  const std::string targets = c["targets"].get<std::string>();
  const size_t layers = static_cast<size_t>(std::count(targets.begin(), targets.end(), ',') + 1);
  return adapted_case_model("road_model.pt", acc_model_add_road, targets, road_options(c), c["seed"].get<uint64_t>(),
                            layers);
}

// adapter_config.json in `dir` with `key` set to `value`.
void edit_config(const std::string& dir, const std::string& key, const json& value) {
  json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  config[key] = value;
  std::ofstream(dir + "/adapter_config.json") << config.dump();
}

}  // namespace

TEST(Road, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json road = lora_case("road");
  acc_model* base = road_model();
  for (const char* variant : {"road_1", "road_4", "road_2"}) {
    SCOPED_TRACE(variant);
    const json& c = road[variant];
    const auto base_output = eval_outputs(base, c);
    acc_model* m = adapted(c);
    expect_case_draws_and_outputs(m, c);
    if (c["init_weights"].get<bool>()) EXPECT_EQ(eval_outputs(m, c), base_output);  // the identity
    // (the merge changes the biases too: they are among the merged tensors)
    expect_case_step_disabling_and_merges(m, c, base_output, 6, std::string("road_saved_model_") + variant);
    expect_case_training(adapted(c), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
  }
  acc_model_free(base);
}

TEST(Road, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("road")["road_4"];
  acc_model* m = adapted(c);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("road_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "ROAD");
  EXPECT_EQ(config["variant"], "road_4");
  EXPECT_EQ(config["group_size"], 4);
  EXPECT_EQ(config["init_weights"], false);
  EXPECT_FALSE(config.contains("bias"));  // (PEFT's RoadConfig has none)
  acc_tensor_list* saved = adapter_file_tensors(dir);
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &n));
  EXPECT_EQ(n, 4u);  // theta and alpha of two layers
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  acc_tensor_list_free(saved);
  acc_model* fresh = road_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // What PEFT's RoadConfig refuses in a file: another variant, an odd group size; and a file's group
  // size that does not divide a layer's outputs (its ValueError). Nothing changes.
  for (const auto& [key, value, why] :
       {std::tuple<const char*, json, const char*>{"variant", "road_3", "'variant' must be"},
        {"group_size", 3, "'group_size' must be even"},
        {"group_size", 16, "not a multiple of group_size 16"}}) {
    SCOPED_TRACE(why);
    edit_config(dir, key, value);
    fresh = road_model();
    EXPECT_NE(acc_model_load_lora(fresh, dir.c_str()), ACC_OK);
    EXPECT_NE(std::string(acc_last_error_message()).find(why), std::string::npos) << acc_last_error_message();
    ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
    EXPECT_EQ(n, 0u);
    acc_model_free(fresh);
    edit_config(dir, key, config[key]);
  }
  // Another variant's tensors (road_1's half as many) are refused naming them.
  edit_config(dir, "variant", "road_1");
  fresh = road_model();
  EXPECT_NE(acc_model_load_lora(fresh, dir.c_str()), ACC_OK);
  EXPECT_NE(std::string(acc_last_error_message()).find("road_theta"), std::string::npos) << acc_last_error_message();
  acc_model_free(fresh);

  // What PEFT's RoAd refuses: transformers' Conv1D (its ValueError), an odd group size, a layer whose
  // outputs group_size does not divide.
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_road(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "RoAd cannot adapt 'c_fc'");
  acc_model_free(lm);
  acc_options* o = road_options(c);
  EXPECT_EQ(acc_options_set_int(o, "group_size", 3), ACC_OK);
  acc_model* other = road_model();
  ACC_EXPECT_ERROR(acc_model_add_road(other, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "RoAd's group_size must be even");
  EXPECT_EQ(acc_options_set_int(o, "group_size", 8), ACC_OK);
  ACC_EXPECT_ERROR(acc_model_add_road(other, "fc1,head", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "RoAd cannot adapt 'head': its 4 outputs are not a multiple of group_size 8");
  ACC_ASSERT_OK(acc_model_lora_count(other, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(other);
  acc_options_free(o);
  expect_no_weighted_adapter(m, "RoAd");
  acc_model_free(m);
}

TEST(Road, SpecModelTrainsAndMerges) {  // (the identity at the start: the layer exactly unchanged)
  expect_spec_adapters_train_and_merge(acc_model_add_road, ACC_OPTIONS_ROAD, {{"group_size", 2}}, "linear1,linear2", 2);
}
