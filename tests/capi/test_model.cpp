// Models: built from a layer spec or loaded from TorchScript exported by PyTorch.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support.h"

using acc_test::floats;
using acc_test::item;
using acc_test::longs;
using acc_test::temp_path;
using acc_test::to_floats;

namespace {

const char* kMlp = R"([{"type":"linear","in_features":4,"out_features":8},{"type":"relu"},
                       {"type":"dropout","p":0.0},{"type":"linear","in_features":8,"out_features":3}])";

std::vector<float> forward(acc_model* m, acc_tensor* x) {
  acc_tensor* y = nullptr;
  EXPECT_EQ(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y), ACC_OK) << acc_last_error_message();
  auto values = to_floats(y);
  acc_tensor_free(y);
  return values;
}

std::string fixture(const char* name) {
  std::string dir = acc_test::data_dir();
  if (dir.empty()) return "";
  return dir + "/" + name;
}

}  // namespace

TEST(Model, SpecBuildsNamedParametersLikeNnSequential) {
  acc_model* m = acc_test::spec_model(kMlp);
  acc_string_list* list = nullptr;
  ACC_ASSERT_OK(acc_model_parameter_names(m, &list));
  EXPECT_EQ(acc_test::strings(list), (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"}));
  acc_string_list_free(list);
  size_t tensors = 0;
  int64_t elements = 0;
  ACC_ASSERT_OK(acc_model_parameter_count(m, &tensors, &elements));
  EXPECT_EQ(tensors, 4u);
  EXPECT_EQ(elements, 4 * 8 + 8 + 8 * 3 + 3);
  acc_model_free(m);
}

TEST(Model, SpecInitialisationFollowsPyTorchBounds) {
  // nn.Linear draws weight and bias from U(-1/sqrt(in), 1/sqrt(in)).
  acc_model* m = acc_test::spec_model(R"([{"type":"linear","in_features":100,"out_features":50}])");
  acc_tensor* w = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "0.weight", &w));
  float max_abs = 0;
  for (float v : to_floats(w)) max_abs = std::max(max_abs, std::fabs(v));
  EXPECT_LE(max_abs, 0.1f);
  EXPECT_GT(max_abs, 0.09f);
  acc_tensor_free(w);
  acc_model_free(m);
}

TEST(Model, SameSeedSameInitialisation) {
  ACC_ASSERT_OK(acc_set_seed(7));
  acc_model* a = acc_test::spec_model(kMlp);
  ACC_ASSERT_OK(acc_set_seed(7));
  acc_model* b = acc_test::spec_model(kMlp);
  acc_tensor *wa = nullptr, *wb = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(a, "3.weight", &wa));
  ACC_ASSERT_OK(acc_model_parameter(b, "3.weight", &wb));
  EXPECT_EQ(to_floats(wa), to_floats(wb));
  for (acc_tensor* t : {wa, wb}) acc_tensor_free(t);
  acc_model_free(a);
  acc_model_free(b);
}

TEST(Model, EveryLayerTypeBuildsRunsAndExportsToTorchScript) {
  const char* cnn = R"([
    {"type":"conv2d","in_channels":1,"out_channels":4,"kernel_size":3,"padding":1},
    {"type":"batchnorm2d","num_features":4},
    {"type":"relu"},
    {"type":"maxpool2d","kernel_size":2},
    {"type":"avgpool2d","kernel_size":[2,2],"stride":1},
    {"type":"flatten"},
    {"type":"linear","in_features":36,"out_features":16},
    {"type":"layernorm","normalized_shape":16},
    {"type":"gelu"},
    {"type":"batchnorm1d","num_features":16},
    {"type":"tanh"},
    {"type":"dropout","p":0.25},
    {"type":"linear","in_features":16,"out_features":5,"bias":false},
    {"type":"sigmoid"},
    {"type":"softmax","dim":1}])";
  ACC_ASSERT_OK(acc_set_seed(3));
  acc_model* m = acc_test::spec_model(cnn);
  std::vector<float> pixels(2 * 8 * 8);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = std::sin(static_cast<float>(i));
  acc_tensor* x = floats(pixels, {2, 1, 8, 8});
  // A training step moves the batch-norm statistics, so the export must carry buffers too.
  acc_tensor* y = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_DEFAULT, &y));
  acc_tensor_free(y);
  ACC_ASSERT_OK(acc_model_set_training(m, 0));
  int training = 1;
  ACC_ASSERT_OK(acc_model_is_training(m, &training));
  EXPECT_EQ(training, 0);
  auto expected = forward(m, x);
  ASSERT_EQ(expected.size(), 10u);

  const std::string path = temp_path("cnn.pt");
  ACC_ASSERT_OK(acc_model_save_torchscript(m, path.c_str()));
  acc_model* loaded = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &loaded));
  ACC_ASSERT_OK(acc_model_is_training(loaded, &training));
  EXPECT_EQ(training, 0);
  EXPECT_EQ(forward(loaded, x), expected);
  acc_string_list *a = nullptr, *b = nullptr;
  ACC_ASSERT_OK(acc_model_parameter_names(m, &a));
  ACC_ASSERT_OK(acc_model_parameter_names(loaded, &b));
  EXPECT_EQ(acc_test::strings(a), acc_test::strings(b));
  acc_string_list_free(a);
  acc_string_list_free(b);
  acc_tensor* tracked = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(loaded, "1.num_batches_tracked", &tracked));
  EXPECT_EQ(item(tracked), 1.0);
  acc_tensor_free(tracked);
  std::remove(path.c_str());
  acc_model_free(loaded);
  acc_model_free(m);
  acc_tensor_free(x);
}

