// Several named adapters on one model, as PEFT's add_adapter, load_adapter, set_adapter,
// delete_adapter and unload: each checked against models that hold one of the adapters alone (what
// PEFT computes with that adapter active), on a layer spec and on a TorchScript model, whose
// adapted layers' forward is rewritten per adapter (the adapters here adapt different layers).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lora_support.h"
#include "support.h"
#include "twin_support.h"

using namespace lora_test;
namespace fs = std::filesystem;

namespace {

struct Form {
  const char* name;
  acc_model* (*make)();
  const char *first_targets, *second_targets;  // different layers
};

// Seeded first: every model of one form starts from the same weights.
acc_model* spec_net() {
  EXPECT_EQ(acc_set_seed(5), ACC_OK);
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(kNet, &m), ACC_OK) << acc_last_error_message();
  return m;
}

acc_model* script_net() { return twin_test::script_model("lora_model.pt"); }

std::vector<Form> forms() {
  std::vector<Form> out = {{"layer spec", spec_net, kTargets, "linear2,2"}};
  if (!acc_test::data_dir().empty()) out.push_back({"TorchScript", script_net, "fc1", "block.0,head"});
  return out;
}

// nn.Linear's initialisation for both A and B (init_lora_weights false): every adapter changes the
// outputs from the start, each its own way.
acc_status add(acc_model* m, const char* name, const char* targets, int64_t r, double dropout = 0,
               bool dora = false) {
  acc_options* o = acc_test::lora_options(r, 2.0 * static_cast<double>(r));
  EXPECT_EQ(acc_options_set(o, "init_lora_weights", "false"), ACC_OK);
  EXPECT_EQ(acc_options_set_double(o, "lora_dropout", dropout), ACC_OK);
  EXPECT_EQ(acc_options_set(o, "use_dora", dora ? "true" : "false"), ACC_OK);
  const acc_status status =
      name ? acc_model_add_lora_named(m, name, targets, o, nullptr) : acc_model_add_lora(m, targets, o, nullptr);
  acc_options_free(o);
  return status;
}

std::vector<std::string> names(const acc_model* m) {
  acc_string_list* list = nullptr;
  EXPECT_EQ(acc_model_adapter_names(m, &list), ACC_OK) << acc_last_error_message();
  auto out = acc_test::strings(list);
  acc_string_list_free(list);
  return out;
}

std::string active(const acc_model* m) {
  char* name = nullptr;
  EXPECT_EQ(acc_model_active_adapter(m, &name), ACC_OK) << acc_last_error_message();
  std::string out = name ? name : "";
  acc_string_free(name);
  return out;
}

std::vector<float> eval_outputs(acc_model* m) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  auto out = outputs(m);
  EXPECT_EQ(acc_model_set_training(m, 1), ACC_OK);
  return out;
}

// The global generator's next draws after seeding with 99 and running `action`: equal to
// next_after_seed() where the action draws nothing.
template <typename F>
std::vector<float> draws_after(F action) {
  EXPECT_EQ(acc_set_seed(99), ACC_OK);
  action();
  return acc_test::next_global_draws();
}
std::vector<float> next_after_seed() {
  return draws_after([] {});
}

// A model holding "default" (first targets, r 2) and "second" (second targets, r 3, lora_dropout
// `dropout`) drawn after seed 11, and the two models that hold one of them alone, drawn alike.
struct Trio {
  acc_model *both, *first, *second;
  ~Trio() {
    acc_model_free(both);
    acc_model_free(first);
    acc_model_free(second);
  }
};

void make_trio(const Form& f, Trio* t, double dropout = 0, bool dora = false) {
  t->both = f.make();
  t->first = f.make();
  t->second = f.make();
  ASSERT_EQ(acc_set_seed(11), ACC_OK);
  ASSERT_EQ(add(t->both, nullptr, f.first_targets, 2), ACC_OK) << acc_last_error_message();
  ASSERT_EQ(add(t->both, "second", f.second_targets, 3, dropout, dora), ACC_OK) << acc_last_error_message();
  const auto after_both = acc_test::next_global_draws();
  ASSERT_EQ(acc_set_seed(11), ACC_OK);
  ASSERT_EQ(add(t->first, nullptr, f.first_targets, 2), ACC_OK);
  ASSERT_EQ(add(t->second, nullptr, f.second_targets, 3, dropout, dora), ACC_OK);
  // PEFT's add_adapter draws as get_peft_model does, after the adapters the model has.
  EXPECT_EQ(after_both, acc_test::next_global_draws()) << "the global stream after both adapters";
}

}  // namespace

TEST(NamedAdapters, AddDrawsAsPeftAndSetAdapterSwitchesWithoutDrawing) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t);
    EXPECT_EQ(names(t.both), (std::vector<std::string>{"default", "second"}));
    EXPECT_EQ(active(t.both), "default");
    // The new adapter is kept aside: the model computes and lists the active one's alone.
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.first));
    EXPECT_EQ(acc_test::parameter_names(t.both), acc_test::parameter_names(t.first));
    size_t count = 0, alone = 0;
    ASSERT_EQ(acc_model_lora_count(t.both, &count), ACC_OK);
    ASSERT_EQ(acc_model_lora_count(t.first, &alone), ACC_OK);
    EXPECT_EQ(count, alone);

    EXPECT_EQ(
        draws_after([&] { EXPECT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK) << acc_last_error_message(); }),
        next_after_seed());
    EXPECT_EQ(active(t.both), "second");
    EXPECT_EQ(names(t.both), (std::vector<std::string>{"default", "second"}));
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
    EXPECT_EQ(acc_test::parameter_names(t.both), acc_test::parameter_names(t.second));
    for (const auto& name : acc_test::parameter_names(t.second))
      if (name.find("lora_") != std::string::npos) EXPECT_EQ(param(t.both, name), param(t.second, name)) << name;

    ASSERT_EQ(acc_model_set_adapter(t.both, "default"), ACC_OK);
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.first));
    ASSERT_EQ(acc_model_set_adapter(t.both, "default"), ACC_OK) << "the active one again: nothing changes";
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.first));
  }
}

TEST(NamedAdapters, TheActiveOneTrainsAndEachKeepsItsOwnValues) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t, /*dropout=*/0.25);
    ASSERT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK);
    // With its dropout drawn as the lone adapter's (the same stream), it trains alike.
    ASSERT_EQ(acc_set_seed(5), ACC_OK);
    const auto losses = train(t.both, 3);
    ASSERT_EQ(acc_set_seed(5), ACC_OK);
    EXPECT_EQ(losses, train(t.second, 3));
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
    // The first adapter was frozen aside: back, it computes as before any training.
    ASSERT_EQ(acc_model_set_adapter(t.both, "default"), ACC_OK);
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.first));
    ASSERT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK);
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second)) << "the trained values kept aside";

    // An optimizer holds the active adapter's tensors: switching while it lives is refused.
    acc_optimizer* opt = acc_test::optimizer(t.both, "adamw", 1e-2);
    ACC_EXPECT_ERROR(acc_model_set_adapter(t.both, "default"), ACC_ERR_INVALID_ARGUMENT, "optimizer");
    acc_optimizer_free(opt);
    EXPECT_EQ(acc_model_set_adapter(t.both, "default"), ACC_OK) << acc_last_error_message();
  }
}

