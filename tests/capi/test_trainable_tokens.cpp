// PEFT's TrainableTokensConfig (peft_type TRAINABLE_TOKENS): rows of the input embedding train alone,
// without LoRA, and a head tied to the embedding computes with them. Checked against PEFT's
// TrainableTokensLayer restated in export_lora_cases.py (its "standalone_tokens" case, with
// init_weights false, so the rows start as PEFT's torch.randn draws): the draws and the rest of
// the global stream, three AdamW steps' losses and rows, the outputs with the rows disabled and
// the merged weight, bit for bit, for a TorchScript model and the same network as a layer spec;
// PEFT's file layout and its own files; and what has no meaning.
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

const char* kStandaloneDelta = ".trainable_tokens_delta";

// acc_model_add_trainable_tokens with token_indices `indices` and init_weights `from_weights`.
acc_status add_tokens(acc_model* m, const char* targets, const char* indices, bool from_weights = true,
                      size_t* count = nullptr) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_TRAINABLE_TOKENS, &o), ACC_OK);
  if (indices) EXPECT_EQ(acc_options_set(o, "token_indices", indices), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(acc_options_set_bool(o, "init_weights", from_weights ? 1 : 0), ACC_OK);
  const acc_status status = acc_model_add_trainable_tokens(m, targets, o, count);
  acc_options_free(o);
  return status;
}

int requires_grad(acc_model* m, const std::string& name) {
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name.c_str(), &t), ACC_OK) << name;
  int out = -1;
  EXPECT_EQ(acc_tensor_requires_grad(t, &out), ACC_OK);
  acc_tensor_free(t);
  return out;
}

void check_training_as_peft(acc_model* m, const json& c, const Names& n) {
  const std::vector<float> base = logits(m, c);
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  size_t count = 0;
  ACC_ASSERT_OK(add_tokens(m, nullptr, "7, 2, 9", /*from_weights=*/false, &count));
  EXPECT_EQ(count, 1u) << "the embedding (its tied head follows it)";
  EXPECT_EQ(param(m, n.embed + kStandaloneDelta), values(c["initial_delta"])) << "PEFT's torch.randn draws";
  EXPECT_EQ(acc_test::next_global_draws(), values(c["next_draw"])) << "the global stream goes on as PEFT's";
  const std::vector<std::string> expected_names = {n.embed + ".weight", n.embed + kStandaloneDelta, n.fc + ".weight",
                                                   n.fc + ".bias"};
  EXPECT_EQ(acc_test::parameter_names(m), expected_names);
  for (const auto& frozen : {n.embed + ".weight", n.fc + ".weight", n.fc + ".bias"})
    EXPECT_EQ(requires_grad(m, frozen), 0) << frozen << ": every other parameter is frozen";
  size_t lora = 9;
  ACC_ASSERT_OK(acc_model_lora_count(m, &lora));
  EXPECT_EQ(lora, 0u);

  const std::vector<float> embed_before = param(m, n.embed + ".weight");
  EXPECT_EQ(train(m, c), as_doubles(c["losses"]));
  EXPECT_EQ(param(m, n.embed + kStandaloneDelta), values(c["delta"]));
  EXPECT_EQ(param(m, n.embed + ".weight"), embed_before);
  EXPECT_EQ(logits(m, c), values(c["output"]));
  // Disabled: the base model's outputs, head included.
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
  EXPECT_EQ(logits(m, c), base);
  ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 1));

  ACC_ASSERT_OK(acc_model_merge_lora(m));
  EXPECT_EQ(param(m, n.embed + ".weight"), values(c["merged_embed"]));
  EXPECT_EQ(acc_test::parameter_names(m).size(), 3u);
  EXPECT_EQ(logits(m, c), values(c["output"])) << "the merged model computes as the trained one";
}

