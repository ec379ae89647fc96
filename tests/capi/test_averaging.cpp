// Averaged models (PyTorch's AveragedModel): SWA and EMA bit for bit against PyTorch's own
// (tests/data/export_averaging_cases.py), putting the averages into a model, refusals, checkpoints.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "support.h"

using acc_test::floats;
using acc_test::to_floats;
using nlohmann::json;

namespace {

const char* const kSpec =
    R"([{"type":"linear","in_features":3,"out_features":4},{"type":"tanh"},{"type":"linear","in_features":4,"out_features":2}])";

acc_options* averaging_options(const json& settings) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_AVERAGED_MODEL, &o), ACC_OK);
  for (const auto& [key, value] : settings.items()) {
    const acc_status s = value.is_string()    ? acc_options_set_string(o, key.c_str(), value.get<std::string>().c_str())
                         : value.is_boolean() ? acc_options_set_bool(o, key.c_str(), value.get<bool>())
                         : value.is_number_integer() ? acc_options_set_int(o, key.c_str(), value.get<int64_t>())
                                                     : acc_options_set_double(o, key.c_str(), value.get<double>());
    EXPECT_EQ(s, ACC_OK) << key << ": " << acc_last_error_message();
  }
  return o;
}

acc_averaged_model* make_averaged(acc_model* model, const json& settings) {
  acc_options* o = averaging_options(settings);
  acc_averaged_model* avg = nullptr;
  EXPECT_EQ(acc_averaged_model_create(model, o, &avg), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  return avg;
}

// A fixture tensor ({"dtype", "shape", "values"}: float.hex strings, or numbers for int64).
acc_tensor* fixture_tensor(const json& t) {
  const auto shape = t["shape"].get<std::vector<int64_t>>();
  if (t["dtype"] == "int64") return acc_test::longs(t["values"].get<std::vector<int64_t>>(), shape);
  std::vector<double> values;
  for (const auto& v : t["values"]) values.push_back(std::strtod(v.get<std::string>().c_str(), nullptr));
  if (t["dtype"] == "float64") {
    acc_tensor* out = nullptr;
    EXPECT_EQ(acc_tensor_from_host(values.data(), values.size() * sizeof(double), shape.data(), shape.size(),
                                   ACC_DTYPE_FLOAT64, &out),
              ACC_OK);
    return out;
  }
  return floats(std::vector<float>(values.begin(), values.end()), shape);
}

// A tensor's bytes on the host, whatever its dtype and device.
std::string host_bytes(const acc_tensor* t) {
  acc_tensor* cpu = nullptr;
  EXPECT_EQ(acc_tensor_to(t, "cpu", ACC_DTYPE_UNDEFINED, &cpu), ACC_OK) << acc_last_error_message();
  int64_t numel = 0;
  acc_dtype dtype = ACC_DTYPE_UNDEFINED;
  EXPECT_EQ(acc_tensor_numel(cpu, &numel), ACC_OK);
  EXPECT_EQ(acc_tensor_dtype(cpu, &dtype), ACC_OK);
  std::string out(static_cast<size_t>(numel) * acc_dtype_size(dtype), '\0');
  EXPECT_EQ(acc_tensor_to_host(cpu, out.data(), out.size()), ACC_OK) << acc_last_error_message();
  acc_tensor_free(cpu);
  return out;
}

std::map<std::string, std::string> bytes_by_name(const acc_tensor_list* list) {
  std::map<std::string, std::string> out;
  size_t n = 0;
  EXPECT_EQ(acc_tensor_list_size(list, &n), ACC_OK);
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_name(list, i, &name), ACC_OK);
    EXPECT_EQ(acc_tensor_list_get(list, i, &t), ACC_OK);
    out[name] = host_bytes(t);
    acc_tensor_free(t);
  }
  return out;
}

std::map<std::string, std::string> averages_of(const acc_averaged_model* avg) {
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_averaged_model_state_dict(avg, &state), ACC_OK) << acc_last_error_message();
  auto out = bytes_by_name(state);
  acc_tensor_list_free(state);
  return out;
}

std::map<std::string, std::string> weights_of(const acc_model* model) {
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_model_state_dict(model, &state), ACC_OK) << acc_last_error_message();
  auto out = bytes_by_name(state);
  acc_tensor_list_free(state);
  return out;
}

