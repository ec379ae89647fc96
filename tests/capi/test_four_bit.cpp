// transformers' load_in_4bit (acc_model_quantize_4bit) and QLoRA on it, against bitsandbytes' and
// PEFT's arithmetic restated (tests/data/export_four_bit_cases.py, four_bit_cases.json): NF4 and
// FP4, double quantisation, float32 and bfloat16 compute dtypes and models, default and given skip
// lists; each 4-bit layer's state-dict entries bit for bit, the output, three AdamW steps' losses
// and the adapters after them. Then what a user relies on around it: the memory it saves, the state
// dict read back into a fresh model (and refused where it describes another layer), the adapters'
// files, and every refusal leaving the model as it was.
#include <string>
#include <vector>

#include "quantized_support.h"

using namespace lora_test;
using namespace quantized_test;

namespace {

std::string config_json(const json& c) {
  json config = {{"load_in_4bit", true},
                 {"bnb_4bit_quant_type", c["quant_type"]},
                 {"bnb_4bit_use_double_quant", c["double_quant"]},
                 {"bnb_4bit_compute_dtype", c["compute"]}};
  if (!c["skip"].is_null()) config["llm_int8_skip_modules"] = c["skip"];
  return config.dump();
}

acc_model* quantised(const json& c, size_t* count = nullptr) {
  acc_model* m = data_model("four_bit_model.pt");
  if (c["model"] == "bfloat16") EXPECT_EQ(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16), ACC_OK);
  EXPECT_EQ(acc_model_quantize_4bit(m, config_json(c).c_str(), count), ACC_OK) << acc_last_error_message();
  return m;
}

}  // namespace

TEST(FourBit, QuantisesTrainsAndMergesAsBitsandbytesAndPeft) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  for (const json& c : all["cases"]) {
    const json& config = c["config"];
    SCOPED_TRACE(config.dump());
    size_t count = 0;
    acc_model* m = quantised(config, &count);
    EXPECT_EQ(count, c["layers"].size());
    expect_layer_states(m, c["layers"], c["states"]);
    if (config.value("prepare", false)) {  // the 4-bit layers' biases and the output layer's tensors
      size_t cast = 0;
      ACC_ASSERT_OK(acc_model_prepare_for_kbit_training(m, &cast));
      EXPECT_EQ(cast, 4u);
    }
    ACC_ASSERT_OK(acc_set_seed(77));
    EXPECT_EQ(add_case_lora(m, config), config["targets"].size());
    acc_tensor* x = case_input(all, config);
    EXPECT_EQ(case_output(m, x, config), acc_test::float_values(c["before"]));
    acc_tensor_free(x);
    acc_accelerator* acc = nullptr;
    EXPECT_EQ(train_case(m, all, config, &acc), c["losses"].get<std::vector<double>>());
    for (const auto& [name, pair] : c["adapters"].items()) {
      EXPECT_EQ(param(m, name + ".lora_A.weight"), acc_test::float_values(pair["a"])) << name;
      EXPECT_EQ(param(m, name + ".lora_B.weight"), acc_test::float_values(pair["b"])) << name;
    }
    // merge_and_unload (of the unwrapped model, once prepared): each 4-bit layer quantised again
    // from its weight plus the delta.
    acc_model* merged = m;
    if (acc) ACC_ASSERT_OK(acc_unwrap_model(acc, m, &merged));
    ACC_ASSERT_OK(acc_model_merge_lora(merged));
    expect_layer_states(merged, c["layers"], c["merged_states"]);
    x = case_input(all, config);
    EXPECT_EQ(case_output(merged, x, config), acc_test::float_values(c["merged"]));
    acc_tensor_free(x);
    if (merged != m) acc_model_free(merged);
    acc_model_free(m);
    acc_accelerator_free(acc);
  }
}

TEST(FourBit, HoldsASixthOfTheWeightsBytesOrLess) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  const json& c = all["cases"][0]["config"];  // NF4 without double quantisation
  acc_model* plain = data_model("four_bit_model.pt");
  const auto before = state_of(plain);
  acc_model* m = quantised(c);
  const auto after = state_of(m);
  auto bytes_of = [](const std::map<std::string, Entry>& state, const std::string& layer) {
    double total = 0;
    for (const auto& [name, entry] : state)
      if (name.rfind(layer + ".weight", 0) == 0)
        total += static_cast<double>(entry.values.size()) * (entry.dtype == ACC_DTYPE_UINT8 ? 1 : 4);
    return total;
  };
  // 4 bits a value and a float32 maximum per 64 (0.5625 of a byte against 4), and per layer the
  // 16 codes and the JSON text.
  for (const char* layer : {"fc1", "fc2"}) EXPECT_LT(bytes_of(after, layer), bytes_of(before, layer) / 6.0) << layer;
  EXPECT_EQ(bytes_of(after, "fc3"), bytes_of(before, "fc3"));  // the output layer stays
  acc_model_free(plain);
  acc_model_free(m);
}