TEST(NamedAdapters, SaveWritesEachWherePeftDoesAndLoadAdapterReadsIt) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t);
    const std::string dir = acc_test::temp_path("named_adapters");
    fs::remove_all(dir);
    ASSERT_EQ(acc_model_save_lora(t.both, dir.c_str()), ACC_OK) << acc_last_error_message();
    EXPECT_TRUE(fs::exists(dir + "/adapter_config.json"));
    EXPECT_TRUE(fs::exists(dir + "/second/adapter_model.safetensors"));
    // Each folder is one adapter's, read by acc_model_load_lora (PeftModel.from_pretrained).
    acc_model* first = f.make();
    ASSERT_EQ(acc_model_load_lora(first, dir.c_str()), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(eval_outputs(first), eval_outputs(t.first));
    acc_model* second = f.make();
    ASSERT_EQ(acc_model_load_lora(second, (dir + "/second").c_str()), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(eval_outputs(second), eval_outputs(t.second));
    // load_adapter: kept aside until set active.
    ASSERT_EQ(acc_model_load_lora_named(first, (dir + "/second").c_str(), "other"), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(names(first), (std::vector<std::string>{"default", "other"}));
    EXPECT_EQ(eval_outputs(first), eval_outputs(t.first));
    ASSERT_EQ(acc_model_set_adapter(first, "other"), ACC_OK);
    EXPECT_EQ(eval_outputs(first), eval_outputs(t.second));
    // Without a "default" adapter nothing goes into the folder itself.
    acc_model* named_only = f.make();
    ASSERT_EQ(acc_model_load_lora_named(named_only, (dir + "/second").c_str(), "solo"), ACC_OK);
    EXPECT_EQ(active(named_only), "solo") << "the first adapter is the active one";
    EXPECT_EQ(eval_outputs(named_only), eval_outputs(t.second));
    const std::string solo_dir = acc_test::temp_path("named_solo");
    fs::remove_all(solo_dir);
    ASSERT_EQ(acc_model_save_lora(named_only, solo_dir.c_str()), ACC_OK);
    EXPECT_FALSE(fs::exists(solo_dir + "/adapter_config.json"));
    EXPECT_TRUE(fs::exists(solo_dir + "/solo/adapter_config.json"));
    for (acc_model* m : {first, second, named_only}) acc_model_free(m);
    fs::remove_all(dir);
    fs::remove_all(solo_dir);
  }
}

// Found by a hunt: an adapter named longer than a folder's name can be was saved halfway (the others
// written, then ENAMETOOLONG). Such a name is accepted as PEFT accepts it; saving refuses it first.
TEST(NamedAdapters, SaveRefusesANameNoFolderCanHaveBeforeWritingAnything) {
  const auto all = forms();
  const Form& f = all.front();
  Trio t;
  make_trio(f, &t);
  const std::string long_name(300, 'z');
  ASSERT_EQ(add(t.both, long_name.c_str(), f.second_targets, 2), ACC_OK) << acc_last_error_message();
  const std::string dir = acc_test::temp_path("named_long");
  fs::remove_all(dir);
  ACC_EXPECT_ERROR(acc_model_save_lora(t.both, dir.c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "(300 bytes) is longer than a folder's name can be (255 bytes); nothing was written");
  EXPECT_FALSE(fs::exists(dir));
  ASSERT_EQ(acc_model_delete_adapter(t.both, long_name.c_str()), ACC_OK);
  ASSERT_EQ(acc_model_save_lora(t.both, dir.c_str()), ACC_OK) << acc_last_error_message();
  EXPECT_TRUE(fs::exists(dir + "/second/adapter_config.json"));
  fs::remove_all(dir);
}

// Found by a hunt: a save of several adapters wrote the active one's files, then failed on another's
// folder (a file in its place, a folder in its configuration's place): every folder is checked first.
TEST(NamedAdapters, SaveChecksEveryAdaptersFolderBeforeWritingAnything) {
  const auto all = forms();
  const Form& f = all.front();
  Trio t;
  make_trio(f, &t);
  const std::string dir = acc_test::temp_path("named_blocked");
  for (bool folder_in_file_place : {false, true}) {
    SCOPED_TRACE(folder_in_file_place);
    fs::remove_all(dir);
    ASSERT_EQ(acc_model_save_lora(t.first, dir.c_str()), ACC_OK) << acc_last_error_message();
    const std::string weights = acc_test::read_file(dir + "/adapter_model.safetensors");
    if (folder_in_file_place)
      fs::create_directories(dir + "/second/adapter_config.json");
    else
      std::ofstream(dir + "/second") << "the user's file";
    ACC_EXPECT_ERROR(acc_model_save_lora(t.both, dir.c_str()), ACC_ERR_IO,
                     folder_in_file_place ? "is not a regular file" : "it is not a folder; nothing was written");
    EXPECT_EQ(acc_test::read_file(dir + "/adapter_model.safetensors"), weights)
        << "a refused save wrote the active adapter";
  }
  fs::remove_all(dir);
}

namespace {

// A batch of three samples (the models' input, 4 x 6 each).
acc_tensor* three_samples() {
  std::vector<float> v(3 * 4 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.29f * static_cast<float>(i) + 0.5f);
  return acc_test::floats(v, {3, 4, 6});
}

// The evaluation output of `m` on three_samples() with `adapter_names` (acc_model_forward_adapters).
acc_status mixed_outputs(acc_model* m, const std::vector<const char*>& adapter_names, std::vector<float>* out) {
  acc_tensor* x = three_samples();
  acc_tensor_list* list = nullptr;
  const acc_status status =
      acc_model_forward_adapters(m, &x, 1, adapter_names.data(), adapter_names.size(), ACC_FORWARD_NO_GRAD, &list);
  if (status == ACC_OK) *out = acc_test::flat_floats(list);
  acc_tensor_list_free(list);
  acc_tensor_free(x);
  return status;
}

std::vector<float> outputs_of_three(acc_model* m) {
  EXPECT_EQ(acc_model_set_training(m, 0), ACC_OK);
  return outputs_on(m, three_samples());
}

}  // namespace

// PEFT's adapter_names: each sample of one batch computes with its own adapter ("__base__": none),
// as the model holding that adapter alone computes it (to rounding: a sub-batch's products);
// the active adapter stays wired as it was.
TEST(NamedAdapters, MixedBatchComputesEachSampleWithItsOwnAdapter) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    // A TorchScript model's forward runs adapters on the active adapter's layers: the second adapter
    // adapts one of them (on a layer spec, other layers).
    const bool spec = std::string(f.name) == "layer spec";
    const Form plain{f.name, f.make, spec ? "0,linear1" : f.first_targets, spec ? f.second_targets : "fc1"};
    Trio t;
    make_trio(plain, &t);
    acc_model* base = f.make();
    const std::vector<std::vector<float>> alone = {outputs_of_three(t.second), outputs_of_three(base),
                                                   outputs_of_three(t.first)};
    const auto before = outputs_of_three(t.both);
    std::vector<float> mixed;
    ASSERT_EQ(mixed_outputs(t.both, {"second", "__base__", "default"}, &mixed), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(mixed.size(), before.size());
    const size_t row = mixed.size() / 3;
    for (size_t i = 0; i < mixed.size(); ++i) EXPECT_NEAR(mixed[i], alone[i / row][i], 1e-6) << i;
    EXPECT_EQ(outputs_of_three(t.both), before);  // the active adapter wired as before
    // Disabled adapters: every sample the base model's.
    ASSERT_EQ(acc_model_set_lora_enabled(t.both, 0), ACC_OK);
    ASSERT_EQ(mixed_outputs(t.both, {"second", "second", "default"}, &mixed), ACC_OK);
    acc_test::expect_equal_but_for_freezing(mixed, alone[1]);
    ASSERT_EQ(acc_model_set_lora_enabled(t.both, 1), ACC_OK);

    // What PEFT refuses, changing nothing.
    ACC_EXPECT_ERROR(mixed_outputs(t.both, {"second", "nope", "zz"}, &mixed), ACC_ERR_INVALID_ARGUMENT,
                     "Trying to infer with non-existing adapter(s): nope, zz");
    ACC_EXPECT_ERROR(mixed_outputs(t.both, {"second", "default"}, &mixed), ACC_ERR_INVALID_ARGUMENT,
                     "Length of adapter_names should be the same as the number of inputs, but got 2 and 3");
    ASSERT_EQ(acc_model_set_training(t.both, 1), ACC_OK);
    ACC_EXPECT_ERROR(mixed_outputs(t.both, {"second", "default", "default"}, &mixed), ACC_ERR_INVALID_ARGUMENT,
                     "training mode");
    EXPECT_EQ(outputs_of_three(t.both), before);
    if (!spec) {  // an adapter of layers the active one does not adapt: not built for TorchScript
      ASSERT_EQ(add(t.both, "third", "head", 2), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_model_set_training(t.both, 0), ACC_OK);
      ACC_EXPECT_ERROR(mixed_outputs(t.both, {"third", "default", "default"}, &mixed), ACC_ERR_UNSUPPORTED,
                       "adapter 'third' adapts 'head', which the model's forward runs no adapter on now");
    }
    acc_model_free(base);
  }
  Trio dora;
  const auto all = forms();
  const Form& f = all.front();
  make_trio({f.name, f.make, "0,linear1", f.second_targets}, &dora, 0, /*dora=*/true);
  ASSERT_EQ(acc_model_set_training(dora.both, 0), ACC_OK);
  std::vector<float> mixed;
  ACC_EXPECT_ERROR(mixed_outputs(dora.both, {"second", "default", "default"}, &mixed), ACC_ERR_INVALID_ARGUMENT,
                   "Cannot pass adapter_names when DoRA is enabled");
}

// RoAd's mixed batches (PEFT's road layer has them too): each sample's rows rotated by its adapter.
TEST(NamedAdapters, MixedBatchOfRoadAdapters) {
  // Two models alike: "default" (active) and "second" kept aside, RoAd's angles and scales drawn.
  auto road_pair = [] {
    acc_model* m = spec_net();
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_ROAD, &o), ACC_OK);
    EXPECT_EQ(acc_options_set(o, "group_size", "2"), ACC_OK);
    EXPECT_EQ(acc_options_set(o, "init_weights", "false"), ACC_OK);
    EXPECT_EQ(acc_set_seed(13), ACC_OK);
    EXPECT_EQ(acc_model_add_road(m, "0,linear1", o, nullptr), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(acc_model_add_lora_named(m, "second", "0,linear1", o, nullptr), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    return m;
  };
  acc_model *m = road_pair(), *other = road_pair();
  const auto first = outputs_of_three(m);
  ASSERT_EQ(acc_model_set_adapter(other, "second"), ACC_OK);
  const auto second = outputs_of_three(other);
  ASSERT_EQ(acc_model_set_lora_enabled(other, 0), ACC_OK);
  const std::vector<std::vector<float>> alone = {second, outputs_of_three(other), first};
  std::vector<float> mixed;
  ASSERT_EQ(mixed_outputs(m, {"second", "__base__", "default"}, &mixed), ACC_OK) << acc_last_error_message();
  const size_t row = mixed.size() / 3;
  for (size_t i = 0; i < mixed.size(); ++i) EXPECT_NEAR(mixed[i], alone[i / row][i], 1e-6) << i;
  EXPECT_NE(second, first);
  acc_model_free(m);
  acc_model_free(other);
}

TEST(NamedAdapters, DeleteAndUnloadAsPeft) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t);
    acc_model* base = f.make();
    const auto base_outputs = [&] {
      size_t n = 0;
      EXPECT_EQ(acc_model_set_requires_grad(base, "*", 0, &n), ACC_OK);  // frozen, as the adapted models' base
      return eval_outputs(base);
    }();
    ASSERT_EQ(add(t.both, "a_third", f.first_targets, 2), ACC_OK);
    // The active one deleted: the first of the others by name takes its place (PEFT's sorted choice).
    ASSERT_EQ(acc_model_delete_adapter(t.both, "default"), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(active(t.both), "a_third");
    EXPECT_EQ(names(t.both), (std::vector<std::string>{"second", "a_third"}));
    ASSERT_EQ(acc_model_delete_adapter(t.both, "a_third"), ACC_OK);
    EXPECT_EQ(active(t.both), "second");
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
    ASSERT_EQ(acc_model_delete_adapter(t.both, "second"), ACC_OK);
    EXPECT_EQ(names(t.both), std::vector<std::string>{});
    ACC_EXPECT_ERROR(acc_model_active_adapter(t.both, nullptr), ACC_ERR_INVALID_ARGUMENT, "out");
    char* none = nullptr;
    ACC_EXPECT_ERROR(acc_model_active_adapter(t.both, &none), ACC_ERR_INVALID_ARGUMENT, "no adapters");
    EXPECT_EQ(eval_outputs(t.both), base_outputs) << "the base model's outputs";

    // unload: every adapter goes, nothing merged; new adapters can come after.
    ASSERT_EQ(add(t.first, "other", f.second_targets, 3), ACC_OK);
    ASSERT_EQ(acc_model_unload_lora(t.first), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(names(t.first), std::vector<std::string>{});
    size_t count = 1;
    ASSERT_EQ(acc_model_lora_count(t.first, &count), ACC_OK);
    EXPECT_EQ(count, 0u);
    EXPECT_EQ(eval_outputs(t.first), base_outputs);
    EXPECT_EQ(add(t.first, nullptr, f.second_targets, 3), ACC_OK) << acc_last_error_message();
    ACC_EXPECT_ERROR(acc_model_unload_lora(base), ACC_ERR_INVALID_ARGUMENT, "no LoRA adapters");
    acc_model_free(base);
  }
}

