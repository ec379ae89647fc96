// LoftQ, PEFT's quantisation-aware start (init_lora_weights "loftq" with loftq_bits and loftq_iter),
// against PEFT's loftq_init and bitsandbytes' NF4 and int8 round trips restated (lora_cases.json
// "loftq", tests/data/lora_loftq_case.py): 4 and 8 bits, one and several rounds, a rank_pattern, a
// bfloat16 model, DoRA; each layer's A, B, quantised weight and magnitude, the global generator after; the files
// PEFT writes, read back into the unquantised model as PEFT's from_pretrained reads them; and what
// it refuses, before anything changes.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using namespace lora_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

acc_model* loftq_model(const char* file = "lora_loftq_model.pt") { return data_model(file); }

acc_options* loftq_options(const json& config) {
  acc_options* o = case_lora_options(config);
  EXPECT_EQ(acc_options_set(o, "init_lora_weights", "loftq"), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "loftq_bits", config["bits"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "loftq_iter", config["iter"].get<int64_t>()), ACC_OK);
  return o;
}

acc_status add_loftq(acc_model* m, const json& config, size_t* count = nullptr) {
  acc_options* o = loftq_options(config);
  const acc_status status = acc_model_add_lora(m, joined(config["targets"]).c_str(), o, count);
  acc_options_free(o);
  return status;
}

acc_tensor* probe_input() {
  std::vector<float> v(3 * 40);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.11f * static_cast<float>(i));
  return acc_test::floats(v, {3, 40});
}

}  // namespace

TEST(LoraLoftq, EveryBitsAndRoundsStartAsPefts) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json all = lora_case("loftq");
  ASSERT_TRUE(all.contains("cases"));
  for (const json& c : all["cases"]) {
    const json& config = c["config"];
    SCOPED_TRACE(config.dump());
    acc_model* m = loftq_model();
    if (config["model"] == "bfloat16") ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16));
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
    size_t count = 0;
    ACC_ASSERT_OK(add_loftq(m, config, &count));
    EXPECT_EQ(count, c["layers"].size());
    for (const auto& [name, layer] : c["layers"].items()) {
      EXPECT_EQ(param(m, name + ".lora_A.weight"), acc_test::float_values(layer["lora_A"])) << name;
      EXPECT_EQ(param(m, name + ".lora_B.weight"), acc_test::float_values(layer["lora_B"])) << name;
      EXPECT_EQ(param_floats(m, name + ".weight"), acc_test::float_values(layer["weight"])) << name << " quantised";
      if (layer.contains("magnitude"))
        EXPECT_EQ(param(m, name + ".lora_magnitude_vector"), acc_test::float_values(layer["magnitude"])) << name;
    }
    // LoftQ draws nothing beyond the adapters' nn.Linear draws.
    EXPECT_EQ(acc_test::next_global_draws(), acc_test::float_values(c["next_draw"]));
    acc_model_free(m);
  }
}

// The adapters approximate the quantisation error: the quantised model with them computes closer to
// the original than the quantised model alone. Saved, they carry PEFT's loftq_config; read into the
// original, unquantised model, its weights are quantised again (as PEFT's from_pretrained does) and
// the file's adapters replace the start, so it computes as the model that was saved; read into the
// quantised model, quantising again leaves its weights as they are.
TEST(LoraLoftq, SavedAdaptersReloadIntoTheUnquantisedModel) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json all = lora_case("loftq");
  for (int which : {0, 2}) {  // 4 and 8 bits
    const json& config = all["cases"][which]["config"];
    SCOPED_TRACE(config.dump());
    acc_model* m = loftq_model();
    const auto original = outputs_on(m, probe_input());
    ACC_ASSERT_OK(add_loftq(m, config));
    const auto adapted = outputs_on(m, probe_input());
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    const auto quantised = outputs_on(m, probe_input());
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
    EXPECT_GT(acc_test::max_difference(quantised, original), 0.0f) << "the weights were quantised";
    EXPECT_LT(acc_test::max_difference(adapted, original), acc_test::max_difference(quantised, original));

    const std::string dir = acc_test::temp_path("lora_loftq_" + std::to_string(which));
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    const json written = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
    EXPECT_EQ(written["init_lora_weights"], "loftq");
    EXPECT_EQ(written["loftq_config"], (json{{"loftq_bits", config["bits"]}, {"loftq_iter", config["iter"]}}));

    acc_model* fresh = loftq_model();
    ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
    for (const char* name : {"fc1.weight", "fc2.weight", "fc1.lora_A.weight", "fc2.lora_B.weight"})
      EXPECT_EQ(param(fresh, name), param(m, name)) << name;
    EXPECT_EQ(outputs_on(fresh, probe_input()), adapted);
    acc_model_free(fresh);
    // Read into the quantised model (its weights saved beside the adapters), they stay as they are.
    acc_model* quantised_model = loftq_model();
    acc_tensor_list* state = nullptr;
    ACC_ASSERT_OK(acc_model_state_dict(m, &state));
    ACC_ASSERT_OK(acc_model_load_state_dict(quantised_model, state, 0));
    acc_tensor_list_free(state);
    ACC_ASSERT_OK(acc_model_load_lora(quantised_model, dir.c_str()));
    for (const char* name : {"fc1.weight", "fc2.weight"}) EXPECT_EQ(param(quantised_model, name), param(m, name)) << name;
    EXPECT_EQ(outputs_on(quantised_model, probe_input()), adapted);
    acc_model_free(quantised_model);

    // A file without its loftq_config is refused by name, before anything changes (PEFT's ValueError).
    for (const json& bad : {json::object(), json{{"loftq_bits", 5}, {"loftq_iter", 1}},
                            json{{"loftq_bits", 4}, {"loftq_iter", 0}}, json{{"loftq_bits", 4}}}) {
      json changed = written;
      changed["loftq_config"] = bad;
      std::ofstream(dir + "/adapter_config.json", std::ios::trunc) << changed.dump();
      acc_model* other = loftq_model();
      const auto before = param(other, "fc1.weight");
      ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_IO, "loftq_config");
      EXPECT_EQ(param(other, "fc1.weight"), before);
      EXPECT_EQ(acc_test::parameter_names(other).size(), 6u) << "no adapters";
      acc_model_free(other);
    }
    fs::remove_all(dir);
    acc_model_free(m);
  }
}