TEST(FourBit, StateDictReadsBackIntoAFreshModelAndRefusesAnotherLayers) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  const json& c = all["cases"][1];  // FP4, double quantisation, bfloat16 compute
  acc_model* m = quantised(c["config"]);
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(m, &state));
  const std::string path = acc_test::temp_path("four_bit_state.safetensors");
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(state, path.c_str()));
  acc_tensor_list* read = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &read));
  // Into a model quantised from other weights: the codes, maxima and offsets all come from the file.
  acc_model* other = data_model("four_bit_model.pt");
  acc_test::fill_state(other, 0.25f);
  ACC_ASSERT_OK(acc_model_quantize_4bit(other, config_json(c["config"]).c_str(), nullptr));
  acc_tensor* x = case_input(all, c["config"]);
  EXPECT_NE(output_of(other, x), output_of(m, x));
  ACC_ASSERT_OK(acc_model_load_state_dict(other, read, 1));
  EXPECT_EQ(output_of(other, x), output_of(m, x));
  // A state that describes the layer as another dtype is refused, naming it, before anything changes.
  acc_model* nf4 = quantised(all["cases"][0]["config"]);
  const auto kept = output_of(nf4, x);
  EXPECT_EQ(acc_model_load_state_dict(nf4, read, 0), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(acc_last_error_message()).find("fc1.weight"), std::string::npos) << acc_last_error_message();
  EXPECT_EQ(output_of(nf4, x), kept);
  for (acc_model* model : {m, other, nf4}) acc_model_free(model);
  acc_tensor_free(x);
  acc_tensor_list_free(state);
  acc_tensor_list_free(read);
}

// Entries a dequantisation multiplies by, found not finite (or negative maxima), a double
// quantisation's offset beyond float32, and codes of another integer type (which a cast would
// wrap) are refused, naming the entry, before anything changes.
TEST(FourBit, CorruptStateEntriesAreRefusedBeforeAnythingChanges) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  for (const int index : {0, 1}) {  // NF4 without double quantisation, FP4 with
    const json& c = all["cases"][index]["config"];
    SCOPED_TRACE(c.dump());
    acc_model* m = quantised(c);
    acc_tensor_list* state = nullptr;
    ACC_ASSERT_OK(acc_model_state_dict(m, &state));
    const std::string path = acc_test::temp_path("four_bit_corrupt.safetensors");
    acc_tensor* x = case_input(all, c);
    const auto kept = output_of(m, x);
    const bool nested = c["double_quant"].get<bool>();
    std::vector<std::pair<std::string, acc_tensor*>> corrupt;
    auto with_value = [&](const std::string& name, float value, size_t at) {
      acc_tensor *own = nullptr, *as_float = nullptr;
      ASSERT_EQ(acc_tensor_list_find(state, name.c_str(), &own), ACC_OK) << name;
      ASSERT_EQ(acc_tensor_to(own, nullptr, ACC_DTYPE_FLOAT32, &as_float), ACC_OK);
      int64_t n = 0;
      ACC_ASSERT_OK(acc_tensor_numel(as_float, &n));
      std::vector<float> values(static_cast<size_t>(n));
      ACC_ASSERT_OK(acc_tensor_to_host(as_float, values.data(), values.size() * 4));
      values.at(at) = value;
      acc_tensor* changed = nullptr;
      ACC_ASSERT_OK(acc_tensor_from_host(values.data(), values.size() * 4, &n, 1, ACC_DTYPE_FLOAT32, &changed));
      corrupt.emplace_back(name, changed);
      acc_tensor_free(own);
      acc_tensor_free(as_float);
    };
    with_value("fc1.weight.quant_map", std::numeric_limits<float>::infinity(), 15);
    if (nested) {
      // The offset as JSON text, beyond float32's range.
      const std::string key = "fc1.weight.quant_state.bitsandbytes__" + c["quant_type"].get<std::string>();
      acc_tensor* text = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_find(state, key.c_str(), &text));
      int64_t size = 0;
      ACC_ASSERT_OK(acc_tensor_numel(text, &size));
      std::string bytes(static_cast<size_t>(size), '\0');
      ACC_ASSERT_OK(acc_tensor_to_host(text, bytes.data(), bytes.size()));
      acc_tensor_free(text);
      json described = json::parse(bytes);
      described["nested_offset"] = 1e300;
      const std::string changed = described.dump();
      const int64_t length = static_cast<int64_t>(changed.size());
      acc_tensor* changed_text = nullptr;
      ACC_ASSERT_OK(acc_tensor_from_host(changed.data(), changed.size(), &length, 1, ACC_DTYPE_UINT8, &changed_text));
      corrupt.emplace_back(key, changed_text);
      with_value("fc1.weight.nested_absmax", std::numeric_limits<float>::quiet_NaN(), 0);
      with_value("fc1.weight.nested_quant_map", std::numeric_limits<float>::quiet_NaN(), 3);
    } else {
      with_value("fc1.weight.absmax", -1.0f, 0);
    }
    acc_tensor *codes = nullptr, *wide_codes = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_find(state, "fc1.weight", &codes));
    ACC_ASSERT_OK(acc_tensor_to(codes, nullptr, ACC_DTYPE_INT64, &wide_codes));
    acc_tensor_free(codes);
    corrupt.emplace_back("fc1.weight", wide_codes);
    for (const auto& [name, value] : corrupt) {
      ACC_ASSERT_OK(acc_tensor_list_save_safetensors(state, path.c_str()));
      acc_test::replace_saved_tensor(path, name, value);
      acc_tensor_list* bad = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &bad));
      EXPECT_EQ(acc_model_load_state_dict(m, bad, 1), ACC_ERR_INVALID_ARGUMENT) << name;
      EXPECT_NE(std::string(acc_last_error_message()).find("'" + name + "'"), std::string::npos)
          << acc_last_error_message();
      EXPECT_EQ(output_of(m, x), kept) << name;
      acc_tensor_list_free(bad);
      acc_tensor_free(value);
    }
    acc_tensor_free(x);
    acc_tensor_list_free(state);
    acc_model_free(m);
  }
}