TEST(Model, EmbeddingTakesIndices) {
  acc_model* m = acc_test::spec_model(R"([{"type":"embedding","num_embeddings":10,"embedding_dim":3,"padding_idx":0},
                                {"type":"flatten"}])");
  acc_tensor* idx = longs({0, 4}, {1, 2});
  auto out = forward(m, idx);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0], 0.0f);  // the padding row is zero
  acc_tensor_free(idx);
  acc_model_free(m);
}

TEST(Model, BadSpecsAreRejectedWithTheReason) {
  acc_model* m = nullptr;
  ACC_EXPECT_ERROR(acc_model_from_spec("[{\"type\":\"linear\"", &m), ACC_ERR_INVALID_ARGUMENT,
                   "not valid JSON: parse error at line 1, column 18");  // without nlohmann's exception tag
  ACC_EXPECT_ERROR(acc_model_from_spec("[]", &m), ACC_ERR_INVALID_ARGUMENT, "non-empty JSON array");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"lstm"}])", &m), ACC_ERR_INVALID_ARGUMENT,
                   "unknown layer type 'lstm'");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"linear","in_features":4}])", &m), ACC_ERR_INVALID_ARGUMENT,
                   "layer 0 (linear): missing required argument 'out_features'");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"relu"},{"type":"linear","in":4,"out_features":2}])", &m),
                   ACC_ERR_INVALID_ARGUMENT, "layer 1 (linear): unknown argument 'in'");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"linear","in_features":"4","out_features":2}])", &m),
                   ACC_ERR_INVALID_ARGUMENT, "'in_features' must be an integer");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"linear","in_features":0,"out_features":2}])", &m),
                   ACC_ERR_INVALID_ARGUMENT, "must be positive");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"dropout","p":2}])", &m), ACC_ERR_INVALID_ARGUMENT, "'p'");
  // Sizes each valid alone whose product libtorch cannot allocate: the layer is named.
  ACC_EXPECT_ERROR(
      acc_model_from_spec(
          R"([{"type":"relu"},{"type":"embedding","num_embeddings":4611686018427387904,"embedding_dim":4}])", &m),
      ACC_ERR_INVALID_ARGUMENT, "layer 1 (embedding): ");
  ACC_EXPECT_ERROR(acc_model_from_spec(nullptr, &m), ACC_ERR_INVALID_ARGUMENT, "json_spec is NULL");
  EXPECT_EQ(m, nullptr);
}

TEST(Model, ForwardErrorsNameTheProblem) {
  acc_model* m = acc_test::spec_model(kMlp);
  acc_tensor* wrong = floats(std::vector<float>(10, 0), {2, 5});
  acc_tensor* y = nullptr;
  ACC_EXPECT_ERROR(acc_model_forward1(m, wrong, 0, &y), ACC_ERR_INVALID_ARGUMENT, "");
  EXPECT_NE(std::string(acc_last_error_message()).find("cannot be multiplied"), std::string::npos)
      << acc_last_error_message();
  acc_tensor_list* out = nullptr;
  const acc_tensor* two[] = {wrong, wrong};
  ACC_EXPECT_ERROR(acc_model_forward(m, two, 2, 0, &out), ACC_ERR_INVALID_ARGUMENT, "takes 1 input(s), got 2");
  ACC_EXPECT_ERROR(acc_model_forward(m, nullptr, 1, 0, &out), ACC_ERR_INVALID_ARGUMENT, "inputs is NULL");
  ACC_EXPECT_ERROR(acc_model_forward(m, two, 1, 0x80, &out), ACC_ERR_INVALID_ARGUMENT, "unknown forward flags");
  acc_tensor_free(wrong);
  ACC_EXPECT_ERROR(acc_model_forward1(m, wrong, 0, &y), ACC_ERR_INVALID_HANDLE, "inputs[0] is not a live acc_tensor");
  acc_model_free(m);
  acc_tensor* x = floats(std::vector<float>(4, 0), {1, 4});
  ACC_EXPECT_ERROR(acc_model_forward1(m, x, 0, &y), ACC_ERR_INVALID_HANDLE, "not a live acc_model");
  acc_tensor_free(x);
}

