// The optimizer algorithms seen from C++: which are elementwise (ZeRO sharding relies on it), how
// a saved state is checked before it is applied, state moved between devices, and Adafactor over
// bf16 parameters (updated in float32, as transformers does).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include <torch/types.h>
#include <torch/utils.h>

#include "checkpoint/torch_load.h"
#include "checkpoint/torch_pickle.h"
#include "common/compat.h"
#include "common/error.h"
#include "optim/optimizer.h"
#include "optim/optimizer_python_state.h"
#include "optim/optimizer_state.h"

namespace {

const char* kSpec = R"([{"type":"linear","in_features":3,"out_features":4},{"type":"linear","in_features":4,"out_features":2}])";

acc::Options options(std::initializer_list<std::pair<const char*, const char*>> items) {
  acc::Options o(acc::optimizer_option_schema());
  for (const auto& kv : items) o.set_from_text(kv.first, kv.second);
  return o;
}

void train_step(acc::Model& model, acc::Optimizer& opt) {
  opt.zero_grad();
  const auto out = model.forward({torch::ones({2, 3})});
  out.front().second.pow(2).sum().backward();
  opt.step();
}

std::string restore_error(acc::Optimizer& opt, const acc::OptimizerSnapshot& snapshot) {
  try {
    acc::prepare_optimizer_restore(opt, snapshot, "snap");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

acc::OptimizerSnapshot without(acc::OptimizerSnapshot s, const std::string& name) {
  s.tensors.erase(std::remove_if(s.tensors.begin(), s.tensors.end(), [&](const auto& t) { return t.first == name; }),
                  s.tensors.end());
  return s;
}

}  // namespace

TEST(OptimizerAlgorithms, AllButAdafactorAreElementwise) {
  auto model = acc::model_from_spec(kSpec);
  for (const char* name : {"sgd", "adam", "adamw", "rmsprop", "adagrad", "lion", "adafactor", "radam", "nadam", "adamax",
                           "adadelta", "rprop", "asgd"}) {
    acc::TorchOptimizer opt(model, name, acc::Options(acc::optimizer_option_schema()));
    EXPECT_EQ(opt.elementwise(), std::string(name) != "adafactor") << name;
    EXPECT_EQ(opt.algorithm(), name);
  }
}

TEST(OptimizerAlgorithms, ASavedStateMustHoldExactlyTheFieldsTheAlgorithmKeeps) {
  auto model = acc::model_from_spec(kSpec);
  acc::TorchOptimizer adafactor(model, "adafactor", options({{"beta1", "0.9"}}));
  train_step(*model, adafactor);
  const auto snap = acc::snapshot_optimizer(adafactor);
  EXPECT_EQ(restore_error(adafactor, snap), "");
  EXPECT_NE(restore_error(adafactor, without(snap, "state.0.weight.exp_avg_sq_row")).find("lacks 'exp_avg_sq_row'"),
            std::string::npos);
  auto extra = snap;
  extra.tensors.emplace_back("state.0.bias.exp_avg_sq_row", torch::zeros({}));
  EXPECT_NE(restore_error(adafactor, extra).find("is not part of the state of a adafactor optimizer"),
            std::string::npos);
  auto reshaped = snap;
  for (auto& t : reshaped.tensors)
    if (t.first == "state.0.weight.exp_avg_sq_col") t.second = torch::zeros({4});
  EXPECT_NE(restore_error(adafactor, reshaped).find("has shape [4] but [3] was expected"), std::string::npos)
      << restore_error(adafactor, reshaped);
  auto fractional = snap;
  for (auto& t : fractional.tensors)
    if (t.first == "state.0.weight.step") t.second = torch::full({}, 1.5, torch::kDouble);
  EXPECT_NE(restore_error(adafactor, fractional).find("not a whole number"), std::string::npos);
  auto conflicting = snap;
  auto pos = conflicting.metadata["param_groups"].find("\"lr\":null");
  ASSERT_NE(pos, std::string::npos);
  conflicting.metadata["param_groups"].replace(pos, 9, "\"lr\":0.5");
  EXPECT_NE(restore_error(adafactor, conflicting).find("lr cannot be combined with relative_step=true"),
            std::string::npos);

  // Adagrad keeps an accumulator for every parameter from the start: a state without one is broken.
  acc::TorchOptimizer adagrad(model, "adagrad", options({}));
  const auto fresh = acc::snapshot_optimizer(adagrad);
  EXPECT_EQ(fresh.tensors.size(), 8u);  // sum and step of 4 parameters before any step
  EXPECT_NE(restore_error(adagrad, without(without(fresh, "state.1.bias.sum"), "state.1.bias.step"))
                .find("the state of '1.bias' is missing"),
            std::string::npos);

  // RMSprop with momentum keeps a buffer; Adam with amsgrad its maximum.
  acc::TorchOptimizer rmsprop(model, "rmsprop", options({{"momentum", "0.5"}}));
  train_step(*model, rmsprop);
  EXPECT_NE(restore_error(rmsprop, without(acc::snapshot_optimizer(rmsprop), "state.0.weight.momentum_buffer"))
                .find("lacks 'momentum_buffer'"),
            std::string::npos);
  acc::TorchOptimizer adam(model, "adam", options({{"amsgrad", "true"}}));
  train_step(*model, adam);
  EXPECT_NE(restore_error(adam, without(acc::snapshot_optimizer(adam), "state.0.weight.max_exp_avg_sq"))
                .find("lacks 'max_exp_avg_sq'"),
            std::string::npos);

  // NAdam's running product of momentum coefficients is in (0, 1], and float32 on the CPU as
  // PyTorch keeps it, whatever the parameters' dtype.
  acc::TorchOptimizer nadam(model, "nadam", options({}));
  train_step(*model, nadam);
  auto snap_nadam = acc::snapshot_optimizer(nadam);
  for (const auto& t : snap_nadam.tensors)
    if (t.first == "state.0.weight.mu_product") {
      EXPECT_EQ(t.second.scalar_type(), torch::kFloat);
      EXPECT_TRUE(t.second.is_cpu());
      EXPECT_LT(t.second.item<double>(), 1.0);
    }
  EXPECT_EQ(restore_error(nadam, snap_nadam), "");
  for (double bad : {0.0, 1.5, std::nan("")}) {
    auto broken = snap_nadam;
    for (auto& t : broken.tensors)
      if (t.first == "state.0.weight.mu_product") t.second = torch::full({}, bad, torch::kFloat);
    EXPECT_NE(restore_error(nadam, broken).find("not a product of momentum coefficients"), std::string::npos)
        << bad << ": " << restore_error(nadam, broken);
  }

  // ASGD's step size eta (>= 0, finite) and averaging weight mu (in (0, 1]) are float32 numbers on
  // the CPU, as PyTorch keeps them; Rprop's step sizes are never negative, infinite or NaN.
  acc::TorchOptimizer asgd(model, "asgd", options({}));
  train_step(*model, asgd);
  const auto snap_asgd = acc::snapshot_optimizer(asgd);
  for (const auto& t : snap_asgd.tensors)
    if (t.first == "state.0.weight.eta" || t.first == "state.0.weight.mu") {
      EXPECT_EQ(t.second.scalar_type(), torch::kFloat) << t.first;
      EXPECT_TRUE(t.second.is_cpu()) << t.first;
    }
  EXPECT_EQ(restore_error(asgd, snap_asgd), "");
  const std::tuple<const char*, double, const char*> bad_asgd[] = {{"eta", -0.1, "not a step size"},
                                                                   {"eta", std::numeric_limits<double>::infinity(), "not a step size"},
                                                                   {"mu", 0.0, "not an averaging weight"},
                                                                   {"mu", 2.0, "not an averaging weight"},
                                                                   {"mu", std::nan(""), "not an averaging weight"}};
  for (const auto& [field, value, needle] : bad_asgd) {
    auto broken = snap_asgd;
    for (auto& t : broken.tensors)
      if (t.first == std::string("state.0.weight.") + field) t.second = torch::full({}, value, torch::kFloat);
    EXPECT_NE(restore_error(asgd, broken).find(needle), std::string::npos) << field << " " << value;
  }
  acc::TorchOptimizer rprop(model, "rprop", options({}));
  train_step(*model, rprop);
  for (double bad : {-1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    auto broken = acc::snapshot_optimizer(rprop);
    for (auto& t : broken.tensors)
      if (t.first == "state.0.bias.step_size") t.second = t.second.clone().index_fill_(0, torch::tensor({0}), bad);
    EXPECT_NE(restore_error(rprop, broken).find("negative, infinite or NaN"), std::string::npos) << bad;
  }
}

// ASGD's ax, which training never reads, averages the iterates as PyTorch's does: a step uses the
// weight mu = 1 / max(1, step - t0) of the step before, so with t0 0 after n steps ax is the mean of
// the weights after steps 2..n, and while step <= t0 + 1 it is the latest weights.
TEST(OptimizerAlgorithms, AsgdAveragesTheIteratesFromT0) {
  for (const char* t0 : {"0", "1000"}) {
    auto model = acc::model_from_spec(kSpec);
    acc::TorchOptimizer asgd(model, "asgd", options({{"lr", "0.05"}, {"t0", t0}}));
    at::Tensor sum = torch::zeros({4, 3});
    at::Tensor weight;
    for (int step = 1; step <= 5; ++step) {
      train_step(*model, asgd);
      for (const auto& named : model->named_parameters())
        if (named.first == "0.weight") weight = named.second.detach().clone();
      if (step >= 2) sum += weight;
    }
    at::Tensor ax;
    for (const auto& t : acc::snapshot_optimizer(asgd).tensors)
      if (t.first == "state.0.weight.ax") ax = t.second;
    ASSERT_TRUE(ax.defined());
    const at::Tensor want = std::string(t0) == "0" ? sum / 4 : weight;
    EXPECT_TRUE(torch::allclose(ax, want, 1e-6, 1e-7)) << "t0 " << t0 << ": " << ax << " vs " << want;
  }
}

TEST(OptimizerAlgorithms, MovingStateKeepsEveryField) {
  auto model = acc::model_from_spec(kSpec);
  for (const char* name :
       {"rmsprop", "adagrad", "lion", "adafactor", "radam", "nadam", "adamax", "adadelta", "rprop", "asgd"}) {
    acc::TorchOptimizer opt(model, name, options({}));
    train_step(*model, opt);
    const auto before = acc::snapshot_optimizer(opt);
    acc::move_optimizer_state(opt, torch::kCPU);
    const auto after = acc::snapshot_optimizer(opt);
    ASSERT_EQ(after.tensors.size(), before.tensors.size()) << name;
    for (size_t i = 0; i < after.tensors.size(); ++i) {
      EXPECT_EQ(after.tensors[i].first, before.tensors[i].first) << name;
      EXPECT_TRUE(torch::equal(after.tensors[i].second, before.tensors[i].second)) << name;
    }
  }
}

TEST(OptimizerAlgorithms, AdafactorUpdatesBf16ParametersInFloat32) {
  auto low = acc::model_from_spec(kSpec);
  auto full = acc::model_from_spec(kSpec);
  low->to(c10::nullopt, torch::kBFloat16);
  std::vector<std::pair<std::string, at::Tensor>> weights;
  for (auto& p : low->named_parameters()) weights.emplace_back(p.first, p.second.detach().to(torch::kFloat));
  full->load_state_dict(weights, true);
  acc::TorchOptimizer low_opt(low, "adafactor", options({{"beta1", "0.9"}}));
  acc::TorchOptimizer full_opt(full, "adafactor", options({{"beta1", "0.9"}}));
  for (int step = 0; step < 3; ++step) {
    // The same gradients (the bf16 ones) for both.
    for (auto* m : {low.get(), full.get()}) m->zero_grad();
    torch::manual_seed(step);
    for (auto& p : low->named_parameters()) {
      auto g = torch::randn(p.second.sizes()).to(torch::kBFloat16);
      p.second.mutable_grad() = g;
      full->find_tensor(p.first).mutable_grad() = g.to(torch::kFloat);
    }
    low_opt.step();
    full_opt.step();
    for (auto& p : low->named_parameters()) {
      EXPECT_EQ(p.second.scalar_type(), torch::kBFloat16);
      // transformers' rounding: the float32 result of the bf16 weights, rounded to bf16.
      const auto expected = full->find_tensor(p.first).detach().to(torch::kBFloat16);
      EXPECT_TRUE(torch::equal(p.second.detach(), expected)) << p.first << " step " << step;
      full->find_tensor(p.first).detach().copy_(expected);  // continue from the same bf16 weights
    }
  }
  for (const auto& t : acc::snapshot_optimizer(low_opt).tensors)
    if (t.first.find(".step") == std::string::npos) EXPECT_EQ(t.second.scalar_type(), torch::kFloat) << t.first;
}

// Python's optimizer.bin says how each group computes, as PyTorch's own state dict does: a group
// without `foreach` takes PyTorch's default (None), the one-tensor rule on the CPU, whose rounding
// differs from the foreach rule the run stepped with (found by the side-by-side hunt: NAdam, RAdam
// and ASGD handed over with foreach drifted by an ulp from the first step).
TEST(PythonOptimizerState, GroupsSayHowTheRuleComputes) {
  auto group_of = [](const std::string& algorithm, acc::Options o) {
    acc::TorchOptimizer opt(acc::model_from_spec(kSpec), algorithm, o);
    return acc::python_optimizer_state_dict(opt).toGenericDict().at("param_groups").toList().get(0).toGenericDict();
  };
  const auto unset = group_of("nadam", options({{"lr", "0.01"}}));
  EXPECT_TRUE(unset.at("foreach").isNone());
  EXPECT_FALSE(unset.contains("fused"));  // NAdam has no fused rule
  const auto one_tensor = group_of("adam", options({{"lr", "0.01"}, {"foreach", "false"}}));
  EXPECT_FALSE(one_tensor.at("foreach").toBool());
  EXPECT_TRUE(one_tensor.at("fused").isNone());
#if ACC_TORCH_VERSION >= 200
  EXPECT_TRUE(group_of("radam", options({{"lr", "0.01"}, {"foreach", "true"}})).at("foreach").toBool());
#endif
}

// bitsandbytes' groups as its classes pack them: SGD8bit's betas are (momentum, dampening),
// AdEMAMix's three, the two-moment ones carry alpha, t_alpha and t_beta3 (None where unset); and a
// member the class fixes, found at another value in a Python file, is refused by name.
TEST(PythonOptimizerState, BitsandbytesGroupsPackTheirClassesArguments) {
  auto group_of = [](acc::TorchOptimizer& opt) {
    return acc::python_optimizer_state_dict(opt).toGenericDict().at("param_groups").toList().get(0).toGenericDict();
  };
  auto betas_of = [](const c10::impl::GenericDict& group) {
    std::vector<double> betas;
    for (const auto& beta : group.at("betas").toTupleRef().elements()) betas.push_back(beta.toDouble());
    return betas;
  };
  acc::TorchOptimizer sgd(acc::model_from_spec(kSpec), "sgd_8bit", options({{"lr", "0.1"}, {"momentum", "0.9"}}));
  const auto sgd_group = group_of(sgd);
  EXPECT_EQ(betas_of(sgd_group), (std::vector<double>{0.9, 0.0}));
  EXPECT_EQ(sgd_group.at("eps").toDouble(), 0.0);
  EXPECT_FALSE(sgd_group.contains("alpha"));
  EXPECT_FALSE(sgd_group.contains("min_8bit_size"));

  acc::TorchOptimizer ademamix(acc::model_from_spec(kSpec), "ademamix_8bit",
                               options({{"beta3", "0.999"}, {"t_alpha", "4"}}));
  const auto ademamix_group = group_of(ademamix);
  EXPECT_EQ(betas_of(ademamix_group), (std::vector<double>{0.9, 0.999, 0.999}));
  EXPECT_EQ(ademamix_group.at("alpha").toDouble(), 5.0);
  EXPECT_EQ(ademamix_group.at("t_alpha").toInt(), 4);
  EXPECT_TRUE(ademamix_group.at("t_beta3").isNone());

  acc::TorchOptimizer adamw(acc::model_from_spec(kSpec), "adamw_8bit", options({}));
  const auto adamw_group = group_of(adamw);
  EXPECT_EQ(adamw_group.at("alpha").toDouble(), 0.0);
  EXPECT_TRUE(adamw_group.at("t_alpha").isNone());

  // SGD8bit's dampening at 0.1 in the file: its kernel would ignore it, so the file is refused.
  auto state = acc::python_optimizer_state_dict(sgd).toGenericDict();
  auto group = state.at("param_groups").toList().get(0).toGenericDict();
  group.insert_or_assign("betas", acc::python_tuple({0.9, 0.1}));
  const std::string path = ::testing::TempDir() + "bnb_sgd_dampening.bin";
  acc::save_torch_pickle(path, state);
  try {
    acc::python_optimizer_snapshot(sgd, acc::TorchSavedFile(path));
    ADD_FAILURE() << "a dampening of 0.1 was taken";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("param_groups[0].betas[1]' holds a setting the bitsandbytes optimizer "
                                         "behind sgd_8bit does not take (it leaves it at 0)"),
              std::string::npos)
        << e.what();
  }
  group.insert_or_assign("betas", acc::python_tuple({0.5, 0.0}));
  acc::save_torch_pickle(path, state);
  const auto snapshot = acc::python_optimizer_snapshot(sgd, acc::TorchSavedFile(path));
  const auto groups = nlohmann::json::parse(snapshot.metadata.at("param_groups"));
  EXPECT_EQ(groups[0]["options"]["momentum"], 0.5);

  // Another class's file: Adagrad8bit's betas (0, 0) would give RMSprop8bit an alpha of 0, which it
  // refuses; AdEMAMix's three betas are no pair.
  auto refusal = [&](acc::TorchOptimizer& saved, acc::TorchOptimizer& loading) {
    acc::save_torch_pickle(path, acc::python_optimizer_state_dict(saved));
    try {
      const auto loaded = acc::python_optimizer_snapshot(loading, acc::TorchSavedFile(path));
      acc::prepare_optimizer_restore(loading, loaded, path);
    } catch (const acc::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  acc::TorchOptimizer adagrad(acc::model_from_spec(kSpec), "adagrad_8bit", options({}));
  acc::TorchOptimizer rmsprop(acc::model_from_spec(kSpec), "rmsprop_8bit", options({}));
  EXPECT_NE(refusal(adagrad, rmsprop).find("'alpha' is 0, which RMSprop8bit does not take"), std::string::npos)
      << refusal(adagrad, rmsprop);
  EXPECT_NE(refusal(ademamix, sgd).find("holds 3 betas, where the bitsandbytes optimizer behind sgd_8bit has 2"),
            std::string::npos)
      << refusal(ademamix, sgd);
  std::remove(path.c_str());
}

// bitsandbytes' state as loaded: the code tables must be its dynamic maps (the step quantises back
// to those whatever the file says) and a float32 mean of squares cannot be negative.
TEST(OptimizerAlgorithms, BitsandbytesStateHoldsItsOwnCodesAndNonNegativeSquares) {
  auto model = acc::model_from_spec(kSpec);
  acc::TorchOptimizer adam(model, "adam_8bit", options({{"min_8bit_size", "12"}}));  // 0.weight 8-bit
  train_step(*model, adam);
  const auto snap = acc::snapshot_optimizer(adam);
  EXPECT_EQ(restore_error(adam, snap), "");
  auto changed = [&](const std::string& name, const std::function<void(at::Tensor&)>& change) {
    auto s = snap;
    for (auto& t : s.tensors)
      if (t.first == name) {
        t.second = t.second.clone();
        change(t.second);
      }
    return restore_error(adam, s);
  };
  EXPECT_NE(changed("state.0.weight.qmap1", [](at::Tensor& t) { t.mul_(2); })
                .find("is not bitsandbytes' signed dynamic code"),
            std::string::npos);
  EXPECT_NE(changed("state.0.weight.qmap2", [](at::Tensor& t) { t.copy_(t.flip(0)); })
                .find("is not bitsandbytes' unsigned dynamic code"),
            std::string::npos);
  EXPECT_NE(changed("state.0.bias.state2", [](at::Tensor& t) { t[0] = -1; }).find("holds a negative mean of squares"),
            std::string::npos);
  EXPECT_EQ(changed("state.0.bias.state1", [](at::Tensor& t) { t[0] = -1; }), "");  // a first moment may be
}