TEST(FourBit, AdaptersSaveAndLoadIntoAFreshQuantisedModel) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  const json& c = all["cases"][0];
  acc_model* m = quantised(c["config"]);
  add_case_lora(m, c["config"]);
  train_case(m, all, c["config"]);
  const std::string dir = acc_test::fresh_dir("four_bit_lora");
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  acc_model* fresh = quantised(c["config"]);
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  acc_tensor* x = case_input(all, c["config"]);
  EXPECT_EQ(output_of(fresh, x), output_of(m, x));
  acc_tensor_free(x);
  acc_model_free(m);
  acc_model_free(fresh);
}

TEST(FourBit, RefusesWhatItCannotHonourLeavingTheModelAsItWas) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  const json& c = all["cases"][0];
  acc_model* m = data_model("four_bit_model.pt");
  const std::pair<const char*, acc_status> configs[] = {
      {"not json", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_8bit": true})", ACC_ERR_INVALID_ARGUMENT},  // acc_model_quantize takes it
      {R"({"load_in_4bit": true, "load_in_8bit": true})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_4bit": false})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_4bit": true, "bnb_4bit_quant_type": "int4"})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_4bit": true, "bnb_4bit_quant_storage": "bfloat16"})", ACC_ERR_UNSUPPORTED},
      {R"({"load_in_4bit": true, "bnb_4bit_compute_dtype": "int8"})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_4bit": true, "llm_int8_skip_modules": ["fc1", "fc2", "fc3"]})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_4bit": true, "llm_int8_skip_modules": ["(fc"]})", ACC_ERR_INVALID_ARGUMENT},
      {R"({"load_in_4bit": true, "no_such_key": 1})", ACC_ERR_INVALID_ARGUMENT},
  };
  acc_tensor* x = case_input(all, c["config"]);
  const auto original = output_of(m, x);
  for (const auto& [config, status] : configs) {
    EXPECT_EQ(acc_model_quantize_4bit(m, config, nullptr), status) << config;
    EXPECT_EQ(output_of(m, x), original) << config;
  }
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');  // no stack overflow
  EXPECT_EQ(acc_model_quantize_4bit(m, deep.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT);
  ACC_ASSERT_OK(acc_model_quantize_4bit(m, config_json(c["config"]).c_str(), nullptr));
  const auto quantised_output = output_of(m, x);
  EXPECT_NE(quantised_output, original);
  EXPECT_EQ(acc_model_quantize_4bit(m, config_json(c["config"]).c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16), ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(acc_model_save_torchscript(m, acc_test::temp_path("four_bit.pt").c_str()), ACC_ERR_UNSUPPORTED);
  size_t count = 0;
  EXPECT_EQ(acc_model_set_requires_grad(m, "fc1.weight", 1, &count), ACC_ERR_INVALID_ARGUMENT);
  acc_options* saving = acc_test::lora_options(2, 4);  // a 4-bit layer trained whole
  ACC_ASSERT_OK(acc_options_set(saving, "modules_to_save", "fc2"));
  EXPECT_EQ(acc_model_add_lora(m, "fc1", saving, nullptr), ACC_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(acc_last_error_message()).find("fc2.weight"), std::string::npos) << acc_last_error_message();
  acc_options_free(saving);
  acc_options* pissa = acc_test::lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(pissa, "init_lora_weights", "pissa"));
  EXPECT_EQ(acc_model_add_lora(m, "fc1", pissa, nullptr), ACC_ERR_UNSUPPORTED);
  acc_options_free(pissa);
  add_case_lora(m, c["config"]);
  EXPECT_EQ(output_of(m, x), quantised_output);  // B starts at zero
  // After adapters, or once an optimizer holds the model's trainable parameters.
  acc_model* adapted = data_model("four_bit_model.pt");
  add_case_lora(adapted, c["config"]);
  EXPECT_EQ(acc_model_quantize_4bit(adapted, config_json(c["config"]).c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT);
  acc_model_free(adapted);
  acc_model* held = data_model("four_bit_model.pt");
  acc_optimizer* opt = acc_test::optimizer(held, "sgd", 0.1);
  EXPECT_EQ(acc_model_quantize_4bit(held, config_json(c["config"]).c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT);
  acc_optimizer_free(opt);
  ACC_ASSERT_OK(acc_model_quantize_4bit(held, config_json(c["config"]).c_str(), nullptr));  // released with it
  acc_model_free(held);
  acc_model* reads = data_model("four_bit_reads_weight.pt");
  EXPECT_EQ(acc_model_quantize_4bit(reads, R"({"load_in_4bit": true})", nullptr), ACC_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(acc_last_error_message()).find("'fc'"), std::string::npos) << acc_last_error_message();
  ACC_ASSERT_OK(acc_model_quantize_4bit(reads, R"({"load_in_4bit": true, "llm_int8_skip_modules": ["fc"]})", nullptr));
  acc_model_free(reads);
  acc_model* spec = acc_test::spec_model(R"([{"type":"linear","in_features":4,"out_features":3}])");
  EXPECT_EQ(acc_model_quantize_4bit(spec, R"({"load_in_4bit": true})", nullptr), ACC_ERR_UNSUPPORTED);
  acc_model_free(spec);
  acc_tensor_free(x);
  acc_model_free(m);
}

TEST(FourBit, PreparedWithBf16ResumesExactlyFromSaveState) {
  // A prepared QLoRA job (bf16 autocast) saved after 3 steps and resumed by a process whose model
  // was quantised from other weights: the checkpoint brings the 4-bit codes, maxima and offsets, and
  // the next 2 steps are the same.
  REQUIRE_CASES(all, "four_bit_cases.json");
  const json& c = all["cases"][1]["config"];  // FP4, double quantisation, bfloat16 compute
  expect_resumes_exactly(all, c, "four_bit_model.pt", [&](acc_model* m) {
    EXPECT_EQ(acc_model_quantize_4bit(m, config_json(c).c_str(), nullptr), ACC_OK) << acc_last_error_message();
  });
}

TEST(FourBit, LayersTheForwardComputesItselfRunIn4BitsAndTakeAdapters) {
  // A layer-spec model saved as TorchScript computes its encoder layer's feed-forward itself,
  // torch.linear(x, self.linear1.weight, self.linear1.bias): those products compute with the 4-bit
  // weight as a call of the layer does (against the same model given the dequantised weights), and
  // LoRA adds its branch there (PEFT's layer would wrap the module; here its markers do).
  const std::string file = acc_test::temp_path("four_bit_stack.pt");
  acc_model* spec = net();
  ACC_ASSERT_OK(acc_model_save_torchscript(spec, file.c_str()));
  acc_model_free(spec);
  acc_model *m = nullptr, *reference = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(file.c_str(), &m));
  ACC_ASSERT_OK(acc_model_load_torchscript(file.c_str(), &reference));
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_quantize_4bit(
      m, R"({"load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "llm_int8_skip_modules": ["out_proj"]})", &count));
  EXPECT_EQ(count, 4u);  // 0, 1.linear1, 1.linear2 and 2: the attention's out_proj is left out
  const auto state = state_of(m);
  acc_tensor_list* dequantised = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&dequantised));
  for (const std::string layer : {"0", "1.linear1", "1.linear2", "2"}) {
    const std::string name = layer + ".weight";
    acc_tensor* original = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(reference, name.c_str(), &original));
    const std::vector<int64_t> shape = acc_test::shape(original);
    acc_tensor_free(original);
    const auto &packed = state.at(name).values, &absmax = state.at(name + ".absmax").values,
               &code = state.at(name + ".quant_map").values;
    std::vector<float> values(static_cast<size_t>(shape[0] * shape[1]));
    for (size_t j = 0; j < values.size(); ++j) {
      const auto byte = static_cast<unsigned>(packed[j / 2]);
      values[j] = code[j % 2 == 0 ? byte >> 4 : byte & 15u] * absmax[j / 64];
    }
    acc_tensor* weight = acc_test::floats(values, shape);
    ACC_ASSERT_OK(acc_tensor_list_append(dequantised, name.c_str(), weight));
    acc_tensor_free(weight);
  }
  ACC_ASSERT_OK(acc_model_load_state_dict(reference, dequantised, 0));
  acc_tensor_list_free(dequantised);
  const auto base = outputs(m);
  EXPECT_EQ(base, outputs(reference));
  EXPECT_EQ(add_lora(m, "linear1,linear2"), 2u);
  acc_test::expect_equal_but_for_freezing(outputs(m), base);  // B starts at zero
  const auto b = param(m, "1.linear1.lora_B.weight");
  const auto losses = train(m, 3);
  EXPECT_NE(param(m, "1.linear1.lora_B.weight"), b);
  EXPECT_LT(losses.back(), losses.front());
  acc_model_free(m);
  acc_model_free(reference);
}

