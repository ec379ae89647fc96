// The built-in optimizers against PyTorch's own SGD, Adam, AdamW, RMSprop, Adagrad, RAdam and NAdam bit for bit
// (tests/data/export_optimizer_cases.py), and Lion, Adafactor and the schedule-free optimizers against
// their papers' update rules written here independently, in doubles; parameter groups, schedulers, save_state /
// load_state, bf16 mixed precision, and the options each one refuses.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "support.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using acc_test::floats;
using acc_test::to_floats;

namespace {

const char* kMlp = R"([{"type":"linear","in_features":3,"out_features":4},{"type":"tanh"},
                       {"type":"linear","in_features":4,"out_features":2}])";
const std::vector<std::string> kNames = {"0.weight", "0.bias", "2.weight", "2.bias"};
const char* kBiases[] = {"0.bias", "2.bias"};

using Weights = std::map<std::string, std::vector<float>>;

// Optimizer options from a JSON object of numbers and flags.
acc_options* optimizer_options(const json& items) {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
  for (const auto& item : items.items()) {
    const json& v = item.value();
    const acc_status s = v.is_boolean()          ? acc_options_set_bool(o, item.key().c_str(), v.get<bool>() ? 1 : 0)
                         : v.is_number_integer() ? acc_options_set(o, item.key().c_str(), v.dump().c_str())
                                                 : acc_options_set_double(o, item.key().c_str(), v.get<double>());
    EXPECT_EQ(s, ACC_OK) << item.key() << ": " << acc_last_error_message();
  }
  return o;
}

// An optimizer over `model`; with `group`, the biases form a second group with those overrides.
acc_optimizer* make_optimizer(acc_model* model, const char* algorithm, const json& options,
                              const std::optional<json>& group = std::nullopt) {
  acc_options* o = optimizer_options(options);
  acc_optimizer* opt = nullptr;
  EXPECT_EQ(acc_optimizer_create(model, algorithm, o, &opt), ACC_OK) << algorithm << ": " << acc_last_error_message();
  acc_options_free(o);
  if (opt && group) {
    acc_options* g = optimizer_options(*group);
    EXPECT_EQ(acc_optimizer_add_param_group(opt, kBiases, 2, g), ACC_OK) << acc_last_error_message();
    acc_options_free(g);
  }
  return opt;
}

std::vector<float> from_hex(const json& values) {
  std::vector<float> out;
  for (const auto& text : values) out.push_back(static_cast<float>(std::strtod(text.get<std::string>().c_str(), nullptr)));
  return out;
}

// The MLP on a fixed batch, MSE loss; weights from PyTorch's export or from the seeded generator.
struct Mlp {
  acc_model* model = nullptr;
  acc_tensor* x = nullptr;
  acc_tensor* y = nullptr;

  explicit Mlp(const json* fixture = nullptr) {
    if (!fixture) EXPECT_EQ(acc_set_seed(11), ACC_OK);
    EXPECT_EQ(acc_model_from_spec(kMlp, &model), ACC_OK) << acc_last_error_message();
    if (fixture) {
      acc_tensor_list* state = nullptr;
      EXPECT_EQ(acc_tensor_list_create(&state), ACC_OK);
      for (const auto& name : kNames) {
        const json& t = (*fixture)["initial"][name];
        acc_tensor* w = floats(from_hex(t["values"]), t["shape"].get<std::vector<int64_t>>());
        EXPECT_EQ(acc_tensor_list_append(state, name.c_str(), w), ACC_OK);
        acc_tensor_free(w);
      }
      EXPECT_EQ(acc_model_load_state_dict(model, state, 1), ACC_OK) << acc_last_error_message();
      acc_tensor_list_free(state);
      x = floats(from_hex((*fixture)["x"]), {5, 3});
      y = floats(from_hex((*fixture)["y"]), {5, 2});
      const std::string device = (*fixture).value("device", "cpu");
      if (device != "cpu") {  // the GPU suite's fixture (tests/gpu/gpu_tests.cmake)
        EXPECT_EQ(acc_model_to(model, device.c_str(), ACC_DTYPE_UNDEFINED), ACC_OK) << acc_last_error_message();
        for (acc_tensor** t : {&x, &y}) {
          acc_tensor* moved = nullptr;
          EXPECT_EQ(acc_tensor_to(*t, device.c_str(), ACC_DTYPE_UNDEFINED, &moved), ACC_OK);
          acc_tensor_free(*t);
          *t = moved;
        }
      }
    } else {
      x = floats({0.5f, -1.0f, 2.0f, 0.1f, 0.7f, -0.3f, -1.5f, 0.2f, 0.9f, 1.1f, -0.6f, 0.4f, 0.3f, 0.8f, -2.0f},
                 {5, 3});
      y = floats({1.0f, -1.0f, 0.5f, 0.2f, -0.7f, 0.9f, 0.0f, 0.3f, -0.4f, 1.2f}, {5, 2});
    }
  }
  ~Mlp() {
    acc_model_free(model);
    acc_tensor_free(x);
    acc_tensor_free(y);
  }
  void backward() {
    acc_tensor* out = nullptr;
    acc_tensor* loss = nullptr;
    ASSERT_EQ(acc_model_forward1(model, x, 0, &out), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_loss_mse(out, y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
    ASSERT_EQ(acc_tensor_backward(loss), ACC_OK);
    acc_tensor_free(out);
    acc_tensor_free(loss);
  }
  std::vector<float> parameter(const std::string& name, bool gradient = false) const {
    acc_tensor* p = nullptr;
    EXPECT_EQ(acc_model_parameter(model, name.c_str(), &p), ACC_OK);
    acc_tensor* g = nullptr;
    if (gradient) EXPECT_EQ(acc_tensor_grad(p, &g), ACC_OK);
    std::vector<float> values = to_floats(gradient ? g : p);
    acc_tensor_free(g);
    acc_tensor_free(p);
    return values;
  }
  Weights weights() const {
    Weights w;
    for (const auto& name : kNames) w[name] = parameter(name);
    return w;
  }
};

int sign(double v) { return (v > 0) - (v < 0); }

double rms(const std::vector<double>& v) {
  double sum = 0;
  for (double e : v) sum += e * e;
  return std::sqrt(sum / static_cast<double>(v.size()));
}

// Lion as the paper's Algorithm 2 states it: c = b1 m + (1 - b1) g; x -= lr (sign(c) + wd x);
// m = b2 m + (1 - b2) g.
struct LionRule {
  double lr, beta1, beta2, weight_decay;
};

struct LionReference {
  std::map<std::string, std::vector<double>> momentum;
  std::vector<double> step(const std::string& name, const LionRule& r, const std::vector<float>& x,
                           const std::vector<float>& g) {
    auto& m = momentum[name];
    m.resize(x.size(), 0.0);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double c = r.beta1 * m[i] + (1 - r.beta1) * g[i];
      out[i] = x[i] - r.lr * (sign(c) + r.weight_decay * x[i]);
      m[i] = r.beta2 * m[i] + (1 - r.beta2) * g[i];
    }
    return out;
  }
};

// Adafactor as the paper's Algorithms 4 (matrices: row and column sums R, C of the squared
// gradient, V = R C / 1'R) and 5 (vectors), with update clipping (section 6), relative step size
// and parameter scale (section 8), and a first moment of the scaled update as transformers adds.
struct AdafactorRule {
  std::optional<double> lr;  // none: relative step
  double eps1 = 1e-30, eps2 = 1e-3, clip = 1.0, decay_rate = -0.8;
  std::optional<double> beta1;
  double weight_decay = 0;
  bool scale_parameter = true, warmup_init = false;
};

struct AdafactorReference {
  struct State {
    int64_t t = 0;
    std::vector<double> r, c, v, m;
  };
  std::map<std::string, State> states;

