// transformers' load_in_8bit (acc_model_quantize: LLM.int8, bitsandbytes' Linear8bitLt) and LoRA
// on it, against bitsandbytes' and PEFT's arithmetic restated (tests/data/export_eight_bit_cases.py,
// eight_bit_cases.json): thresholds 6 (the default), 0 and 1.5 with outlier columns, float32 and
// bfloat16 models, default and given skip lists, prepare_model_for_kbit_training under bf16
// autocast; each 8-bit layer's state-dict entries bit for bit, the evaluation output (the int8
// product), three AdamW steps' losses in training mode (the dequantised product; one case in
// evaluation mode, through the int8 product's backward), the adapters after them, the evaluation
// output with them and after merging. Then what a user relies on
// around it: the bytes it saves, the state dict read back into a fresh model and a corrupt one
// refused, the adapters' files, and every refusal leaving the model as it was.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "quantized_support.h"

using namespace lora_test;
using namespace quantized_test;

namespace {

const char* const kCases = "eight_bit_cases.json";

std::string config_json(const json& c) {
  json config = {{"load_in_8bit", true}};
  if (!c["threshold"].is_null()) config["llm_int8_threshold"] = c["threshold"];
  if (!c["skip"].is_null()) config["llm_int8_skip_modules"] = c["skip"];
  return config.dump();
}

acc_model* quantised(const json& c, size_t* count = nullptr) {
  acc_model* m = data_model("eight_bit_model.pt");
  if (c["model"] == "bfloat16") EXPECT_EQ(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16), ACC_OK);
  EXPECT_EQ(acc_model_quantize(m, config_json(c).c_str(), count), ACC_OK) << acc_last_error_message();
  return m;
}

// The output in evaluation mode (the int8 product), the model left in it.
std::vector<float> evaluated(acc_model* m, acc_tensor* x, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return case_output(m, x, c);
}

}  // namespace

TEST(EightBit, QuantisesTrainsEvaluatesAndMergesAsBitsandbytesAndPeft) {
  REQUIRE_CASES(all, kCases);
  for (const json& c : all["cases"]) {
    const json& config = c["config"];
    SCOPED_TRACE(config.dump());
    size_t count = 0;
    acc_model* m = quantised(config, &count);
    EXPECT_EQ(count, c["layers"].size());
    expect_layer_states(m, c["layers"], c["states"]);
    if (config.value("prepare", false)) {  // the 8-bit layers' biases and the output layer's tensors
      size_t cast = 0;
      ACC_ASSERT_OK(acc_model_prepare_for_kbit_training(m, &cast));
      EXPECT_EQ(cast, 4u);
    }
    acc_tensor* x = case_input(all, config);
    EXPECT_EQ(evaluated(m, x, config), acc_test::float_values(c["evaluated"]));
    ACC_ASSERT_OK(acc_set_seed(77));
    EXPECT_EQ(add_case_lora(m, config), config["targets"].size());
    ACC_ASSERT_OK(acc_model_set_training(m, config.value("train_in_eval", false) ? 0 : 1));
    acc_accelerator* acc = nullptr;
    EXPECT_EQ(train_case(m, all, config, &acc), c["losses"].get<std::vector<double>>());
    for (const auto& [name, pair] : c["adapters"].items()) {
      EXPECT_EQ(param(m, name + ".lora_A.weight"), acc_test::float_values(pair["a"])) << name;
      EXPECT_EQ(param(m, name + ".lora_B.weight"), acc_test::float_values(pair["b"])) << name;
    }
    EXPECT_EQ(evaluated(m, x, config), acc_test::float_values(c["adapted"]));
    // merge_and_unload (of the unwrapped model, once prepared): each 8-bit layer quantised again
    // from its weight plus the delta.
    acc_model* merged = m;
    if (acc) ACC_ASSERT_OK(acc_unwrap_model(acc, m, &merged));
    ACC_ASSERT_OK(acc_model_merge_lora(merged));
    expect_layer_states(merged, c["layers"], c["merged_states"]);
    EXPECT_EQ(evaluated(merged, x, config), acc_test::float_values(c["merged"]));
    acc_tensor_free(x);
    if (merged != m) acc_model_free(merged);
    acc_model_free(m);
    acc_accelerator_free(acc);
  }
}