TEST(FourBit, SaveModelWritesBitsandbytesEntriesThatLoadBack) {
  // acc_save_model writes the 4-bit layers as transformers saves a 4-bit model (the codes as uint8
  // `weight`, the state's entries beside them), and acc_model_load_safetensors reads them back.
  REQUIRE_CASES(all, "four_bit_cases.json");
  const json& c = all["cases"][1];  // FP4, double quantisation
  acc_model* m = quantised(c["config"]);
  acc_accelerator* acc = acc_test::make_accelerator({});
  const std::string dir = acc_test::fresh_dir("four_bit_saved");
  ACC_ASSERT_OK(acc_save_model(acc, m, dir.c_str(), nullptr));
  acc_tensor_list* file = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/model.safetensors").c_str(), &file));
  const std::pair<const char*, acc_dtype> expected[] = {{"fc1.weight", ACC_DTYPE_UINT8},
                                                        {"fc1.weight.absmax", ACC_DTYPE_UINT8},
                                                        {"fc1.weight.quant_map", ACC_DTYPE_FLOAT32},
                                                        {"fc1.weight.nested_absmax", ACC_DTYPE_FLOAT32},
                                                        {"fc1.weight.nested_quant_map", ACC_DTYPE_FLOAT32},
                                                        {"fc1.weight.quant_state.bitsandbytes__fp4", ACC_DTYPE_UINT8},
                                                        {"fc1.bias", ACC_DTYPE_BFLOAT16},
                                                        {"fc3.weight", ACC_DTYPE_UINT8}};
  for (const auto& [name, dtype] : expected) {
    acc_tensor* t = nullptr;
    ASSERT_EQ(acc_tensor_list_find(file, name, &t), ACC_OK) << name;
    acc_dtype got = ACC_DTYPE_UNDEFINED;
    ACC_ASSERT_OK(acc_tensor_dtype(t, &got));
    EXPECT_EQ(got, dtype) << name;
    acc_tensor_free(t);
  }
  acc_tensor_list_free(file);
  acc_model* other = data_model("four_bit_model.pt");
  acc_test::fill_state(other, -0.5f);
  ACC_ASSERT_OK(acc_model_quantize_4bit(other, config_json(c["config"]).c_str(), nullptr));
  ACC_ASSERT_OK(acc_model_load_safetensors(other, dir.c_str(), 1, nullptr, nullptr));
  acc_tensor* x = case_input(all, c["config"]);
  EXPECT_EQ(output_of(other, x), output_of(m, x));
  acc_tensor_free(x);
  for (acc_model* model : {m, other}) acc_model_free(model);
  acc_accelerator_free(acc);
}

