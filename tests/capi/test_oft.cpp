// PEFT's OFT (acc_model_add_oft) on linear layers: each layer's input rotated block by block.
// Checked against PEFT's layers restated in lora_oft_case.py (the "oft" case of
// export_lora_cases.py) on a TorchScript model of three nn.Linear layers in two configurations
// ("blocks": oft_block_size 4, the last layer's block moved to 3, the Cayley-Neumann series;
// "shared": r 2, block_share, coft's projection, the Cayley transform by a solve): the draws and
// the stream after them, the outputs, the gradients, three AdamW steps (coft writing back at each
// forward) and the merged weights, bit for bit; PEFT's files both ways; what PEFT refuses.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::float_values;
using acc_test::from_json;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* oft_model() { return eager_data_model("oft_model.pt"); }

acc_model* adapted(const json& c, bool init) {
  acc_model* m = oft_model();
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OFT, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "r", c["r"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "oft_block_size", c["oft_block_size"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "block_share", c["block_share"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "coft", c["coft"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "eps", c["eps"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "use_cayley_neumann", c["use_cayley_neumann"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "num_cayley_neumann_terms", c["num_cayley_neumann_terms"].get<int64_t>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", init), ACC_OK);
  EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  size_t count = 0;
  EXPECT_EQ(acc_model_add_oft(m, "fc1,fc2,head", o, &count), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(count, 3u);
  acc_options_free(o);
  return m;
}

}  // namespace

TEST(Oft, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json oft = lora_case("oft");
  acc_model* base = oft_model();
  const auto base_output = eval_outputs(base, oft);
  for (const char* config : {"blocks", "shared"}) {
    SCOPED_TRACE(config);
    const json& c = oft[config];
    acc_model* m = adapted(c, /*init=*/true);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));  // zeros draw nothing
    expect_params(m, c["initial"]);
    EXPECT_EQ(eval_outputs(m, oft), base_output);  // the identity rotations
    EXPECT_EQ(acc_test::parameter_names(m),
              (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc1.oft_R.weight", "fc2.weight", "fc2.bias",
                                        "fc2.oft_R.weight", "head.weight", "head.bias", "head.oft_R.weight"}));
    acc_model_free(m);

    m = adapted(c, /*init=*/false);
    expect_params(m, c["chosen"]);
    EXPECT_EQ(eval_outputs(m, oft), float_values(c["eval_output"]));
    expect_autocast_outputs(m, oft["input"], c);
    expect_training_step(m, oft["input"], c["seed"].get<uint64_t>(), c["train_output"], c["grads"]);
    expect_params(m, c["after_forward"]);  // coft's projection written back
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    EXPECT_EQ(eval_outputs(m, oft), base_output);
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));
    expect_saved_model_merged(m, c["merged"], 6, "oft_saved_model");  // the layers' weights and biases
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    for (const auto& item : c["merged"].items())
      EXPECT_EQ(param(m, item.key()), float_values(item.value())) << item.key();
    acc_model_free(m);

    expect_case_training(adapted(c, /*init=*/false), oft["input"], oft["target"], c, std::nullopt);
  }
  acc_model_free(base);
}

TEST(Oft, PeftFilesBothWaysAndRefusals) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json oft = lora_case("oft");
  const json& c = oft["shared"];
  acc_model* m = adapted(c, /*init=*/false);
  const auto output = eval_outputs(m, oft);
  const std::string dir = acc_test::temp_path("oft_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "OFT");
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["oft_block_size"], 0);
  EXPECT_EQ(config["block_share"], true);
  EXPECT_EQ(config["coft"], true);
  EXPECT_EQ(config["use_cayley_neumann"], false);
  acc_model* fresh = oft_model();
  ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
  EXPECT_EQ(eval_outputs(fresh, oft), eval_outputs(m, oft));
  acc_model_free(fresh);
  // A file from before PEFT 0.14 (no oft_block_size), whose weights PEFT lays out otherwise.
  json old = config;
  old.erase("oft_block_size");
  std::ofstream(dir + "/adapter_config.json") << old.dump();
  fresh = oft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "PEFT before 0.14");
  acc_model_free(fresh);
  // Files of PEFT before 0.18 with the Cayley-Neumann series summed another series: refused.
  json older = config;
  older["peft_version"] = "0.17.1";
  older["use_cayley_neumann"] = true;
  std::ofstream(dir + "/adapter_config.json") << older.dump();
  fresh = oft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_UNSUPPORTED, "earlier Cayley-Neumann series");
  acc_model_free(fresh);
  // PEFT wrote no peft_version before 0.18: such a file (with the series) is an older one, as PEFT takes it.
  older.erase("peft_version");
  std::ofstream(dir + "/adapter_config.json") << older.dump();
  fresh = oft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_UNSUPPORTED, "without a peft_version");
  acc_model_free(fresh);
  older["peft_version"] = 18;
  std::ofstream(dir + "/adapter_config.json") << older.dump();
  fresh = oft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "'peft_version' must be a version string");
  acc_model_free(fresh);
  EXPECT_EQ(config["peft_version"], "0.18.0");
  // Into a model whose OFT adapters compute their rotations otherwise (the series, not the solve):
  // refused, the model unchanged.
  std::ofstream(dir + "/adapter_config.json") << config.dump();
  {
    acc_model* series = oft_model();
    acc_options* o = nullptr;
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OFT, &o));
    for (const char* key : {"r", "oft_block_size"})
      ACC_ASSERT_OK(acc_options_set_int(o, key, config[key].get<int64_t>()));
    ACC_ASSERT_OK(acc_options_set_bool(o, "block_share", 1));
    ACC_ASSERT_OK(acc_options_set_bool(o, "coft", 1));
    ACC_ASSERT_OK(acc_options_set_bool(o, "use_cayley_neumann", 1));
    ACC_ASSERT_OK(acc_model_add_oft(series, "fc1,fc2,head", o, nullptr));
    acc_options_free(o);
    const auto before = eval_outputs(series, oft);
    ACC_EXPECT_ERROR(acc_model_load_lora(series, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "the model's have coft true (eps");
    EXPECT_EQ(eval_outputs(series, oft), before);
    acc_model_free(series);
  }
  // A null block size: PEFT computes with it (its TypeError), refused by name.
  json nulled = config;
  nulled["oft_block_size"] = nullptr;
  std::ofstream(dir + "/adapter_config.json") << nulled.dump();
  fresh = oft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_IO, "'oft_block_size' is null");
  acc_model_free(fresh);
  // Another layout (blocks of 4 where the file's are shared halves): refused by the weights' shapes.
  json other = config;
  other["r"] = 0;
  other["oft_block_size"] = 4;
  other["block_share"] = false;
  std::ofstream(dir + "/adapter_config.json") << other.dump();
  fresh = oft_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT, "oft_R.weight' has shape");
  acc_model_free(fresh);
  (void)output;

  // What PEFT's OFT refuses, and what is not built.
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OFT, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "r", 2));  // with the default oft_block_size 32: both
  acc_model* other_model = oft_model();
  ACC_EXPECT_ERROR(acc_model_add_oft(other_model, "fc1", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "OFT takes r or oft_block_size");
  acc_options_free(o);
  acc_model_free(other_model);
  acc_model* lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_oft(lm, "c_fc", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "OFT cannot adapt 'c_fc'");  // transformers' Conv1D
  acc_model_free(lm);
  acc_model* conv = data_model("lokr_model.pt");
  ACC_EXPECT_ERROR(acc_model_add_oft(conv, "conv", nullptr, nullptr), ACC_ERR_UNSUPPORTED,
                   "OFT on the convolution 'conv' is not built");
  acc_model_free(conv);
  lm = data_model("transformers_lm.pt");
  ACC_EXPECT_ERROR(acc_model_add_oft(lm, "embed", nullptr, nullptr), ACC_ERR_UNSUPPORTED,
                   "OFT on the embedding 'embed' is not built");  // PEFT 0.19 adapts embeddings
  acc_model_free(lm);
  expect_no_weighted_adapter(m, "OFT");
  acc_model_free(m);
}

