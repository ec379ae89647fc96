// PEFT's MiCA (init_lora_weights "mica"): B starts as the layer weight's minor singular vectors and
// stays frozen, A starts at zero and trains. Checked bit for bit against PEFT's mica_init restated in
// export_lora_cases.py (the "embedding" case's "mica"), on EmbedNet's embedding and linear layers, as
// TorchScript and as a layer spec: B, the rest of the global stream, outputs, A's gradients (B has
// none), PEFT's files, merged weights; and what PEFT refuses with it.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"
#include "twin_support.h"

using json = nlohmann::json;
using namespace twin_test;
using lora_test::lora_case;
using lora_test::lora_options;
using lora_test::outputs_on;
using lora_test::param;
namespace fs = std::filesystem;

namespace {

std::vector<float> values(const json& t) { return t["values"].get<std::vector<float>>(); }

constexpr const char* kSpec = R"([{"type":"embedding","num_embeddings":10,"embedding_dim":6,"padding_idx":0},
  {"type":"linear","in_features":6,"out_features":6},{"type":"tanh"},{"type":"linear","in_features":6,"out_features":4}])";

acc_tensor* ids(const json& c) {
  return acc_test::longs(c["ids"].get<std::vector<int64_t>>(), c["ids_shape"].get<std::vector<int64_t>>());
}

acc_status add_mica(acc_model* m, const json& k, const std::string& targets, const char* key = nullptr) {
  acc_options* o = lora_options(k["r"], k["lora_alpha"]);
  EXPECT_EQ(acc_options_set_double(o, "lora_dropout", k["lora_dropout"]), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "init_lora_weights", "mica"), ACC_OK);
  if (key) EXPECT_EQ(acc_options_set(o, key, "true"), ACC_OK);
  const acc_status status = acc_model_add_lora(m, targets.c_str(), o, nullptr);
  acc_options_free(o);
  return status;
}

std::vector<float> eval_output(acc_model* m, const json& c) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, ids(c));
}

}  // namespace

TEST(LoraMica, StartsFromTheMinorComponentsAndTrainsAAlone) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding"), k = c["mica"];
  for (const Twin& twin : twins("embedding_model.pt", kSpec, c["spec_names"])) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    const std::vector<float> base = eval_output(m, c);
    ACC_ASSERT_OK(acc_set_seed(k["seed"].get<uint64_t>()));
    ACC_ASSERT_OK(add_mica(m, k, targets(json{"embed", "fc", "head"}, twin)));
    for (const auto& item : k["initial"].items())
      EXPECT_EQ(param(m, twin.name(item.key())), values(item.value())) << item.key();
    EXPECT_EQ(acc_test::next_global_draws(), values(k["next_draw"]));
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
    EXPECT_EQ(eval_output(m, c), values(k["eval_output"]));
    ACC_ASSERT_OK(acc_model_set_training(m, 1));
    ACC_ASSERT_OK(acc_set_seed(k["train_seed"].get<uint64_t>()));
    acc_tensor *x = ids(c), *y = nullptr, *sum = nullptr;
    ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &y));
    EXPECT_EQ(acc_test::to_floats(y), values(k["train_output"]));
    ACC_ASSERT_OK(acc_tensor_sum(y, &sum));
    ACC_ASSERT_OK(acc_tensor_backward(sum));
    expect_grads(m, k["grads"], twin);
    for (acc_tensor* t : {x, y, sum}) acc_tensor_free(t);
    acc_optimizer* opt = acc_test::optimizer(m, "adamw", 1e-2);
    const std::vector<float> b = param(m, twin.name("fc.lora_B.weight"));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
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
    EXPECT_EQ(eval_output(loaded, c), values(k["eval_output"]));
    acc_model_free(loaded);
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_merge_lora(m));
    for (const auto& item : k["merged"].items())
      EXPECT_EQ(param(m, twin.name(item.key())), values(item.value())) << item.key();
    acc_model_free(m);
  }
}

TEST(LoraMica, RefusesWhatPeftRefuses) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("embedding"), k = c["mica"];
  for (const Twin& twin : twins("embedding_model.pt", kSpec, c["spec_names"])) {
    SCOPED_TRACE(twin.form);
    acc_model* m = twin.make();
    const auto names = acc_test::parameter_names(m);
    ACC_EXPECT_ERROR(add_mica(m, k, twin.name("fc"), "use_dora"), ACC_ERR_INVALID_ARGUMENT,
                     "mica does not combine with use_dora");
    ACC_EXPECT_ERROR(add_mica(m, k, twin.name("fc"), "lora_bias"), ACC_ERR_UNSUPPORTED, "mica with lora_bias");
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