// acc_save_model of a QLoRA model writes the adapters merged into the 4-bit layers, quantised again
// as merging does, and leaves the model as it was (it failed on the codes' shape before).
TEST(FourBit, SaveModelWithAdaptersWritesTheMergedLayers) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  for (const int index : {0, 1}) {  // NF4; FP4 with double quantisation
    const json& c = all["cases"][index]["config"];
    SCOPED_TRACE(c.dump());
    acc_model* m = quantised(c);
    add_case_lora(m, c);
    train_case(m, all, c);
    expect_saved_model_is_merged(m, acc_test::fresh_dir("four_bit_saved_merged"));
    acc_model_free(m);
  }
}

// Quantising, a dtype cast and prepare_for_kbit_training are refused on a prepared model (they
// changed what it was prepared over), and prepare_for_kbit_training after adapters (it would
// freeze them).
TEST(FourBit, APreparedModelRefusesWhatWouldChangeItsLayers) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  const json& c = all["cases"][0]["config"];
  acc_model* m = quantised(c);
  add_case_lora(m, c);
  ACC_EXPECT_ERROR(acc_model_prepare_for_kbit_training(m, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "prepare_for_kbit_training comes before adding adapters");
  acc_accelerator* acc = acc_test::make_accelerator({});
  ASSERT_EQ(acc_prepare(acc, &m, nullptr, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  ACC_EXPECT_ERROR(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16), ACC_ERR_INVALID_ARGUMENT,
                   "a model with quantised layers cannot be cast");
  ACC_EXPECT_ERROR(acc_model_prepare_for_kbit_training(m, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "before adding adapters, creating the optimizer and preparing the model");
  ACC_EXPECT_ERROR(acc_model_quantize(m, R"({"load_in_4bit": true})", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "quantise the model before preparing it");
  acc_tensor* x = case_input(all, c);
  acc_tensor* out = nullptr;
  EXPECT_EQ(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &out), ACC_OK) << acc_last_error_message();
  acc_tensor_free(out);
  acc_tensor_free(x);
  acc_model_free(m);
  acc_accelerator_free(acc);
}

TEST(FourBit, TransformersConv1dLayersAreQuantisedTransposed) {
  // GPT-2's Conv1D keeps its weight in x out; transformers quantises it transposed, out x in, as
  // the layer it becomes: the model computes as one given the dequantised weights transposed back
  // (to the products' rounding: addmm against linear), and the state says [out, in].
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("conv1d");
  ASSERT_TRUE(c.contains("input"));
  acc_model *m = data_model("conv1d_model.pt"), *reference = data_model("conv1d_model.pt");
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_quantize_4bit(
      m, R"({"load_in_4bit": true, "bnb_4bit_quant_type": "fp4", "llm_int8_skip_modules": []})", &count));
  EXPECT_EQ(count, 3u);
  const auto state = state_of(m);
  acc_tensor_list* dequantised = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&dequantised));
  struct Layer {
    const char* name;
    int64_t in, out;
    bool conv1d;
  };
  for (const Layer& layer : {Layer{"c_fc", 6, 12, true}, Layer{"c_proj", 12, 6, true}, Layer{"head", 6, 4, false}}) {
    const std::string name = std::string(layer.name) + ".weight";
    const auto &packed = state.at(name).values, &absmax = state.at(name + ".absmax").values,
               &code = state.at(name + ".quant_map").values;
    std::string text;
    for (float byte : state.at(name + ".quant_state.bitsandbytes__fp4").values) text += static_cast<char>(byte);
    EXPECT_EQ(json::parse(text)["shape"], json::array({layer.out, layer.in})) << text;
    std::vector<float> values(static_cast<size_t>(layer.out * layer.in));
    for (size_t j = 0; j < values.size(); ++j) {
      const auto byte = static_cast<unsigned>(packed[j / 2]);
      const float value = code[j % 2 == 0 ? byte >> 4 : byte & 15u] * absmax[j / 64];
      const size_t o = j / static_cast<size_t>(layer.in), i = j % static_cast<size_t>(layer.in);
      values[layer.conv1d ? i * static_cast<size_t>(layer.out) + o : j] = value;
    }
    acc_tensor* weight = acc_test::floats(
        values, layer.conv1d ? std::vector<int64_t>{layer.in, layer.out} : std::vector<int64_t>{layer.out, layer.in});
    ACC_ASSERT_OK(acc_tensor_list_append(dequantised, name.c_str(), weight));
    acc_tensor_free(weight);
  }
  ACC_ASSERT_OK(acc_model_load_state_dict(reference, dequantised, 0));
  acc_tensor_list_free(dequantised);
  const auto quantised_output = outputs_on(m, acc_test::from_json(c["input"]));
  const auto expected = outputs_on(reference, acc_test::from_json(c["input"]));
  ASSERT_EQ(quantised_output.size(), expected.size());
  EXPECT_LT(acc_test::max_difference(quantised_output, expected), 1e-6f);
  acc_model_free(m);
  acc_model_free(reference);
}