  // x and g of a rows x cols matrix (cols 0: a vector of `rows`).
  std::vector<double> step(const std::string& name, const AdafactorRule& a, size_t rows, size_t cols,
                           const std::vector<float>& x, const std::vector<float>& g) {
    State& s = states[name];
    const double t = static_cast<double>(++s.t);
    const std::vector<double> xd(x.begin(), x.end());
    const double rho = a.lr ? *a.lr : std::min(a.warmup_init ? 1e-6 * t : 1e-2, 1 / std::sqrt(t));
    const double alpha = a.scale_parameter ? std::max(a.eps2, rms(xd)) * rho : rho;
    const double beta2 = 1 - std::pow(t, a.decay_rate);
    std::vector<double> v_hat(x.size());
    if (cols > 0) {
      s.r.resize(rows, 0.0);
      s.c.resize(cols, 0.0);
      for (size_t i = 0; i < rows; ++i) {
        double sum = 0;
        for (size_t j = 0; j < cols; ++j) sum += static_cast<double>(g[i * cols + j]) * g[i * cols + j] + a.eps1;
        s.r[i] = beta2 * s.r[i] + (1 - beta2) * sum;
      }
      for (size_t j = 0; j < cols; ++j) {
        double sum = 0;
        for (size_t i = 0; i < rows; ++i) sum += static_cast<double>(g[i * cols + j]) * g[i * cols + j] + a.eps1;
        s.c[j] = beta2 * s.c[j] + (1 - beta2) * sum;
      }
      double total = 0;
      for (double r : s.r) total += r;
      for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j) v_hat[i * cols + j] = s.r[i] * s.c[j] / total;
    } else {
      s.v.resize(rows, 0.0);
      for (size_t i = 0; i < rows; ++i) {
        s.v[i] = beta2 * s.v[i] + (1 - beta2) * (static_cast<double>(g[i]) * g[i] + a.eps1);
        v_hat[i] = s.v[i];
      }
    }
    std::vector<double> u(x.size());
    for (size_t k = 0; k < u.size(); ++k) u[k] = g[k] / std::sqrt(v_hat[k]);
    const double clip = std::max(1.0, rms(u) / a.clip);
    for (auto& e : u) e = alpha * e / clip;
    if (a.beta1) {
      s.m.resize(x.size(), 0.0);
      for (size_t k = 0; k < u.size(); ++k) u[k] = s.m[k] = *a.beta1 * s.m[k] + (1 - *a.beta1) * u[k];
    }
    std::vector<double> out(x.size());
    for (size_t k = 0; k < x.size(); ++k) out[k] = xd[k] - alpha * a.weight_decay * xd[k] - u[k];
    return out;
  }
};

// Runs `steps` steps of `opt` on `net`; after each, every parameter must be within `tolerance` of
// what expect(name, weights before, gradient) says.
// Schedule-free SGD and AdamW as the paper states them (Defazio et al. 2024, Algorithm 1, with the
// schedulefree package's warmup and weights), keeping x and z and forming y from them: the library
// updates y in place instead. For step t: rate lr_t = lr min(1, t / warmup), c = w_t / sum(w) with
// w_t = t^r max(lr_1..t)^p; z -= lr_t (g' + wd y) with g' = g (SGD) or g / (sqrt(v / (1 - b2^t)) + eps)
// (AdamW, v tracking g^2 with b2); x = (1 - c) x + c z; y = (1 - b) z + b x (b: momentum or beta1).
struct ScheduleFreeRule {
  bool adam = false;
  double lr, beta, beta2 = 0.999, eps = 1e-8, weight_decay = 0, r = 0, weight_lr_power = 2;
  int64_t warmup_steps = 0;
};

struct ScheduleFreeReference {
  struct State {
    std::vector<double> x, z, v;
  };
  std::map<std::string, State> states;
  std::map<bool, std::pair<double, double>> sums;  // per group (bias or not): lr_max, weight_sum
  std::map<bool, int64_t> steps;

  // Advances a group's averaging once per step (call before its parameters' steps).
  std::pair<double, double> begin_step(bool group, const ScheduleFreeRule& r) {
    const int64_t t = ++steps[group];
    auto& [lr_max, weight_sum] = sums.try_emplace(group, -1.0, 0.0).first->second;
    const double lr = r.lr * (t <= r.warmup_steps ? double(t) / double(r.warmup_steps) : 1.0);
    lr_max = std::max(lr_max, lr);
    const double weight = std::pow(double(t), r.r) * std::pow(lr_max, r.weight_lr_power);
    weight_sum += weight;
    return {lr, weight / weight_sum};
  }
  std::vector<double> y(const std::string& name, const ScheduleFreeRule& r) const {
    const State& s = states.at(name);
    std::vector<double> out(s.x.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = (1 - r.beta) * s.z[i] + r.beta * s.x[i];
    return out;
  }
  std::vector<double> step(const std::string& name, const ScheduleFreeRule& r, std::pair<double, double> lr_c,
                           int64_t t, const std::vector<float>& y0, const std::vector<float>& g) {
    State& s = states[name];
    if (s.x.empty()) {
      s.x.assign(y0.begin(), y0.end());
      s.z = s.x;
      s.v.assign(y0.size(), 0.0);
    }
    const std::vector<double> y_now = y(name, r);
    const auto [lr, c] = lr_c;
    for (size_t i = 0; i < s.x.size(); ++i) {
      double step = g[i];
      if (r.adam) {
        s.v[i] = r.beta2 * s.v[i] + (1 - r.beta2) * g[i] * g[i];
        step = g[i] / (std::sqrt(s.v[i] / (1 - std::pow(r.beta2, double(t)))) + r.eps);
      }
      s.z[i] -= lr * (step + r.weight_decay * y_now[i]);
      s.x[i] = (1 - c) * s.x[i] + c * s.z[i];
    }
    return y(name, r);
  }
};

template <class Expect>
void expect_steps(Mlp& net, acc_optimizer* opt, int steps, double tolerance, Expect expect) {
  for (int s = 0; s < steps; ++s) {
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    net.backward();
    Weights before = net.weights(), grads;
    for (const auto& name : kNames) grads[name] = net.parameter(name, true);
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
    for (const auto& name : kNames) {
      const std::vector<double> want = expect(name, before[name], grads[name]);
      const std::vector<float> got = net.parameter(name);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0, moved = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::abs(got[i] - want[i]));
        moved = std::max(moved, std::abs(want[i] - before[name][i]));
      }
      EXPECT_LE(worst, tolerance) << "step " << s + 1 << ", " << name << " (the rule moves it by up to " << moved
                                  << ")";
      EXPECT_GT(moved, 20 * tolerance) << "step " << s + 1 << ", " << name << ": the check would not see an error";
    }
  }
}

std::pair<size_t, size_t> matrix_shape(const std::string& name) {
  if (name == "0.weight") return {4, 3};
  if (name == "2.weight") return {2, 4};
  return {name == "0.bias" ? 4 : 2, 0};
}

double get_lr(acc_optimizer* opt, size_t group) {
  double lr = -1;
  EXPECT_EQ(acc_optimizer_get_lr(opt, group, &lr), ACC_OK) << acc_last_error_message();
  return lr;
}

}  // namespace