TEST(LoraLoftq, RefusesWhatPeftCannotStartBeforeAnythingChanges) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LORA, &o));
  for (int64_t bits : {2, 6, 16})
    ACC_EXPECT_ERROR(acc_options_set_int(o, "loftq_bits", bits), ACC_ERR_INVALID_ARGUMENT,
                     "option 'loftq_bits' must be one of 4, 8");
  ACC_EXPECT_ERROR(acc_options_set(o, "loftq_bits", "5"), ACC_ERR_INVALID_ARGUMENT, "must be one of 4, 8");
  ACC_EXPECT_ERROR(acc_options_set_int(o, "loftq_iter", 0), ACC_ERR_INVALID_ARGUMENT, "loftq_iter");
  acc_options_free(o);

  auto expect_refused = [](acc_model* m, const json& config, acc_status status, const char* needle) {
    const auto names = acc_test::parameter_names(m);
    const auto fc1 = param_floats(m, "fc1.weight"), fc2 = param_floats(m, "fc2.weight");
    ACC_EXPECT_ERROR(add_loftq(m, config), status, needle);
    EXPECT_EQ(acc_test::parameter_names(m), names) << "no adapters";
    EXPECT_EQ(param_floats(m, "fc1.weight"), fc1) << "fc1 unchanged";
    EXPECT_EQ(param_floats(m, "fc2.weight"), fc2) << "fc2 unchanged";
  };
  const json base = {{"targets", {"fc1", "fc2"}}, {"r", 2}, {"lora_alpha", 4.0}, {"bits", 4}, {"iter", 1}};
  acc_model* m = loftq_model();
  json config = base;
  config["targets"] = {"fc1", "fc3"};
  config["r"] = 6;  // fc3 is 24 -> 5
  expect_refused(m, config, ACC_ERR_INVALID_ARGUMENT, "exceeds its weight's rank bound");
  acc_model_free(m);

  // fc2 beyond float16's range (bitsandbytes' int8 goes through float16), fc3 with a NaN.
  acc_model* extreme = loftq_model("lora_loftq_model_extreme.pt");
  config = base;
  config["bits"] = 8;
  expect_refused(extreme, config, ACC_ERR_INVALID_ARGUMENT, "exceeds float16's range");
  config = base;
  config["targets"] = {"fc1", "fc3"};
  expect_refused(extreme, config, ACC_ERR_INVALID_ARGUMENT, "'fc3': its weight holds inf or NaN");
  config["targets"] = {"fc1", "fc2"};  // 4 bits take fc2 (NF4 scales each block by its maximum)
  ACC_ASSERT_OK(add_loftq(extreme, config));
  acc_model_free(extreme);

  // PEFT's Embedding and convolutions fail on LoftQ; its Conv1D would get adapters of the wrong shapes.
  acc_model* embedding = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"embedding","num_embeddings":10,"embedding_dim":6},
    {"type":"linear","in_features":6,"out_features":4}])",
                                    &embedding));
  acc_options* lo = loftq_options(base);
  ACC_EXPECT_ERROR(acc_model_add_lora(embedding, "0", lo, nullptr), ACC_ERR_UNSUPPORTED,
                   "init_lora_weights loftq on the embedding '0'");
  ACC_ASSERT_OK(acc_model_add_lora(embedding, "1", lo, nullptr));
  acc_model_free(embedding);
  acc_model* conv = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(
      R"([{"type":"conv2d","in_channels":2,"out_channels":4,"kernel_size":3,"stride":1,"padding":1}])", &conv));
  ACC_EXPECT_ERROR(acc_model_add_lora(conv, "0", lo, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "init_lora_weights loftq on the convolution '0'");
  acc_model_free(conv);
  acc_model* conv1d = data_model("conv1d_model.pt");
  ACC_EXPECT_ERROR(acc_model_add_lora(conv1d, "c_fc", lo, nullptr), ACC_ERR_UNSUPPORTED,
                   "init_lora_weights loftq on 'c_fc' (transformers' Conv1D");
  acc_model_free(conv1d);
  acc_options_free(lo);
}