TEST(NamedAdapters, MergeMergesTheActiveOneAndDropsTheOthers) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t);
    ASSERT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK);
    ASSERT_EQ(acc_model_merge_lora(t.both), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_model_merge_lora(t.second), ACC_OK);
    EXPECT_EQ(names(t.both), std::vector<std::string>{});
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
  }
}

// PEFT's merge_and_unload(adapter_names=...): the named adapters, kept aside or active, merged in
// the order given, then all removed. The two adapters adapt different layers, so each layer holds
// what merging its adapter alone gives; refusals (an unknown name) change nothing.
TEST(NamedAdapters, MergeByNameMergesTheNamedOnesInOrder) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t);
    const auto base = [&] {
      acc_model* plain = f.make();
      std::map<std::string, std::vector<float>> out;
      for (const auto& name : acc_test::parameter_names(plain)) out[name] = param(plain, name);
      acc_model_free(plain);
      return out;
    }();
    const char* unknown[] = {"second", "third"};
    ACC_EXPECT_ERROR(acc_model_merge_lora_adapters(t.both, unknown, 2), ACC_ERR_INVALID_ARGUMENT,
                     "no adapter named 'third'");
    EXPECT_EQ(names(t.both), (std::vector<std::string>{"default", "second"}));
    const char* both[] = {"second", "default"};
    ASSERT_EQ(acc_model_merge_lora_adapters(t.both, both, 2), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(names(t.both), std::vector<std::string>{});
    ASSERT_EQ(acc_model_merge_lora(t.first), ACC_OK);
    ASSERT_EQ(acc_model_merge_lora(t.second), ACC_OK);
    size_t changed = 0;
    for (const auto& [name, original] : base) {
      const auto first = param(t.first, name), second = param(t.second, name);
      const auto& expected = first != original ? first : second;
      changed += expected != original;
      EXPECT_EQ(param(t.both, name), expected) << name;
    }
    EXPECT_GE(changed, 2u) << "both adapters' layers merged";
    // Merging a kept-aside adapter alone: the model computes as with it active.
    Trio u;
    make_trio(f, &u);
    const char* kept[] = {"second"};
    ASSERT_EQ(acc_model_merge_lora_adapters(u.both, kept, 1), ACC_OK);
    ASSERT_EQ(acc_model_merge_lora(u.second), ACC_OK);
    EXPECT_EQ(eval_outputs(u.both), eval_outputs(u.second));
  }
}

