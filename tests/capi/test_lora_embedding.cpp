// LoRA on embeddings (PEFT's lora.Embedding: lora_embedding_A looked up as the layer looks up its rows,
// times lora_embedding_B), checked bit for bit against PEFT's layer restated in export_lora_cases.py
// (its "embedding" case), on a TorchScript model and on its layer-spec twin: the draws and the rest of
// the global stream, outputs in evaluation and in training (dropout on the linear layers only, as
// PEFT's embedding layer applies none), gradients, PEFT's files, merged weights; what PEFT refuses, or
// what would not compute as PEFT's layer does, is refused; OLoRA and PiSSA start it as PEFT's default.
// DoRA and MiCA on the same model.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"
#include "tokens_support.h"
#include "twin_support.h"

using json = nlohmann::json;
using namespace twin_test;
using acc_test::float_values;
using lora_test::lora_case;
using lora_test::lora_options;
using lora_test::outputs_on;
using lora_test::param;
namespace fs = std::filesystem;

namespace {

// EmbedNet as a layer spec: "0" the embedding (padding row 0), "1" fc, "3" head.
constexpr const char* kSpec = R"([{"type":"embedding","num_embeddings":10,"embedding_dim":6,"padding_idx":0},
  {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},{"type":"linear","in_features":6,"out_features":4}])";

std::vector<Twin> embedding_twins(const json& c) { return twins("embedding_model.pt", kSpec, c["spec_names"]); }

acc_tensor* ids(const json& c) {
  return acc_test::longs(c["ids"].get<std::vector<int64_t>>(), c["ids_shape"].get<std::vector<int64_t>>());
}

std::vector<float> eval_output(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, ids(c));
}

}  // namespace

TEST(LoraEmbedding, DrawsComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding");
  for (const Twin& twin : embedding_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
    size_t count = 0;
    acc_options* o = lora_options(c["r"], c["lora_alpha"]);
    ACC_ASSERT_OK(acc_options_set_double(o, "lora_dropout", c["lora_dropout"]));
    ACC_ASSERT_OK(acc_model_add_lora(m, targets(json{"embed", "fc", "head"}, twin).c_str(), o, &count));
    acc_options_free(o);
    EXPECT_EQ(count, 3u);
    // PEFT's draws: A and B from torch.randn, then A zero and B from N(0, 1) again.
    for (const auto& item : c["initial"].items()) {
      EXPECT_EQ(param(m, twin.name(item.key())), float_values(item.value())) << item.key();
      acc_tensor* t = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(m, twin.name(item.key()).c_str(), &t));
      EXPECT_EQ(acc_test::shape(t), item.value()["shape"].get<std::vector<int64_t>>()) << item.key();
      acc_tensor_free(t);
    }
    EXPECT_EQ(acc_test::next_global_draws(), float_values(c["next_draw"]));
    // Listed after the embedding's weight, as PEFT's layer lists them.
    const auto names = acc_test::parameter_names(m);
    ASSERT_GE(names.size(), 3u);
    EXPECT_EQ(names[0], twin.name("embed.weight"));
    EXPECT_EQ(names[1], twin.name("embed.lora_embedding_A"));
    EXPECT_EQ(names[2], twin.name("embed.lora_embedding_B"));
    choose(m, c["chosen"], twin);
    EXPECT_EQ(eval_output(m, c), float_values(c["eval_output"]));

    // Training mode: dropout on the linear layers' inputs, none on the embedding's branch.
    expect_training(m, ids(c), c, twin);

    // PEFT's files: lora_embedding_A and lora_embedding_B under the module's name.
    const std::string dir = acc_test::temp_path("lora_embedding");
    acc_model* loaded = reloaded(m, dir, twin);
    EXPECT_EQ(saved_shape(dir, twin.name("embed.lora_embedding_A")), (std::vector<int64_t>{2, 10}));
    EXPECT_EQ(saved_shape(dir, twin.name("embed.lora_embedding_B")), (std::vector<int64_t>{6, 2}));
    EXPECT_EQ(eval_output(loaded, c), float_values(c["eval_output"]));
    acc_model_free(loaded);
    {  // an embedding's adapter of another vocabulary does not fit, and nothing is added
      acc_tensor* wrong = acc_test::floats(std::vector<float>(2 * 12), {2, 12});
      acc_test::replace_saved_tensor(dir + "/adapter_model.safetensors",
                                     "base_model.model." + twin.name("embed.lora_embedding_A"), wrong);
      acc_tensor_free(wrong);
      expect_load_refused(twin, dir, ACC_ERR_INVALID_ARGUMENT, "does not fit");
    }
    fs::remove_all(dir);

    // Merged as PEFT merges: W + (B @ A)^T * scaling.
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    expect_params(m, c["merged"], twin);
    EXPECT_LT(acc_test::max_difference(eval_output(m, c), float_values(c["eval_output"])), 1e-5f);
    acc_model_free(m);
  }
}

