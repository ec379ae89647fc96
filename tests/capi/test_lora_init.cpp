// PEFT's initialisations that decompose the layer's weight, OLoRA (QR) and PiSSA (SVD, or
// torch.svd_lowrank's randomised SVD with pissa_niter_<n>): the adapters start from the weight, and
// the weight keeps the residual W - scaling * B A; and its orthogonal start (B A zero, the weight kept). Checked
// against PEFT's olora_init and pissa_init restated in export_lora_cases.py on PyTorch (its "decomposing" case): the
// draws, the adapters, the residual weights and the output at the start, bit for bit, also for a bfloat16 model. Saved,
// they reload into the model they were trained from, as PEFT's from_pretrained reloads them: the decomposition runs
// again there, and the loaded adapters replace its start.
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using acc_test::from_json;
using acc_test::max_difference;
using json = nlohmann::json;
using namespace lora_test;
namespace fs = std::filesystem;

namespace {

acc_model* lora_model() {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/lora_model.pt").c_str(), &m), ACC_OK)
      << acc_last_error_message();
  return m;
}

// Adds adapters of rank r starting as `init` says (with `flag`, a bool key of ACC_OPTIONS_LORA, set).
acc_status add_decomposing(acc_model* m, const char* targets, int64_t r, double alpha, const std::string& init,
                           const char* flag = nullptr) {
  acc_options* o = lora_options(r, alpha);
  EXPECT_EQ(acc_options_set(o, "init_lora_weights", init.c_str()), ACC_OK);
  if (flag) EXPECT_EQ(acc_options_set_bool(o, flag, 1), ACC_OK);
  const acc_status status = acc_model_add_lora(m, targets, o, nullptr);
  acc_options_free(o);
  return status;
}

// The same with the "decomposing" case's targets, rank and alpha.
acc_status add_decomposing(acc_model* m, const json& c, const std::string& init) {
  return add_decomposing(m, c["targets"].get<std::string>().c_str(), c["r"], c["lora_alpha"], init);
}

std::vector<float> values(const json& t) { return t["values"].get<std::vector<float>>(); }

}  // namespace

TEST(LoraInit, OloraAndPissaStartAsPeftsAndKeepTheResidual) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("decomposing");
  ASSERT_TRUE(c.contains("cases"));
  for (const auto& [name, d] : c["cases"].items()) {
    SCOPED_TRACE(name);
    const bool bf16 = name == "pissa_bf16";
    acc_model* m = lora_model();
    if (bf16) ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16));
    ACC_ASSERT_OK(acc_set_seed(c["seed"].get<uint64_t>()));
    ACC_ASSERT_OK(add_decomposing(m, c, d["init"]));
    // nn.Linear's draws for each pair, then (pissa_niter) svd_lowrank's Gaussian start.
    EXPECT_EQ(acc_test::next_global_draws(), values(d["next_draw"]));
    for (const auto& [module, a] : d["initial_a"].items()) {
      SCOPED_TRACE(module);
      EXPECT_EQ(param(m, module + ".lora_A.weight"), values(a));
      EXPECT_EQ(param(m, module + ".lora_B.weight"), values(d["initial_b"][module]));
      EXPECT_EQ(param_floats(m, module + ".weight"), values(d["residual"][module])) << "the residual weight";
    }
    if (!bf16) EXPECT_EQ(outputs_on(m, from_json(c["input"])), values(d["output"]));
    acc_model_free(m);
  }
}

// The residual plus the adapters is the model that was decomposed; trained and saved, the adapters
// reload into the original model (the decomposition runs again there, as PEFT's from_pretrained
// runs it) and compute as the trained model; acc_save_model's merged weights load into it too.
TEST(LoraInit, AdaptersReloadIntoTheModelTheyWereDecomposedFrom) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("decomposing");
  for (const char* init : {"olora", "pissa", "pissa_niter_2", "orthogonal"}) {
    SCOPED_TRACE(init);
    acc_model* m = lora_model();
    const auto base = outputs_on(m, from_json(c["input"]));
    ACC_ASSERT_OK(acc_set_seed(4));
    ACC_ASSERT_OK(add_decomposing(m, c, init));
    EXPECT_LT(max_difference(outputs_on(m, from_json(c["input"])), base), 1e-5f) << "the same model to rounding";
    train(m, 3);
    const auto trained = outputs_on(m, from_json(c["input"]));
    EXPECT_GT(max_difference(trained, base), 1e-3f);
    const std::string dir = acc_test::temp_path(std::string("lora_init_") + init);
    fs::remove_all(dir);
    ACC_ASSERT_OK(acc_model_save_lora(m, dir.c_str()));
    EXPECT_EQ(json::parse(acc_test::read_file(dir + "/adapter_config.json"))["init_lora_weights"], init);

    acc_model* fresh = lora_model();
    ACC_ASSERT_OK(acc_set_seed(4));  // pissa_niter's randomised SVD draws again
    ACC_ASSERT_OK(acc_model_load_lora(fresh, dir.c_str()));
    EXPECT_EQ(param(fresh, "fc1.weight"), param(m, "fc1.weight")) << "decomposed again into the same residual";
    EXPECT_EQ(outputs_on(fresh, from_json(c["input"])), trained);
    acc_model_free(fresh);
    fs::remove_all(dir);
    acc_model_free(m);
  }
}