TEST(NamedAdapters, RefusalsChangeNothing) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t);
    const auto before = eval_outputs(t.both);
    const auto expect_unchanged = [&] {
      EXPECT_EQ(names(t.both), (std::vector<std::string>{"default", "second"}));
      EXPECT_EQ(active(t.both), "default");
      EXPECT_EQ(eval_outputs(t.both), before);
    };
    for (const char* bad : {"", "a/b", "..", "."})
      ACC_EXPECT_ERROR(add(t.both, bad, f.second_targets, 2), ACC_ERR_INVALID_ARGUMENT, "name");
    EXPECT_EQ(draws_after([&] {
                ACC_EXPECT_ERROR(add(t.both, "second", f.second_targets, 2), ACC_ERR_INVALID_ARGUMENT,
                                 "already has an adapter named 'second'");
                ACC_EXPECT_ERROR(add(t.both, "third", "no_such_layer", 2), ACC_ERR_INVALID_ARGUMENT, "no_such_layer");
              }),
              next_after_seed())
        << "a refused adapter leaves the global stream as it was";
    ACC_EXPECT_ERROR(acc_model_set_adapter(t.both, "third"), ACC_ERR_INVALID_ARGUMENT, "no adapter named 'third'");
    ACC_EXPECT_ERROR(acc_model_delete_adapter(t.both, "third"), ACC_ERR_INVALID_ARGUMENT, "no adapter named 'third'");
    ACC_EXPECT_ERROR(acc_model_set_adapter(t.both, nullptr), ACC_ERR_INVALID_ARGUMENT, "adapter_name");
    ACC_EXPECT_ERROR(acc_model_load_lora_named(t.both, acc_test::temp_path("none_here").c_str(), "third"), ACC_ERR_IO,
                     "none_here");
    {  // bias trains the model's own biases in place, shared by every adapter: not built
      acc_options* o = acc_test::lora_options(2, 4);
      ASSERT_EQ(acc_options_set(o, "bias", "all"), ACC_OK);
      EXPECT_EQ(draws_after([&] {
                  ACC_EXPECT_ERROR(acc_model_add_lora_named(t.both, "third", f.first_targets, o, nullptr),
                                   ACC_ERR_UNSUPPORTED, "are not built (PEFT allows one such adapter per model");
                }),
                next_after_seed());
      acc_options_free(o);
    }
    expect_unchanged();
    // A prepared model's tensors are registered for its training.
    acc_accelerator* acc = nullptr;
    ASSERT_EQ(acc_accelerator_create(nullptr, &acc), ACC_OK) << acc_last_error_message();
    acc_model* prepared = nullptr;
    ASSERT_EQ(acc_prepare_model(acc, t.both, ACC_PLACEMENT_DEFAULT, &prepared), ACC_OK) << acc_last_error_message();
    ACC_EXPECT_ERROR(acc_model_set_adapter(prepared, "second"), ACC_ERR_INVALID_ARGUMENT, "before preparing");
    ACC_EXPECT_ERROR(add(prepared, "third", f.second_targets, 2), ACC_ERR_INVALID_ARGUMENT, "before preparing");
    EXPECT_EQ(names(prepared), (std::vector<std::string>{"default", "second"}));
    acc_model_free(prepared);
    acc_accelerator_free(acc);
  }
}