TEST(Model, NoGradForwardRecordsNoHistory) {
  acc_model* m = acc_test::spec_model(kMlp);
  acc_tensor* x = floats(std::vector<float>(4, 1), {1, 4});
  acc_tensor* y = nullptr;
  int requires_grad = -1;
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_NO_GRAD, &y));
  ACC_ASSERT_OK(acc_tensor_requires_grad(y, &requires_grad));
  EXPECT_EQ(requires_grad, 0);
  acc_tensor_free(y);
  ACC_ASSERT_OK(acc_model_forward1(m, x, ACC_FORWARD_DEFAULT, &y));
  ACC_ASSERT_OK(acc_tensor_requires_grad(y, &requires_grad));
  EXPECT_EQ(requires_grad, 1);
  acc_tensor_free(y);
  acc_tensor_free(x);
  acc_model_free(m);
}

TEST(Model, StateDictRoundTripAndStrictness) {
  ACC_ASSERT_OK(acc_set_seed(1));
  acc_model* a = acc_test::spec_model(kMlp);
  ACC_ASSERT_OK(acc_set_seed(2));
  acc_model* b = acc_test::spec_model(kMlp);
  acc_tensor* x = floats({0.1f, -0.2f, 0.3f, 0.4f}, {1, 4});
  EXPECT_NE(forward(a, x), forward(b, x));
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(a, &state));
  ACC_ASSERT_OK(acc_model_load_state_dict(b, state, 1));
  EXPECT_EQ(forward(a, x), forward(b, x));

  // Strict loading names what is missing and what is unexpected; non-strict ignores both.
  acc_tensor_list* partial = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&partial));
  acc_tensor* w = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(state, "0.weight", &w));
  ACC_ASSERT_OK(acc_tensor_list_append(partial, "0.weight", w));
  ACC_ASSERT_OK(acc_tensor_list_append(partial, "encoder.weight", w));
  ACC_EXPECT_ERROR(acc_model_load_state_dict(b, partial, 1), ACC_ERR_INVALID_ARGUMENT, "missing keys: 0.bias");
  EXPECT_NE(std::string(acc_last_error_message()).find("unexpected keys: encoder.weight"), std::string::npos);
  EXPECT_EQ(std::string(acc_last_error_message()).find("persistent=False"), std::string::npos);  // no buffer missing
  ACC_ASSERT_OK(acc_model_load_state_dict(b, partial, 0));
  acc_tensor_list* wrong_shape = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&wrong_shape));
  ACC_ASSERT_OK(acc_tensor_list_append(wrong_shape, "3.weight", w));
  ACC_EXPECT_ERROR(acc_model_load_state_dict(b, wrong_shape, 0), ACC_ERR_INVALID_ARGUMENT,
                   "'3.weight' has shape [8, 4] but the model's has [3, 8]");
  acc_tensor_free(w);
  for (acc_tensor_list* l : {state, partial, wrong_shape}) acc_tensor_list_free(l);
  acc_tensor_free(x);
  acc_model_free(a);
  acc_model_free(b);
}

TEST(Model, ConversionToAnotherDtypeKeepsIntegerBuffers) {
  acc_model* m = acc_test::spec_model(R"([{"type":"linear","in_features":2,"out_features":2},
                                {"type":"batchnorm1d","num_features":2}])");
  ACC_ASSERT_OK(acc_model_to(m, "cpu", ACC_DTYPE_FLOAT64));
  acc_tensor* t = nullptr;
  acc_dtype dtype = ACC_DTYPE_UNDEFINED;
  ACC_ASSERT_OK(acc_model_parameter(m, "0.weight", &t));
  ACC_ASSERT_OK(acc_tensor_dtype(t, &dtype));
  EXPECT_EQ(dtype, ACC_DTYPE_FLOAT64);
  acc_tensor_free(t);
  ACC_ASSERT_OK(acc_model_parameter(m, "1.num_batches_tracked", &t));
  ACC_ASSERT_OK(acc_tensor_dtype(t, &dtype));
  EXPECT_EQ(dtype, ACC_DTYPE_INT64);
  acc_tensor_free(t);
  ACC_EXPECT_ERROR(acc_model_to(m, nullptr, ACC_DTYPE_INT32), ACC_ERR_INVALID_ARGUMENT, "floating dtype");
  // Weights without the buffers (as a file leaves out persistent=False ones, which TorchScript does
  // not mark): strict loading names them and says why they may be missing.
  acc_tensor_list* weights_only = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&weights_only));
  for (const char* name : {"0.weight", "0.bias", "1.weight", "1.bias"}) {
    ACC_ASSERT_OK(acc_model_parameter(m, name, &t));
    ACC_ASSERT_OK(acc_tensor_list_append(weights_only, name, t));
    acc_tensor_free(t);
  }
  ACC_EXPECT_ERROR(acc_model_load_state_dict(m, weights_only, 1), ACC_ERR_INVALID_ARGUMENT,
                   "missing keys: 1.num_batches_tracked 1.running_mean 1.running_var (a missing buffer may be one "
                   "registered with persistent=False");
  ACC_ASSERT_OK(acc_model_load_state_dict(m, weights_only, 0));
  acc_tensor_list_free(weights_only);
  acc_model_free(m);
}

