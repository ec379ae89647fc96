// PEFT's trainable_token_indices beside LoRA: chosen rows of an embedding train (new special
// tokens), the rest of it stays frozen, and a head tied to the embedding computes with the same
// rows. Checked against PEFT's TrainableTokensLayer restated in export_lora_cases.py (its "tokens"
// case): the parameters, three AdamW steps' losses and values, the base model's outputs with the
// adapters disabled and the merged weight, bit for bit, for a TorchScript model and for the same
// network as a layer spec (checkpointed too); PEFT's file layout; and the settings PEFT refuses.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"
#include "tokens_support.h"

using json = nlohmann::json;
using namespace lora_test;
using namespace tokens_test;
namespace fs = std::filesystem;

namespace {

const char* kDelta = ".token_adapter.trainable_tokens_delta";

acc_status add_with_tokens(acc_model* m, const char* targets, const char* indices, const json& c,
                           const char* modules_to_save = nullptr) {
  acc_options* o = lora_options(c["r"], c["lora_alpha"]);
  EXPECT_EQ(acc_options_set(o, "trainable_token_indices", indices), ACC_OK) << acc_last_error_message();
  if (modules_to_save) EXPECT_EQ(acc_options_set(o, "modules_to_save", modules_to_save), ACC_OK);
  const acc_status status = acc_model_add_lora(m, targets, o, nullptr);
  acc_options_free(o);
  return status;
}

void check_training_as_peft(acc_model* m, const json& c, const Names& n) {
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(add_with_tokens(m, n.fc.c_str(), "7, 2, 9", c));
  // PEFT's order: the embedding's weight, its delta; the adapted layer's, its adapters.
  const std::vector<std::string> expected_names = {n.embed + ".weight",     n.embed + kDelta,
                                                   n.fc + ".weight",        n.fc + ".bias",
                                                   n.fc + ".lora_A.weight", n.fc + ".lora_B.weight"};
  EXPECT_EQ(acc_test::parameter_names(m), expected_names);
  EXPECT_EQ(param(m, n.embed + kDelta), values(c["initial_delta"]));
  int requires_grad = 1;
  acc_tensor* w = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, (n.embed + ".weight").c_str(), &w));
  ACC_ASSERT_OK(acc_tensor_requires_grad(w, &requires_grad));
  acc_tensor_free(w);
  EXPECT_EQ(requires_grad, 0) << "the embedding's own weight stays frozen";
  const std::vector<float> embed_before = param(m, n.embed + ".weight");

  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(logits(m, c), values(c["base_output"]));
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));

  EXPECT_EQ(train(m, c), as_doubles(c["losses"]));
  EXPECT_EQ(param(m, n.embed + kDelta), values(c["delta"]));
  EXPECT_EQ(param(m, n.fc + ".lora_A.weight"), values(c["lora_A"]));
  EXPECT_EQ(param(m, n.fc + ".lora_B.weight"), values(c["lora_B"]));
  EXPECT_EQ(param(m, n.embed + ".weight"), embed_before);
  EXPECT_EQ(logits(m, c), values(c["output"]));

  // Merged (merge_and_unload): the rows written into the embedding, the adapters gone.
  ACC_ASSERT_OK(acc_model_merge_lora(m));
  EXPECT_EQ(param(m, n.embed + ".weight"), values(c["merged_embed"]));
  EXPECT_EQ(acc_test::parameter_names(m).size(), 3u);
}

// The TorchScript model with LoRA on fc and rows 7, 2, 9 trained for the case's three steps.
acc_model* trained_tokens_model(const json& c) {
  acc_model* m = tokens_model();
  EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  EXPECT_EQ(add_with_tokens(m, "fc", "7,2,9", c), ACC_OK) << acc_last_error_message();
  train(m, c);
  return m;
}

}  // namespace

TEST(TrainableTokens, TrainAsPeftComputesThemThroughATiedHead) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("tokens");
  for_each_twin([&](acc_model* m, const Names& n) { check_training_as_peft(m, c, n); });
}