namespace {

// The module each form's adapters may save (modules_to_save), adapted by neither: a LayerNorm.
const char* saved_module(const Form& f) { return std::string(f.name) == "TorchScript" ? "norm" : "norm1"; }

// Adds an adapter (nn.Linear's draws for A and B) that saves `saved` (none where null).
acc_status add_saving(acc_model* m, const char* name, const char* targets, int64_t r, const char* saved) {
  acc_options* o = acc_test::lora_options(r, 2.0 * static_cast<double>(r));
  EXPECT_EQ(acc_options_set(o, "init_lora_weights", "false"), ACC_OK);
  if (saved) EXPECT_EQ(acc_options_set(o, "modules_to_save", saved), ACC_OK);
  const acc_status status =
      name ? acc_model_add_lora_named(m, name, targets, o, nullptr) : acc_model_add_lora(m, targets, o, nullptr);
  acc_options_free(o);
  return status;
}

// The values of the saved module's parameters, in name order, and whether they train.
std::vector<float> saved_values(const acc_model* m, const char* module) {
  std::vector<float> out;
  for (const auto& name : acc_test::parameter_names(m)) {
    if (name.find(std::string(module) + ".") == std::string::npos) continue;
    const auto values = param(m, name);
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}
bool saved_trains(const acc_model* m, const char* module) {
  bool trains = false;
  for (const auto& name : acc_test::parameter_names(m)) {
    if (name.find(std::string(module) + ".") == std::string::npos) continue;
    acc_tensor* t = nullptr;
    int requires_grad = 0;
    EXPECT_EQ(acc_model_parameter(m, name.c_str(), &t), ACC_OK);
    EXPECT_EQ(acc_tensor_requires_grad(t, &requires_grad), ACC_OK);
    acc_tensor_free(t);
    trains = trains || requires_grad;
  }
  return trains;
}

}  // namespace

// PEFT's ModulesToSaveWrapper per adapter: each adapter saving a module trains its own copy, made
// from the original when the adapter is added; while an adapter that does not save it is active,
// the module is the original, frozen. Checked against models holding one adapter alone, trained
// alike, through switching, saving and loading, combining and unloading.
TEST(NamedAdapters, EachAdapterTrainsItsOwnCopyOfTheModulesToSave) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    const char* saved = saved_module(f);
    acc_model *both = f.make(), *first = f.make(), *second = f.make();
    const auto original = saved_values(both, saved);
    ASSERT_EQ(acc_set_seed(11), ACC_OK);
    ASSERT_EQ(add_saving(both, nullptr, f.first_targets, 2, saved), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(add_saving(both, "second", f.second_targets, 3, saved), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_set_seed(11), ACC_OK);
    ASSERT_EQ(add_saving(first, nullptr, f.first_targets, 2, saved), ACC_OK);
    ASSERT_EQ(add_saving(second, nullptr, f.second_targets, 3, saved), ACC_OK);

    EXPECT_EQ(train(both, 2), train(first, 2));
    EXPECT_NE(saved_values(both, saved), original) << "the module trains with the active adapter";
    EXPECT_EQ(saved_values(both, saved), saved_values(first, saved));
    ASSERT_EQ(acc_model_set_adapter(both, "second"), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(saved_values(both, saved), original) << "the second adapter's copy starts as the original";
    EXPECT_TRUE(saved_trains(both, saved));
    EXPECT_EQ(train(both, 2), train(second, 2));
    EXPECT_EQ(eval_outputs(both), eval_outputs(second));
    ASSERT_EQ(acc_model_set_adapter(both, "default"), ACC_OK);
    EXPECT_EQ(saved_values(both, saved), saved_values(first, saved)) << "the first adapter's copy came back";
    EXPECT_EQ(eval_outputs(both), eval_outputs(first));

    // An adapter saving nothing computes with the original module, frozen.
    ASSERT_EQ(add_saving(both, "plain", f.first_targets, 2, nullptr), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_model_set_adapter(both, "plain"), ACC_OK);
    EXPECT_EQ(saved_values(both, saved), original);
    EXPECT_FALSE(saved_trains(both, saved));

    // Each adapter's folder holds its own copy; loaded alone, it computes as it did.
    const std::string dir = acc_test::temp_path("named_saved_modules_" + std::string(saved));
    ASSERT_EQ(acc_model_save_lora(both, dir.c_str()), ACC_OK) << acc_last_error_message();
    for (const auto& [folder, solo] : {std::pair<std::string, acc_model*>{dir, first}, {dir + "/second", second}}) {
      acc_model* loaded = f.make();
      ASSERT_EQ(acc_model_load_lora(loaded, folder.c_str()), ACC_OK) << acc_last_error_message();
      EXPECT_EQ(eval_outputs(loaded), eval_outputs(solo)) << folder;
      acc_model_free(loaded);
    }
    {  // and loaded as a named adapter beside others, it brings its copy in
      acc_model* loaded = f.make();
      ASSERT_EQ(add_saving(loaded, nullptr, f.first_targets, 2, nullptr), ACC_OK);
      ASSERT_EQ(acc_model_load_lora_named(loaded, (dir + "/second").c_str(), "second"), ACC_OK)
          << acc_last_error_message();
      EXPECT_EQ(saved_values(loaded, saved), original) << "kept aside";
      ASSERT_EQ(acc_model_set_adapter(loaded, "second"), ACC_OK);
      EXPECT_EQ(eval_outputs(loaded), eval_outputs(second));
      acc_model_free(loaded);
    }

    // PEFT refuses to combine two copies of one module; one copy among the adapters is fine.
    const char* pair[] = {"default", "second"};
    const double weights[] = {1.0, 1.0};
    ACC_EXPECT_ERROR(acc_model_add_weighted_adapter(both, pair, weights, 2, "mix", "cat", 0, nullptr),
                     ACC_ERR_INVALID_ARGUMENT, "more than one of the adapters saves");
    const char* one_saving[] = {"default", "plain"};
    ASSERT_EQ(acc_model_add_weighted_adapter(both, one_saving, weights, 2, "mix", "cat", 0, nullptr), ACC_OK)
        << acc_last_error_message();
    ASSERT_EQ(acc_model_set_adapter(both, "mix"), ACC_OK);
    EXPECT_EQ(saved_values(both, saved), original) << "PEFT copies the original for the combined adapter";
    EXPECT_TRUE(saved_trains(both, saved));

    // Deleting the active adapter hands its place on with the next one's copy; unload keeps the
    // active adapter's copy (PEFT's unload returns it in place of the wrapper).
    ASSERT_EQ(acc_model_set_adapter(both, "second"), ACC_OK);
    const auto second_copy = saved_values(both, saved);
    ASSERT_EQ(acc_model_delete_adapter(both, "second"), ACC_OK);
    EXPECT_EQ(active(both), "default");
    EXPECT_EQ(saved_values(both, saved), saved_values(first, saved));
    ASSERT_EQ(acc_model_unload_lora(both), ACC_OK);
    EXPECT_EQ(saved_values(both, saved), saved_values(first, saved));
    EXPECT_NE(saved_values(both, saved), second_copy);
    // Deleting the last adapter puts the module back as it was, frozen (PEFT's wrapper computes with
    // its original module once no adapter is left): the base model's outputs.
    ASSERT_EQ(acc_model_delete_adapter(second, "default"), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(saved_values(second, saved), original);
    EXPECT_FALSE(saved_trains(second, saved));
    acc_model* plain = f.make();
    acc_test::expect_equal_but_for_freezing(eval_outputs(second), eval_outputs(plain));
    acc_model_free(plain);
    acc_model_free(both);
    acc_model_free(first);
    acc_model_free(second);
  }
}

// PEFT's add_adapter with PiSSA beside another adapter: pissa_init writes the base layer's weight,
// which every adapter shares, so the other adapters sit on the residual from then on. Checked
// against a model holding the PiSSA adapter alone (drawn after the same stream) and one holding the
// first adapter on that residual.
TEST(NamedAdapters, PissaBesideAnotherRewritesTheSharedBase) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    acc_model *both = f.make(), *first = f.make(), *solo = f.make();
    acc_options* pissa = acc_test::lora_options(2, 4);
    ASSERT_EQ(acc_options_set(pissa, "init_lora_weights", "pissa"), ACC_OK);
    ASSERT_EQ(acc_set_seed(11), ACC_OK);
    ASSERT_EQ(add(both, nullptr, f.first_targets, 2), ACC_OK);
    ASSERT_EQ(acc_model_add_lora_named(both, "pissa", f.second_targets, pissa, nullptr), ACC_OK)
        << acc_last_error_message();
    ASSERT_EQ(acc_set_seed(11), ACC_OK);
    ASSERT_EQ(add(first, nullptr, f.first_targets, 2), ACC_OK);
    ASSERT_EQ(acc_model_add_lora(solo, f.second_targets, pissa, nullptr), ACC_OK);
    acc_options_free(pissa);
    // The base weights: the residual the PiSSA adapter left, under either adapter.
    acc_tensor_list* residual = nullptr;
    ASSERT_EQ(acc_tensor_list_create(&residual), ACC_OK);
    for (const auto& name : acc_test::parameter_names(solo)) {
      if (name.find("lora_") != std::string::npos) continue;
      EXPECT_EQ(param(both, name), param(solo, name)) << name;
      acc_tensor* t = nullptr;
      ASSERT_EQ(acc_model_parameter(solo, name.c_str(), &t), ACC_OK);
      ASSERT_EQ(acc_tensor_list_append(residual, name.c_str(), t), ACC_OK);
      acc_tensor_free(t);
    }
    ASSERT_EQ(acc_model_load_state_dict(first, residual, 0), ACC_OK) << acc_last_error_message();
    acc_tensor_list_free(residual);
    EXPECT_EQ(eval_outputs(both), eval_outputs(first)) << "the first adapter on the residual";
    ASSERT_EQ(acc_model_set_adapter(both, "pissa"), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(eval_outputs(both), eval_outputs(solo));
    for (acc_model* m : {both, first, solo}) acc_model_free(m);
  }
}

TEST(NamedAdapters, AdaptersKeptAsideMoveWithTheModel) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t);
    ASSERT_EQ(acc_model_to(t.both, nullptr, ACC_DTYPE_FLOAT64), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK) << acc_last_error_message();
    for (const auto& name : acc_test::parameter_names(t.both)) {
      acc_tensor* p = nullptr;
      ASSERT_EQ(acc_model_parameter(t.both, name.c_str(), &p), ACC_OK);
      acc_dtype dtype = ACC_DTYPE_UNDEFINED;
      ASSERT_EQ(acc_tensor_dtype(p, &dtype), ACC_OK);
      EXPECT_EQ(dtype, ACC_DTYPE_FLOAT64) << name;
      acc_tensor_free(p);
    }
    ASSERT_EQ(acc_model_to(t.both, nullptr, ACC_DTYPE_FLOAT32), ACC_OK);
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
  }
}