// The averages without n_averaged, named as the model names them.
std::map<std::string, std::string> averaged_weights(const acc_averaged_model* avg) {
  std::map<std::string, std::string> out;
  for (const auto& [name, bytes] : averages_of(avg))
    if (name != "n_averaged") out[name.substr(std::strlen("module."))] = bytes;
  return out;
}

// A model, an MSE loss on a fixed batch and SGD: each step changes every weight.
struct Trainee {
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *y = nullptr;

  Trainee() {
    EXPECT_EQ(acc_set_seed(5), ACC_OK);
    model = acc_test::spec_model(kSpec);
    opt = acc_test::optimizer(model, "sgd", 0.1);
    x = floats({0.5f, -1.0f, 2.0f, 0.1f, 0.7f, -0.3f}, {2, 3});
    y = floats({1.0f, -1.0f, 0.5f, 0.2f}, {2, 2});
  }
  ~Trainee() {
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_tensor_free(x);
    acc_tensor_free(y);
  }
  void step() {
    acc_tensor *out = nullptr, *loss = nullptr;
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    ASSERT_EQ(acc_model_forward1(model, x, 0, &out), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    ASSERT_EQ(acc_tensor_backward(loss), ACC_OK);
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
};

}  // namespace

// The fixture is written by the python3 torch the build found (from 2.1 EMA is its foreach lerp, before
// that the same arithmetic tensor by tensor); the GPU suite runs it with the averages on CUDA, where
// PyTorch 2.x averages SWA with its foreach lerp too. It also holds diffusers' EMAModel's steps.
TEST(AveragedModels, AverageAsPyTorchsAveragedModelBitForBit) {
  std::ifstream in(acc_test::data_dir() + "/averaging_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_averaging_cases fixture";
  const json data = json::parse(in);
  const std::string device = data.value("device", "cpu");
  ASSERT_EQ(data["cases"].size(), 6u);
  for (const auto& c : data["cases"]) {
    SCOPED_TRACE(c["options"].dump());
    if (c.contains("pytorch_refused")) {  // nothing to compare with (the exporter says where PyTorch refuses)
      std::printf("PyTorch on %s refused %s: %s\n", device.c_str(), c["options"].dump().c_str(),
                  c["pytorch_refused"].get<std::string>().c_str());
      continue;
    }
    acc_model* model = nullptr;
    ASSERT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/averaging_model.pt").c_str(), &model), ACC_OK)
        << acc_last_error_message();
    ASSERT_EQ(acc_model_to(model, device.c_str(), ACC_DTYPE_UNDEFINED), ACC_OK) << acc_last_error_message();
    for (const auto& name : data["frozen"])  // averaged all the same, but for diffusers' EMAModel
      ASSERT_EQ(acc_model_set_requires_grad(model, name.get<std::string>().c_str(), 0, nullptr), ACC_OK);
    acc_averaged_model* avg = make_averaged(model, c["options"]);
    for (size_t u = 0; u < c["updates"].size(); ++u) {
      acc_tensor_list* state = nullptr;
      ASSERT_EQ(acc_tensor_list_create(&state), ACC_OK);
      for (const auto& [name, t] : data["states"][u].items()) {
        acc_tensor* value = fixture_tensor(t);
        ASSERT_EQ(acc_tensor_list_append(state, name.c_str(), value), ACC_OK);
        acc_tensor_free(value);
      }
      ASSERT_EQ(acc_model_load_state_dict(model, state, 1), ACC_OK) << acc_last_error_message();
      acc_tensor_list_free(state);
      ASSERT_EQ(acc_averaged_model_update(avg, model), ACC_OK) << acc_last_error_message();

      const json& expected = c["updates"][u];
      int64_t count = -1;
      ASSERT_EQ(acc_averaged_model_count(avg, &count), ACC_OK);
      EXPECT_EQ(count, expected["n_averaged"].get<int64_t>());
      const auto got = averaged_weights(avg);
      ASSERT_EQ(got.size(), expected["averages"].size());
      for (const auto& [name, t] : expected["averages"].items()) {
        acc_tensor* want = fixture_tensor(t);
        ASSERT_TRUE(got.count(name)) << name;
        EXPECT_EQ(got.at(name), host_bytes(want)) << "update " << u + 1 << ", " << name;
        acc_tensor_free(want);
      }
    }
    acc_averaged_model_free(avg);
    acc_model_free(model);
  }
}

// SWA's average of equal weights is the mean of what was averaged; swap puts the averages into the
// model and takes them out again, copy_to writes them into a second model.
TEST(AveragedModels, SwapAndCopyToPutTheAveragesIntoAModel) {
  Trainee net;
  acc_averaged_model* avg = make_averaged(net.model, json::object());
  int64_t count = -1;
  ASSERT_EQ(acc_averaged_model_count(avg, &count), ACC_OK);
  EXPECT_EQ(count, 0);
  std::vector<std::vector<float>> seen;
  for (int step = 0; step < 3; ++step) {
    net.step();
    ASSERT_EQ(acc_averaged_model_update(avg, net.model), ACC_OK) << acc_last_error_message();
    acc_tensor* w = nullptr;
    ASSERT_EQ(acc_model_parameter(net.model, "2.bias", &w), ACC_OK);
    seen.push_back(to_floats(w));
    acc_tensor_free(w);
  }
  ASSERT_EQ(acc_averaged_model_count(avg, &count), ACC_OK);
  EXPECT_EQ(count, 3);
  acc_tensor_list* state = nullptr;
  ASSERT_EQ(acc_averaged_model_state_dict(avg, &state), ACC_OK);
  acc_tensor* bias = nullptr;
  ASSERT_EQ(acc_tensor_list_find(state, "module.2.bias", &bias), ACC_OK) << acc_last_error_message();
  const auto mean = to_floats(bias);
  for (size_t i = 0; i < mean.size(); ++i)
    EXPECT_NEAR(mean[i], (seen[0][i] + seen[1][i] + seen[2][i]) / 3, 1e-6) << i;
  acc_tensor_free(bias);
  acc_tensor_list_free(state);

  const auto trained = weights_of(net.model);
  const auto averages = averaged_weights(avg);
  ASSERT_NE(trained, averages);
  ASSERT_EQ(acc_averaged_model_swap(avg, net.model), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(weights_of(net.model), averages);
  EXPECT_EQ(averaged_weights(avg), trained);
  ASSERT_EQ(acc_averaged_model_swap(avg, net.model), ACC_OK);
  EXPECT_EQ(weights_of(net.model), trained);
  EXPECT_EQ(averaged_weights(avg), averages);

  acc_model* evaluation = acc_test::spec_model(kSpec);
  ASSERT_EQ(acc_averaged_model_copy_to(avg, evaluation), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(weights_of(evaluation), averages);
  acc_model_free(evaluation);
  acc_averaged_model_free(avg);
}

// EMA with decay 0.5 after two updates is the mean of the two models, and an averaged model keeps
// its averages apart from the model it was made from.
TEST(AveragedModels, EmaWeighsTheNewValuesByOneMinusDecay) {
  Trainee net;
  acc_averaged_model* avg = make_averaged(net.model, {{"strategy", "ema"}, {"decay", 0.5}});
  net.step();
  ASSERT_EQ(acc_averaged_model_update(avg, net.model), ACC_OK);
  acc_tensor* w = nullptr;
  ASSERT_EQ(acc_model_parameter(net.model, "0.weight", &w), ACC_OK);
  const auto first = to_floats(w);
  acc_tensor_free(w);
  net.step();
  ASSERT_EQ(acc_averaged_model_update(avg, net.model), ACC_OK);
  ASSERT_EQ(acc_model_parameter(net.model, "0.weight", &w), ACC_OK);
  const auto second = to_floats(w);
  acc_tensor_free(w);
  acc_model* evaluation = acc_test::spec_model(kSpec);
  ASSERT_EQ(acc_averaged_model_copy_to(avg, evaluation), ACC_OK);
  ASSERT_EQ(acc_model_parameter(evaluation, "0.weight", &w), ACC_OK);
  const auto average = to_floats(w);
  acc_tensor_free(w);
  for (size_t i = 0; i < average.size(); ++i) EXPECT_FLOAT_EQ(average[i], 0.5f * first[i] + 0.5f * second[i]) << i;
  acc_model_free(evaluation);
  acc_averaged_model_free(avg);
}

TEST(AveragedModels, RefuseWhatDoesNotFitAndChangeNothing) {
  Trainee net;
  acc_averaged_model* avg = nullptr;
  for (const auto& [settings, needle] : std::vector<std::pair<json, std::string>>{
           {{{"decay", 0.9}}, "decay is an ema strategy's; set strategy to ema"},
           {{{"strategy", "ema"}, {"min_decay", 0.1}}, "min_decay is the diffusers_ema strategy's"},
           {{{"strategy", "diffusers_ema"}, {"use_buffers", true}}, "diffusers_ema averages parameters only"},
           {{{"strategy", "diffusers_ema"}, {"decay", 0.5}, {"min_decay", 0.6}}, "decay 0.5 is below min_decay 0.6"},
           {{{"strategy", "ema"}, {"decay", 1.5}}, "decay"},
           {{{"device", "tpu"}}, "tpu"}}) {
    acc_options* o = nullptr;
    ASSERT_EQ(acc_options_create(ACC_OPTIONS_AVERAGED_MODEL, &o), ACC_OK);
    acc_status status = ACC_OK;
    for (const auto& [key, value] : settings.items())
      if (status == ACC_OK)
        status = value.is_string()    ? acc_options_set_string(o, key.c_str(), value.get<std::string>().c_str())
                 : value.is_boolean() ? acc_options_set_bool(o, key.c_str(), value.get<bool>())
                                      : acc_options_set_double(o, key.c_str(), value.get<double>());
    if (status == ACC_OK) status = acc_averaged_model_create(net.model, o, &avg);
    EXPECT_EQ(status, ACC_ERR_INVALID_ARGUMENT) << settings.dump();
    EXPECT_NE(std::string(acc_last_error_message()).find(needle), std::string::npos) << acc_last_error_message();
    EXPECT_EQ(avg, nullptr);
    acc_options_free(o);
  }
  acc_options* wrong_kind = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &wrong_kind), ACC_OK);
  ACC_EXPECT_ERROR(acc_averaged_model_create(net.model, wrong_kind, &avg), ACC_ERR_INVALID_ARGUMENT,
                   "averaged_model options are needed here");
  acc_options_free(wrong_kind);

  avg = make_averaged(net.model, json::object());
  net.step();
  ASSERT_EQ(acc_averaged_model_update(avg, net.model), ACC_OK);
  const auto before = averages_of(avg);
  acc_model* other = acc_test::spec_model(
      R"([{"type":"linear","in_features":3,"out_features":5},{"type":"tanh"},{"type":"linear","in_features":5,"out_features":2}])");
  ACC_EXPECT_ERROR(acc_averaged_model_update(avg, other), ACC_ERR_INVALID_ARGUMENT,
                   "the model's parameter '0.weight' is Float [5, 3], its average Float [4, 3]");
  ACC_EXPECT_ERROR(acc_averaged_model_copy_to(avg, other), ACC_ERR_INVALID_ARGUMENT, "'0.weight'");
  ACC_EXPECT_ERROR(acc_averaged_model_swap(avg, other), ACC_ERR_INVALID_ARGUMENT, "'0.weight'");
  acc_model_free(other);
  acc_model* fewer = acc_test::spec_model(R"([{"type":"linear","in_features":3,"out_features":2}])");
  ACC_EXPECT_ERROR(acc_averaged_model_update(avg, fewer), ACC_ERR_INVALID_ARGUMENT,
                   "the model has 2 parameters and 0 buffers, the averages were made from 4 and 0");
  acc_model_free(fewer);
  EXPECT_EQ(averages_of(avg), before);

  // A state that does not fit is refused before anything changes: the averages' state of zeros,
  // with one tensor replaced or left out.
  auto zero_state = [&](const std::string& replaced, acc_tensor* replacement, const std::string& dropped) {
    acc_tensor_list *state = nullptr, *zeros = nullptr;
    EXPECT_EQ(acc_averaged_model_state_dict(avg, &state), ACC_OK);
    EXPECT_EQ(acc_tensor_list_create(&zeros), ACC_OK);
    size_t n = 0;
    EXPECT_EQ(acc_tensor_list_size(state, &n), ACC_OK);
    for (size_t i = 0; i < n; ++i) {
      const char* name = nullptr;
      acc_tensor *t = nullptr, *zero = nullptr;
      EXPECT_EQ(acc_tensor_list_name(state, i, &name), ACC_OK);
      EXPECT_EQ(acc_tensor_list_get(state, i, &t), ACC_OK);
      int64_t dims[8];
      size_t ndim = 0;
      acc_dtype dtype = ACC_DTYPE_UNDEFINED;
      EXPECT_EQ(acc_tensor_shape(t, dims, 8, &ndim), ACC_OK);
      EXPECT_EQ(acc_tensor_dtype(t, &dtype), ACC_OK);
      EXPECT_EQ(acc_tensor_zeros(dims, ndim, dtype, "cpu", &zero), ACC_OK);
      if (name == replaced)
        EXPECT_EQ(acc_tensor_list_append(zeros, name, replacement), ACC_OK);
      else if (name != dropped)
        EXPECT_EQ(acc_tensor_list_append(zeros, name, zero), ACC_OK);
      acc_tensor_free(zero);
      acc_tensor_free(t);
    }
    acc_tensor_list_free(state);
    acc_tensor_free(replacement);
    return zeros;
  };
  struct BadState {
    acc_tensor_list* state;
    std::string needle;
  };
  const BadState bad_states[] = {
      {zero_state("n_averaged", acc_test::longs({-1}, {}), ""), "n_averaged must not be negative, got -1"},
      {zero_state("n_averaged", floats({2}, {}), ""), "n_averaged must be an int64 number, got Float []"},
      {zero_state("module.2.bias", floats({1, 2, 3}, {3}), ""), "'module.2.bias' is Float [3], the average is Float [2]"},
      {zero_state("", nullptr, "module.0.bias"), "has n_averaged and 4 tensors named module.<name>; this one has 4"},
  };
  for (const auto& [bad, needle] : bad_states) {
    ACC_EXPECT_ERROR(acc_averaged_model_load_state_dict(avg, bad), ACC_ERR_INVALID_ARGUMENT, needle);
    acc_tensor_list_free(bad);
    EXPECT_EQ(averages_of(avg), before);
  }
  acc_tensor_list* zeros = zero_state("", nullptr, "");
  ASSERT_EQ(acc_averaged_model_load_state_dict(avg, zeros), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(zeros);
  int64_t count = -1;
  ASSERT_EQ(acc_averaged_model_count(avg, &count), ACC_OK);
  EXPECT_EQ(count, 0);
  acc_averaged_model_free(avg);
}

// Accelerate's register_for_checkpointing(averaged_model): the state goes into the checkpoint after
// the registered objects before it, and comes back with the rest.
TEST(AveragedModels, SaveStateAndLoadStateKeepTheAverages) {
  const std::string dir = acc_test::temp_path("averaged_checkpoint");
  std::map<std::string, std::string> saved;
  {
    Trainee net;
    acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
    ASSERT_EQ(acc_prepare(acc, &net.model, &net.opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    acc_averaged_model* avg = make_averaged(net.model, {{"strategy", "ema"}, {"decay", 0.8}});
    ASSERT_EQ(acc_register_averaged_model(acc, avg), ACC_OK) << acc_last_error_message();
    acc_averaged_model_free(avg);  // the accelerator keeps the averages
    ACC_EXPECT_ERROR(acc_register_averaged_model(acc, avg), ACC_ERR_INVALID_HANDLE, "avg is not a live");
    avg = make_averaged(net.model, {{"strategy", "ema"}, {"decay", 0.8}});
    ASSERT_EQ(acc_register_averaged_model(acc, avg), ACC_OK);
    for (int step = 0; step < 3; ++step) {
      net.step();
      ASSERT_EQ(acc_averaged_model_update(avg, net.model), ACC_OK) << acc_last_error_message();
    }
    saved = averages_of(avg);
    ASSERT_EQ(acc_save_state(acc, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
    EXPECT_TRUE(std::filesystem::exists(dir + "/custom_checkpoint_0.safetensors"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/custom_checkpoint_1.safetensors"));
    acc_averaged_model_free(avg);
    acc_accelerator_free(acc);
  }
  Trainee net;
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  ASSERT_EQ(acc_prepare(acc, &net.model, &net.opt, nullptr, nullptr), ACC_OK);
  acc_averaged_model* first = make_averaged(net.model, {{"strategy", "ema"}, {"decay", 0.8}});
  acc_averaged_model* second = make_averaged(net.model, {{"strategy", "ema"}, {"decay", 0.8}});
  ASSERT_EQ(acc_register_averaged_model(acc, first), ACC_OK);
  ASSERT_EQ(acc_register_averaged_model(acc, second), ACC_OK);
  ASSERT_EQ(acc_load_state(acc, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(averages_of(second), saved);
  int64_t count = -1;
  ASSERT_EQ(acc_averaged_model_count(first, &count), ACC_OK);
  EXPECT_EQ(count, 0);  // the first was saved before any update
  acc_averaged_model_free(first);
  acc_averaged_model_free(second);
  acc_accelerator_free(acc);

  // Averages of another model are refused, naming the file, and nothing is loaded.
  Trainee again;
  acc = acc_test::make_accelerator({{"cpu", "true"}});
  ASSERT_EQ(acc_prepare(acc, &again.model, &again.opt, nullptr, nullptr), ACC_OK);
  acc_model* other = acc_test::spec_model(R"([{"type":"linear","in_features":3,"out_features":2}])");
  acc_averaged_model* avgs[2] = {make_averaged(other, json::object()), make_averaged(other, json::object())};
  for (acc_averaged_model* avg : avgs) ASSERT_EQ(acc_register_averaged_model(acc, avg), ACC_OK);
  const auto weights = weights_of(again.model);
  ACC_EXPECT_ERROR(acc_load_state(acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "custom_checkpoint_0.safetensors': an averaged model's state has n_averaged and 2 tensors");
  EXPECT_EQ(weights_of(again.model), weights);
  for (acc_averaged_model* avg : avgs) acc_averaged_model_free(avg);
  acc_model_free(other);
  acc_accelerator_free(acc);
  std::filesystem::remove_all(dir);
}

namespace {

// The layer-spec twin of the fixture's nn.Sequential, in the state PyTorch's started from.
acc_model* update_bn_model(const json& c) {
  acc_model* model = acc_test::spec_model(c["spec"].dump());
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_tensor_list_create(&state), ACC_OK);
  for (const auto& [name, t] : c["initial"].items()) {
    acc_tensor* value = fixture_tensor(t);
    EXPECT_EQ(acc_tensor_list_append(state, name.c_str(), value), ACC_OK);
    acc_tensor_free(value);
  }
  EXPECT_EQ(acc_model_load_state_dict(model, state, 1), ACC_OK) << acc_last_error_message();
  acc_tensor_list_free(state);
  return model;
}

// The fixture's loader: 10 samples (x, y) in batches of 4, in order.
acc_dataloader* update_bn_loader(const json& c) {
  acc_tensor* fields[] = {fixture_tensor(c["x"]), fixture_tensor(c["y"])};
  acc_dataset* ds = nullptr;
  EXPECT_EQ(acc_dataset_from_tensors(fields, 2, &ds), ACC_OK);
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "batch_size", c["batch_size"].get<int64_t>()), ACC_OK);
  acc_dataloader* dl = nullptr;
  EXPECT_EQ(acc_dataloader_create(ds, o, &dl), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  acc_dataset_free(ds);
  for (acc_tensor* t : fields) acc_tensor_free(t);
  return dl;
}

std::map<std::string, std::string> fixture_bytes(const json& state) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : state.items()) {
    acc_tensor* value = fixture_tensor(t);
    out[name] = host_bytes(value);
    acc_tensor_free(value);
  }
  return out;
}

}  // namespace

// torch.optim.swa_utils.update_bn, bit for bit: the statistics reset and averaged over an epoch
// with each batch weighted equally (dropout drawing from the global generator as PyTorch's does,
// after the loader's own draw), the mode given back, and the momentum too (a later training
// forward moves the statistics by it); unprepared and prepared alike.
TEST(AveragedModels, UpdateBnRecomputesTheStatisticsAsPyTorchsBitForBit) {
  const json c = json::parse(acc_test::read_file(acc_test::data_dir() + "/averaging_cases.json"))["update_bn"];
  for (const bool prepared : {false, true}) {
    SCOPED_TRACE(prepared ? "prepared" : "unprepared");
    acc_model* model = update_bn_model(c);
    acc_accelerator* acc = prepared ? acc_test::make_accelerator({{"cpu", "true"}}) : nullptr;
    if (prepared) ASSERT_EQ(acc_prepare(acc, &model, nullptr, nullptr, nullptr), ACC_OK) << acc_last_error_message();
    acc_dataloader* dl = update_bn_loader(c);
    ASSERT_EQ(acc_model_set_training(model, 0), ACC_OK);
    ASSERT_EQ(acc_set_seed(c["seed"].get<uint64_t>()), ACC_OK);
    ASSERT_EQ(acc_model_update_bn(model, dl), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(weights_of(model), fixture_bytes(c["after"]));
    int training = -1;
    ASSERT_EQ(acc_model_is_training(model, &training), ACC_OK);
    EXPECT_EQ(training != 0, c["training_after"].get<bool>());
    const int64_t three[] = {3};
    acc_tensor* draw = nullptr;
    ASSERT_EQ(acc_tensor_rand(three, 1, &draw), ACC_OK);
    acc_tensor* expected_draw = fixture_tensor(c["rand_after"]);
    EXPECT_EQ(host_bytes(draw), host_bytes(expected_draw)) << "the global generator was used otherwise";
    ASSERT_EQ(acc_model_set_training(model, 1), ACC_OK);
    json rows = c["x"];  // its first 4 samples
    rows["shape"] = {4, 3};
    rows["values"] = std::vector<json>(c["x"]["values"].begin(), c["x"]["values"].begin() + 12);
    acc_tensor* first4 = fixture_tensor(rows);
    acc_tensor* out = nullptr;
    ASSERT_EQ(acc_model_forward1(model, first4, ACC_FORWARD_NO_GRAD, &out), ACC_OK) << acc_last_error_message();
    EXPECT_EQ(weights_of(model), fixture_bytes(c["after_train_forward"]));
    for (acc_tensor* t : {draw, expected_draw, first4, out}) acc_tensor_free(t);
    acc_dataloader_free(dl);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
}

// A model without BatchNorm is left alone and the loader is not read; a TorchScript BatchNorm (whose
// momentum its graph holds as a constant) and a loader in the middle of an epoch are refused, and
// nothing changes.
TEST(AveragedModels, UpdateBnRefusesWhatItCannotDoAndSkipsModelsWithoutBatchNorm) {
  const json c = json::parse(acc_test::read_file(acc_test::data_dir() + "/averaging_cases.json"))["update_bn"];
  acc_dataloader* dl = update_bn_loader(c);
  acc_model* plain = acc_test::spec_model(kSpec);
  const auto plain_before = weights_of(plain);
  ASSERT_EQ(acc_model_update_bn(plain, dl), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(weights_of(plain), plain_before);
  int64_t epoch = -1;
  ASSERT_EQ(acc_dataloader_epoch(dl, &epoch), ACC_OK);
  EXPECT_EQ(epoch, 0) << "the loader must not have been read";

  acc_model* script = nullptr;
  ASSERT_EQ(acc_model_load_torchscript((acc_test::data_dir() + "/averaging_model.pt").c_str(), &script), ACC_OK);
  const auto script_before = weights_of(script);
  ACC_EXPECT_ERROR(acc_model_update_bn(script, dl), ACC_ERR_UNSUPPORTED,
                   "'norm.running_mean' is a BatchNorm layer's statistic in a TorchScript model");
  EXPECT_EQ(weights_of(script), script_before);

  acc_model* model = update_bn_model(c);
  const auto before = weights_of(model);
  acc_tensor_list* batch = nullptr;
  ASSERT_EQ(acc_dataloader_next(dl, &batch), ACC_OK);
  ACC_EXPECT_ERROR(acc_model_update_bn(model, dl), ACC_ERR_INVALID_ARGUMENT, "end the one in progress first");
  EXPECT_EQ(weights_of(model), before);
  ACC_EXPECT_ERROR(acc_model_update_bn(model, nullptr), ACC_ERR_INVALID_HANDLE, "loader is NULL");
  acc_tensor_list_free(batch);
  for (acc_model* m : {plain, script, model}) acc_model_free(m);
  acc_dataloader_free(dl);
}