TEST(EightBit, HoldsOneByteAValuePlusItsRowsScales) {
  REQUIRE_CASES(all, kCases);
  const json& c = all["cases"][0]["config"];
  acc_model* plain = data_model("eight_bit_model.pt");
  const auto before = state_of(plain);
  acc_model* m = quantised(c);
  const auto after = state_of(m);
  auto bytes_of = [](const std::map<std::string, Entry>& state, const std::string& layer) {
    double total = 0;
    for (const std::string& entry : {".weight", ".SCB", ".weight_format"}) {
      auto it = state.find(layer + entry);
      if (it != state.end())
        total += static_cast<double>(it->second.values.size()) * (it->second.dtype == ACC_DTYPE_FLOAT32 ? 4 : 1);
    }
    return total;
  };
  EXPECT_EQ(bytes_of(after, "fc1"), 160.0 * 128 + 160 * 4 + 1);  // 4 bytes a value before
  EXPECT_EQ(bytes_of(before, "fc1"), 160.0 * 128 * 4);
  EXPECT_EQ(bytes_of(after, "fc2"), 33.0 * 160 + 33 * 4 + 1);
  EXPECT_EQ(bytes_of(after, "fc3"), bytes_of(before, "fc3"));  // the output layer stays
  acc_model_free(plain);
  acc_model_free(m);
}

TEST(EightBit, StateDictReadsBackIntoAFreshModelAndRefusesACorruptOne) {
  REQUIRE_CASES(all, kCases);
  const json& c = all["cases"][1]["config"];  // threshold 0, every layer
  acc_model* m = quantised(c);
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(m, &state));
  const std::string path = acc_test::temp_path("eight_bit_state.safetensors");
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(state, path.c_str()));
  acc_tensor_list* read = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &read));
  // Into a model quantised from other weights: codes and scales come from the file.
  acc_model* other = data_model("eight_bit_model.pt");
  acc_test::fill_state(other, 0.25f);
  ACC_ASSERT_OK(acc_model_quantize(other, config_json(c).c_str(), nullptr));
  acc_tensor* x = case_input(all, c);
  EXPECT_NE(evaluated(other, x, c), evaluated(m, x, c));
  ACC_ASSERT_OK(acc_model_load_state_dict(other, read, 1));
  EXPECT_EQ(evaluated(other, x, c), evaluated(m, x, c));
  // A layout bitsandbytes does not read, or scales that are not finite, are refused, naming the
  // entry, before anything changes.
  acc_model* fresh = quantised(c);
  const auto kept = evaluated(fresh, x, c);
  const uint8_t col_major = 1;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> scales(33, 1.0f);
  scales[3] = nan;
  const int64_t rows = 33;
  acc_tensor *format = nullptr, *bad_scales = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_host(&col_major, 1, nullptr, 0, ACC_DTYPE_UINT8, &format));
  ACC_ASSERT_OK(acc_tensor_from_host(scales.data(), scales.size() * 4, &rows, 1, ACC_DTYPE_FLOAT32, &bad_scales));
  // Codes of another integer type would be cast to int8, wrapping (1000 -> -24).
  acc_tensor *codes = nullptr, *wide_codes = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(state, "fc1.weight", &codes));
  ACC_ASSERT_OK(acc_tensor_to(codes, nullptr, ACC_DTYPE_INT64, &wide_codes));
  const std::pair<const char*, const acc_tensor*> corrupt[] = {
      {"fc1.weight_format", format}, {"fc2.SCB", bad_scales}, {"fc1.weight", wide_codes}};
  for (const auto& [name, value] : corrupt) {
    const std::string bad_path = acc_test::temp_path(std::string(name) + ".safetensors");
    ACC_ASSERT_OK(acc_tensor_list_save_safetensors(state, bad_path.c_str()));
    acc_test::replace_saved_tensor(bad_path, name, value);
    acc_tensor_list* bad = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_load_safetensors(bad_path.c_str(), &bad));
    EXPECT_EQ(acc_model_load_state_dict(fresh, bad, 1), ACC_ERR_INVALID_ARGUMENT) << name;
    EXPECT_NE(std::string(acc_last_error_message()).find(name), std::string::npos) << acc_last_error_message();
    EXPECT_EQ(evaluated(fresh, x, c), kept) << name;
    acc_tensor_list_free(bad);
  }
  for (acc_model* model : {m, other, fresh}) acc_model_free(model);
  for (acc_tensor* t : {x, format, bad_scales, codes, wide_codes}) acc_tensor_free(t);
  acc_tensor_list_free(state);
  acc_tensor_list_free(read);
}