// The fixture is written by the python3 torch the build found, so this holds the rules of the
// libtorch built against to those of the same PyTorch version's Python (torch::optim's C++ rules
// are not kept in step with them). The GPU suite runs it on a CUDA fixture, where Python steps with
// its foreach ops.
TEST(Optimizers, BuiltInRulesEqualPyTorchsBitForBit) {
  std::ifstream in(acc_test::data_dir() + "/optimizer_cases.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_optimizer_cases fixture";
  const json data = json::parse(in);
  // 34 on 1.x; from 2.0 also RAdam's and NAdam's decoupled decay and maximize, from 2.4 the fused kernels.
  ASSERT_GE(data["cases"].size(), 34u);
  for (const auto& c : data["cases"]) {
    const std::string algorithm = c["algorithm"];
    const std::string which = algorithm + " " + c["options"].dump() + " biases " + c["group"].dump();
    Mlp net(&data);
    std::optional<json> group;
    if (!c["group"].is_null()) group = c["group"];
    acc_optimizer* opt = make_optimizer(net.model, algorithm.c_str(), c["options"], group);
    ASSERT_NE(opt, nullptr);
    int step = 0;
    for (const auto& expected : c["steps"]) {
      ++step;
      ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
      net.backward();
      // The gradients first: a difference in the weights is then the rule's, not the backward's.
      for (const auto& name : kNames) {
        const std::vector<float> want = from_hex(expected["grads"][name]), got = net.parameter(name, true);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << which << ", step " << step << ", " << name << "'s gradient: " << got[0] << " vs PyTorch's " << want[0];
      }
      ASSERT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
      for (const auto& name : kNames) {
        const std::vector<float> want = from_hex(expected[name]), got = net.parameter(name);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << which << ", step " << step << ", " << name << ": " << got[0] << " vs PyTorch's " << want[0];
      }
    }
    acc_optimizer_free(opt);
  }
}

// PyTorch's fused=True kernels from 2.4 (their bit-for-bit cases are in the fixture above): a build
// against an older libtorch refuses them, and fused is chosen for the whole optimizer, not a group.
TEST(Optimizers, FusedIsTheWholeOptimizersChoiceAndNeedsPyTorch24) {
  const json info = json::parse(acc_build_info());
  const std::string version = info.at("libtorch");
  const bool fused_built = std::stoi(version) * 100 + std::stoi(version.substr(version.find('.') + 1)) >= 204;
  Mlp net;
  for (const char* algorithm : {"sgd", "adam", "adamw", "adagrad"}) {
    SCOPED_TRACE(algorithm);
    acc_options* o = optimizer_options({{"fused", true}});
    acc_optimizer* opt = nullptr;
    if (!fused_built) {
      ACC_EXPECT_ERROR(acc_optimizer_create(net.model, algorithm, o, &opt), ACC_ERR_UNSUPPORTED,
                       "fused optimizers need PyTorch 2.4 or later");
      acc_options_free(o);
      continue;
    }
    ASSERT_EQ(acc_optimizer_create(net.model, algorithm, o, &opt), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
    acc_options* group = optimizer_options({{"fused", false}});
    ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, kBiases, 2, group), ACC_ERR_INVALID_ARGUMENT,
                     "'fused' is chosen for the whole optimizer");
    acc_options_free(group);
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    net.backward();
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
    acc_optimizer_free(opt);
  }
  acc_optimizer* opt = nullptr;
  acc_options* o = optimizer_options({{"fused", true}});
  ACC_EXPECT_ERROR(acc_optimizer_create(net.model, "rmsprop", o, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "'fused' does not apply to the rmsprop optimizer");
  acc_options_free(o);
}

// foreach=true (bit for bit in the fixture above from PyTorch 2.0) steps PyTorch 2.x's foreach rules:
// a build against 1.13 refuses it; it excludes fused, and is the whole optimizer's choice.
TEST(Optimizers, ForeachNeedsPyTorch2AndExcludesFused) {
  const json info = json::parse(acc_build_info());
  const bool pytorch2 = std::stoi(info.at("libtorch").get<std::string>()) >= 2;
  Mlp net;
  acc_optimizer* opt = nullptr;
  acc_options* o = optimizer_options({{"foreach", true}});
  if (pytorch2) {
    ASSERT_EQ(acc_optimizer_create(net.model, "radam", o, &opt), ACC_OK) << acc_last_error_message();
    acc_options* group = optimizer_options({{"foreach", false}});
    ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, kBiases, 2, group), ACC_ERR_INVALID_ARGUMENT,
                     "'foreach' is chosen for the whole optimizer");
    acc_options_free(group);
    acc_optimizer_free(opt);
    acc_options* both = optimizer_options({{"foreach", true}, {"fused", true}});
    ACC_EXPECT_ERROR(acc_optimizer_create(net.model, "adam", both, &opt), ACC_ERR_INVALID_ARGUMENT,
                     "fused and foreach cannot both be true");
    acc_options_free(both);
  } else {
    ACC_EXPECT_ERROR(acc_optimizer_create(net.model, "radam", o, &opt), ACC_ERR_UNSUPPORTED,
                     "foreach=true steps PyTorch 2.x's foreach rules");
  }
  acc_options_free(o);
  acc_options* unforeach = optimizer_options({{"foreach", false}});  // the one-tensor rules: any version
  ASSERT_EQ(acc_optimizer_create(net.model, "asgd", unforeach, &opt), ACC_OK) << acc_last_error_message();
  acc_optimizer_free(opt);
  acc_options_free(unforeach);
}

// maximize (bit for bit in the fixture above) negates the gradients for the step only: after it they
// are the backward's, as PyTorch leaves them. Lion and Adafactor have no maximize, and a group cannot
// choose its own.
TEST(Optimizers, MaximizeLeavesTheGradientsAsTheBackwardMadeThem) {
  Mlp net;
  acc_options* o = optimizer_options({{"maximize", true}, {"weight_decay", 0.1}});
  acc_optimizer* opt = nullptr;
  ASSERT_EQ(acc_optimizer_create(net.model, "adamw", o, &opt), ACC_OK) << acc_last_error_message();
  acc_options_free(o);
  acc_options* group = optimizer_options({{"maximize", false}});
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, kBiases, 2, group), ACC_ERR_INVALID_ARGUMENT,
                   "'maximize' is chosen for the whole optimizer");
  acc_options_free(group);
  net.backward();
  std::map<std::string, std::vector<float>> grads;
  for (const auto& name : kNames) grads[name] = net.parameter(name, true);
  ASSERT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
  for (const auto& name : kNames) EXPECT_EQ(net.parameter(name, true), grads[name]) << name;
  acc_optimizer_free(opt);
  for (const char* algorithm : {"lion", "adafactor"}) {
    acc_options* m = optimizer_options({{"maximize", true}});
    ACC_EXPECT_ERROR(acc_optimizer_create(net.model, algorithm, m, &opt), ACC_ERR_INVALID_ARGUMENT,
                     "'maximize' does not apply");
    acc_options_free(m);
  }
}

