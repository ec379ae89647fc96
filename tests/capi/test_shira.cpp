// PEFT's SHiRA (acc_model_add_shira): each layer trains r (in + out) entries of its weight at places
// a generator of its own picks, and computes with W plus them. Checked against PEFT's layer
// restated in lora_shira_case.py (the "shira" case of export_lora_cases.py) on three nn.Linear
// layers: r 2 with random_seed 42, a 3-D input ("seeded"); r 1 on two layers with the generator's
// default seed ("unseeded"). The places and the draws (and the stream after them), the outputs in
// evaluation and in training (also under bf16 autocast, enabled and disabled), the gradients, three
// AdamW steps and the merged weights (merge and save_model), bit for bit; PEFT's files both ways,
// their places too (a mask function of the user's); what PEFT refuses.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
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

acc_model* shira_model() { return eager_data_model("shira_model.pt"); }

acc_options* shira_options(const json& c, bool init_weights) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_SHIRA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  if (!c["random_seed"].is_null())
    EXPECT_EQ(acc_options_set_int(o, "random_seed", c["random_seed"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init_weights ? 1 : 0), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, bool init_weights = false) {
  const std::string targets = c["targets"].get<std::string>();
  const size_t layers = static_cast<size_t>(std::count(targets.begin(), targets.end(), ',') + 1);
  return adapted_case_model("shira_model.pt", acc_model_add_shira, targets, shira_options(c, init_weights),
                            c["seed"].get<uint64_t>(), layers);
}

// The adapter folder's files for `m`, written to `dir` (emptied first).
void save_adapter(acc_model* m, const std::string& dir) {
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
}

std::vector<int32_t> int_values(const acc_tensor* t) { return acc_test::to_host<int32_t>(t); }

}  // namespace

TEST(Shira, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json shira = lora_case("shira");
  acc_model* base = shira_model();
  for (const char* variant : {"seeded", "unseeded"}) {
    SCOPED_TRACE(variant);
    const json& c = shira[variant];
    const auto base_output = eval_outputs(base, c);
    acc_model* zeros = adapted(c, true);  // the layer unchanged
    EXPECT_EQ(eval_outputs(zeros, c), base_output);
    acc_model_free(zeros);
    acc_model* m = adapted(c);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    expect_params(m, c["chosen"]);
    // The places, as the adapter's file holds them.
    const std::string dir = acc_test::temp_path(std::string("shira_places_") + variant);
    save_adapter(m, dir);
    acc_tensor_list* saved = adapter_file_tensors(dir);
    for (const auto& [module, places] : c["indices"].items()) {
      acc_tensor* t = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_find(saved, ("base_model.model." + module + ".shira_indices").c_str(), &t));
      acc_dtype dtype = ACC_DTYPE_UNDEFINED;
      ACC_ASSERT_OK(acc_tensor_dtype(t, &dtype));
      EXPECT_EQ(dtype, ACC_DTYPE_INT32) << module;
      EXPECT_EQ(int_values(t), places.get<std::vector<int32_t>>()) << module;
      acc_tensor_free(t);
    }
    acc_tensor_list_free(saved);
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    expect_autocast_outputs(m, c["input"], c);
    expect_autocast_step(m, c);
    expect_case_step_disabling_and_merges(m, c, base_output, 6, std::string("shira_saved_model_") + variant);
    expect_case_training(adapted(c), c["input"], c["target"], c, std::nullopt);
  }
  acc_model_free(base);
}

