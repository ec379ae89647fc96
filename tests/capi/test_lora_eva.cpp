// EVA, PEFT's data-driven start (init_lora_weights "eva", initialize_lora_eva_weights), against PEFT
// restated (lora_cases.json "eva", tests/data/lora_eva_case.py): the components each layer's lora_A
// takes, the ranks redistributed, the draws of the layers whose rank changed (the global generator
// after), the configuration written; and what it refuses.
#include <filesystem>
#include <string>
#include <vector>

#include "json_tensors.h"
#include "lora_support.h"
#include "support.h"

using namespace lora_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// ACC_OPTIONS_LORA of a case's configuration, init_lora_weights "eva".
acc_options* eva_lora_options(const json& config) {
  acc_options* o = case_lora_options(config);
  const json& eva = config["eva"];
  EXPECT_EQ(acc_options_set(o, "init_lora_weights", "eva"), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "eva_rho", eva["rho"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "eva_tau", eva["tau"].get<double>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "eva_whiten", eva["whiten"].get<bool>()), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "eva_adjust_scaling_factors", eva["adjust_scaling_factors"].get<bool>()), ACC_OK);
  return o;
}

acc_options* reading(int64_t labels, int64_t attention_mask) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_EVA, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "labels", labels), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "attention_mask", attention_mask), ACC_OK);
  return o;
}

struct EvaSetup {
  acc_model* model;
  acc_dataloader* loader;
  acc_options* reading;
  EvaSetup(acc_model* m, acc_dataloader* dl, acc_options* o) : model(m), loader(dl), reading(o) {}
  EvaSetup(EvaSetup&& other) noexcept : model(other.model), loader(other.loader), reading(other.reading) {
    other.model = nullptr;
    other.loader = nullptr;
    other.reading = nullptr;
  }
  EvaSetup(const EvaSetup&) = delete;
  EvaSetup& operator=(const EvaSetup&) = delete;
  ~EvaSetup() {
    acc_model_free(model);
    acc_dataloader_free(loader);
    acc_options_free(reading);
  }
};

// The case's model with its adapters drawn as get_peft_model draws them (init "eva"), its loader
// and how EVA reads it.
EvaSetup case_setup(const json& c, bool lm) {
  EvaSetup s{data_model(lm ? "eva_lm_model.pt" : "eva_mlp_model.pt"), nullptr, nullptr};
  EXPECT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
  acc_options* o = eva_lora_options(c["config"]);
  EXPECT_EQ(acc_model_add_lora(s.model, joined(c["config"]["targets"]).c_str(), o, nullptr), ACC_OK)
      << acc_last_error_message();
  acc_options_free(o);
  s.loader = lm ? loader_over({c["ids"], c["labels"], c["mask"]}, 4, true) : loader_over({c["x"], c["y"]}, 6, false);
  s.reading = lm ? reading(1, 2) : reading(-1, -1);
  return s;
}