TEST(TorchScript, MissingAndCorruptFilesAreIoErrors) {
  acc_model* m = nullptr;
  ACC_EXPECT_ERROR(acc_model_load_torchscript("/nonexistent/model.pt", &m), ACC_ERR_IO, "cannot open");
  const std::string path = temp_path("corrupt.pt");
  {
    std::ofstream f(path, std::ios::binary);
    f << "PK\x03\x04 this is not a zip archive at all";
  }
  ACC_EXPECT_ERROR(acc_model_load_torchscript(path.c_str(), &m), ACC_ERR_IO, "not a zip archive");
  std::remove(path.c_str());
  EXPECT_EQ(m, nullptr);
  acc_model* spec = acc_test::spec_model(kMlp);
  ACC_EXPECT_ERROR(acc_model_save_torchscript(spec, "/nonexistent/dir/out.pt"), ACC_ERR_IO, "cannot write");
  acc_model_free(spec);
}

TEST(TorchScript, DamagedArchivesAreRefusedBeforeUse) {
  if (fixture("classifier.pt").empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = nullptr;
  // One bit flipped inside a weight record: PyTorch itself loads it.
  ACC_EXPECT_ERROR(acc_model_load_torchscript(fixture("classifier_flipped.pt").c_str(), &m), ACC_ERR_IO,
                   "fails its CRC-32 check");
  // A weight record (CRC correct) half as long as its tensor: PyTorch loads it and reads past it.
  ACC_EXPECT_ERROR(acc_model_load_torchscript(fixture("classifier_short_record.pt").c_str(), &m), ACC_ERR_IO,
                   "holds 128 bytes, but its tensor storage needs 256");
  EXPECT_EQ(m, nullptr);
}

TEST(TorchScript, MutatedArchivesAreRefusedOrWorkNeverCrash) {
  const std::string original = fixture("classifier.pt");
  if (original.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  const std::string bytes = acc_test::read_file(original);
  ASSERT_FALSE(bytes.empty()) << original << " is missing or empty (run the export_ fixtures first)";
  const std::string path = temp_path("mutated.pt");
  uint32_t state = 12345;  // a fixed LCG: the same mutations every run
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string mutated = bytes;
    state = state * 1664525u + 1013904223u;
    const size_t at = state % mutated.size();
    mutated[at] = static_cast<char>(mutated[at] ^ (1 << (state >> 29)));
    std::ofstream(path, std::ios::binary | std::ios::trunc) << mutated;
    acc_model* m = nullptr;
    const acc_status status = acc_model_load_torchscript(path.c_str(), &m);
    if (status != ACC_OK) {
      EXPECT_EQ(status, ACC_ERR_IO) << "byte " << at << ": " << acc_last_error_message();
      ++refused;
      continue;
    }
    // Accepted (the flip hit bytes no reader uses): the model must still run.
    acc_tensor* x = floats(std::vector<float>(8, 0.5f), {2, 4});
    acc_tensor* labels = longs({0, 2}, {2});
    const acc_tensor* inputs[] = {x, labels};
    acc_tensor_list* out = nullptr;
    if (acc_model_forward(m, inputs, 2, ACC_FORWARD_NO_GRAD, &out) == ACC_OK) acc_tensor_list_free(out);
    acc_tensor_free(x);
    acc_tensor_free(labels);
    acc_model_free(m);
  }
  EXPECT_GT(refused, 250) << "most single-bit flips land in checked bytes (the rest in zip padding)";
  std::remove(path.c_str());
}

// What fails inside a TorchScript forward (here: 7 features where the model takes 4) is the caller's
// to fix: INVALID_ARGUMENT with the model's own traceback, not an internal error.
TEST(TorchScript, InputsTheModelCannotTakeAreInvalidArguments) {
  const std::string path = fixture("classifier.pt");
  if (path.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &m));
  acc_tensor* x = floats(std::vector<float>(2 * 7, 0.5f), {2, 7});
  acc_tensor* y = longs({0, 1}, {2});
  const acc_tensor* inputs[] = {x, y};
  acc_tensor_list* out = nullptr;
  ACC_EXPECT_ERROR(acc_model_forward(m, inputs, 2, ACC_FORWARD_DEFAULT, &out), ACC_ERR_INVALID_ARGUMENT,
                   "the TorchScript forward failed on these inputs");
  EXPECT_NE(std::string(acc_last_error_message()).find("self.fc1(x)"), std::string::npos) << acc_last_error_message();
  EXPECT_EQ(out, nullptr);
  acc_tensor* wrong_labels = floats({0.0f, 1.0f}, {2});  // cross_entropy wants class indices
  acc_tensor* x4 = floats(std::vector<float>(2 * 4, 0.5f), {2, 4});
  const acc_tensor* float_labels[] = {x4, wrong_labels};
  acc_status s = acc_model_forward(m, float_labels, 2, ACC_FORWARD_DEFAULT, &out);
  EXPECT_NE(s, ACC_ERR_INTERNAL) << acc_last_error_message();
  if (s == ACC_OK) acc_tensor_list_free(out);
  for (acc_tensor* t : {x, y, wrong_labels, x4}) acc_tensor_free(t);
  acc_model_free(m);
}