TEST(Shira, PeftFilesBothWaysTheirPlacesAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("shira")["seeded"];
  acc_model* m = adapted(c);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("shira_adapter");
  save_adapter(m, dir);
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "SHIRA");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["mask_type"], "random");
  EXPECT_EQ(config["random_seed"], 42);
  EXPECT_EQ(config["init_weights"], false);
  EXPECT_FALSE(config.contains("exclude_modules"));
  acc_tensor_list* saved = adapter_file_tensors(dir);
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  size_t entries = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &entries));
  EXPECT_EQ(entries, 6u);  // each layer's values and places
  acc_model* fresh = shira_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);

  // A mask function of the user's (PEFT's mask_fn): the file's places are the adapter's. fc2's
  // places moved one column on (wrapping): the merged weight gains the values there.
  acc_tensor* places = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(saved, "base_model.model.fc2.shira_indices", &places));
  std::vector<int32_t> moved = int_values(places);
  acc_tensor_free(places);
  const size_t k = moved.size() / 2;
  for (size_t i = k; i < moved.size(); ++i) moved[i] = (moved[i] + 1) % 8;
  const int64_t dims[] = {2, static_cast<int64_t>(k)};
  auto write_with = [&](const std::string& name, acc_tensor* replacement, const json& edited) {
    replace_adapter_tensor(dir, name, replacement);
    std::ofstream(dir + "/adapter_config.json") << edited.dump();
  };
  json custom = config;
  custom["mask_type"] = "my_structured_mask";
  custom["random_seed"] = nullptr;
  acc_tensor* moved_places = nullptr;
  ACC_ASSERT_OK(
      acc_tensor_from_host(moved.data(), moved.size() * sizeof(int32_t), dims, 2, ACC_DTYPE_INT32, &moved_places));
  write_with("base_model.model.fc2.shira_indices", moved_places, custom);
  acc_model* custom_mask = shira_model();
  ACC_ASSERT_OK(acc_model_load_lora(custom_mask, dir.c_str()));
  const auto base_weight = param(custom_mask, "fc2.weight");
  const auto values = param(custom_mask, "fc2.shira_weight");
  ACC_ASSERT_OK(acc_model_merge_lora(custom_mask));
  std::vector<float> expected = base_weight;
  for (size_t i = 0; i < k; ++i) expected[static_cast<size_t>(moved[i] * 8 + moved[k + i])] += values[i];
  EXPECT_EQ(param(custom_mask, "fc2.weight"), expected);
  acc_model_free(custom_mask);
  // PEFT on Windows writes the places as float32 whole numbers.
  std::vector<float> as_floats(moved.begin(), moved.end());
  acc_tensor* float_places = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_host(as_floats.data(), as_floats.size() * sizeof(float), dims, 2, ACC_DTYPE_FLOAT32,
                                     &float_places));
  write_with("base_model.model.fc2.shira_indices", float_places, custom);
  acc_model* windows = shira_model();
  ACC_ASSERT_OK(acc_model_load_lora(windows, dir.c_str()));
  ACC_ASSERT_OK(acc_model_merge_lora(windows));
  EXPECT_EQ(param(windows, "fc2.weight"), expected);
  acc_model_free(windows);

  auto refused_with = [&](const std::string& says) {
    acc_model* other = shira_model();
    ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, says);
    size_t n = 1;
    ACC_ASSERT_OK(acc_model_lora_count(other, &n));
    EXPECT_EQ(n, 0u);
    acc_model_free(other);
  };
  moved[k] = 8;  // a column past the weight's 8
  acc_tensor* outside = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_host(moved.data(), moved.size() * sizeof(int32_t), dims, 2, ACC_DTYPE_INT32, &outside));
  write_with("base_model.model.fc2.shira_indices", outside, config);
  refused_with("'fc2.shira_indices' holds a place outside the layer's 8 x 8 weight");
  as_floats[0] = 0.5f;
  acc_tensor* half_places = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_host(as_floats.data(), as_floats.size() * sizeof(float), dims, 2, ACC_DTYPE_FLOAT32,
                                     &half_places));
  write_with("base_model.model.fc2.shira_indices", half_places, config);
  refused_with("'fc2.shira_indices' holds a place that is not a whole number");
  const int64_t flat[] = {static_cast<int64_t>(2 * k)};
  acc_tensor* flat_places = nullptr;
  ACC_ASSERT_OK(
      acc_tensor_from_host(moved.data(), moved.size() * sizeof(int32_t), flat, 1, ACC_DTYPE_INT32, &flat_places));
  write_with("base_model.model.fc2.shira_indices", flat_places, config);
  refused_with("'fc2.shira_indices' has shape [64]; the layer's 32 values take [2, 32]");
  write_with("base_model.model.fc2.shira_indices", nullptr, config);
  refused_with("the SHiRA adapter of 'fc2' lacks 'fc2.shira_indices'");
  for (acc_tensor* t : {moved_places, float_places, half_places, outside, flat_places}) acc_tensor_free(t);
  acc_tensor_list_free(saved);

  // What PEFT's SHiRA refuses: more entries than the weight holds (its ValueError), transformers'
  // Conv1D and embeddings (its TypeError); its config has no exclude_modules, bias or layer settings.
  acc_options* o = shira_options(c, false);
  ACC_ASSERT_OK(acc_options_set_int(o, "r", 4));
  acc_model* other = shira_model();
  ACC_EXPECT_ERROR(acc_model_add_shira(other, "fc1,fc2", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "SHiRA cannot adapt 'fc1': r 4 trains r (in + out) = 56 entries, more than its 8 x 6 weight holds");
  size_t count = 1;
  ACC_ASSERT_OK(acc_model_lora_count(other, &count));
  EXPECT_EQ(count, 0u);
  acc_model_free(other);
  EXPECT_EQ(acc_options_set_string(o, "mask_type", "my_structured_mask"), ACC_ERR_INVALID_ARGUMENT);
  for (const char* key : {"exclude_modules", "bias", "layers_to_transform"})
    EXPECT_EQ(acc_options_set_string(o, key, "fc2"), ACC_ERR_INVALID_ARGUMENT) << key;
  acc_options_free(o);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_shira(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "SHiRA cannot adapt 'c_fc'");  // transformers' Conv1D
  ACC_EXPECT_ERROR(acc_model_add_shira(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "SHiRA cannot adapt 'embed'");
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "SHiRA");
  acc_model_free(m);
}

TEST(Shira, NamedAdaptersKeepTheirOwnPlaces) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("shira")["seeded"];
  acc_model* m = adapted(c);
  const auto first = eval_outputs(m, c);
  json other = c;
  other["random_seed"] = 7;
  acc_options* o = shira_options(other, false);
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "other", "fc1,fc2,head", o, nullptr));
  acc_options_free(o);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "other"));
  const auto second = eval_outputs(m, c);
  EXPECT_NE(second, first);
  const std::string dir = acc_test::temp_path("shira_named");
  save_adapter(m, dir);  // each adapter with its own places: "other" in its folder, seed 7's
  ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
  EXPECT_EQ(eval_outputs(m, c), first);
  for (const auto& [folder, outputs] : {std::pair{dir, first}, std::pair{dir + "/other", second}}) {
    acc_model* fresh = shira_model();
    ACC_ASSERT_OK(acc_model_load_lora(fresh, folder.c_str()));
    EXPECT_EQ(eval_outputs(fresh, c), outputs) << folder;
    acc_model_free(fresh);
  }
  acc_model_free(m);
}

TEST(Shira, SpecModelTrainsAndMerges) {  // (zeros: the layer exactly unchanged at the start)
  expect_spec_adapters_train_and_merge(acc_model_add_shira, ACC_OPTIONS_SHIRA, {{"r", 1}, {"random_seed", 3}},
                                       "linear1,linear2", 2);
}