// After EVA: each layer's lora_A is PEFT's, lora_B zero of its new rank, DoRA's magnitude PEFT's,
// the global generator where PEFT's is, and adapter_config.json says what PEFT's does.
void expect_peft(acc_model* m, const json& c) {
  for (const auto& [name, layer] : c["layers"].items()) {
    acc_tensor* a = nullptr;
    ASSERT_EQ(acc_model_parameter(m, (name + ".lora_A.weight").c_str(), &a), ACC_OK) << name;
    EXPECT_EQ(acc_test::shape(a), layer["lora_A"]["shape"].get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(acc_test::to_floats(a), acc_test::float_values(layer["lora_A"])) << name;
    acc_tensor_free(a);
    const auto b = param(m, name + ".lora_B.weight");
    EXPECT_EQ(b.size() % layer["rank"].get<size_t>(), 0u) << name;
    for (float v : b) EXPECT_EQ(v, 0.0f) << name;
    if (layer.contains("magnitude"))
      EXPECT_EQ(param(m, name + ".lora_magnitude_vector"), acc_test::float_values(layer["magnitude"])) << name;
  }
  EXPECT_EQ(acc_test::next_global_draws(), acc_test::float_values(c["next_draw"]));
  const std::string dir = acc_test::temp_path("eva_adapters");
  fs::remove_all(dir);
  ASSERT_EQ(acc_model_save_lora(m, dir.c_str()), ACC_OK) << acc_last_error_message();
  const json written = json::parse(acc_test::read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(written["init_lora_weights"], "eva");
  EXPECT_EQ(written["target_modules"], c["target_modules"]);
  EXPECT_EQ(written["rank_pattern"], c["rank_pattern"]);
  EXPECT_EQ(written["alpha_pattern"], c["alpha_pattern"]);
  EXPECT_EQ(written["eva_config"], c["config"]["eva"]);
}

}  // namespace

TEST(LoraEva, LanguageModelComponentsAndRanksAreThoseOfPeft) {
  const json c = lora_case("eva")["lm"];
  EvaSetup s = case_setup(c, true);
  size_t adapted = 0;
  ASSERT_EQ(acc_model_initialize_lora_eva(s.model, s.loader, s.reading, nullptr, &adapted), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(adapted, c["layers"].size());
  expect_peft(s.model, c);
  int training = 0;
  ASSERT_EQ(acc_model_is_training(s.model, &training), ACC_OK);
  EXPECT_EQ(training, 1);  // the mode it had
  int in_epoch = 1;
  ASSERT_EQ(acc_dataloader_in_epoch(s.loader, &in_epoch), ACC_OK);
  EXPECT_EQ(in_epoch, 0);
}

TEST(LoraEva, WithoutMasksEveryRowCountsAndDoraKeepsItsMagnitude) {
  const json c = lora_case("eva")["mlp"];
  EvaSetup s = case_setup(c, false);
  size_t adapted = 0;
  ASSERT_EQ(acc_model_initialize_lora_eva(s.model, s.loader, s.reading, nullptr, &adapted), ACC_OK)
      << acc_last_error_message();
  EXPECT_EQ(adapted, c["layers"].size());
  expect_peft(s.model, c);
}

// What save_lora wrote after EVA loads into a fresh model as the same adapters (the new ranks
// through rank_pattern), and the model computes the same.
TEST(LoraEva, SavedAdaptersLoadBackWithTheirNewRanks) {
  const json c = lora_case("eva")["lm"];
  EvaSetup s = case_setup(c, true);
  ASSERT_EQ(acc_model_initialize_lora_eva(s.model, s.loader, s.reading, nullptr, nullptr), ACC_OK)
      << acc_last_error_message();
  const std::string dir = acc_test::temp_path("eva_reload");
  fs::remove_all(dir);
  ASSERT_EQ(acc_model_save_lora(s.model, dir.c_str()), ACC_OK) << acc_last_error_message();
  acc_model* fresh = data_model("eva_lm_model.pt");
  ASSERT_EQ(acc_model_load_lora(fresh, dir.c_str()), ACC_OK) << acc_last_error_message();
  for (const auto& [name, layer] : c["layers"].items())
    EXPECT_EQ(param(fresh, name + ".lora_A.weight"), acc_test::float_values(layer["lora_A"])) << name;
  acc_model_free(fresh);
}

TEST(LoraEva, RefusesWhatItCannotCompute) {
  const json c = lora_case("eva")["mlp"];
  {  // adapters of another start (PEFT's ValueError)
    EvaSetup s{data_model("eva_mlp_model.pt"), loader_over({c["x"], c["y"]}, 6, false), reading(-1, -1)};
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, s.reading, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "no LoRA adapters");
    add_lora(s.model, "fc1", 2, 4);
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, s.reading, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "init_lora_weights \"eva\"");
  }
  {  // a loader in an epoch, options of another kind, a missing field, more components than features
    EvaSetup s = case_setup(c, false);
    const auto before = param(s.model, "fc1.lora_A.weight");
    acc_tensor_list* batch = nullptr;
    ASSERT_EQ(acc_dataloader_next(s.loader, &batch), ACC_OK);
    acc_tensor_list_free(batch);
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, s.reading, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "in an epoch");
    ASSERT_EQ(acc_dataloader_end_epoch(s.loader), ACC_OK);
    acc_options* wrong = lora_options(2, 4);
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, wrong, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "eva");
    acc_options_free(wrong);
    acc_options* labels = reading(5, -1);
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, labels, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "labels is field 5");
    acc_options_free(labels);
    acc_options* mask = reading(1, -1);  // labels [6] beside inputs [6, 10]
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, mask, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "shaped as the batch's first field");
    acc_options_free(mask);
    acc_options* briefly = reading(-1, -1);
    ASSERT_EQ(acc_options_set_int(briefly, "max_batches", 1), ACC_OK);
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, briefly, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "have not converged");
    acc_options_free(briefly);
    EXPECT_EQ(param(s.model, "fc1.lora_A.weight"), before);  // no adapter changed
    int training = 0;
    ASSERT_EQ(acc_model_is_training(s.model, &training), ACC_OK);
    EXPECT_EQ(training, 1);
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, nullptr, s.reading, nullptr, nullptr),
                     ACC_ERR_INVALID_HANDLE, "dl");
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(nullptr, s.loader, s.reading, nullptr, nullptr),
                     ACC_ERR_INVALID_HANDLE, "model");
  }
  {  // round(r * rho) components of fc3's 12 input features: r 7, rho 2
    EvaSetup s{data_model("eva_mlp_model.pt"), loader_over({c["x"], c["y"]}, 6, false), reading(-1, -1)};
    acc_options* o = lora_options(7, 7);
    ASSERT_EQ(acc_options_set(o, "init_lora_weights", "eva"), ACC_OK);
    ASSERT_EQ(acc_model_add_lora(s.model, "fc3", o, nullptr), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    ACC_EXPECT_ERROR(acc_model_initialize_lora_eva(s.model, s.loader, s.reading, nullptr, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "14 components");
  }
}