// PyTorch's optimizer.state[p][field], read by parameter name: ASGD's averaged parameter (before t0
// it is the latest weights, exactly), its step count, the fields each algorithm keeps, and the
// refusals before a first step and for names and fields that are not there.
TEST(Optimizers, TheStateOfAParameterIsReadByName) {
  Mlp net;
  acc_optimizer* opt = make_optimizer(net.model, "asgd", {{"lr", 0.05}});
  ASSERT_NE(opt, nullptr);
  acc_tensor* t = nullptr;
  ACC_EXPECT_ERROR(acc_optimizer_state(opt, "0.weight", "ax", &t), ACC_ERR_NOT_INITIALIZED, "has no optimizer state yet");
  acc_string_list* fields = nullptr;
  ASSERT_EQ(acc_optimizer_state_fields(opt, "0.weight", &fields), ACC_OK);
  EXPECT_TRUE(acc_test::strings(fields).empty());
  acc_string_list_free(fields);
  for (int step = 0; step < 3; ++step) {
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    net.backward();
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
  }
  ASSERT_EQ(acc_optimizer_state_fields(opt, "0.weight", &fields), ACC_OK);
  EXPECT_EQ(acc_test::strings(fields), (std::vector<std::string>{"ax", "eta", "mu", "step"}));
  acc_string_list_free(fields);
  ASSERT_EQ(acc_optimizer_state(opt, "0.weight", "ax", &t), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(to_floats(t), net.parameter("0.weight"));  // t0 1e6: ax follows the weights
  acc_tensor_free(t);
  ASSERT_EQ(acc_optimizer_state(opt, "2.bias", "step", &t), ACC_OK);
  acc_dtype dtype = ACC_DTYPE_UNDEFINED;
  double steps = 0;
  ASSERT_EQ(acc_tensor_dtype(t, &dtype), ACC_OK);
  ASSERT_EQ(acc_tensor_item(t, &steps), ACC_OK);
  EXPECT_EQ(dtype, ACC_DTYPE_INT64);
  EXPECT_EQ(steps, 3.0);
  acc_tensor_free(t);
  ACC_EXPECT_ERROR(acc_optimizer_state(opt, "0.weight", "exp_avg", &t), ACC_ERR_INVALID_ARGUMENT,
                   "keeps no 'exp_avg' for '0.weight' (it keeps ax, eta, mu, step)");
  t = nullptr;
  ACC_EXPECT_ERROR(acc_optimizer_state(opt, "9.weight", "ax", &t), ACC_ERR_INVALID_ARGUMENT,
                   "the model has no parameter '9.weight'");
  EXPECT_EQ(t, nullptr);
  acc_optimizer_free(opt);

  // Adagrad's accumulators exist from the start; a frozen parameter is no optimizer's.
  ASSERT_EQ(acc_model_set_requires_grad(net.model, "2.*", 0, nullptr), ACC_OK);
  opt = make_optimizer(net.model, "adagrad", {{"initial_accumulator_value", 0.25}});
  ASSERT_EQ(acc_optimizer_state(opt, "0.bias", "sum", &t), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(to_floats(t), std::vector<float>(4, 0.25f));
  acc_tensor_free(t);
  ACC_EXPECT_ERROR(acc_optimizer_state_fields(opt, "2.weight", &fields), ACC_ERR_INVALID_ARGUMENT,
                   "the optimizer does not step '2.weight'");
  // Found by a hunt: a group's own initial_accumulator_value filled its accumulators. torch's
  // Adagrad fills every parameter's with the constructor's value, whatever its group says.
  acc_options* group = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &group), ACC_OK);
  ASSERT_EQ(acc_options_set_double(group, "initial_accumulator_value", 0.5), ACC_OK);
  ASSERT_EQ(acc_optimizer_add_param_group_matching(opt, "0.*", group, nullptr), ACC_OK) << acc_last_error_message();
  acc_options_free(group);
  ASSERT_EQ(acc_optimizer_state(opt, "0.bias", "sum", &t), ACC_OK) << acc_last_error_message();
  EXPECT_EQ(to_floats(t), std::vector<float>(4, 0.25f));
  acc_tensor_free(t);
  acc_optimizer_free(opt);
}

TEST(Optimizers, LionFollowsThePapersRuleWithGroups) {
  struct Case {
    json options;
    std::optional<json> biases;
    LionRule weights_rule, biases_rule;
  };
  const Case cases[] = {
      {json::object(), std::nullopt, {1e-4, 0.9, 0.99, 0}, {1e-4, 0.9, 0.99, 0}},  // the defaults
      {{{"lr", 3e-3}, {"weight_decay", 0.5}, {"beta1", 0.8}, {"beta2", 0.95}},
       json{{"lr", 1e-3}, {"weight_decay", 0.0}, {"beta1", 0.5}},
       {3e-3, 0.8, 0.95, 0.5},
       {1e-3, 0.5, 0.95, 0.0}},
  };
  for (const auto& c : cases) {
    Mlp net;
    acc_optimizer* opt = make_optimizer(net.model, "lion", c.options, c.biases);
    ASSERT_NE(opt, nullptr);
    LionReference ref;
    expect_steps(net, opt, 6, 1e-7, [&](const std::string& name, const auto& x, const auto& g) {
      const bool bias = name.find("bias") != std::string::npos;
      return ref.step(name, bias ? c.biases_rule : c.weights_rule, x, g);
    });
    acc_optimizer_free(opt);
  }
}

TEST(Optimizers, ScheduleFreeFollowsThePapersRuleWithGroups) {
  struct Case {
    const char* algorithm;
    json options, biases;
    ScheduleFreeRule weights_rule, biases_rule;
  };
  ScheduleFreeRule adam_defaults{true, 0.0025, 0.9};
  ScheduleFreeRule adam_given{true, 0.02, 0.8, 0.99, 1e-6, 0.1, 1.0, 1.0, 3};
  ScheduleFreeRule adam_biases = adam_given;
  adam_biases.lr = 0.05;
  adam_biases.warmup_steps = 0;
  ScheduleFreeRule sgd_defaults{false, 1.0, 0.9};
  ScheduleFreeRule sgd_given{false, 0.3, 0.7, 0, 0, 0.2, 0.5, 0, 2};
  const Case cases[] = {
      {"adamw_schedule_free", json::object(), json::object(), adam_defaults, adam_defaults},
      {"adamw_schedule_free",
       {{"lr", 0.02},
        {"beta1", 0.8},
        {"beta2", 0.99},
        {"eps", 1e-6},
        {"weight_decay", 0.1},
        {"r", 1.0},
        {"weight_lr_power", 1.0},
        {"warmup_steps", 3}},
       {{"lr", 0.05}, {"warmup_steps", 0}},
       adam_given,
       adam_biases},
      {"sgd_schedule_free", json::object(), json::object(), sgd_defaults, sgd_defaults},
      {"sgd_schedule_free",
       {{"lr", 0.3}, {"momentum", 0.7}, {"weight_decay", 0.2}, {"r", 0.5}, {"weight_lr_power", 0}, {"warmup_steps", 2}},
       json::object(),
       sgd_given,
       sgd_given},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.algorithm) + " " + c.options.dump());
    Mlp net;
    acc_optimizer* opt = make_optimizer(net.model, c.algorithm, c.options, c.biases);
    ASSERT_NE(opt, nullptr);
    ACC_ASSERT_OK(acc_optimizer_set_training(opt, 1));
    ScheduleFreeReference ref;
    std::map<bool, std::pair<double, double>> step_of_group;
    int64_t t = 0;
    expect_steps(net, opt, 6, 2e-6, [&](const std::string& name, const auto& y, const auto& g) {
      const bool bias = name.find("bias") != std::string::npos;
      const ScheduleFreeRule& rule = bias ? c.biases_rule : c.weights_rule;
      if (name == kNames.front()) {  // a new step: each group's averaging advances once
        ++t;
        step_of_group.clear();
      }
      if (!step_of_group.count(bias)) step_of_group[bias] = ref.begin_step(bias, rule);
      return ref.step(name, rule, step_of_group[bias], t, y, g);
    });
    // eval() gives the average x, train() y again.
    ACC_ASSERT_OK(acc_optimizer_set_training(opt, 0));
    for (const auto& name : kNames) {
      const bool bias = name.find("bias") != std::string::npos;
      const std::vector<double>& x = ref.states.at(name).x;
      const std::vector<float> got = net.parameter(name);
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(got[i], x[i], 5e-6) << name << " in eval mode";
      EXPECT_GT(std::abs(x[0] - ref.y(name, bias ? c.biases_rule : c.weights_rule)[0]), 1e-4)
          << name << ": x and y too close to tell apart";
    }
    ACC_EXPECT_ERROR(acc_optimizer_step(opt), ACC_ERR_INVALID_ARGUMENT,
                     "is in eval mode: switch it to training before a step");
    ACC_ASSERT_OK(acc_optimizer_set_training(opt, 0));  // already in eval mode: nothing moves
    ACC_ASSERT_OK(acc_optimizer_set_training(opt, 1));
    for (const auto& name : kNames) {
      const bool bias = name.find("bias") != std::string::npos;
      const std::vector<double> y = ref.y(name, bias ? c.biases_rule : c.weights_rule);
      const std::vector<float> got = net.parameter(name);
      for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(got[i], y[i], 5e-6) << name << " back in train mode";
    }
    acc_optimizer_free(opt);
  }
}