TEST(TrainableTokens, SaveModelWritesTheRowsIntoTheEmbedding) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("tokens");
  acc_model* m = trained_tokens_model(c);
  acc_accelerator* acc = acc_test::make_accelerator({});
  const std::string dir = acc_test::temp_path("tokens_saved_model");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_save_model(acc, m, dir.c_str(), nullptr));
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/model.safetensors").c_str(), &saved));
  acc_tensor* embed = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(saved, "embed.weight", &embed));
  EXPECT_EQ(to_floats(embed), values(c["merged_embed"]));
  size_t count = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &count));
  EXPECT_EQ(count, 3u) << "embed.weight, fc.weight, fc.bias: no delta, no adapters";
  acc_tensor_free(embed);
  acc_tensor_list_free(saved);
  // The model keeps its adapters and rows.
  EXPECT_EQ(param(m, std::string("embed") + kDelta), values(c["delta"]));
  acc_accelerator_free(acc);
  acc_model_free(m);
}

TEST(TrainableTokens, SavedInPeftsLayoutAndLoadedBack) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("tokens");
  acc_model* m = trained_tokens_model(c);
  const std::string dir = acc_test::temp_path("tokens_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  std::ifstream config_file(dir + "/adapter_config.json");
  const json config = json::parse(config_file);
  EXPECT_EQ(config["trainable_token_indices"], json({7, 2, 9}));
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  acc_tensor* delta = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(saved, "base_model.model.embed.token_adapter.trainable_tokens_delta", &delta));
  EXPECT_EQ(to_floats(delta), values(c["delta"]));
  size_t count = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &count));
  EXPECT_EQ(count, 3u) << "lora_A, lora_B and the embedding's delta (the tied head has none of its own)";
  acc_tensor_free(delta);
  acc_tensor_list_free(saved);

  // Into a model without adapters: the same outputs.
  acc_model* loaded = tokens_model();
  ACC_ASSERT_OK(acc_model_load_lora(loaded, dir.c_str()));
  EXPECT_EQ(logits(loaded, c), logits(m, c));
  EXPECT_EQ(param(loaded, std::string("embed") + kDelta), values(c["delta"]));
  // Into one whose adapters train other rows: refused, nothing changed.
  acc_model* other = tokens_model();
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(add_with_tokens(other, "fc", "7,2", c));
  const std::vector<float> before = logits(other, c);
  ACC_EXPECT_ERROR(acc_model_load_lora(other, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "trains other tokens (trainable_token_indices)");
  EXPECT_EQ(logits(other, c), before);

  // The object form names its module and is written as one.
  acc_model* by_name = tokens_model();
  ACC_ASSERT_OK(add_with_tokens(by_name, "fc", R"({"embed": [3, 1]})", c));
  const std::string named_dir = acc_test::temp_path("tokens_adapter_named");
  fs::remove_all(named_dir);
  ACC_ASSERT_OK(acc_model_save_lora(by_name, named_dir.c_str()));
  std::ifstream named_file(named_dir + "/adapter_config.json");
  EXPECT_EQ(json::parse(named_file)["trainable_token_indices"], json({{"embed", {3, 1}}}));
  // A file whose delta does not fit its indices is refused, naming it.
  {
    std::vector<float> first_row = param(by_name, std::string("embed") + kDelta);
    first_row.resize(6);
    acc_tensor* cut = floats(first_row, {1, 6});
    acc_test::replace_saved_tensor(named_dir + "/adapter_model.safetensors",
                                   "base_model.model.embed.token_adapter.trainable_tokens_delta", cut);
    acc_tensor_free(cut);
    acc_model* fresh = tokens_model();
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, named_dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "'embed.token_adapter.trainable_tokens_delta' has shape [1, 6] there");
    EXPECT_EQ(acc_test::parameter_names(fresh).size(), 3u) << "nothing added";
    acc_model_free(fresh);
  }
  for (acc_model* x : {m, loaded, other, by_name}) acc_model_free(x);
}