// DoRA on the embedding (a magnitude per embedding dimension) beside DoRA on the head.
TEST(LoraEmbedding, DoraComputesAndMergesAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding"), k = c["dora"];
  for (const Twin& twin : embedding_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ACC_ASSERT_OK(acc_set_seed(k["seed"].get<uint64_t>()));
    ACC_ASSERT_OK(add_case_lora(m, k, targets(json{"embed", "head"}, twin), {{"use_dora", "true"}}));
    expect_params(m, k["initial"], twin);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(k["next_draw"]));
    choose(m, k["chosen"], twin);
    EXPECT_EQ(eval_output(m, c), float_values(k["eval_output"]));
    expect_training(m, ids(c), k, twin);
    // PEFT's files, read back.
    const std::string dir = acc_test::temp_path("lora_embedding_dora");
    acc_model* loaded = reloaded(m, dir, twin);
    EXPECT_EQ(saved_shape(dir, twin.name("embed.lora_magnitude_vector")), (std::vector<int64_t>{6}));
    EXPECT_EQ(eval_output(loaded, c), float_values(k["eval_output"]));
    acc_model_free(loaded);
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    expect_params(m, k["merged"], twin);
    EXPECT_LT(acc_test::max_difference(eval_output(m, c), float_values(k["eval_output"])), 1e-5f);
    acc_model_free(m);
  }
}

TEST(LoraEmbedding, RefusesWhatPeftsEmbeddingLayerDoesNotTake) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding");
  struct Case {
    const char* key;
    const char* value;
    acc_status status;
    const char* message;
  };
  const Case cases[] = {
      {"lora_bias", "true", ACC_ERR_INVALID_ARGUMENT, "lora_bias is not supported on the embedding"},
      {"trainable_token_indices", "1,2", ACC_ERR_INVALID_ARGUMENT, "both adapted by LoRA and trained"},
  };
  for (const Twin& twin : embedding_twins(c))
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(twin.form) + " " + k.key);
      acc_model* m = twin.make();
      const auto names = acc_test::parameter_names(m);
      ACC_EXPECT_ERROR(add_case_lora(m, c, twin.name("embed"), {{k.key, k.value}}), k.status, k.message);
      EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
      acc_model_free(m);
    }
  // A file holding a linear layer's adapter names for the embedding is refused, naming both kinds.
  for (const Twin& twin : embedding_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    ACC_ASSERT_OK(add_case_lora(m, c, twin.name("embed")));
    const std::string dir = acc_test::temp_path("lora_embedding_kinds");
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    acc_tensor_list* saved = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/adapter_model.safetensors").c_str(), &saved));
    acc_tensor_list* renamed = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_create(&renamed));
    const std::string prefix = "base_model.model." + twin.name("embed");
    for (const auto& [from, to] : {std::pair<std::string, std::string>{".lora_embedding_A", ".lora_A.weight"},
                                   {".lora_embedding_B", ".lora_B.weight"}}) {
      acc_tensor* t = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_find(saved, (prefix + from).c_str(), &t));
      ACC_ASSERT_OK(acc_tensor_list_append(renamed, (prefix + to).c_str(), t));
      acc_tensor_free(t);
    }
    ACC_ASSERT_OK(acc_tensor_list_save_safetensors(renamed, (dir + "/adapter_model.safetensors").c_str()));
    acc_tensor_list_free(saved);
    acc_tensor_list_free(renamed);
    acc_model* fresh = twin.make();
    ACC_EXPECT_ERROR(acc_model_load_lora(fresh, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "is a linear layer's (lora_A/B), but");
    acc_model_free(fresh);
    fs::remove_all(dir);
    acc_model_free(m);
  }
}