namespace {

// The model of case `c` before quantising (in its dtype), saved as its safetensors file would be.
std::string unquantised_file(const json& c, const std::string& name) {
  acc_model* m = data_model("four_bit_model.pt");
  if (c["model"] == "bfloat16") EXPECT_EQ(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16), ACC_OK);
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_model_state_dict(m, &state), ACC_OK);
  const std::string path = acc_test::temp_path(name + ".safetensors");
  EXPECT_EQ(acc_tensor_list_save_safetensors(state, path.c_str()), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(state);
  acc_model_free(m);
  return path;
}

struct KeepOnly {
  std::string module;
  std::vector<std::string> asked;
  bool fail = false;
};

int keep_only(void* user_data, const char* module, int* keep) {
  auto& k = *static_cast<KeepOnly*>(user_data);
  k.asked.push_back(module);
  if (k.fail) {
    acc_callback_set_error("the comparison failed");
    return 5;
  }
  *keep = k.module == module;
  return 0;
}

// Runs the model, then tries to remove its adapters, from inside the callback.
int forward_then_unload(void* user_data, const char*, int* keep) {
  *keep = 1;
  auto* m = static_cast<acc_model*>(user_data);
  acc_tensor* x = acc_test::floats(std::vector<float>(128, 0.5f), {1, 128});
  acc_tensor* out = nullptr;
  const acc_status ran = acc_model_forward1(m, x, 0, &out);
  acc_tensor_free(x);
  acc_tensor_free(out);
  return ran != ACC_OK ? ran : acc_model_unload_lora(m);
}

}  // namespace