TEST(Optimizers, ScheduleFreeStartsInEvalModeAndReportsItsProgress) {
  Mlp net;
  acc_optimizer* opt = make_optimizer(net.model, "adamw_schedule_free", {{"lr", 0.01}, {"warmup_steps", 4}});
  net.backward();
  ACC_EXPECT_ERROR(acc_optimizer_step(opt), ACC_ERR_INVALID_ARGUMENT,
                   "the adamw_schedule_free optimizer is in eval mode: switch it to training");
  const Weights untouched = net.weights();
  ACC_ASSERT_OK(acc_optimizer_set_training(opt, 0));  // no state yet: nothing moves
  ACC_ASSERT_OK(acc_optimizer_set_training(opt, 1));
  EXPECT_EQ(net.weights(), untouched);
  for (int step = 1; step <= 2; ++step) {
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
    double value = 0;
    ACC_ASSERT_OK(acc_optimizer_get_hyperparameter(opt, 0, "scheduled_lr", &value));
    EXPECT_DOUBLE_EQ(value, 0.01 * step / 4) << "the warmed-up rate of step " << step;
    ACC_ASSERT_OK(acc_optimizer_get_hyperparameter(opt, 0, "k", &value));
    EXPECT_EQ(value, step);
    ACC_ASSERT_OK(acc_optimizer_get_lr(opt, 0, &value));
    EXPECT_EQ(value, 0.01) << "the base rate stays as set";
  }
  // Other optimizers have no modes: accepted, nothing moves.
  acc_optimizer* sgd = make_optimizer(net.model, "sgd", {{"lr", 0.1}});
  const Weights before = net.weights();
  ACC_ASSERT_OK(acc_optimizer_set_training(sgd, 0));
  ACC_ASSERT_OK(acc_optimizer_set_training(sgd, 1));
  EXPECT_EQ(net.weights(), before);
  acc_optimizer_free(sgd);
  acc_optimizer_free(opt);
}

// A group added after train() (before any step) follows the optimizer's mode: eval() moves it too.
TEST(Optimizers, ScheduleFreeGroupAddedAfterTrainFollowsTheOptimizersMode) {
  Mlp net;
  acc_optimizer* opt = make_optimizer(net.model, "sgd_schedule_free", {{"lr", 0.1}});
  ACC_ASSERT_OK(acc_optimizer_set_training(opt, 1));
  acc_options* g = optimizer_options({{"lr", 0.2}});
  ACC_ASSERT_OK(acc_optimizer_add_param_group(opt, kBiases, 2, g));
  acc_options_free(g);
  for (int s = 0; s < 3; ++s) {
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    net.backward();
    ACC_ASSERT_OK(acc_optimizer_step(opt));
  }
  const Weights y = net.weights();
  ACC_ASSERT_OK(acc_optimizer_set_training(opt, 0));
  const Weights x = net.weights();
  for (const char* name : kBiases) EXPECT_NE(x.at(name), y.at(name)) << name << " stayed at y in eval mode";
  acc_optimizer_free(opt);
}

TEST(Optimizers, AdafactorFollowsThePapersRuleWithGroups) {
  struct Case {
    json options;
    std::optional<json> biases;
    AdafactorRule weights_rule, biases_rule;
  };
  AdafactorRule defaults;  // relative step, parameter scale, no first moment, clipping at 1
  AdafactorRule given;
  given.lr = 0.02;
  given.beta1 = 0.9;
  given.weight_decay = 0.1;
  given.clip = 0.5;
  given.decay_rate = -0.5;
  given.scale_parameter = false;
  given.eps1 = 1e-20;
  AdafactorRule warmup;
  warmup.warmup_init = true;
  warmup.eps2 = 100;  // above the weights' RMS: the scale is eps2 (and the steps big enough to see)
  AdafactorRule biases;
  biases.lr = 0.05;
  const Case cases[] = {
      {json::object(), std::nullopt, defaults, defaults},
      {{{"lr", 0.02},
        {"relative_step", false},
        {"beta1", 0.9},
        {"weight_decay", 0.1},
        {"clip_threshold", 0.5},
        {"decay_rate", -0.5},
        {"scale_parameter", false},
        {"eps1", 1e-20}},
       std::nullopt,
       given,
       given},
      {{{"warmup_init", true}, {"eps2", 100}}, std::nullopt, warmup, warmup},
      {json::object(), json{{"lr", 0.05}, {"relative_step", false}}, defaults, biases},
  };
  for (const auto& c : cases) {
    Mlp net;
    acc_optimizer* opt = make_optimizer(net.model, "adafactor", c.options, c.biases);
    ASSERT_NE(opt, nullptr);
    AdafactorReference ref;
    expect_steps(net, opt, 6, 2e-7, [&](const std::string& name, const auto& x, const auto& g) {
      const bool bias = name.find("bias") != std::string::npos;
      const auto shape = matrix_shape(name);
      return ref.step(name, bias ? c.biases_rule : c.weights_rule, shape.first, shape.second, x, g);
    });
    acc_optimizer_free(opt);
  }
}

TEST(Optimizers, SchedulersSetTheLearningRateTheyUse) {
  // Lion moves every element by exactly lr (no weight decay, gradients not 0): the scheduled one.
  Mlp net;
  acc_optimizer* opt = make_optimizer(net.model, "lion", {{"lr", 1e-3}}, json{{"lr", 4e-3}});
  acc_options* so = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &so), ACC_OK);
  ASSERT_EQ(acc_options_set_int(so, "num_warmup_steps", 4), ACC_OK);
  ASSERT_EQ(acc_options_set_int(so, "num_training_steps", 20), ACC_OK);
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "linear", so, &sched));
  acc_options_free(so);
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(acc_scheduler_step(sched), ACC_OK);
    const double lrs[] = {get_lr(opt, 0), get_lr(opt, 1)};
    EXPECT_DOUBLE_EQ(lrs[0], 1e-3 * (s + 1) / 4);
    EXPECT_DOUBLE_EQ(lrs[1], 4e-3 * (s + 1) / 4);
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    net.backward();
    const Weights before = net.weights();
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
    for (const auto& name : kNames) {
      const double lr = lrs[name.find("bias") != std::string::npos ? 1 : 0];
      const auto after = net.parameter(name);
      for (size_t i = 0; i < after.size(); ++i)
        EXPECT_NEAR(std::abs(after[i] - before.at(name)[i]), lr, 1e-7) << name << " step " << s;
    }
  }
  acc_scheduler_free(sched);
  acc_optimizer_free(opt);

  // RMSprop and Adagrad: torch::optim's groups; Adafactor with a learning rate.
  for (const char* algorithm : {"rmsprop", "adagrad"}) {
    acc_optimizer* o = make_optimizer(net.model, algorithm, json::object(), json{{"lr", 0.5}});
    EXPECT_DOUBLE_EQ(get_lr(o, 0), 0.01) << algorithm;  // PyTorch's default
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &so));
    ACC_ASSERT_OK(acc_options_set_int(so, "step_size", 1));
    ACC_ASSERT_OK(acc_options_set_double(so, "gamma", 0.5));
    ACC_ASSERT_OK(acc_scheduler_create(o, "step", so, &sched));
    acc_options_free(so);
    ACC_ASSERT_OK(acc_scheduler_step(sched));
    ACC_ASSERT_OK(acc_scheduler_step(sched));
    EXPECT_DOUBLE_EQ(get_lr(o, 0), 0.0025) << algorithm;
    EXPECT_DOUBLE_EQ(get_lr(o, 1), 0.125) << algorithm;
    acc_scheduler_free(sched);
    acc_optimizer_free(o);
  }
  acc_optimizer* fixed = make_optimizer(net.model, "adafactor", {{"lr", 0.02}, {"relative_step", false}});
  ACC_ASSERT_OK(acc_optimizer_set_lr(fixed, 0, 0.0));
  const Weights before = net.weights();
  ASSERT_EQ(acc_optimizer_zero_grad(fixed), ACC_OK);
  net.backward();
  ASSERT_EQ(acc_optimizer_step(fixed), ACC_OK);
  EXPECT_EQ(net.weights(), before) << "a step with lr 0 moved the weights";
  ACC_ASSERT_OK(acc_optimizer_set_lr(fixed, 0, 0.02));
  ASSERT_EQ(acc_optimizer_step(fixed), ACC_OK);
  EXPECT_NE(net.weights(), before);
  acc_optimizer_free(fixed);

  // With relative_step, Adafactor computes its own step size: no lr to read, set or schedule.
  acc_optimizer* relative = make_optimizer(net.model, "adafactor", json::object());
  double lr = 0;
  ACC_EXPECT_ERROR(acc_optimizer_get_lr(relative, 0, &lr), ACC_ERR_INVALID_ARGUMENT, "relative_step");
  ACC_EXPECT_ERROR(acc_optimizer_set_lr(relative, 0, 0.1), ACC_ERR_INVALID_ARGUMENT, "relative_step");
  ACC_EXPECT_ERROR(acc_scheduler_create(relative, "constant", nullptr, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "relative_step");
  acc_optimizer_free(relative);
}