// An embedding whose weight a head shares (GPT-2's tied head): the adapter acts through the
// embedding's output (PEFT's), merging would change both layers and is refused, and disabled the
// model computes as before.
TEST(LoraEmbedding, BesideATiedHeadActsButDoesNotMerge) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  tokens_test::for_each_twin([](acc_model* m, const tokens_test::Names& names) {
    const std::vector<float> before = outputs_on(m, acc_test::longs({1, 2, 3, 4}, {1, 4}));
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "false"));  // A not zero: the adapter acts
    ACC_ASSERT_OK(acc_model_add_lora(m, names.embed.c_str(), o, nullptr));
    acc_options_free(o);
    EXPECT_GT(acc_test::max_difference(outputs_on(m, acc_test::longs({1, 2, 3, 4}, {1, 4})), before), 1e-4f);
    ACC_EXPECT_ERROR(acc_model_merge_lora(m), ACC_ERR_UNSUPPORTED, "tied");
    ACC_ASSERT_OK(acc_model_set_lora_enabled(m, 0));
    EXPECT_EQ(outputs_on(m, acc_test::longs({1, 2, 3, 4}, {1, 4})), before);
  });
  // PiSSA leaves an embedding's weight as it is (PEFT's default start): a tied one may take it.
  tokens_test::for_each_twin([](acc_model* m, const tokens_test::Names& names) {
    const std::vector<float> before = outputs_on(m, acc_test::longs({1, 2, 3, 4}, {1, 4}));
    acc_options* o = lora_options(2, 4);
    ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "pissa"));
    ACC_ASSERT_OK(acc_model_add_lora(m, names.embed.c_str(), o, nullptr));
    acc_options_free(o);
    EXPECT_EQ(outputs_on(m, acc_test::longs({1, 2, 3, 4}, {1, 4})), before) << "A starts at zero";
  });
}

// PEFT's MiCA (init_lora_weights "mica"): B starts as the layer weight's minor singular vectors and
// stays frozen, A starts at zero and trains (the case's "mica": PEFT's mica_init restated).
TEST(LoraMica, StartsFromTheMinorComponentsAndTrainsAAlone) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding"), k = c["mica"];
  for (const Twin& twin : embedding_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    const std::vector<float> base = eval_output(m, c);
    ACC_ASSERT_OK(acc_set_seed(k["seed"].get<uint64_t>()));
    ACC_ASSERT_OK(add_case_lora(m, k, targets(json{"embed", "fc", "head"}, twin), {{"init_lora_weights", "mica"}}));
    expect_params(m, k["initial"], twin);
    EXPECT_EQ(acc_test::next_global_draws(), float_values(k["next_draw"]));
    EXPECT_EQ(eval_output(m, c), base) << "A starts at zero: the model computes as before";
    // B is frozen: no gradient reaches it, and the optimizer leaves it.
    for (const auto& name : k["frozen"]) {
      acc_tensor* b = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(m, twin.name(name.get<std::string>()).c_str(), &b));
      int requires = -1;
      ACC_ASSERT_OK(acc_tensor_requires_grad(b, &requires));
      EXPECT_EQ(requires, 0) << name;
      acc_tensor_free(b);
    }
    choose(m, k["chosen"], twin);
    EXPECT_EQ(eval_output(m, c), float_values(k["eval_output"]));
    expect_training(m, ids(c), k, twin);
    // A step with fresh gradients: A moves, B stays.
    acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
    acc_tensor* sum = nullptr;
    {
      acc_tensor* y = nullptr;
      ACC_ASSERT_OK(acc_model_forward1(m, ids(c), 0, &y));
      ACC_ASSERT_OK(acc_tensor_sum(y, &sum));
      acc_tensor_free(y);
    }
    ACC_ASSERT_OK(acc_tensor_backward(sum));
    acc_tensor_free(sum);
    const std::vector<float> a = param(m, twin.name("fc.lora_A.weight")), b = param(m, twin.name("fc.lora_B.weight"));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    EXPECT_NE(param(m, twin.name("fc.lora_A.weight")), a) << "A trains";
    EXPECT_EQ(param(m, twin.name("fc.lora_B.weight")), b) << "B stays as it was";
    acc_optimizer_free(opt);
    ACC_ASSERT_OK(acc_model_zero_grad(m));
    choose(m, k["chosen"], twin);

    // PEFT's files (init_lora_weights "mica", B included), read back into the base model.
    const std::string dir = acc_test::temp_path("lora_mica");
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    std::ifstream config_file(dir + "/adapter_config.json");
    EXPECT_EQ(json::parse(config_file)["init_lora_weights"], "mica");
    acc_model* loaded = twin.make();
    ACC_ASSERT_OK(acc_model_load_lora(loaded, dir.c_str()));
    EXPECT_EQ(eval_output(loaded, c), float_values(k["eval_output"]));
    acc_model_free(loaded);
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    expect_params(m, k["merged"], twin);
    acc_model_free(m);
  }
}