// PEFT's TrainableTokensWrapper holds rows per adapter: each named adapter trains its own rows,
// starting as the embedding's, and switching brings each one's back; checked against models
// holding one adapter alone, trained alike, and through saving and loading.
TEST(TrainableTokens, NamedAdaptersEachTrainTheirOwnRows) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("tokens");
  for_each_twin([&](acc_model* m, const Names& n) {
    const auto twin = [&] { return n.embed == "embed" ? tokens_model() : spec_twin(false); };
    acc_model *first = twin(), *second = twin();
    const auto add = [&](acc_model* to, const char* name, const char* indices) {
      acc_options* o = lora_options(c["r"], c["lora_alpha"]);
      EXPECT_EQ(acc_options_set(o, "trainable_token_indices", indices), ACC_OK);
      EXPECT_EQ(name ? acc_model_add_lora_named(to, name, n.fc.c_str(), o, nullptr)
                     : acc_model_add_lora(to, n.fc.c_str(), o, nullptr),
                ACC_OK)
          << acc_last_error_message();
      acc_options_free(o);
    };
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
    add(m, nullptr, "7,2,9");
    add(m, "second", "3,7");
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
    add(first, nullptr, "7,2,9");
    add(second, nullptr, "3,7");

    EXPECT_EQ(train(m, c), train(first, c));
    EXPECT_EQ(logits(m, c), logits(first, c));
    ACC_ASSERT_OK(acc_model_set_adapter(m, "second"));
    EXPECT_EQ(param(m, n.embed + kDelta), param(second, n.embed + kDelta)) << "its rows start as the embedding's";
    EXPECT_EQ(train(m, c), train(second, c));
    EXPECT_EQ(logits(m, c), logits(second, c));
    ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
    EXPECT_EQ(logits(m, c), logits(first, c));
    EXPECT_EQ(param(m, n.embed + kDelta), param(first, n.embed + kDelta));

    const std::string dir = acc_test::temp_path("named_tokens_" + n.embed);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    acc_model* loaded = twin();
    ACC_ASSERT_OK(acc_model_load_lora(loaded, (dir + "/second").c_str()));
    EXPECT_EQ(logits(loaded, c), logits(second, c));
    acc_model_free(loaded);
    fs::remove_all(dir);
    for (acc_model* x : {first, second}) acc_model_free(x);
  });
}

TEST(TrainableTokens, RefusesWhatPeftRefusesAndWhatHasNoMeaning) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("tokens");
  struct Case {
    const char* targets;
    const char* indices;
    const char* modules_to_save;
    acc_status status;
    const char* message;
  };
  const Case cases[] = {
      {"fc", "7,10", nullptr, ACC_ERR_INVALID_ARGUMENT, "holds 10, outside the layer's 10 tokens"},
      {"fc", "-1", nullptr, ACC_ERR_INVALID_ARGUMENT, "holds -1, outside"},
      {"fc", "3,3", nullptr, ACC_ERR_INVALID_ARGUMENT, "holds 3 twice"},
      {"fc", "3,x", nullptr, ACC_ERR_INVALID_ARGUMENT, "must be token indices separated by commas"},
      {"fc", "[]", nullptr, ACC_ERR_INVALID_ARGUMENT, "must be a non-empty list"},
      {"fc", R"({"embed": [1], "head": [1]})", nullptr, ACC_ERR_INVALID_ARGUMENT,
       "'head', whose weight another of its entries already trains"},
      {"fc", R"({"nowhere": [1]})", nullptr, ACC_ERR_INVALID_ARGUMENT, "'nowhere', which matches no embedding"},
      {"fc", R"({"fc": [1]})", nullptr, ACC_ERR_UNSUPPORTED, "a linear layer with a bias"},
      {"fc", R"({"embed": ["1"]})", nullptr, ACC_ERR_INVALID_ARGUMENT, "must hold integer token indices"},
      {"head", "1", nullptr, ACC_ERR_INVALID_ARGUMENT, "'head' is both adapted by LoRA and trained by"},
      // (the model's head is tied to the embedding, which PEFT's copy to save would untie: refused first)
      {"fc", "1", "embed", ACC_ERR_UNSUPPORTED, "modules_to_save would train 'embed.weight', which 'head.weight'"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.indices);
    acc_model* m = tokens_model();
    const auto names = acc_test::parameter_names(m);
    ACC_EXPECT_ERROR(add_with_tokens(m, k.targets, k.indices, c, k.modules_to_save), k.status, k.message);
    EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
    acc_model_free(m);
  }
  // An untied embedding both trained whole and by its rows, as PEFT refuses it.
  acc_model* untied = eager_data_model("embedding_model.pt");
  const auto names = acc_test::parameter_names(untied);
  ACC_EXPECT_ERROR(add_with_tokens(untied, "fc", "1", c, "embed"), ACC_ERR_INVALID_ARGUMENT,
                   "'embed' is both in modules_to_save and in trainable_token");
  EXPECT_EQ(acc_test::parameter_names(untied), names) << "nothing added";
  acc_model_free(untied);
  // A model without an embedding has no input embedding for the list form.
  acc_model* m = net();
  ACC_EXPECT_ERROR(add_with_tokens(m, "0", "1", c), ACC_ERR_INVALID_ARGUMENT, "the model has no embedding layer");
  acc_model_free(m);
}