TEST(EightBit, PreparedWithBf16ResumesExactlyFromSaveState) {
  REQUIRE_CASES(all, kCases);
  const json& c = all["cases"][0]["config"];
  expect_resumes_exactly(all, c, "eight_bit_model.pt", [&](acc_model* m) {
    EXPECT_EQ(acc_model_quantize(m, config_json(c).c_str(), nullptr), ACC_OK) << acc_last_error_message();
  });
}

TEST(EightBit, SaveModelWritesTransformersEntriesThatLoadBack) {
  // acc_save_model writes the 8-bit layers as transformers saves an 8-bit model (the int8 codes as
  // `weight`, SCB and weight_format beside them), and acc_model_load_safetensors reads them back.
  REQUIRE_CASES(all, kCases);
  const json& c = all["cases"][2]["config"];  // bfloat16, fc1 and fc3
  acc_model* m = quantised(c);
  acc_accelerator* acc = acc_test::make_accelerator({});
  const std::string dir = acc_test::fresh_dir("eight_bit_saved");
  ACC_ASSERT_OK(acc_save_model(acc, m, dir.c_str(), nullptr));
  acc_tensor_list* file = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/model.safetensors").c_str(), &file));
  const std::tuple<const char*, acc_dtype, size_t> expected[] = {
      {"fc1.weight", ACC_DTYPE_INT8, 2},         {"fc1.SCB", ACC_DTYPE_FLOAT32, 1},
      {"fc1.weight_format", ACC_DTYPE_UINT8, 0}, {"fc1.bias", ACC_DTYPE_BFLOAT16, 1},
      {"fc2.weight", ACC_DTYPE_BFLOAT16, 2},     {"fc3.weight", ACC_DTYPE_INT8, 2}};
  for (const auto& [name, dtype, dims] : expected) {
    acc_tensor* t = nullptr;
    ASSERT_EQ(acc_tensor_list_find(file, name, &t), ACC_OK) << name;
    acc_dtype got = ACC_DTYPE_UNDEFINED;
    size_t ndim = 99;
    ACC_ASSERT_OK(acc_tensor_dtype(t, &got));
    ACC_ASSERT_OK(acc_tensor_ndim(t, &ndim));
    EXPECT_EQ(got, dtype) << name;
    EXPECT_EQ(ndim, dims) << name;
    acc_tensor_free(t);
  }
  acc_tensor_list_free(file);
  acc_model* other = data_model("eight_bit_model.pt");
  acc_test::fill_state(other, -0.5f);
  ACC_ASSERT_OK(acc_model_to(other, nullptr, ACC_DTYPE_BFLOAT16));
  ACC_ASSERT_OK(acc_model_quantize(other, config_json(c).c_str(), nullptr));
  ACC_ASSERT_OK(acc_model_load_safetensors(other, dir.c_str(), 1, nullptr, nullptr));
  acc_tensor* x = case_input(all, c);
  EXPECT_EQ(evaluated(other, x, c), evaluated(m, x, c));
  // A corrupt entry in the folder's file is refused, naming the entry and the file.
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(m, &state));
  acc_tensor* scales = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(state, "fc1.SCB", &scales));
  acc_tensor_list_free(state);
  int64_t rows = 0;
  ACC_ASSERT_OK(acc_tensor_numel(scales, &rows));
  std::vector<float> infinite(static_cast<size_t>(rows), std::numeric_limits<float>::infinity());
  acc_tensor* bad = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_host(infinite.data(), infinite.size() * 4, &rows, 1, ACC_DTYPE_FLOAT32, &bad));
  acc_test::replace_saved_tensor(dir + "/model.safetensors", "fc1.SCB", bad);
  EXPECT_EQ(acc_model_load_safetensors(other, dir.c_str(), 1, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT);
  const std::string message = acc_last_error_message();
  EXPECT_NE(message.find(dir + "' does not fit the model: 'fc1.SCB' holds scales"), std::string::npos) << message;
  EXPECT_EQ(evaluated(other, x, c), evaluated(m, x, c));
  for (acc_tensor* t : {x, scales, bad}) acc_tensor_free(t);
  for (acc_model* model : {m, other}) acc_model_free(model);
  acc_accelerator_free(acc);
}