TEST(LoraMica, RefusesWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding"), k = c["mica"];
  for (const Twin& twin : embedding_twins(c)) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    const auto names = acc_test::parameter_names(m);
    ACC_EXPECT_ERROR(add_case_lora(m, k, twin.name("fc"), {{"init_lora_weights", "mica"}, {"use_dora", "true"}}),
                     ACC_ERR_INVALID_ARGUMENT, "mica does not combine with use_dora");
    acc_options* o = lora_options(7, 8);  // more than the head's 4 outputs
    ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "mica"));
    ACC_EXPECT_ERROR(acc_model_add_lora(m, twin.name("head").c_str(), o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                     "exceeds its weight's rank bound");
    acc_options_free(o);
    EXPECT_EQ(acc_test::parameter_names(m), names) << "nothing added";
    acc_model_free(m);
  }
  acc_model* conv = script_model("conv_model.pt");
  acc_options* o = lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "init_lora_weights", "mica"));
  ACC_EXPECT_ERROR(acc_model_add_lora(conv, "conv1", o, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "PEFT's convolution layers do not take MiCA");
  acc_options_free(o);
  acc_model_free(conv);
}

// PEFT's Embedding has no OLoRA, PiSSA or orthogonal start: named in the config, its adapters start as
// with `true` (zero A, normal B, the draws of DrawsComputesAndMergesAsPeft) and its weight stays, while
// a linear layer of the same config gets its start (a decomposition's residual weight).
TEST(LoraEmbedding, DecompositionsStartTheEmbeddingAsPeftsDefault) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding");
  for (const Twin& twin : embedding_twins(c))
    for (const char* init : {"olora", "pissa", "pissa_niter_2", "orthogonal"}) {
      SCOPED_TRACE(std::string(twin.form) + " " + init);
      auto adapted = [&](const char* how, const std::string& targets, std::vector<float>* next_draws) {
        acc_model* m = twin.make();
        EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
        EXPECT_EQ(add_case_lora(m, c, targets, {{"init_lora_weights", how}}), ACC_OK) << acc_last_error_message();
        *next_draws = acc_test::next_global_draws();
        return m;
      };
      const std::string embed = twin.name("embed");
      std::vector<float> draws_default, draws;
      acc_model* by_default = adapted("true", embed, &draws_default);
      acc_model* m = adapted(init, embed, &draws);
      for (const char* suffix : {".lora_embedding_A", ".lora_embedding_B", ".weight"})
        EXPECT_EQ(param(m, embed + suffix), param(by_default, embed + suffix)) << suffix;
      EXPECT_EQ(draws, draws_default);
      acc_model_free(m);
      acc_model_free(by_default);

      // With the linear layer fc: fc's weight is PiSSA's or OLoRA's residual (the orthogonal start
      // keeps it), the embedding's as it was.
      acc_model* base = twin.make();
      m = adapted(init, embed + "," + twin.name("fc"), &draws);
      EXPECT_EQ(param(m, embed + ".weight"), param(base, embed + ".weight"));
      const bool decomposed = std::string(init) != "orthogonal";
      EXPECT_EQ(param(m, twin.name("fc") + ".weight") != param(base, twin.name("fc") + ".weight"), decomposed);
      EXPECT_LT(acc_test::max_difference(eval_output(m, c), eval_output(base, c)), 1e-5f);
      acc_model_free(base);
      acc_model_free(m);
    }
}