TEST(NamedAdapters, DoraAdaptersSwitchAndDisablingCarriesOver) {
  for (const Form& f : forms()) {
    SCOPED_TRACE(f.name);
    Trio t;
    make_trio(f, &t, /*dropout=*/0.1, /*dora=*/true);
    const auto first = eval_outputs(t.both);
    ASSERT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
    // PEFT's disable_adapter_layers is the layers': the adapter switched in stays disabled.
    ASSERT_EQ(acc_model_set_lora_enabled(t.both, 0), ACC_OK);
    ASSERT_EQ(acc_model_set_adapter(t.both, "default"), ACC_OK);
    int enabled = 1;
    ASSERT_EQ(acc_model_lora_enabled(t.both, &enabled), ACC_OK);
    EXPECT_EQ(enabled, 0);
    ASSERT_EQ(acc_model_set_lora_enabled(t.second, 0), ACC_OK);
    EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second)) << "both the base model's outputs";
    ASSERT_EQ(acc_model_set_lora_enabled(t.both, 1), ACC_OK);
    EXPECT_EQ(eval_outputs(t.both), first);
  }
}

// Adapters of the same layers change places without the layers being wired again: alike.
TEST(NamedAdapters, AdaptersOfTheSameLayersSwitchAlike) {
  for (Form f : forms()) {
    SCOPED_TRACE(f.name);
    f.second_targets = f.first_targets;
    for (bool dora : {false, true}) {
      Trio t;
      make_trio(f, &t, /*dropout=*/0.25, dora);
      ASSERT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK) << acc_last_error_message();
      EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
      ASSERT_EQ(acc_set_seed(5), ACC_OK);
      const auto losses = train(t.both, 2);
      ASSERT_EQ(acc_set_seed(5), ACC_OK);
      EXPECT_EQ(losses, train(t.second, 2));
      ASSERT_EQ(acc_model_set_adapter(t.both, "default"), ACC_OK);
      EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.first));
      EXPECT_EQ(acc_test::parameter_names(t.both), acc_test::parameter_names(t.first));
      ASSERT_EQ(acc_model_set_adapter(t.both, "second"), ACC_OK);
      EXPECT_EQ(eval_outputs(t.both), eval_outputs(t.second));
    }
  }
}

namespace {

// The "weighted" case's TorchScript model with its three adapters ("default" active) at their chosen values.
acc_model* weighted_sources(const nlohmann::json& w) {
  acc_model* m = script_net();
  for (const char* name : {"default", "b", "c"}) {
    const auto& spec = w["specs"][name];
    acc_options* o = acc_test::lora_options(spec["r"], spec["lora_alpha"]);
    const std::string targets = spec["targets"][0].get<std::string>() + "," + spec["targets"][1].get<std::string>();
    EXPECT_EQ(std::string(name) == "default" ? acc_model_add_lora(m, targets.c_str(), o, nullptr)
                                             : acc_model_add_lora_named(m, name, targets.c_str(), o, nullptr),
              ACC_OK)
        << acc_last_error_message();
    acc_options_free(o);
    EXPECT_EQ(acc_model_set_adapter(m, name), ACC_OK) << acc_last_error_message();
    twin_test::choose(m, w["values"][name], twin_test::script_only("lora_model.pt"));
  }
  EXPECT_EQ(acc_model_set_adapter(m, "default"), ACC_OK);
  return m;
}

std::vector<const char*> c_strings(const std::vector<std::string>& names) {
  std::vector<const char*> pointers;
  for (const auto& n : names) pointers.push_back(n.c_str());
  return pointers;
}

acc_status add_weighted(acc_model* m, const std::vector<std::string>& names, const std::vector<double>& weights,
                        const char* name, const char* how, int64_t svd_rank = 0) {
  return acc_model_add_weighted_adapter(m, c_strings(names).data(), weights.data(), names.size(), name, how, svd_rank,
                                        nullptr);
}

// add_weighted_adapter with its keywords, set from a JSON object of them as acc_options_set reads text.
acc_status add_weighted_with(acc_model* m, const std::vector<std::string>& names, const std::vector<double>& weights,
                             const char* name, const char* how, const nlohmann::json& keywords) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_WEIGHTED_ADAPTER, &o), ACC_OK);
  for (const auto& [key, value] : keywords.items()) {
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    EXPECT_EQ(acc_options_set(o, key.c_str(), text.c_str()), ACC_OK) << acc_last_error_message();
  }
  const acc_status status = acc_model_add_weighted_adapter_with(m, c_strings(names).data(), weights.data(),
                                                                names.size(), name, how, o, nullptr);
  acc_options_free(o);
  return status;
}

}  // namespace