TEST(TorchScript, TupleOutputsFromAPyTorchExportTrain) {
  const std::string path = fixture("classifier.pt");
  if (path.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &m));
  acc_string_list* list = nullptr;
  ACC_ASSERT_OK(acc_model_parameter_names(m, &list));
  EXPECT_EQ(acc_test::strings(list), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  acc_string_list_free(list);

  // Three separable classes; the model's own loss (second output) must fall when trained from C.
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int i = 0; i < 30; ++i) {
    const int cls = i % 3;
    for (int f = 0; f < 4; ++f) xs.push_back(f == cls ? 2.0f : 0.1f * static_cast<float>((i + f) % 5));
    ys.push_back(cls);
  }
  acc_tensor* x = floats(xs, {30, 4});
  acc_tensor* y = longs(ys, {30});
  acc_options* opts = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opts));
  ACC_ASSERT_OK(acc_options_set_double(opts, "lr", 0.05));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "adam", opts, &opt));
  acc_options_free(opts);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    const acc_tensor* inputs[] = {x, y};
    acc_tensor_list* out = nullptr;
    ACC_ASSERT_OK(acc_model_forward(m, inputs, 2, ACC_FORWARD_DEFAULT, &out));
    size_t n = 0;
    ACC_ASSERT_OK(acc_tensor_list_size(out, &n));
    ASSERT_EQ(n, 2u);
    const char* name = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_name(out, 1, &name));
    EXPECT_STREQ(name, "1");
    acc_tensor* loss = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_get(out, 1, &loss));
    if (step == 0) first = item(loss);
    last = item(loss);
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    ACC_ASSERT_OK(acc_tensor_backward(loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    acc_tensor_free(loss);
    acc_tensor_list_free(out);
  }
  EXPECT_LT(last, first * 0.2) << "loss " << first << " -> " << last;
  acc_tensor* lone = nullptr;
  ACC_EXPECT_ERROR(acc_model_forward1(m, x, 0, &lone), ACC_ERR_INVALID_ARGUMENT, "takes 2 input(s), got 1");
  acc_optimizer_free(opt);
  acc_model_free(m);  // the optimizer was freed after... and before works too (see Lifetimes)
  acc_tensor_free(x);
  acc_tensor_free(y);
}

TEST(TorchScript, DictOutputsAreNamedAndMatchPyTorch) {
  const std::string path = fixture("dict_output.pt");
  if (path.empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set";
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &m));
  std::vector<float> in(8);
  for (int i = 0; i < 8; ++i) in[i] = static_cast<float>(i) / 8;
  acc_tensor* x = floats(in, {2, 4});
  acc_tensor_list* out = nullptr;
  const acc_tensor* inputs[] = {x};
  ACC_ASSERT_OK(acc_model_forward(m, inputs, 1, ACC_FORWARD_NO_GRAD, &out));
  acc_tensor* logits = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(out, "logits", &logits));
  acc_tensor* norm = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(out, "norm", &norm));
  std::ifstream expected_file(fixture("dict_output_logits.txt"));
  std::vector<float> expected;
  for (float v; expected_file >> v;) expected.push_back(v);
  auto got = to_floats(logits);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6);
  acc_tensor* buffer = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(m, "scale", &buffer));  // buffers are reachable by name
  EXPECT_EQ(item(buffer), 2.0);
  for (acc_tensor* t : {x, logits, norm, buffer}) acc_tensor_free(t);
  acc_tensor_list_free(out);
  acc_model_free(m);
}