TEST(Optimizers, BadOptionsAreRefusedWithTheReason) {
  Mlp net;
  acc_optimizer* opt = nullptr;
  auto refused = [&](const char* algorithm, const json& options, const char* needle) {
    acc_options* o = optimizer_options(options);
    ACC_EXPECT_ERROR(acc_optimizer_create(net.model, algorithm, o, &opt), ACC_ERR_INVALID_ARGUMENT, needle);
    EXPECT_EQ(opt, nullptr);
    acc_options_free(o);
  };
  refused("adafactor", {{"lr", 0.01}}, "lr cannot be combined with relative_step=true");
  refused("adafactor", {{"relative_step", false}}, "relative_step=false needs lr");
  refused("adafactor", {{"lr", 0.01}, {"relative_step", false}, {"warmup_init", true}},
          "warmup_init=true needs relative_step=true");
  refused("adafactor", {{"clip_threshold", 0.0}}, "clip_threshold must be above 0");
  refused("adafactor", {{"beta1", 1.0}}, "beta1 must be below 1");
  refused("adafactor", {{"eps", 1e-3}}, "'eps' does not apply to the adafactor optimizer (it takes");
  refused("adagrad", {{"alpha", 0.9}}, "'alpha' does not apply to the adagrad optimizer");
  refused("lion", {{"eps", 1e-8}}, "'eps' does not apply to the lion optimizer");
  refused("rmsprop", {{"lr_decay", 0.1}}, "'lr_decay' does not apply to the rmsprop optimizer");
  refused("radam", {{"momentum_decay", 0.1}}, "'momentum_decay' does not apply to the radam optimizer");
  refused("nadam", {{"amsgrad", true}}, "'amsgrad' does not apply to the nadam optimizer");
  refused("radam", {{"beta1", 1.0}}, "'beta1' is 1, outside [0, 1)");
  refused("rprop", {{"weight_decay", 0.1}}, "'weight_decay' does not apply to the rprop optimizer");
  refused("rprop", {{"etaplus", 1.0}}, "'etaplus' must be above 1");
  refused("rprop", {{"etaminus", 0.0}}, "'etaminus' must be above 0");
  refused("rprop", {{"step_size_min", 2.0}, {"step_size_max", 1.0}}, "'step_size_min' is above 'step_size_max'");
  refused("adadelta", {{"beta1", 0.9}}, "'beta1' does not apply to the adadelta optimizer");
  refused("adamax", {{"beta2", 1.0}}, "'beta2' is 1, outside [0, 1)");
  refused("asgd", {{"momentum", 0.9}}, "'momentum' does not apply to the asgd optimizer");
  refused("sgd_schedule_free", {{"momentum", 0.0}}, "'momentum' must be in (0, 1), as schedulefree requires");
  refused("adamw_schedule_free", {{"beta1", 0.0}}, "'beta1' must be > 0: eval() divides by it");
  refused("adamw_schedule_free", {{"inner_momentum", 1.0}}, "'inner_momentum' is 1, outside [0, 1)");
  refused("adamw_schedule_free", {{"momentum", 0.9}}, "'momentum' does not apply to the adamw_schedule_free");
  // bitsandbytes' classes' own refusals: SGD8bit's lr is a required argument; its ValueErrors are
  // InvalidArgument, its NotImplementedErrors (and the paged optimizers) Unsupported.
  refused("sgd_8bit", {{"momentum", 0.9}}, "sgd_8bit: lr is needed (SGD8bit has no default)");
  refused("sgd_8bit", {{"lr", 0.1}, {"momentum", 1.0}}, "'momentum' is 1, outside [0, 1)");
  refused("sgd_8bit", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}},
          "'nesterov' does not apply to the sgd_8bit");
  refused("rmsprop_8bit", {{"centered", true}}, "'centered' does not apply to the rmsprop_8bit optimizer");
  refused("adagrad_8bit", {{"lr_decay", 0.1}}, "'lr_decay' does not apply to the adagrad_8bit optimizer");
  refused("ademamix_8bit", {{"beta3", 1.0}}, "'beta3' is 1, outside [0, 1)");
  refused("ademamix_8bit", {{"beta1", 0.0}, {"t_beta3", 10}}, "t_beta3 needs beta1 and beta3 above 0");
  refused("lion_8bit", {{"alpha", 0.5}}, "'alpha' does not apply to the lion_8bit optimizer");
  const std::pair<const char*, const char*> unsupported[] = {
      {"sgd_8bit", "SGD8bit needs a momentum above 0"},
      {"rmsprop_8bit", "RMSprop8bit does not take alpha 0"},
      {"paged_adamw_8bit", "'adamw_8bit' computes the same steps"}};
  for (const auto& [algorithm, needle] : unsupported) {
    acc_options* o = optimizer_options(std::string(algorithm) == "sgd_8bit" ? json{{"lr", 0.1}} : json{{"alpha", 0.0}});
    if (std::string(algorithm) == "paged_adamw_8bit") {
      acc_options_free(o);
      o = nullptr;
    }
    ACC_EXPECT_ERROR(acc_optimizer_create(net.model, algorithm, o, &opt), ACC_ERR_UNSUPPORTED, needle);
    EXPECT_EQ(opt, nullptr);
    acc_options_free(o);
  }
  ACC_EXPECT_ERROR(acc_optimizer_create(net.model, "paged_adamw_32bit", nullptr, &opt), ACC_ERR_UNSUPPORTED,
                   "with a min_8bit_size above every parameter's size they take bitsandbytes' 32-bit rule");
  ACC_EXPECT_ERROR(acc_optimizer_create(net.model, "lamb", nullptr, &opt), ACC_ERR_INVALID_ARGUMENT,
                   "known: sgd, adam, adamw, rmsprop, adagrad, lion, adafactor, radam, nadam, adamax, adadelta, "
                   "rprop, asgd, adamw_schedule_free, sgd_schedule_free");

  // Out-of-range values are refused when set, naming the key.
  acc_options* o = nullptr;
  ASSERT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
  ACC_EXPECT_ERROR(acc_options_set_double(o, "eps", -1e-8), ACC_ERR_INVALID_ARGUMENT, "'eps' must be at least 0");
  ACC_EXPECT_ERROR(acc_options_set_double(o, "eps2", -1), ACC_ERR_INVALID_ARGUMENT, "'eps2' must be at least 0");
  ACC_EXPECT_ERROR(acc_options_set_double(o, "decay_rate", 0.5), ACC_ERR_INVALID_ARGUMENT,
                   "'decay_rate' must be at most 0");
  ACC_EXPECT_ERROR(acc_options_set_double(o, "alpha", -0.5), ACC_ERR_INVALID_ARGUMENT, "'alpha' must be at least 0");
  ACC_EXPECT_ERROR(acc_options_set_double(o, "beta2", 1.5), ACC_ERR_INVALID_ARGUMENT, "'beta2' must be at most 1");
  ACC_EXPECT_ERROR(acc_options_set_double(o, "initial_accumulator_value", -1), ACC_ERR_INVALID_ARGUMENT,
                   "initial_accumulator_value");
  acc_options_free(o);

  // A group whose options conflict is refused and leaves the groups as they were.
  opt = make_optimizer(net.model, "adafactor", json::object());
  acc_options* bad = optimizer_options({{"lr", 0.1}});
  ACC_EXPECT_ERROR(acc_optimizer_add_param_group(opt, kBiases, 2, bad), ACC_ERR_INVALID_ARGUMENT,
                   "lr cannot be combined");
  acc_options_free(bad);
  size_t groups = 0;
  ACC_ASSERT_OK(acc_optimizer_num_param_groups(opt, &groups));
  EXPECT_EQ(groups, 1u);
  ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
  net.backward();
  const Weights before = net.weights();
  ACC_ASSERT_OK(acc_optimizer_step(opt));
  for (const auto& name : kNames) EXPECT_NE(net.parameter(name), before.at(name)) << name << " was left out";
  acc_optimizer_free(opt);
}

