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

using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

const char* kDelta = ".token_adapter.trainable_tokens_delta";

std::vector<float> values(const json& t) { return t["values"].get<std::vector<float>>(); }

// The exported model, computing with PyTorch's eager arithmetic (libtorch 2.x's profiling executor
// would otherwise optimise the graph after its first runs, and round otherwise than eager PyTorch).
acc_model* tokens_model() {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/tokens_model.pt").c_str(), &m), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(acc_model_set_graph_optimization(m, 0), ACC_OK);
  return m;
}

// The TorchScript model's network as a layer spec: "0" the embedding, "1" fc, "3" the tied head.
const char* kTokenSpec = R"([{"type":"embedding","num_embeddings":10,"embedding_dim":6%s},
  {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},
  {"type":"tied_linear","tie_to":0,"bias":false%s}])";

// The spec model with the TorchScript model's weights (checkpointed layers where `checkpoint`).
acc_model* spec_twin(bool checkpoint) {
  const char* flag = checkpoint ? R"(,"checkpoint":true)" : "";
  char spec[512];
  std::snprintf(spec, sizeof spec, kTokenSpec, flag, flag);
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(spec, &m), ACC_OK) << acc_last_error_message();
  acc_model* script = tokens_model();
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_model_state_dict(script, &state), ACC_OK);
  acc_tensor_list* renamed = nullptr;
  EXPECT_EQ(acc_tensor_list_create(&renamed), ACC_OK);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"embed.weight", "0.weight"}, {"fc.weight", "1.weight"}, {"fc.bias", "1.bias"}}) {
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_find(state, from.c_str(), &t), ACC_OK);
    EXPECT_EQ(acc_tensor_list_append(renamed, to.c_str(), t), ACC_OK);
    acc_tensor_free(t);
  }
  EXPECT_EQ(acc_model_load_state_dict(m, renamed, 1), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(state);
  acc_tensor_list_free(renamed);
  acc_model_free(script);
  return m;
}

acc_status add_with_tokens(acc_model* m, const char* targets, const char* indices, const json& c,
                           const char* modules_to_save = nullptr) {
  acc_options* o = lora_options(c["r"], c["lora_alpha"]);
  EXPECT_EQ(acc_options_set(o, "trainable_token_indices", indices), ACC_OK) << acc_last_error_message();
  if (modules_to_save) EXPECT_EQ(acc_options_set(o, "modules_to_save", modules_to_save), ACC_OK);
  const acc_status status = acc_model_add_lora(m, targets, o, nullptr);
  acc_options_free(o);
  return status;
}

acc_tensor* batch_ids(const json& c, int step, int part) {
  return acc_test::longs(c["batches"][step][part].get<std::vector<int64_t>>(), {3, 4});
}

// The logits on step 0's ids, without gradients.
std::vector<float> logits(acc_model* m, const json& c) { return outputs_on(m, batch_ids(c, 0, 0)); }

// The case's three AdamW steps of next-token loss; returns the losses.
std::vector<double> train(acc_model* m, const json& c) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "lr", c["lr"]), ACC_OK);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(m, "adamw", o, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  std::vector<double> losses;
  for (int step = 0; step < 3 && opt; ++step) {
    acc_tensor *ids = batch_ids(c, step, 0), *targets = nullptr, *out = nullptr, *flat = nullptr, *loss = nullptr;
    const int64_t flat_dims[] = {-1, 10}, target_dims[] = {-1};
    acc_tensor* t = batch_ids(c, step, 1);
    EXPECT_EQ(acc_tensor_reshape(t, target_dims, 1, &targets), ACC_OK);
    EXPECT_EQ(acc_model_forward1(m, ids, 0, &out), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_tensor_reshape(out, flat_dims, 2, &flat), ACC_OK);
    EXPECT_EQ(acc_loss_cross_entropy(flat, targets, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK);
    double value = 0;
    EXPECT_EQ(acc_tensor_item(loss, &value), ACC_OK);
    losses.push_back(value);
    EXPECT_EQ(acc_tensor_backward(loss), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    for (acc_tensor* x : {ids, t, targets, out, flat, loss}) acc_tensor_free(x);
  }
  acc_optimizer_free(opt);
  return losses;
}

std::vector<double> as_doubles(const json& losses) {
  std::vector<double> out;
  for (const auto& loss : losses) out.push_back(static_cast<float>(loss.get<double>()));
  return out;
}

// Names and roles: the TorchScript model's ("embed", "fc") or the spec model's ("0", "1").
struct Names {
  std::string embed, fc;
};

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
  {
    SCOPED_TRACE("TorchScript");
    acc_model* m = tokens_model();
    check_training_as_peft(m, c, {"embed", "fc"});
    acc_model_free(m);
  }
  for (bool checkpoint : {false, true}) {
    SCOPED_TRACE(checkpoint ? "layer spec, checkpointed" : "layer spec");
    acc_model* m = spec_twin(checkpoint);
    check_training_as_peft(m, c, {"0", "1"});
    acc_model_free(m);
  }
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
      {"fc", "1", "embed", ACC_ERR_INVALID_ARGUMENT, "'embed' is both in modules_to_save and in trainable_token"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.indices);
    acc_model* m = tokens_model();
    const auto names = acc_test::parameter_names(m);
    ACC_EXPECT_ERROR(add_with_tokens(m, k.targets, k.indices, c, k.modules_to_save), k.status, k.message);
    EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
    acc_model_free(m);
  }
  // A model without an embedding has no input embedding for the list form.
  acc_model* m = net();
  ACC_EXPECT_ERROR(add_with_tokens(m, "0", "1", c), ACC_ERR_INVALID_ARGUMENT, "the model has no embedding layer");
  acc_model_free(m);
}