// A tied weight loads strictly under any of its names, or all of them: Python's state_dict() lists
// both, and safetensors' save_model keeps one (its load_model counts the others loaded).
TEST(TorchScript, ATiedWeightLoadsUnderAnyOfItsNames) {
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/tied.pt").c_str(), &model));
  auto state_of = [](const std::vector<std::pair<const char*, float>>& entries) {
    acc_tensor_list* list = nullptr;
    EXPECT_EQ(acc_tensor_list_create(&list), ACC_OK);
    for (const auto& [name, value] : entries) {
      acc_tensor* t = acc_test::floats(std::vector<float>(48, value), {8, 6});
      EXPECT_EQ(acc_tensor_list_append(list, name, t), ACC_OK);
      acc_tensor_free(t);
    }
    return list;
  };
  auto embedding = [&] {
    acc_tensor* p = nullptr;
    EXPECT_EQ(acc_model_parameter(model, "embed.weight", &p), ACC_OK);
    const float first = acc_test::to_floats(p)[0];
    acc_tensor_free(p);
    return first;
  };
  for (const auto& [entries, want] : std::vector<std::pair<std::vector<std::pair<const char*, float>>, float>>{
           {{{"head.weight", 0.5f}}, 0.5f},
           {{{"embed.weight", 0.25f}}, 0.25f},
           {{{"embed.weight", 0.75f}, {"head.weight", 0.75f}}, 0.75f},
           // Under both names with different values, the last in the model's order wins (head's), as
           // PyTorch copies module by module, whatever the order given (found by a hunt: the state's
           // order decided, so a file's layout did).
           {{{"head.weight", 0.125f}, {"embed.weight", 0.0625f}}, 0.125f},
           {{{"embed.weight", 0.0625f}, {"head.weight", 0.125f}}, 0.125f}}) {
    acc_tensor_list* state = state_of(entries);
    ACC_ASSERT_OK(acc_model_load_state_dict(model, state, 1));
    EXPECT_EQ(embedding(), want);
    acc_tensor_list_free(state);
  }
  acc_tensor_list* state = state_of({{"head.weight", 1.0f}, {"tail.weight", 1.0f}});
  ACC_EXPECT_ERROR(acc_model_load_state_dict(model, state, 1), ACC_ERR_INVALID_ARGUMENT,
                   "unexpected keys: tail.weight");
  acc_tensor_list_free(state);
  // The file safetensors' save_model writes for it (one name, the other recorded in its metadata).
  const std::string path = acc_test::temp_path("tied_save_model.safetensors");
  state = state_of({{"head.weight", 2.0f}});
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(state, path.c_str()));
  acc_tensor_list_free(state);
  ACC_ASSERT_OK(acc_model_load_safetensors(model, path.c_str(), 1, nullptr, nullptr));
  EXPECT_EQ(embedding(), 2.0f);
  // A file holding both, whatever its layout: the head's value.
  for (const auto& order :
       {std::vector<std::pair<const char*, float>>{{"head.weight", 3.0f}, {"embed.weight", 4.0f}},
        std::vector<std::pair<const char*, float>>{{"embed.weight", 4.0f}, {"head.weight", 3.0f}}}) {
    state = state_of(order);
    ACC_ASSERT_OK(acc_tensor_list_save_safetensors(state, path.c_str()));
    acc_tensor_list_free(state);
    ACC_ASSERT_OK(acc_model_load_safetensors(model, path.c_str(), 1, nullptr, nullptr));
    EXPECT_EQ(embedding(), 3.0f);
  }
  std::remove(path.c_str());
  acc_model_free(model);
}

// A buffer two blocks share is written once by save_model, under its first name (found by a hunt:
// written twice), as Accelerate's save_model drops aliases; a file with it once loads strictly. So
// does save_state's model file (a later hunt: both names there), as Accelerate's save_state
// (clean_state_dict_for_safetensors), and load_state reads it back.
TEST(TorchScript, ASharedBufferIsSavedOnce) {
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/shared_mask.pt").c_str(), &model));
  const std::string dir = acc_test::temp_path("shared_mask_model"), state = acc_test::temp_path("shared_mask_state");
  acc_accelerator* acc = acc_test::make_accelerator({});
  ACC_ASSERT_OK(acc_save_model(acc, model, dir.c_str(), nullptr));
  ACC_ASSERT_OK(acc_prepare(acc, &model, nullptr, nullptr, nullptr));
  ACC_ASSERT_OK(acc_save_state(acc, state.c_str(), nullptr));
  for (const std::string& file : {dir + "/model.safetensors", state + "/model.safetensors"}) {
    SCOPED_TRACE(file);
    acc_tensor_list* saved = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_load_safetensors(file.c_str(), &saved));
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_tensor_list_find(saved, "a.mask", &t), ACC_OK);
    acc_tensor_free(t);
    t = nullptr;
    EXPECT_NE(acc_tensor_list_find(saved, "b.mask", &t), ACC_OK) << "the alias is left out";
    size_t count = 0;
    ACC_ASSERT_OK(acc_tensor_list_size(saved, &count));
    EXPECT_EQ(count, 5u);  // two linear layers' weights and biases, the mask once
    ACC_ASSERT_OK(acc_model_load_safetensors(model, file.c_str(), 1, nullptr, nullptr));
    acc_tensor_list_free(saved);
  }
  ACC_ASSERT_OK(acc_load_state(acc, state.c_str(), nullptr));
  acc_accelerator_free(acc);
  acc_model_free(model);
}