// PEFT's add_weighted_adapter, restated in export_lora_cases.py: the new adapter's draws, the
// combined A and B of each layer and the global generator after (DARE's masks), bit for bit, for
// cat, svd (to the largest rank, to a chosen one, clamped), linear, a single adapter, ties (both sign
// elections), dare_linear, dare_ties, magnitude_prune (and a density above 1) and the _svd forms
// (reduced matrices too).
TEST(NamedAdapters, WeightedAdaptersCombineAsPeft) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const nlohmann::json w = lora_case("weighted");
  for (const auto& c : w["combinations"]) {
    SCOPED_TRACE(c["combination"].get<std::string>() + " of " + c["adapters"].dump());
    acc_model* m = weighted_sources(w);
    const auto before = eval_outputs(m);
    ASSERT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
    const std::string how = c["combination"];
    // acc_model_add_weighted_adapter where svd_rank is the only keyword, else the options form.
    const bool rank_only = c["options"].empty() || (c["options"].size() == 1 && c["options"].contains("svd_rank"));
    ASSERT_EQ(rank_only ? add_weighted(m, c["adapters"], c["weights"], "mixed", how.c_str(), c["svd_rank"])
                        : add_weighted_with(m, c["adapters"], c["weights"], "mixed", how.c_str(), c["options"]),
              ACC_OK)
        << acc_last_error_message();
    EXPECT_EQ(acc_test::next_global_draws(), acc_test::float_values(c["next_draw"]));
    EXPECT_EQ(names(m), (std::vector<std::string>{"default", "b", "c", "mixed"}));
    EXPECT_EQ(eval_outputs(m), before) << "kept aside";
    ASSERT_EQ(acc_model_set_adapter(m, "mixed"), ACC_OK);
    std::vector<std::string> lora_names;
    for (const auto& layer : c["layers"].items()) {
      EXPECT_EQ(param(m, layer.key() + ".lora_A.weight"), acc_test::float_values(layer.value()["a"])) << layer.key();
      EXPECT_EQ(param(m, layer.key() + ".lora_B.weight"), acc_test::float_values(layer.value()["b"])) << layer.key();
      lora_names.push_back(layer.key());
    }
    size_t count = 0;
    ASSERT_EQ(acc_model_lora_count(m, &count), ACC_OK);
    EXPECT_EQ(count, lora_names.size());
    acc_model_free(m);
  }
}

// add_weighted_adapter lays a convolution's delta out as PEFT does (a 3 x 3 kernel's flattened, a
// 1 x 1's squeezed, reshaped back into A and B) and an embedding's transposed: with scaling 1, "cat"
// of two adapters computes as both merged (acc_model_merge_lora_adapters), and "svd" of an adapter
// with itself, halves, to its own rank as that adapter.
TEST(NamedAdapters, WeightedAdaptersOfConvolutionsAndEmbeddingsFitTheirLayers) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  struct Case {
    const char *file, *targets;
    std::function<acc_tensor*()> input;
  };
  const Case cases[] = {{"conv_model.pt", "conv1,conv2,conv3",
                         [] {
                           std::vector<float> x(2 * 2 * 6 * 6);
                           for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
                           return acc_test::floats(x, {2, 2, 6, 6});
                         }},
                        {"embedding_model.pt", "embed,fc", [] {
                           return acc_test::longs({1, 4, 9, 0, 3, 7}, {2, 3});
                         }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const auto adapted = [&] {
      acc_model* m = twin_test::script_model(c.file);
      EXPECT_EQ(acc_set_seed(21), ACC_OK);
      for (const char* name : {"default", "b"}) {
        acc_options* o = acc_test::lora_options(2, 2.0);  // scaling 1
        EXPECT_EQ(acc_options_set(o, "init_lora_weights", "false"), ACC_OK);
        EXPECT_EQ(std::string(name) == "default" ? acc_model_add_lora(m, c.targets, o, nullptr)
                                                 : acc_model_add_lora_named(m, name, c.targets, o, nullptr),
                  ACC_OK)
            << acc_last_error_message();
        acc_options_free(o);
      }
      return m;
    };
    acc_model *m = adapted(), *merged = adapted();
    const auto own = outputs_on(m, c.input());
    const char* pair[] = {"default", "b"};
    const char* twice[] = {"default", "default"};
    const double ones[] = {1.0, 1.0}, halves[] = {0.5, 0.5};
    ASSERT_EQ(acc_model_add_weighted_adapter(m, pair, ones, 2, "sum", "cat", 0, nullptr), ACC_OK)
        << acc_last_error_message();
    ASSERT_EQ(acc_model_add_weighted_adapter(m, twice, halves, 2, "same", "svd", 2, nullptr), ACC_OK)
        << acc_last_error_message();
    ASSERT_EQ(acc_model_merge_lora_adapters(merged, pair, 2), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_model_set_adapter(m, "sum"), ACC_OK);
    const auto sum = outputs_on(m, c.input()), both_merged = outputs_on(merged, c.input());
    EXPECT_NE(sum, own);
    EXPECT_LT(acc_test::max_difference(sum, both_merged), 1e-5f);
    ASSERT_EQ(acc_model_set_adapter(m, "same"), ACC_OK);
    EXPECT_LT(acc_test::max_difference(outputs_on(m, c.input()), own), 1e-5f);
    acc_model_free(m);
    acc_model_free(merged);
  }
}