// A checkpointed layer (recomputed in backward) gets the same gradients; a model cast to bfloat16
// computes (libtorch 1.13 has no bfloat16 eye).
TEST(Oft, CheckpointedAndBfloat16LayersComputeAsPlainOnes) {
  auto gradient = [](bool checkpoint) {
    const std::string spec = std::string(R"([{"type":"linear","in_features":8,"out_features":6)") +
                             (checkpoint ? R"(,"checkpoint":true)" : "") +
                             R"(},{"type":"tanh"},{"type":"linear","in_features":6,"out_features":3}])";
    EXPECT_EQ(acc_set_seed(1), ACC_OK);
    acc_model* m = nullptr;
    EXPECT_EQ(acc_model_from_spec(spec.c_str(), &m), ACC_OK);
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_OFT, &o), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "oft_block_size", 4), ACC_OK);
    EXPECT_EQ(acc_options_set_bool(o, "init_weights", 0), ACC_OK);
    EXPECT_EQ(acc_model_add_oft(m, "0", o, nullptr), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    std::vector<float> v(4 * 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7f * static_cast<float>(i));
    acc_tensor *x = floats(v, {4, 8}), *y = nullptr, *sum = nullptr, *p = nullptr, *g = nullptr;
    EXPECT_EQ(acc_model_forward1(m, x, 0, &y), ACC_OK);
    EXPECT_EQ(acc_tensor_sum(y, &sum), ACC_OK);
    EXPECT_EQ(acc_tensor_backward(sum), ACC_OK);
    EXPECT_EQ(acc_model_parameter(m, "0.oft_R.weight", &p), ACC_OK);
    EXPECT_EQ(acc_tensor_grad(p, &g), ACC_OK);
    const auto grads = g ? to_floats(g) : std::vector<float>{};
    for (acc_tensor* t : {x, y, sum, p, g}) acc_tensor_free(t);
    acc_model_free(m);
    return grads;
  };
  const auto plain = gradient(false);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(gradient(true), plain);

  acc_model* m = net();
  ACC_ASSERT_OK(acc_model_add_oft(m, "0", nullptr, nullptr));
  ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16));
  acc_tensor *x = input(), *low = nullptr, *y = nullptr;
  ACC_ASSERT_OK(acc_tensor_to(x, nullptr, ACC_DTYPE_BFLOAT16, &low));
  EXPECT_EQ(acc_model_forward1(m, low, ACC_FORWARD_NO_GRAD, &y), ACC_OK) << acc_last_error_message();
  for (acc_tensor* t : {x, low, y}) acc_tensor_free(t);
  acc_model_free(m);
}

TEST(Oft, SpecModelTrainsAndMerges) {
  expect_spec_adapters_train_and_merge(acc_model_add_oft, ACC_OPTIONS_OFT, {{"oft_block_size", 4}}, "0,linear1,linear2",
                                       3);
}