TEST(LoraInit, WhatCannotBeDecomposedIsRefusedBeforeAnythingChanges) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("decomposing");
  for (const char* bad : {"pissa_niter_", "pissa_niter_-1", "pissa_niter_x", "loftq_4", "PISSA", "CORDA"}) {
    acc_options* o = nullptr;
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LORA, &o));
    ACC_EXPECT_ERROR(acc_options_set(o, "init_lora_weights", bad), ACC_ERR_INVALID_ARGUMENT, "init_lora_weights");
    acc_options_free(o);
  }
  // r above min(out, in) (head is 3 x 8): refused, and no layer changed, the earlier targets included.
  acc_model* m = lora_model();
  const auto fc1 = param(m, "fc1.weight");
  ACC_EXPECT_ERROR(add_decomposing(m, "fc1,head", 4, 4, "pissa"), ACC_ERR_INVALID_ARGUMENT, "'head'");
  EXPECT_EQ(param(m, "fc1.weight"), fc1);
  size_t count = 1;
  ACC_ASSERT_OK(acc_model_lora_count(m, &count));
  EXPECT_EQ(count, 0u);
  // The orthogonal start splits r in two (PEFT's ValueError for an odd one): refused before any draw.
  ACC_ASSERT_OK(acc_set_seed(7));
  const auto seeded = acc_test::next_global_draws();
  ACC_ASSERT_OK(acc_set_seed(7));
  ACC_EXPECT_ERROR(add_decomposing(m, "fc1", 3, 4, "orthogonal"), ACC_ERR_INVALID_ARGUMENT, "even rank");
  EXPECT_EQ(acc_test::next_global_draws(), seeded) << "nothing drawn";
  // A float64 layer, as PEFT refuses it.
  ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_FLOAT64));
  ACC_EXPECT_ERROR(add_decomposing(m, c, "olora"), ACC_ERR_INVALID_ARGUMENT, "float32, float16 or bfloat16");
  acc_model_free(m);
  // A head tied to the embedding: decomposing it would change the embedding too.
  acc_model* tied = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/tied.pt").c_str(), &tied));
  const auto embedding = param(tied, "embed.weight");
  ACC_EXPECT_ERROR(add_decomposing(tied, "head", 2, 4, "olora"), ACC_ERR_UNSUPPORTED, "tied");
  EXPECT_EQ(param(tied, "embed.weight"), embedding);
  acc_model_free(tied);
}

// With DoRA, the magnitude starts as the row norms of the residual plus the decomposed part, which
// is the weight as it was: the model still starts as before.
TEST(LoraInit, DoraMagnitudesStartFromTheDecomposedWeight) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const json c = lora_case("decomposing");
  acc_model* m = lora_model();
  const auto base = outputs_on(m, from_json(c["input"]));
  const auto w = param(m, "head.weight");  // 3 x 8
  ACC_ASSERT_OK(add_decomposing(m, "head", 2, 4, "pissa", "use_dora"));
  EXPECT_NE(param(m, "head.weight"), w) << "the residual";
  const auto magnitude = param(m, "head.lora_magnitude_vector");
  ASSERT_EQ(magnitude.size(), 3u);
  for (size_t row = 0; row < 3; ++row) {
    double norm = 0;
    for (size_t col = 0; col < 8; ++col) norm += double(w[row * 8 + col]) * w[row * 8 + col];
    EXPECT_NEAR(magnitude[row], std::sqrt(norm), 1e-5);
  }
  EXPECT_LT(max_difference(outputs_on(m, from_json(c["input"])), base), 1e-5f);
  acc_model_free(m);
}
