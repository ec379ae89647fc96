// PEFT's HRA (acc_model_add_hra): each layer's weight times a product of Householder reflections
// (or, with apply_GS, one reflection of the Gram-Schmidt basis). Checked against PEFT's layer
// restated in lora_hra_case.py (the "hra" case of export_lora_cases.py) on a TorchScript model with a
// strided Conv2d and three nn.Linear layers, in two configurations: r 4 on the convolution and two
// linear layers; apply_GS with r 3 on the convolution and a linear layer, their biases trained
// (hra_only). The draws (paired and not) and the stream after them, the outputs in evaluation and in
// training (also under bf16 autocast), the gradients, three AdamW steps and the merged weights (merge and save_model),
// bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

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

acc_model* hra_model() { return eager_data_model("hra_model.pt"); }

acc_options* hra_options(const json& c, bool init) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_HRA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "apply_GS", c["apply_GS"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_string(o, "bias", c["bias"].get<std::string>().c_str()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init), ACC_OK);
  return o;
}

acc_model* adapted(const json& c, bool init) {
  const std::string targets = c["targets"].get<std::string>();
  const size_t layers = static_cast<size_t>(std::count(targets.begin(), targets.end(), ',') + 1);
  return adapted_case_model("hra_model.pt", acc_model_add_hra, targets, hra_options(c, init), c["seed"].get<uint64_t>(),
                            layers);
}

}  // namespace

TEST(Hra, DrawsComputesTrainsAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json hra = lora_case("hra");
  acc_model* base = hra_model();
  for (const char* config : {"householder", "gram_schmidt"}) {
    SCOPED_TRACE(config);
    const json& c = hra[config];
    const auto base_output = eval_outputs(base, c);
    acc_model* m = adapted(c, /*init=*/true);  // equal pairs of columns where r is even
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    expect_params(m, c["paired"]);
    EXPECT_EQ(eval_outputs(m, c), float_values(c["paired_output"]));
    acc_model_free(m);

    m = adapted(c, /*init=*/false);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw_drawn"]));
    expect_params(m, c["chosen"]);
    EXPECT_EQ(eval_outputs(m, c), float_values(c["eval_output"]));
    expect_autocast_outputs(m, c["input"], c);
    expect_autocast_step(m, c);
    expect_case_step_disabling_and_merges(m, c, base_output, 8, std::string("hra_saved_model_") + config);

    expect_case_training(adapted(c, /*init=*/false), c["input"], c["target"], c, c["train_seed"].get<uint64_t>());
  }
  acc_model_free(base);
}

TEST(Hra, PeftFilesBothWaysAndWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("hra")["gram_schmidt"];
  acc_model* m = adapted(c, /*init=*/false);
  const auto output = eval_outputs(m, c);
  const std::string dir = acc_test::temp_path("hra_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "HRA");
  EXPECT_EQ(config["r"], 3);
  EXPECT_EQ(config["apply_GS"], true);
  EXPECT_EQ(config["bias"], "hra_only");
  EXPECT_EQ(config["init_weights"], false);
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  expect_list_holds(saved, c["chosen"], "base_model.model.");
  size_t entries = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &entries));
  EXPECT_EQ(entries, 4u);  // two hra_u and the two trained biases
  acc_tensor_list_free(saved);
  acc_model* fresh = hra_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // Into HRA adapters of the same shapes without apply_GS: they would compute otherwise, refused.
  {
    acc_options* plain = hra_options(c, /*init=*/false);
    ACC_ASSERT_OK(acc_options_set_bool(plain, "apply_GS", 0));
    acc_model* other = adapted_case_model("hra_model.pt", acc_model_add_hra, c["targets"].get<std::string>(), plain,
                                          c["seed"].get<uint64_t>(), 2);
    const auto before = eval_outputs(other, c);
    ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "holds HRA adapters of apply_GS true; the model's have apply_GS false");
    EXPECT_EQ(eval_outputs(other, c), before);
    acc_model_free(other);
  }
  // Any "<method>_only" bias, as PEFT's tuners take it: the adapted layers' biases.
  {
    json j = config;
    j["bias"] = "lora_only";
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = hra_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, c), output);
  acc_model_free(fresh);
  // Another rank: hra_u's shape does not fit, refused before anything changes.
  {
    json j = config;
    j["r"] = 4;
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = hra_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "conv.hra_u' has shape [8, 3]");
  size_t n = 1;
  ACC_ASSERT_OK(acc_model_lora_count(fresh, &n));
  EXPECT_EQ(n, 0u);
  acc_model_free(fresh);
  {
    json j = config;
    j["r"] = 0;
    std::ofstream(dir + "/adapter_config.json") << j.dump();
  }
  fresh = hra_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "'r'");
  acc_model_free(fresh);

  // What PEFT's HRA refuses: r 0; transformers' Conv1D and embeddings (its TypeError).
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_HRA, &o));
  EXPECT_EQ(acc_options_set_int(o, "r", 0), ACC_ERR_INVALID_ARGUMENT);
  acc_options_free(o);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_hra(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "HRA cannot adapt 'c_fc'");  // transformers' Conv1D
  ACC_EXPECT_ERROR(acc_model_add_hra(lm, "embed", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "HRA cannot adapt 'embed'");
  size_t count = 1;
  ACC_ASSERT_OK(acc_model_lora_count(lm, &count));
  EXPECT_EQ(count, 0u);
  acc_model_free(lm);
  // Convolutions PEFT's hra.Conv2d would compute otherwise (it takes the first of each size, and
  // neither dilation nor groups): refused, nothing added.
  acc_model* convs = acc_test::spec_model(
      R"([{"type":"conv2d","in_channels":2,"out_channels":4,"kernel_size":3,"dilation":2,"padding":2},
          {"type":"conv2d","in_channels":4,"out_channels":2,"kernel_size":[1,3]},
          {"type":"conv2d","in_channels":2,"out_channels":2,"kernel_size":3,"stride":[1,2]}])");
  for (const char* layer : {"0", "1", "2"})
    ACC_EXPECT_ERROR(acc_model_add_hra(convs, layer, nullptr, nullptr), ACC_ERR_UNSUPPORTED,
                     "PEFT's hra.Conv2d computes with a square kernel");
  ACC_ASSERT_OK(acc_model_lora_count(convs, &count));
  EXPECT_EQ(count, 0u);
  acc_model_free(convs);
  expect_no_weighted_adapter(m, "HRA");
  acc_model_free(m);
}

TEST(Hra, SpecModelTrainsAndMerges) {  // (a pair of equal reflections is the identity to rounding)
  expect_spec_adapters_train_and_merge(acc_model_add_hra, ACC_OPTIONS_HRA, {{"r", 2}}, "linear1,linear2", 2,
                                       /*exact_start=*/false);
}