namespace {

std::vector<std::string> state_dict_names(acc_accelerator* acc, acc_model* model) {
  acc_tensor_list* state = nullptr;
  EXPECT_EQ(acc_get_state_dict(acc, model, 1, &state), ACC_OK) << acc_last_error_message();
  std::vector<std::string> names = acc_test::tensor_names(state);
  acc_tensor_list_free(state);
  return names;
}

}  // namespace

// acc_get_state_dict lists tensors as PyTorch's state_dict() (module by module, each module's
// parameters before its buffers: found by a hunt listing every parameter before every buffer), a
// TorchScript module's and a spec's (an nn.Sequential's) alike, and save_model's shards split where
// Accelerate's do (huggingface_hub fills them in that order).
TEST(TorchScript, StateDictOrderAndShardSplitsAreAsPyTorchsAndAccelerates) {
  std::ifstream in(acc_test::data_dir() + "/interleaved_state.json");
  ASSERT_TRUE(in) << "interleaved_state.json (export_models.py)";
  const auto expected = nlohmann::json::parse(in);
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/interleaved.pt").c_str(), &model));
  acc_accelerator* acc = acc_test::make_accelerator({});
  EXPECT_EQ(state_dict_names(acc, model), expected["state_dict_names"].get<std::vector<std::string>>());
  const std::string dir = acc_test::temp_path("interleaved_model");
  const std::string limit = std::to_string(expected["max_shard_size"].get<int64_t>());
  ACC_ASSERT_OK(acc_save_model(acc, model, dir.c_str(), limit.c_str()));
  const auto index = nlohmann::json::parse(acc_test::read_file(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"], expected["weight_map"]);
  std::filesystem::remove_all(dir);
  acc_model* spec = acc_test::spec_model(R"([{"type":"linear","in_features":4,"out_features":8},
                                             {"type":"batchnorm1d","num_features":8},
                                             {"type":"linear","in_features":8,"out_features":3}])");
  EXPECT_EQ(state_dict_names(acc, spec), expected["sequential_state_dict_names"].get<std::vector<std::string>>());
  acc_model_free(spec);
  acc_accelerator_free(acc);
  acc_model_free(model);
}

// A batchnorm with "momentum": null keeps cumulative averages, as PyTorch's momentum=None: after
// three training batches from the same seed, its state and output are PyTorch's, in the spec model
// and in the TorchScript it saves.
TEST(Spec, BatchNormWithoutMomentumKeepsPyTorchsCumulativeAverage) {
  std::ifstream in(acc_test::data_dir() + "/cumulative_batch_norm.json");
  ASSERT_TRUE(in) << "cumulative_batch_norm.json (export_models.py)";
  const auto expected = nlohmann::json::parse(in);
  ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
  acc_model* spec = acc_test::spec_model(expected["spec"].dump());
  ASSERT_NE(spec, nullptr);
  const std::string path = acc_test::temp_path("cumulative_batch_norm.pt");
  ACC_ASSERT_OK(acc_model_save_torchscript(spec, path.c_str()));
  acc_model* script = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &script));
  std::remove(path.c_str());
  for (acc_model* m : {spec, script}) {
    SCOPED_TRACE(m == spec ? "spec model" : "its TorchScript");
    std::vector<float> output;
    for (const auto& batch : expected["batches"]) {
      acc_tensor* x = acc_test::floats(batch.get<std::vector<float>>(), {5, 3});
      acc_tensor* y = acc_test::forward(m, {x}, ACC_FORWARD_NO_GRAD);
      output = acc_test::to_floats(y);
      acc_tensor_free(y);
      acc_tensor_free(x);
    }
    EXPECT_EQ(output, expected["last_output"].get<std::vector<float>>());
    acc_tensor_list* state = nullptr;
    ACC_ASSERT_OK(acc_model_state_dict(m, &state));
    for (const auto& [name, values] : expected["state"].items()) {
      acc_tensor *t = nullptr, *as_float = nullptr;
      ACC_ASSERT_OK(acc_tensor_list_find(state, name.c_str(), &t));
      ACC_ASSERT_OK(acc_tensor_to(t, nullptr, ACC_DTYPE_FLOAT32, &as_float));
      EXPECT_EQ(acc_test::to_floats(as_float), values.get<std::vector<float>>()) << name;
      acc_tensor_free(as_float);
      acc_tensor_free(t);
    }
    acc_tensor_list_free(state);
  }
  acc_model_free(script);
  acc_model_free(spec);
}