// acc_save_model of an LLM.int8 model with adapters writes them merged (codes and SCB quantised
// again, as merging does), the model left as it was (it wrote the base codes before).
TEST(EightBit, SaveModelWithAdaptersWritesTheMergedLayers) {
  REQUIRE_CASES(all, kCases);
  const json& c = all["cases"][0]["config"];
  acc_model* m = quantised(c);
  add_case_lora(m, c);
  train_case(m, all, c);
  expect_saved_model_is_merged(m, acc_test::fresh_dir("eight_bit_saved_merged"));
  acc_model_free(m);
}

TEST(EightBit, AdaptersSaveAndLoadIntoAFreshQuantisedModel) {
  REQUIRE_CASES(all, kCases);
  const json& c = all["cases"][0]["config"];
  acc_model* m = quantised(c);
  add_case_lora(m, c);
  ACC_ASSERT_OK(acc_model_set_training(m, 1));
  train_case(m, all, c);
  const std::string dir = acc_test::fresh_dir("eight_bit_lora");
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  acc_model* fresh = quantised(c);
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  acc_tensor* x = case_input(all, c);
  EXPECT_EQ(evaluated(fresh, x, c), evaluated(m, x, c));
  acc_tensor_free(x);
  acc_model_free(m);
  acc_model_free(fresh);
}

TEST(EightBit, RefusesWhatItCannotHonourLeavingTheModelAsItWas) {
  REQUIRE_CASES(all, kCases);
  const json& c = all["cases"][0]["config"];
  acc_model* m = data_model("eight_bit_model.pt");
  const std::pair<const char*, acc_status> configs[] = {
      {R"({"load_in_8bit": true, "llm_int8_has_fp16_weight": true})", ACC_ERR_UNSUPPORTED},
      {R"({"load_in_8bit": true, "load_in_4bit": true})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_8bit": false})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_8bit": true, "llm_int8_threshold": -1})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_8bit": true, "llm_int8_threshold": "6"})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_8bit": true, "llm_int8_skip_modules": ["fc"]})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_8bit": true, "llm_int8_enable_fp32_cpu_offload": true})", ACC_ERR_UNSUPPORTED},
  };
  acc_tensor* x = case_input(all, c);
  const auto original = evaluated(m, x, c);
  for (const auto& [config, status] : configs) {
    EXPECT_EQ(acc_model_quantize(m, config, nullptr), status) << config;
    EXPECT_EQ(evaluated(m, x, c), original) << config;
  }
  // acc_model_quantize_4bit names the function that takes 8 bits.
  EXPECT_EQ(acc_model_quantize_4bit(m, config_json(c).c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("acc_model_quantize"), std::string::npos);
  ACC_ASSERT_OK(acc_model_quantize(m, config_json(c).c_str(), nullptr));
  const auto quantised_output = evaluated(m, x, c);
  EXPECT_NE(quantised_output, original);
  // Once quantised: not twice, no cast of the dtype, no TorchScript, no DoRA or data-driven start
  // on an 8-bit layer (PEFT's would dequantise it).
  EXPECT_EQ(acc_model_quantize(m, config_json(c).c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(acc_model_save_torchscript(m, acc_test::temp_path("eight_bit.pt").c_str()), ACC_ERR_UNSUPPORTED);
  acc_options* dora = acc_test::lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set_bool(dora, "use_dora", 1));
  EXPECT_EQ(acc_model_add_lora(m, "fc1", dora, nullptr), ACC_ERR_UNSUPPORTED);
  acc_options* pissa = acc_test::lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set_string(pissa, "init_lora_weights", "pissa"));
  EXPECT_EQ(acc_model_add_lora(m, "fc1", pissa, nullptr), ACC_ERR_UNSUPPORTED);
  EXPECT_EQ(evaluated(m, x, c), quantised_output);
  acc_options_free(dora);
  acc_options_free(pissa);
  acc_tensor_free(x);
  acc_model_free(m);
}

TEST(EightBit, ALayerSpecModelIsUnsupported) {
  acc_model* spec = acc_test::spec_model(R"([{"type":"linear","in_features":4,"out_features":3}])");
  EXPECT_EQ(acc_model_quantize(spec, R"({"load_in_8bit": true})", nullptr), ACC_ERR_UNSUPPORTED);
  acc_model_free(spec);
}