// The TorchScript model with rows 7, 2, 9 trained alone for the case's three steps.
acc_model* trained_model(const json& c) {
  acc_model* m = tokens_model();
  EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  EXPECT_EQ(add_tokens(m, nullptr, "7,2,9", false), ACC_OK) << acc_last_error_message();
  train(m, c);
  return m;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

}  // namespace

TEST(StandaloneTokens, TrainAsPeftsTrainableTokensModel) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("standalone_tokens");
  for_each_twin([&](acc_model* m, const Names& n) { check_training_as_peft(m, c, n); });
  // init_weights true (PEFT's default): the rows as they are, so the model starts unchanged.
  acc_model* m = tokens_model();
  const std::vector<float> base = logits(m, c);
  const std::vector<float> embed = param(m, "embed.weight");
  ACC_ASSERT_OK(add_tokens(m, "embed", "[9, 0]"));
  std::vector<float> rows(embed.begin() + 9 * 6, embed.begin() + 10 * 6);
  rows.insert(rows.end(), embed.begin(), embed.begin() + 6);
  EXPECT_EQ(param(m, std::string("embed") + kStandaloneDelta), rows);
  EXPECT_EQ(logits(m, c), base);
  acc_model_free(m);
}

TEST(StandaloneTokens, SavedInPeftsLayoutAndLoadedBack) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("standalone_tokens");
  acc_model* m = trained_model(c);
  const std::string dir = acc_test::temp_path("standalone_tokens_adapter");
  fs::remove_all(dir);
  ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
  const json config = read_json(dir + "/adapter_config.json");
  EXPECT_EQ(config["peft_type"], "TRAINABLE_TOKENS");
  EXPECT_EQ(config["token_indices"], json({7, 2, 9}));
  EXPECT_EQ(config["target_modules"], "embed") << "PEFT writes the input embedding it chose, as a string";
  EXPECT_EQ(config["init_weights"], false);
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
  size_t count = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &count));
  EXPECT_EQ(count, 2u) << "the embedding's rows, and PEFT's copy under the tied head's name";
  for (const char* name :
       {"base_model.model.embed.trainable_tokens_delta", "base_model.model.head.trainable_tokens_delta"}) {
    acc_tensor* delta = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_find(saved, name, &delta));
    EXPECT_EQ(to_floats(delta), values(c["delta"])) << name;
    acc_tensor_free(delta);
  }
  acc_tensor_list_free(saved);

  // Into a model without adapters (after the seed: PEFT's from_pretrained draws too, as init_weights
  // false asks): the trained model's outputs, the stream as after adding.
  acc_model* loaded = tokens_model();
  ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
  ACC_ASSERT_OK(acc_model_load_lora(loaded, dir.c_str()));
  EXPECT_EQ(acc_test::next_global_draws(), values(c["next_draw"]));
  EXPECT_EQ(logits(loaded, c), values(c["output"]));
  EXPECT_EQ(acc_test::parameter_names(loaded), acc_test::parameter_names(m));
  // Into the trained model: its own values again.
  ACC_ASSERT_OK(acc_model_load_lora(m, dir.c_str()));

  // PEFT's own file: target_modules as a list, no tied copy, init_weights left out (true).
  json peft = config;
  peft["target_modules"] = json::array({"embed"});
  peft.erase("init_weights");
  write_json(dir + "/adapter_config.json", peft);
  {
    acc_tensor* delta = floats(values(c["delta"]), {3, 6});
    acc_tensor_list* only = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_create(&only));
    ACC_ASSERT_OK(acc_tensor_list_append(only, "base_model.model.embed.trainable_tokens_delta", delta));
    ACC_ASSERT_OK(acc_tensor_list_save_safetensors(only, (dir + "/adapter_model.safetensors").c_str()));
    acc_tensor_list_free(only);
    acc_tensor_free(delta);
  }
  acc_model* from_peft = tokens_model();
  ACC_ASSERT_OK(acc_model_load_lora(from_peft, dir.c_str()));
  EXPECT_EQ(logits(from_peft, c), values(c["output"]));

  // A tied copy that differs from the embedding's rows is refused, naming both.
  acc_model* trained = trained_model(c);
  const std::string tied_dir = acc_test::temp_path("standalone_tokens_tied");
  fs::remove_all(tied_dir);
  ACC_ASSERT_OK(acc_model_save_lora(trained, tied_dir.c_str()));
  {
    std::vector<float> other = values(c["delta"]);
    other[4] += 1;
    acc_tensor* changed = floats(other, {3, 6});
    acc_test::replace_saved_tensor(tied_dir + "/adapter_model.safetensors",
                                   "base_model.model.head.trainable_tokens_delta", changed);
    acc_tensor_free(changed);
  }
  acc_model* fresh = tokens_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(fresh, tied_dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "'head.trainable_tokens_delta' (tied to 'embed') differs from 'embed.trainable_tokens_delta'");
  EXPECT_EQ(acc_test::parameter_names(fresh).size(), 3u) << "nothing added";

  // Files and models of the other method refuse each other, changing nothing.
  acc_model* with_lora = tokens_model();
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_model_add_lora(with_lora, "fc", o, nullptr));
  acc_options_free(o);
  ACC_EXPECT_ERROR(acc_model_load_lora(with_lora, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "holds trainable tokens alone (PEFT's TRAINABLE_TOKENS); the model has LoRA adapters");
  const std::string lora_dir = acc_test::temp_path("standalone_tokens_lora");
  fs::remove_all(lora_dir);
  ACC_ASSERT_OK(acc_model_save_lora(with_lora, lora_dir.c_str()));
  ACC_EXPECT_ERROR(acc_model_load_lora(trained, lora_dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "holds LoRA adapters; the model has trainable tokens alone");
  EXPECT_EQ(param(trained, std::string("embed") + kStandaloneDelta), values(c["delta"]));
  // Other rows than the model's.
  acc_model* other_rows = tokens_model();
  ACC_ASSERT_OK(add_tokens(other_rows, nullptr, "7,2"));
  ACC_EXPECT_ERROR(acc_model_load_lora(other_rows, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "trains other tokens (token_indices, target_modules) than the model's");
  for (acc_model* x : {m, loaded, from_peft, trained, fresh, with_lora, other_rows}) acc_model_free(x);
}

TEST(StandaloneTokens, RefusesWhatHasNoMeaning) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  struct Case {
    const char* targets;
    const char* indices;
    acc_status status;
    const char* message;
  };
  const Case cases[] = {
      {nullptr, nullptr, ACC_ERR_INVALID_ARGUMENT, "token_indices is not set"},
      {nullptr, "7,10", ACC_ERR_INVALID_ARGUMENT, "token_indices for 'embed' holds 10, outside the layer's 10 tokens"},
      {nullptr, "3,3", ACC_ERR_INVALID_ARGUMENT, "holds 3 twice"},
      {nullptr, "[]", ACC_ERR_INVALID_ARGUMENT, "token_indices must be a non-empty list"},
      {nullptr, R"({"embed": [1]})", ACC_ERR_INVALID_ARGUMENT, "must be token indices separated by commas"},
      {"fc", "1", ACC_ERR_UNSUPPORTED, "names 'fc', a linear layer with a bias"},
      {"head", "1", ACC_ERR_UNSUPPORTED, "matches 'head', whose weight is tied to the embedding 'embed'"},
      {"nowhere", "1", ACC_ERR_INVALID_ARGUMENT, "target_modules 'nowhere' matches no embedding or linear layer"},
      {"re:(", "1", ACC_ERR_INVALID_ARGUMENT, "target_modules"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.targets ? k.targets : "(input embedding)") + " " + (k.indices ? k.indices : "-"));
    acc_model* m = tokens_model();
    const auto names = acc_test::parameter_names(m);
    ACC_EXPECT_ERROR(add_tokens(m, k.targets, k.indices), k.status, k.message);
    EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
    acc_model_free(m);
  }
  acc_model* m = tokens_model();
  ACC_EXPECT_ERROR(acc_model_add_trainable_tokens(m, nullptr, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "ACC_OPTIONS_TRAINABLE_TOKENS with token_indices");
  acc_options* lora = lora_options(2, 4);
  ACC_EXPECT_ERROR(acc_model_add_trainable_tokens(m, nullptr, lora, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "trainable_tokens options are needed here");
  // Targets both embedding and tied head: one adapter, the head tied to it (PEFT ties them alike).
  size_t count = 0;
  ACC_ASSERT_OK(add_tokens(m, "embed,head", "1", true, &count));
  EXPECT_EQ(count, 1u);
  // One PEFT method at a time, as LoRA with LoRA.
  ACC_EXPECT_ERROR(acc_model_add_lora(m, "fc", lora, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "the model already has trainable tokens (PEFT's TRAINABLE_TOKENS, on 'embed')");
  ACC_EXPECT_ERROR(add_tokens(m, nullptr, "2"), ACC_ERR_INVALID_ARGUMENT, "the model already has trainable tokens");
  acc_model* adapted = tokens_model();
  ACC_ASSERT_OK(acc_model_add_lora(adapted, "fc", lora, nullptr));
  ACC_EXPECT_ERROR(add_tokens(adapted, nullptr, "2"), ACC_ERR_INVALID_ARGUMENT, "the model already has LoRA adapters");
  acc_options_free(lora);
  // A model without an embedding: no input embedding to default to.
  acc_model* plain = net();
  ACC_EXPECT_ERROR(add_tokens(plain, nullptr, "1"), ACC_ERR_INVALID_ARGUMENT, "the model has no embedding layer");
  // After an optimizer is made over the model, as for LoRA.
  acc_model* held = tokens_model();
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(held, "sgd", nullptr, &opt));
  EXPECT_NE(add_tokens(held, nullptr, "1"), ACC_OK);
  acc_optimizer_free(opt);
  for (acc_model* x : {m, adapted, plain, held}) acc_model_free(x);
}

// Standalone trainable tokens as named adapters (PEFT's TrainableTokensModel.add_adapter and
// load_adapter): each adapter's rows its own; a LoRA adapter beside them is refused, as PEFT holds
// adapters of one method per model.
TEST(TrainableTokens, StandaloneTokensAsNamedAdapters) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model *m = tokens_model(), *alone = tokens_model();
  ACC_ASSERT_OK(add_tokens(m, nullptr, "4,5"));
  ACC_ASSERT_OK(acc_set_seed(3));
  ACC_ASSERT_OK(add_tokens(alone, nullptr, "1,8", /*from_weights=*/false));
  const std::string dir = acc_test::temp_path("standalone_tokens_named");
  ACC_ASSERT_OK(acc_model_save_lora(alone, dir.c_str()));
  const auto ids = [] { return acc_test::longs({1, 4, 8, 5}, {1, 4}); };
  const auto with_tokens = lora_test::outputs_on(m, ids());
  ACC_ASSERT_OK(acc_model_load_lora_named(m, dir.c_str(), "drawn"));
  EXPECT_EQ(lora_test::outputs_on(m, ids()), with_tokens) << "kept aside";
  ACC_ASSERT_OK(acc_model_set_adapter(m, "drawn"));
  EXPECT_EQ(lora_test::outputs_on(m, ids()), lora_test::outputs_on(alone, ids()));
  EXPECT_EQ(requires_grad(m, std::string("embed") + kStandaloneDelta), 1);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "default"));
  EXPECT_EQ(lora_test::outputs_on(m, ids()), with_tokens);

  acc_options* o = lora_test::lora_options(2, 4);
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "lora", "fc", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "one method per model");
  acc_options_free(o);
  EXPECT_EQ(lora_test::outputs_on(m, ids()), with_tokens);
  fs::remove_all(dir);
  acc_model_free(m);
  acc_model_free(alone);
}