TEST(NamedAdapters, WeightedAdapterRefusalsChangeNothing) {
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const nlohmann::json w = lora_case("weighted");
  acc_model* m = weighted_sources(w);
  EXPECT_EQ(
      draws_after([&] {
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "b"}, {1, 1}, "x", "linear"), ACC_ERR_INVALID_ARGUMENT,
                         "one rank");
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "c"}, {1, 1}, "x", "ties"), ACC_ERR_INVALID_ARGUMENT,
                         "needs a density");
        // Found by a hunt: DARE with density 0 (or one float32 rounds to 0) made an adapter of NaNs.
        for (const char* dare : {"dare_linear", "dare_ties", "dare_linear_svd"})
          for (double density : {0.0, 1e-300})
            ACC_EXPECT_ERROR(add_weighted_with(m, {"default", "c"}, {1, 1}, "x", dare, {{"density", density}}),
                             ACC_ERR_INVALID_ARGUMENT, "needs a density above 0");
        ACC_EXPECT_ERROR(add_weighted_with(m, {"default", "b"}, {1, 1}, "x", "dare_ties", {{"density", 0.5}}),
                         ACC_ERR_INVALID_ARGUMENT, "one rank");
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "b"}, {1, 1}, "x", "linear_svd"), ACC_ERR_INVALID_ARGUMENT,
                         "none of PEFT's");
        ACC_EXPECT_ERROR(add_weighted_with(m, {"default", "b"}, {1, 1}, "x", "svd", {{"svd_driver", "gesvdj"}}),
                         ACC_ERR_INVALID_ARGUMENT, "CUDA tensors only");
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "b"}, {1, 1}, "x", "average"), ACC_ERR_INVALID_ARGUMENT,
                         "average");
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "d"}, {1, 1}, "x", "cat"), ACC_ERR_INVALID_ARGUMENT,
                         "no adapter named 'd'");
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "b"}, {1, 1}, "c", "cat"), ACC_ERR_INVALID_ARGUMENT,
                         "already has an adapter named 'c'");
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "b"}, {1, NAN}, "x", "cat"), ACC_ERR_INVALID_ARGUMENT, "weight");
        // svd to a rank above what a layer's delta has (fc1: 8 x 6), and far beyond any layer's:
        // refused before anything is drawn.
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "b"}, {1, 1}, "x", "svd", 7), ACC_ERR_INVALID_ARGUMENT,
                         "whose delta is 8 x 6");
        ACC_EXPECT_ERROR(add_weighted(m, {"default", "b"}, {1, 1}, "x", "svd", int64_t{1} << 40),
                         ACC_ERR_INVALID_ARGUMENT, "to rank 1099511627776");
      }),
      next_after_seed());
  const char* one[] = {"default"};
  const double weight[] = {1.0};
  ACC_EXPECT_ERROR(acc_model_add_weighted_adapter(m, one, weight, 0, "x", "cat", 0, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "n is 0");
  ACC_EXPECT_ERROR(acc_model_add_weighted_adapter(m, one, nullptr, 1, "x", "cat", 0, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "weights");
  ACC_EXPECT_ERROR(acc_model_add_weighted_adapter(m, one, weight, 1, "x", "cat", -1, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "svd_rank");
  acc_options* o = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_WEIGHTED_ADAPTER, &o), ACC_OK);
  ACC_EXPECT_ERROR(acc_options_set_double(o, "density", -0.5), ACC_ERR_INVALID_ARGUMENT, "density");
  ACC_EXPECT_ERROR(acc_options_set(o, "majority_sign_method", "mean"), ACC_ERR_INVALID_ARGUMENT, "frequency");
  ACC_EXPECT_ERROR(acc_options_set_double(o, "svd_clamp", 1.5), ACC_ERR_INVALID_ARGUMENT, "svd_clamp");
  acc_options_free(o);
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_LORA, &o), ACC_OK);
  ACC_EXPECT_ERROR(acc_model_add_weighted_adapter_with(m, one, weight, 1, "x", "cat", o, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "weighted_adapter options are needed");
  acc_options_free(o);
  EXPECT_EQ(names(m), (std::vector<std::string>{"default", "b", "c"}));
  acc_model_free(m);
}

namespace {

bool requires_grad(const acc_model* m, const char* name) {
  acc_tensor* p = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name, &p), ACC_OK) << name;
  int out = -1;
  EXPECT_EQ(acc_tensor_requires_grad(p, &out), ACC_OK);
  acc_tensor_free(p);
  return out == 1;
}

}  // namespace

// PEFT's set_adapter touches the adapters alone: a base parameter the user unfroze stays trainable
// across switches between adapters of other layers, and a refused add leaves it so too; making the
// active adapter trainable again is refused while an optimizer holds the parameters, as every other
// change of what trains; and add_weighted_adapter refuses what it cannot combine as B A.
TEST(NamedAdapters, SwitchesAndRefusalsLeaveTheUsersFlagsAlone) {
  acc_model* m = lora_test::net();
  acc_options* o = acc_test::lora_options(2, 4);
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "a", "0", o, nullptr));
  ACC_ASSERT_OK(acc_model_add_lora_named(m, "b", "linear1", o, nullptr));
  size_t n = 0;
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "2.bias", 1, &n));
  ASSERT_EQ(n, 1u);
  ACC_ASSERT_OK(acc_model_set_adapter(m, "b"));
  EXPECT_TRUE(requires_grad(m, "2.bias"));
  EXPECT_FALSE(requires_grad(m, "2.weight"));
  ACC_EXPECT_ERROR(acc_model_add_lora_named(m, "c", "nomatch", o, nullptr), ACC_ERR_INVALID_ARGUMENT, "nomatch");
  EXPECT_TRUE(requires_grad(m, "2.bias"));
  ACC_ASSERT_OK(acc_model_set_adapter(m, "a"));
  EXPECT_TRUE(requires_grad(m, "2.bias"));
  acc_options_free(o);

  // The active adapter frozen by the user, then an optimizer: making it trainable again is refused.
  ACC_ASSERT_OK(acc_model_set_requires_grad(m, "*lora_A*", 0, &n));
  acc_optimizer* opt = acc_test::optimizer(m, "sgd", 0.1);
  ACC_EXPECT_ERROR(acc_model_set_adapter(m, "a"), ACC_ERR_INVALID_ARGUMENT, "");
  EXPECT_FALSE(requires_grad(m, "0.lora_A.weight"));
  acc_optimizer_free(opt);

  // rsLoRA's scaling (DoRA's magnitudes, lora_B's bias) has no place in a combination of B A.
  acc_model* r = lora_test::net();
  o = acc_test::lora_options(2, 4);
  ACC_ASSERT_OK(acc_options_set(o, "use_rslora", "true"));
  ACC_ASSERT_OK(acc_model_add_lora_named(r, "a", "0", o, nullptr));
  acc_options_free(o);
  const char* names[] = {"a"};
  const double weights[] = {1.0};
  ACC_EXPECT_ERROR(acc_model_add_weighted_adapter(r, names, weights, 1, "mix", "linear", 0, nullptr),
                   ACC_ERR_UNSUPPORTED, "use_rslora");
  acc_model_free(r);
  acc_model_free(m);
}

// A checkpoint's weights hold the active adapter's tensors under their usual names, and say whose:
// loaded into a model whose active adapter is another, they are refused (not written into it).
TEST(NamedAdapters, ACheckpointOfOneAdapterIsNotLoadedIntoAnother) {
  const std::string dir = acc_test::temp_path("named_adapters_state");
  fs::remove_all(dir);
  auto prepared = [](const char* active, acc_accelerator** acc) {
    acc_model* m = lora_test::net();
    acc_options* o = acc_test::lora_options(2, 4);
    EXPECT_EQ(acc_model_add_lora_named(m, "a", "0", o, nullptr), ACC_OK);
    EXPECT_EQ(acc_model_add_lora_named(m, "b", "0", o, nullptr), ACC_OK);
    acc_options_free(o);
    EXPECT_EQ(acc_model_set_adapter(m, active), ACC_OK);
    *acc = acc_test::make_accelerator({{"cpu", "1"}});
    EXPECT_EQ(acc_prepare(*acc, &m, nullptr, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    return m;
  };
  acc_accelerator *first = nullptr, *other = nullptr, *same = nullptr;
  acc_model* a = prepared("a", &first);
  ACC_ASSERT_OK(acc_save_state(first, dir.c_str(), nullptr));
  acc_model* b = prepared("b", &other);
  ACC_EXPECT_ERROR(acc_load_state(other, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT, "holds the adapter 'a'");
  acc_model* a_again = prepared("a", &same);
  EXPECT_EQ(acc_load_state(same, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  for (acc_model* m : {a, b, a_again}) acc_model_free(m);
  for (acc_accelerator* acc : {first, other, same}) acc_accelerator_free(acc);
}