namespace {

// A prepared MLP and optimizer (and scheduler) on the fixed batch, with the biases in a second group.
struct Prepared {
  acc_accelerator* acc = nullptr;
  Mlp net;
  acc_optimizer* opt = nullptr;
  acc_scheduler* sched = nullptr;

  Prepared(const char* algorithm, const json& options, const json& biases, bool schedule,
           const char* mixed_precision = "no") {
    acc = acc_test::make_accelerator({{"cpu", "1"}, {"mixed_precision", mixed_precision}});
    opt = make_optimizer(net.model, algorithm, options, std::optional<json>(std::in_place, biases));
    if (schedule) {
      acc_options* so = nullptr;
      EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &so), ACC_OK);
      EXPECT_EQ(acc_options_set_int(so, "num_warmup_steps", 2), ACC_OK);
      EXPECT_EQ(acc_options_set_int(so, "num_training_steps", 12), ACC_OK);
      EXPECT_EQ(acc_scheduler_create(opt, "cosine", so, &sched), ACC_OK) << acc_last_error_message();
      acc_options_free(so);
    }
    EXPECT_EQ(acc_prepare(acc, &net.model, &opt, nullptr, sched ? &sched : nullptr), ACC_OK)
        << acc_last_error_message();
    // As Accelerate's examples do: what schedule-free optimizers need, and nothing to the others.
    EXPECT_EQ(acc_optimizer_set_training(opt, 1), ACC_OK) << acc_last_error_message();
  }
  ~Prepared() {
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
    acc_accelerator_free(acc);
  }
  void train(int steps) {
    for (int s = 0; s < steps; ++s) {
      acc_tensor* out = nullptr;
      acc_tensor* loss = nullptr;
      ASSERT_EQ(acc_model_forward1(net.model, net.x, 0, &out), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_loss_mse(out, net.y, ACC_REDUCTION_MEAN, &loss), ACC_OK);
      ASSERT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
      if (sched) ASSERT_EQ(acc_scheduler_step(sched), ACC_OK);
      ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
      acc_tensor_free(out);
      acc_tensor_free(loss);
    }
  }
};

