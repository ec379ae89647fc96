// An adapter_config.json with null where PEFT computes with the value (its TypeError or ValueError) is
// refused, naming the file and the key, and the model is left as it was; a null read as a default
// would compute something PEFT never does (an AdaLoRA scaled by 8 where the file said 16).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lora_support.h"
#include "support.h"

namespace {

namespace fs = std::filesystem;
using namespace lora_test;

struct Method {
  const char* name;
  acc_options_kind kind;
  AddAdapters add;
  const char* model;  // the test data's
  const char* targets;
  std::vector<std::pair<const char*, const char*>> settings;
  std::vector<const char*> computed_with;  // keys whose null PEFT fails on
};

// The method's adapter on its model, saved to `dir` (its folder made here).
void save_adapter(const Method& method, const std::string& dir) {
  acc_model* m = eager_data_model(method.model);
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(method.kind, &o), ACC_OK);
  for (const auto& [key, value] : method.settings) EXPECT_EQ(acc_options_set(o, key, value), ACC_OK) << key;
  size_t adapted = 0;
  EXPECT_EQ(method.add(m, method.targets, o, &adapted), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  EXPECT_EQ(acc_model_save_lora(m, dir.c_str()), ACC_OK) << acc_last_error_message();
  acc_model_free(m);
}

// Every value of the model's state (its tensors are floats), in order.
std::vector<float> state_values(const acc_model* m) {
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_model_state_dict(m, &state), ACC_OK);
  return acc_test::flat_floats(state);
}

}  // namespace

TEST(PeftConfigNulls, ANullPeftComputesWithIsRefusedNamingTheKey) {
  const std::vector<Method> methods = {
      {"adalora",
       ACC_OPTIONS_ADALORA,
       acc_model_add_adalora,
       "adalora_model.pt",
       "conv,fc1,proj,head",
       {{"init_r", "4"}, {"target_r", "2"}, {"total_step", "8"}, {"lora_alpha", "16"}},
       {"init_r", "target_r", "tinit", "tfinal", "deltaT", "beta1", "beta2", "orth_reg_weight", "lora_alpha",
        "lora_dropout"}},
      {"loha", ACC_OPTIONS_LOHA, acc_model_add_loha, "loha_model.pt", "fc1", {{"r", "2"}}, {"alpha", "module_dropout"}},
      {"lokr",
       ACC_OPTIONS_LOKR,
       acc_model_add_lokr,
       "lokr_model.pt",
       "fc1",
       {{"r", "2"}},
       {"alpha", "module_dropout", "decompose_factor"}},
      {"boft",
       ACC_OPTIONS_BOFT,
       acc_model_add_boft,
       "boft_model.pt",
       "fc2,head",
       {{"boft_block_size", "2"}},
       {"boft_block_size", "boft_block_num", "boft_dropout"}},
      {"randlora",
       ACC_OPTIONS_RANDLORA,
       acc_model_add_randlora,
       "randlora_model.pt",
       "fc1",
       {{"r", "3"}},
       {"projection_prng_key"}},
  };
  for (const Method& method : methods) {
    SCOPED_TRACE(method.name);
    const std::string dir = acc_test::fresh_dir(std::string("nulls_") + method.name);
    save_adapter(method, dir + "/saved");
    const std::string config_text = acc_test::read_file(dir + "/saved/adapter_config.json");
    for (const char* key : method.computed_with) {
      SCOPED_TRACE(key);
      nlohmann::ordered_json config = nlohmann::ordered_json::parse(config_text);
      ASSERT_TRUE(config.contains(key)) << "PEFT writes every field of its configuration";
      config[key] = nullptr;
      const std::string mutated = dir + "/null_" + key;
      fs::copy(dir + "/saved", mutated, fs::copy_options::recursive);
      std::ofstream(mutated + "/adapter_config.json") << config.dump();
      acc_model* m = eager_data_model(method.model);
      const auto before = state_values(m);
      ACC_EXPECT_ERROR(acc_model_load_lora(m, mutated.c_str()), ACC_ERR_IO,
                       std::string("'") + key + "' is null; PEFT computes with it");
      EXPECT_NE(std::string(acc_last_error_message()).find(mutated + "/adapter_config.json"), std::string::npos)
          << acc_last_error_message();
      EXPECT_EQ(state_values(m), before) << "a refused load changes nothing";
      acc_model_free(m);
    }
  }
}

// RandLoRA's files hold the bases once more under each adapted layer's name, as PEFT saves them: a
// copy under a layer the file adapts not was taken (every other tensor of a module without an
// adapter is refused).
TEST(PeftConfigNulls, ARandloraCopyOfTheBasesUnderALayerWithoutAnAdapterIsRefused) {
  const Method randlora{
      "randlora", ACC_OPTIONS_RANDLORA, acc_model_add_randlora, "randlora_model.pt", "fc1", {{"r", "3"}}, {}};
  const std::string dir = acc_test::fresh_dir("randlora_stray_copy");
  save_adapter(randlora, dir);
  const std::string weights = dir + "/adapter_model.safetensors";
  acc_tensor_list* tensors = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(weights.c_str(), &tensors));
  acc_tensor* copy = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(tensors, "base_model.model.fc1.randlora_A", &copy));
  ACC_ASSERT_OK(acc_tensor_list_append(tensors, "base_model.model.fc2.randlora_A", copy));
  acc_tensor_free(copy);
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(tensors, weights.c_str()));
  acc_tensor_list_free(tensors);
  acc_model* m = eager_data_model("randlora_model.pt");
  ACC_EXPECT_ERROR(acc_model_load_lora(m, dir.c_str()), ACC_ERR_IO,
                   "'base_model.model.fc2.randlora_A' is a layer's copy of RandLoRA's bases, but 'fc2' has no");
  acc_model_free(m);
}