// A pooling's "stride": null is PyTorch's stride=None, the kernel's size (found by a hunt: refused).
TEST(Spec, APoolingsNullStrideIsTheKernelsSize) {
  for (const char* type : {"maxpool2d", "avgpool2d"}) {
    SCOPED_TRACE(type);
    const std::string kernel = std::string(R"([{"type":")") + type + R"(","kernel_size":2)";
    acc_model* omitted = acc_test::spec_model(kernel + "}]");
    acc_model* null = acc_test::spec_model(kernel + R"(,"stride":null}])");
    ASSERT_NE(null, nullptr);
    std::vector<float> values(2 * 6 * 4);
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.7f * static_cast<float>(i));
    std::vector<std::vector<float>> outputs;
    for (acc_model* m : {omitted, null}) {
      acc_tensor* x = acc_test::floats(values, {1, 2, 6, 4});
      acc_tensor* y = acc_test::forward(m, {x}, ACC_FORWARD_NO_GRAD);
      EXPECT_EQ(acc_test::shape(y), (std::vector<int64_t>{1, 2, 3, 2}));
      outputs.push_back(acc_test::to_floats(y));
      acc_tensor_free(y);
      acc_tensor_free(x);
    }
    EXPECT_EQ(outputs[0], outputs[1]);
    acc_model_free(null);
    acc_model_free(omitted);
  }
}

// A spec's tied_linear holds its embedding's weight: Python's state_dict() of the same nn.Sequential
// lists it under the head's name too, and either or both names load it strictly.
TEST(Spec, ATiedHeadsWeightLoadsUnderEitherName) {
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"embedding","num_embeddings":8,"embedding_dim":6},{"type":"tanh"},
                                        {"type":"tied_linear","tie_to":0}])",
                                    &model));
  EXPECT_EQ(acc_test::parameter_names(model), std::vector<std::string>{"0.weight"});  // one parameter
  for (const auto& names : std::vector<std::vector<const char*>>{{"2.weight"}, {"0.weight", "2.weight"}}) {
    acc_tensor_list* state = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_create(&state));
    for (const char* name : names) {
      acc_tensor* t = acc_test::floats(std::vector<float>(48, static_cast<float>(names.size())), {8, 6});
      ACC_ASSERT_OK(acc_tensor_list_append(state, name, t));
      acc_tensor_free(t);
    }
    ACC_ASSERT_OK(acc_model_load_state_dict(model, state, 1));
    acc_tensor_list_free(state);
    acc_tensor* p = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(model, "0.weight", &p));
    EXPECT_EQ(acc_test::to_floats(p)[0], static_cast<float>(names.size()));
    acc_tensor_free(p);
  }
  acc_model_free(model);
}

// A tied weight (GPT-2's head sharing the embedding's) is one parameter, as PyTorch's
// named_parameters lists it: stepped once per step, counted once by norms, saved once. 3 AdamW steps
// train the exported module as PyTorch trains it (tied_steps.json).
TEST(TorchScript, TiedWeightsAreOneParameterAndTrainAsInPyTorch) {
  std::ifstream in(acc_test::data_dir() + "/tied_steps.json");
  ASSERT_TRUE(in) << "tied_steps.json (export_models.py)";
  const auto expected = nlohmann::json::parse(in);
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/tied.pt").c_str(), &model));
  EXPECT_EQ(acc_test::parameter_names(model), expected["names"].get<std::vector<std::string>>());
  acc_optimizer* opt = acc_test::optimizer(model, "adamw", 0.1);
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> ids, targets;
    for (int64_t i = 0; i < 12; ++i) {
      ids.push_back((3 * i + step) % 8);
      targets.push_back((ids.back() + 1) % 8);
    }
    acc_tensor* x = acc_test::longs(ids, {3, 4});
    acc_tensor* y = acc_test::longs(targets, {3, 4});
    acc_tensor* logits = acc_test::forward(model, {x}, ACC_FORWARD_DEFAULT);
    acc_tensor* loss = acc_test::sequence_loss(logits, y, 8);
    ACC_ASSERT_OK(acc_tensor_backward(loss));
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    for (acc_tensor* t : {x, y, logits, loss}) acc_tensor_free(t);
  }
  for (const auto& [name, values] : expected["weights"].items()) {
    acc_tensor* p = nullptr;
    ACC_ASSERT_OK(acc_model_parameter(model, name.c_str(), &p));
    EXPECT_LE(acc_test::max_difference(acc_test::to_floats(p), values.get<std::vector<float>>()), 1e-6) << name;
    acc_tensor_free(p);
  }
  // save_model writes the shared tensor once, under its first name (as Accelerate's save_model).
  const std::string dir = acc_test::temp_path("tied_model");
  acc_accelerator* acc = acc_test::make_accelerator({});
  ACC_ASSERT_OK(acc_save_model(acc, model, dir.c_str(), nullptr));
  acc_accelerator_free(acc);
  acc_tensor_list* saved = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors((dir + "/model.safetensors").c_str(), &saved));
  size_t count = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(saved, &count));
  EXPECT_EQ(count, 1u);
  acc_tensor_list_free(saved);
  std::filesystem::remove_all(dir);
  acc_optimizer_free(opt);
  acc_model_free(model);
}