std::vector<std::string> tensor_names(const std::string& path) {
  acc_tensor_list* list = nullptr;
  EXPECT_EQ(acc_tensor_list_load_safetensors(path.c_str(), &list), ACC_OK) << acc_last_error_message();
  std::vector<std::string> names = acc_test::tensor_names(list);
  acc_tensor_list_free(list);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(Optimizers, SaveStateAndLoadStateResumeBitIdentically) {
  struct Case {
    const char* algorithm;
    json options, biases;
    bool schedule;
    std::vector<std::string> weight_fields, bias_fields;  // of 0.weight and 0.bias in the file
  };
  const Case cases[] = {
      {"rmsprop",
       {{"momentum", 0.9}},
       {{"centered", true}, {"momentum", 0.0}},
       true,
       {"momentum_buffer", "square_avg", "step"},
       {"grad_avg", "square_avg", "step"}},
      {"adagrad",
       {{"lr", 0.1}, {"lr_decay", 0.01}},
       {{"initial_accumulator_value", 0.2}},
       true,
       {"step", "sum"},
       {"step", "sum"}},
      {"lion", {{"lr", 1e-3}, {"weight_decay", 0.1}}, {{"beta1", 0.5}}, true, {"exp_avg"}, {"exp_avg"}},
      {"adafactor",
       json::object(),
       {{"lr", 0.01}, {"relative_step", false}, {"beta1", 0.9}},
       false,
       {"RMS", "exp_avg_sq_col", "exp_avg_sq_row", "step"},
       {"RMS", "exp_avg", "exp_avg_sq", "step"}},
      {"radam",
       {{"lr", 0.01}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}},
       {{"beta2", 0.99}},
       true,
       {"exp_avg", "exp_avg_sq", "step"},
       {"exp_avg", "exp_avg_sq", "step"}},
      {"nadam",
       {{"lr", 0.01}},
       {{"momentum_decay", 0.01}},
       true,
       {"exp_avg", "exp_avg_sq", "mu_product", "step"},
       {"exp_avg", "exp_avg_sq", "mu_product", "step"}},
      {"adamax",
       {{"lr", 0.01}},
       {{"weight_decay", 0.1}},
       true,
       {"exp_avg", "exp_inf", "step"},
       {"exp_avg", "exp_inf", "step"}},
      {"adadelta",
       json::object(),
       {{"rho", 0.8}},
       true,
       {"acc_delta", "square_avg", "step"},
       {"acc_delta", "square_avg", "step"}},
      {"rprop",
       json::object(),
       {{"etaplus", 1.5}},
       false,
       {"prev", "step", "step_size"},
       {"prev", "step", "step_size"}},
      {"asgd",
       {{"lr", 0.05}, {"t0", 2.0}, {"lambd", 0.1}},
       {{"alpha", 0.5}},
       true,
       {"ax", "eta", "mu", "step"},
       {"ax", "eta", "mu", "step"}},
      {"adamw_schedule_free",
       {{"lr", 0.01}, {"warmup_steps", 3}, {"weight_decay", 0.1}},
       {{"inner_momentum", 0.9}},
       true,
       {"exp_avg_sq", "z"},
       {"exp_avg", "exp_avg_sq", "z"}},
      {"sgd_schedule_free", {{"lr", 0.1}, {"warmup_steps", 2}}, {{"momentum", 0.8}, {"r", 1.0}}, false, {"z"}, {"z"}},
      // bitsandbytes' names; the weights' moments in 8 bits, the biases' in 32.
      {"adamw_8bit",
       {{"lr", 0.01}, {"min_8bit_size", 1}},
       {{"min_8bit_size", 4096}},
       true,
       {"absmax1", "absmax2", "qmap1", "qmap2", "state1", "state2", "step"},
       {"state1", "state2", "step"}},
      {"lion_8bit",
       {{"lr", 1e-3}, {"min_8bit_size", 1}},
       {{"min_8bit_size", 4096}},
       true,
       {"absmax1", "qmap1", "state1", "step"},
       {"state1", "step"}},
      {"ademamix_8bit",
       {{"lr", 0.01}, {"min_8bit_size", 1}, {"t_alpha", 5}, {"t_beta3", 6}},
       {{"min_8bit_size", 4096}},
       true,
       {"absmax1", "absmax2", "qmap1", "qmap2", "state1", "state2", "step"},
       {"state1", "state2", "step"}},
      {"sgd_8bit",
       {{"lr", 0.05}, {"momentum", 0.9}, {"min_8bit_size", 1}},
       {{"min_8bit_size", 4096}, {"weight_decay", 0.1}},
       true,
       {"absmax1", "qmap1", "state1", "step"},
       {"state1", "step"}},
      {"rmsprop_8bit",
       {{"min_8bit_size", 1}},
       {{"min_8bit_size", 4096}},
       false,
       {"absmax1", "qmap1", "state1", "step"},
       {"state1", "step"}},
      {"adagrad_8bit",
       {{"min_8bit_size", 1}},
       {{"min_8bit_size", 4096}},
       false,
       {"absmax1", "qmap1", "state1", "step"},
       {"state1", "step"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.algorithm);
    const std::string dir = acc_test::temp_path(std::string("optim_resume_") + c.algorithm);
    fs::remove_all(dir);
    Prepared whole(c.algorithm, c.options, c.biases, c.schedule);
    whole.train(7);
    {
      Prepared head(c.algorithm, c.options, c.biases, c.schedule);
      head.train(4);
      ACC_ASSERT_OK(acc_save_state(head.acc, dir.c_str(), nullptr));
    }
    std::vector<std::string> expected;
    for (const auto& f : c.weight_fields) expected.push_back("state.0.weight." + f);
    for (const auto& f : c.bias_fields) expected.push_back("state.0.bias." + f);
    std::vector<std::string> names;
    for (const auto& n : tensor_names(dir + "/optimizer.safetensors"))
      if (n.rfind("state.0.", 0) == 0) names.push_back(n);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(names, expected);

    Prepared tail(c.algorithm, c.options, c.biases, c.schedule);
    tail.train(1);  // state of its own, which the load must replace
    ACC_ASSERT_OK(acc_load_state(tail.acc, dir.c_str(), nullptr));
    tail.train(3);
    EXPECT_EQ(tail.net.weights(), whole.net.weights()) << "the resumed run ended with other weights";
    if (c.schedule) EXPECT_EQ(get_lr(tail.opt, 1), get_lr(whole.opt, 1));
    fs::remove_all(dir);
  }
}

// bitsandbytes' 8-bit Adam keeps its moments as uint8 codes with float32 block maxima and the codes
// themselves (its state's names and dtypes).
TEST(Optimizers, EightBitAdamKeepsCodesAndMaximaByBitsandbytesNames) {
  Prepared run("adamw_8bit", {{"lr", 0.01}, {"min_8bit_size", 1}}, {{"min_8bit_size", 4096}}, false);
  run.train(2);
  const std::tuple<const char*, const char*, acc_dtype, size_t> fields[] = {
      {"0.weight", "state1", ACC_DTYPE_UINT8, 12},
      {"0.weight", "state2", ACC_DTYPE_UINT8, 12},
      {"0.weight", "absmax1", ACC_DTYPE_FLOAT32, 1},
      {"0.weight", "qmap2", ACC_DTYPE_FLOAT32, 256},
      {"0.bias", "state1", ACC_DTYPE_FLOAT32, 4}};
  for (const auto& [param, field, dtype, numel] : fields) {
    acc_tensor* t = nullptr;
    ASSERT_EQ(acc_optimizer_state(run.opt, param, field, &t), ACC_OK)
        << param << " " << field << ": " << acc_last_error_message();
    acc_dtype got = ACC_DTYPE_UNDEFINED;
    ASSERT_EQ(acc_tensor_dtype(t, &got), ACC_OK);
    EXPECT_EQ(got, dtype) << param << " " << field;
    int64_t count = 0;
    ASSERT_EQ(acc_tensor_numel(t, &count), ACC_OK);
    EXPECT_EQ(static_cast<size_t>(count), numel) << param << " " << field;
    acc_tensor_free(t);
  }
  acc_tensor* absent = nullptr;
  EXPECT_EQ(acc_optimizer_state(run.opt, "0.bias", "absmax1", &absent), ACC_ERR_INVALID_ARGUMENT);
}

// AdEMAMix8bit keeps its two first moments in one state1 of (2, *shape), each half with its own row
// of block maxima, as bitsandbytes' _get_state_double_buffer and absmax1 of (2, blocks).
TEST(Optimizers, EightBitAdemamixKeepsBothFirstMomentsInStateOne) {
  Prepared run("ademamix_8bit", {{"lr", 0.01}, {"min_8bit_size", 1}}, {{"min_8bit_size", 4096}}, false);
  run.train(2);
  const std::tuple<const char*, const char*, acc_dtype, std::vector<int64_t>> fields[] = {
      {"0.weight", "state1", ACC_DTYPE_UINT8, {2, 4, 3}}, {"0.weight", "state2", ACC_DTYPE_UINT8, {4, 3}},
      {"0.weight", "absmax1", ACC_DTYPE_FLOAT32, {2, 1}}, {"0.weight", "absmax2", ACC_DTYPE_FLOAT32, {1}},
      {"0.bias", "state1", ACC_DTYPE_FLOAT32, {2, 4}},    {"0.bias", "state2", ACC_DTYPE_FLOAT32, {4}}};
  for (const auto& [param, field, dtype, shape] : fields) {
    acc_tensor* t = nullptr;
    ASSERT_EQ(acc_optimizer_state(run.opt, param, field, &t), ACC_OK)
        << param << " " << field << ": " << acc_last_error_message();
    acc_dtype got = ACC_DTYPE_UNDEFINED;
    ASSERT_EQ(acc_tensor_dtype(t, &got), ACC_OK);
    EXPECT_EQ(got, dtype) << param << " " << field;
    std::vector<int64_t> sizes(4);
    size_t ndim = 0;
    ASSERT_EQ(acc_tensor_shape(t, sizes.data(), sizes.size(), &ndim), ACC_OK);
    sizes.resize(ndim);
    EXPECT_EQ(sizes, shape) << param << " " << field;
    acc_tensor_free(t);
  }
}

TEST(Optimizers, TrainUnderBf16AutocastWithFloat32Weights) {
  const std::pair<const char*, json> cases[] = {{"rmsprop", json::object()},
                                                {"adagrad", json::object()},
                                                {"lion", json::object()},
                                                {"adafactor", json::object()},
                                                {"radam", json::object()},
                                                {"nadam", json::object()},
                                                {"adamax", json::object()},
                                                {"adadelta", json::object()},
                                                {"rprop", json::object()},
                                                {"asgd", json::object()},
                                                {"adamw_schedule_free", json::object()},
                                                {"sgd_schedule_free", json{{"lr", 0.1}}},
                                                {"adamw_8bit", json{{"min_8bit_size", 1}}}};
  for (const auto& c : cases) {
    const json biases = std::string(c.first) == "rprop" ? json{{"lr", 0.02}} : json{{"weight_decay", 0.0}};
    Prepared run(c.first, c.second, biases, false, "bf16");
    const Weights before = run.net.weights();
    run.train(3);
    for (const auto& name : kNames) {
      acc_tensor* p = nullptr;
      ASSERT_EQ(acc_model_parameter(run.net.model, name.c_str(), &p), ACC_OK);
      acc_dtype dtype = ACC_DTYPE_UNDEFINED;
      ASSERT_EQ(acc_tensor_dtype(p, &dtype), ACC_OK);
      EXPECT_EQ(dtype, ACC_DTYPE_FLOAT32) << c.first << " " << name;
      acc_tensor_free(p);
      const auto after = run.net.parameter(name);
      EXPECT_NE(after, before.at(name)) << c.first << " " << name;
      for (float v : after) EXPECT_TRUE(std::isfinite(v)) << c.first << " " << name;
    }
  }
}