// PEFT's replace_lora_weights_loftq: the adapters of the 4-bit layers restart from LoftQ's factors
// of the quantisation error against the unquantised weights of the model's file, bit for bit as
// PEFT computes them (restated in export_four_bit_cases.py); a callback keeps or rolls back each
// layer; what cannot be done is refused before anything changes.
TEST(FourBit, ReplaceLoraWeightsLoftqStartsAdaptersFromTheQuantisationError) {
  REQUIRE_CASES(all, "four_bit_cases.json");
  for (const json& c : all["cases"]) {
    const json& config = c["config"];
    if (config.value("prepare", false)) continue;
    SCOPED_TRACE(config.dump());
    const std::string file = unquantised_file(config, "loftq_unquantised");
    acc_model* m = quantised(config);
    add_case_lora(m, config);
    size_t count = 0;
    ACC_ASSERT_OK(acc_model_replace_lora_weights_loftq(m, file.c_str(), nullptr, nullptr, nullptr, &count));
    EXPECT_EQ(count, c["loftq"].size());
    for (const auto& [name, pair] : c["loftq"].items()) {
      EXPECT_EQ(param(m, name + ".lora_A.weight"), acc_test::float_values(pair["a"])) << name;
      EXPECT_EQ(param(m, name + ".lora_B.weight"), acc_test::float_values(pair["b"])) << name;
    }
    acc_model_free(m);
  }

  // Case 1 adapts fc1 and fc3, both 4-bit: the callback keeps fc3's and rolls fc1's back.
  const json& c = all["cases"][1];
  const std::string file = unquantised_file(c["config"], "loftq_unquantised");
  acc_model* m = quantised(c["config"]);
  ACC_ASSERT_OK(acc_set_seed(3));
  add_case_lora(m, c["config"]);
  const auto fc1_a = param(m, "fc1.lora_A.weight"), fc1_b = param(m, "fc1.lora_B.weight");
  const auto fc3_a = param(m, "fc3.lora_A.weight");
  KeepOnly only{"fc3"};
  size_t count = 0;
  ACC_ASSERT_OK(acc_model_replace_lora_weights_loftq(m, file.c_str(), "default", &keep_only, &only, &count));
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(only.asked, (std::vector<std::string>{"fc1", "fc3"}));
  EXPECT_EQ(param(m, "fc1.lora_A.weight"), fc1_a);
  EXPECT_EQ(param(m, "fc1.lora_B.weight"), fc1_b);
  EXPECT_EQ(param(m, "fc3.lora_A.weight"), acc_test::float_values(c["loftq"]["fc3"]["a"]));
  // A failing callback fails the call and brings every layer's earlier adapters back.
  acc_model* again = quantised(c["config"]);
  ACC_ASSERT_OK(acc_set_seed(3));
  add_case_lora(again, c["config"]);
  KeepOnly failing{"fc3", {}, true};
  ACC_EXPECT_ERROR(acc_model_replace_lora_weights_loftq(again, file.c_str(), nullptr, &keep_only, &failing, nullptr),
                   ACC_ERR_IO, "the comparison failed");
  EXPECT_EQ(param(again, "fc1.lora_A.weight"), fc1_a);
  EXPECT_EQ(param(again, "fc3.lora_A.weight"), fc3_a);

  // Refusals, each leaving the adapters as they were.
  ACC_EXPECT_ERROR(acc_model_replace_lora_weights_loftq(again, file.c_str(), "other", nullptr, nullptr, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "the model has no LoRA adapter named 'other'");
  ACC_EXPECT_ERROR(acc_model_replace_lora_weights_loftq(again, nullptr, nullptr, nullptr, nullptr, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "model_path");
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(file.c_str(), &state));
  acc_tensor_list* without = acc_test::changed_list(
      state, [](const std::string& key, const acc_tensor* t) { return key == "fc3.weight" ? nullptr : t; });
  const std::string partial = acc_test::temp_path("loftq_without_fc3.safetensors");
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(without, partial.c_str()));
  ACC_EXPECT_ERROR(acc_model_replace_lora_weights_loftq(again, partial.c_str(), nullptr, nullptr, nullptr, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "holds no 'fc3.weight'");
  EXPECT_EQ(param(again, "fc1.lora_A.weight"), fc1_a) << "fc1 came before the missing entry";
  acc_tensor_list_free(state);
  acc_tensor_list_free(without);
  // The callback may run the model; removing (adding, switching, merging) adapters inside it is
  // refused, which fails the call with the adapters as they were.
  ACC_EXPECT_ERROR(
      acc_model_replace_lora_weights_loftq(again, file.c_str(), nullptr, &forward_then_unload, again, nullptr),
      ACC_ERR_IO, "inside its keep callback they cannot be added, removed, switched or merged");
  EXPECT_EQ(param(again, "fc1.lora_A.weight"), fc1_a);
  // A weight beyond float32's range, in which LoftQ computes, is refused before anything changes.
  acc_tensor_list* wide = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(file.c_str(), &wide));
  acc_tensor* fc3 = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(wide, "fc3.weight", &fc3));
  int64_t fc3_size = 0;
  ACC_ASSERT_OK(acc_tensor_numel(fc3, &fc3_size));
  std::vector<int64_t> fc3_shape(2);
  size_t fc3_dims = 0;
  ACC_ASSERT_OK(acc_tensor_shape(fc3, fc3_shape.data(), 2, &fc3_dims));
  std::vector<double> huge(static_cast<size_t>(fc3_size), 1e39);
  acc_tensor* huge_weight = nullptr;
  ACC_ASSERT_OK(
      acc_tensor_from_host(huge.data(), huge.size() * 8, fc3_shape.data(), 2, ACC_DTYPE_FLOAT64, &huge_weight));
  const std::string beyond = acc_test::temp_path("loftq_beyond_float32.safetensors");
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(wide, beyond.c_str()));
  acc_test::replace_saved_tensor(beyond, "fc3.weight", huge_weight);
  ACC_EXPECT_ERROR(acc_model_replace_lora_weights_loftq(again, beyond.c_str(), nullptr, nullptr, nullptr, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "or values beyond float32's range, in which LoftQ computes");
  EXPECT_EQ(param(again, "fc1.lora_A.weight"), fc1_a);
  acc_tensor_free(fc3);
  acc_tensor_free(huge_weight);
  acc_tensor_list_free(wide);
  // A prepared model takes the new values in its adapters' own tensors, as load_lora's.
  acc_model* prepared = quantised(c["config"]);
  add_case_lora(prepared, c["config"]);
  acc_accelerator* acc = acc_test::make_accelerator({});
  ACC_ASSERT_OK(acc_prepare(acc, &prepared, nullptr, nullptr, nullptr));
  size_t replaced = 0;
  ACC_ASSERT_OK(acc_model_replace_lora_weights_loftq(prepared, file.c_str(), nullptr, nullptr, nullptr, &replaced));
  EXPECT_EQ(replaced, 2u);
  EXPECT_EQ(param(prepared, "fc3.lora_A.weight"), acc_test::float_values(c["loftq"]["fc3"]["a"]));
  acc_model_free(prepared);
  acc_accelerator_free(acc);
  // Adapters on no 4-bit layer (case 2 keeps fc2 unquantised): PEFT's "No bnb LoRA module found".
  acc_model* skipped = quantised(all["cases"][2]["config"]);
  acc_options* o = acc_test::lora_options(2, 2);
  ACC_ASSERT_OK(acc_model_add_lora(skipped, "fc2", o, nullptr));
  acc_options_free(o);
  ACC_EXPECT_ERROR(acc_model_replace_lora_weights_loftq(skipped, file.c_str(), nullptr, nullptr, nullptr, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "is on a 4-bit layer");
  for (acc_model* model : {m, again, skipped}) acc_model_free(model);
}
