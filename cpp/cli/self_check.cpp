#include "cli/self_check.h"

#include <torch/types.h>
#include <torch/utils.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "accelerator/accelerator.h"
#include "state/process_env.h"
#include "common/error.h"
#include "model/model.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"

namespace acc {
namespace {

using Check = std::function<std::string()>;  // "" when it passed, else what went wrong

std::string differs(const std::string& what, const at::Tensor& got, const at::Tensor& want, double tolerance = 1e-5) {
  if (got.sizes() == want.sizes() &&
      at::allclose(got.to(at::kDouble).cpu(), want.to(at::kDouble).cpu(), tolerance, tolerance / 10))
    return "";
  std::ostringstream out;
  out << what << ": got " << got.flatten().cpu() << " expected " << want.flatten().cpu();
  std::string text = out.str();
  for (auto& c : text)
    if (c == '\n') c = ' ';
  return text;
}

const char* kSpec = R"([{"type":"linear","in_features":4,"out_features":8},{"type":"tanh"},
                        {"type":"linear","in_features":8,"out_features":2}])";

// Rows [first, first + rows) of a batch every process can compute alike.
std::pair<at::Tensor, at::Tensor> rows_of_batch(int step, int64_t first, int64_t rows, const c10::Device& device) {
  auto i = torch::arange(first, first + rows, torch::kFloat).unsqueeze(1);
  auto x = torch::sin(0.37 * (i + torch::arange(4, torch::kFloat) + step));
  auto y = torch::cos(0.21 * (i + torch::arange(2, torch::kFloat) * step));
  return {x.to(device), y.to(device)};
}

std::string ddp_steps(Accelerator& acc) {
  const int64_t world = acc.num_processes(), rank = acc.process_index(), rows = 4, steps = 3;
  Options sgd(optimizer_option_schema());
  sgd.set("lr", 0.1);
  torch::manual_seed(1234);
  auto model = model_from_spec(kSpec);
  torch::manual_seed(1234);
  auto reference = model_from_spec(kSpec);  // the same weights, trained on the whole batch alone
  reference->to(acc.device(), c10::nullopt);
  auto ref_opt = std::make_shared<TorchOptimizer>(reference, "sgd", sgd);
  auto prepared = acc.prepare_model(model, std::nullopt);
  auto opt = acc.prepare_optimizer(std::make_shared<TorchOptimizer>(model, "sgd", sgd), std::nullopt);
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = rows_of_batch(step, rank * rows, rows, acc.device());
    auto out = prepared->forward({x}).at(0).second;
    acc.backward(torch::mse_loss(out.to(torch::kFloat), y));
    opt->step();
    opt->zero_grad();
    auto [all_x, all_y] = rows_of_batch(step, 0, rows * world, acc.device());
    torch::mse_loss(reference->forward({all_x}).at(0).second, all_y).backward();
    // DeepSpeed's gradient_clipping clips every prepared optimizer's step: the reference's too.
    if (const double max_norm = acc.config().gradient_clipping; max_norm > 0)
      clip_grad_norm(reference->gradients(), max_norm, 2.0);
    ref_opt->step();
    ref_opt->zero_grad();
  }
  // The full weights (gathered where they are sharded: under stage 3 a process holds only its part).
  for (const auto& [name, value] : acc.get_state_dict(prepared, /*unwrap=*/true)) {
    // The same on every process, and the same as one process training on the whole batch.
    if (auto e = differs(name + " vs rank 0", value, acc.collectives().broadcast(value, 0, "ddp_check")); !e.empty())
      return e;
    // Mixed precision computes the forward in 16 bits; the reference does not.
    const double tolerance = acc.mixed_precision() == "no" ? 1e-5 : 5e-2;
    if (auto e = differs(name + " vs one process", value, reference->find_tensor(name), tolerance); !e.empty())
      return e;
  }
  return "";
}

// The prepared model's full weights, gathered where they are sharded (a copy, on the CPU).
NamedTensors parameters_copy(Accelerator& acc, const std::shared_ptr<Model>& prepared) {
  NamedTensors out = acc.get_state_dict(prepared, /*unwrap=*/true);  // (unsharded, the parameters themselves)
  for (auto& entry : out) entry.second = entry.second.clone();
  return out;
}

std::string same_parameters(const std::string& what, const NamedTensors& got, const NamedTensors& want,
                            double tolerance = 0.0) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (auto e = differs(what + " " + got[i].first, got[i].second, want[i].second, tolerance); !e.empty())
      return e;
  return got.size() == want.size() ? "" : what + ": the number of parameters changed";
}

// save_state, more steps, load_state: the weights are back, and the next step (Adam's moments
// restored) repeats the one taken after saving.
std::string checkpoint_round_trip(Accelerator& acc) {
  const int64_t rows = 4, rank = acc.process_index();
  // One folder for the job, named by the main process.
  // In the temporary folder (TMPDIR, as Accelerate's tempfile gives it).
  const std::string mine = (std::filesystem::temp_directory_path() / "accelerate_test_").string() +
                           std::to_string(getpid()) + "_" +
                           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::string dir = acc.collectives().gather_object(mine, "checkpoint_dir").at(0);
  Options adam(optimizer_option_schema());
  adam.set("lr", 0.01);
  torch::manual_seed(99);
  auto model = acc.prepare_model(model_from_spec(kSpec), std::nullopt);
  auto opt = acc.prepare_optimizer(std::make_shared<TorchOptimizer>(acc.unwrap_model(model), "adam", adam), std::nullopt);
  auto step = [&](int k) {
    auto [x, y] = rows_of_batch(k, rank * rows, rows, acc.device());
    acc.backward(torch::mse_loss(model->forward({x}).at(0).second.to(torch::kFloat), y));
    opt->step();
    opt->zero_grad();
  };
  step(0);
  acc.save_state(dir);
  const auto saved = parameters_copy(acc, model);
  step(1);
  const auto after_one = parameters_copy(acc, model);
  step(2);
  acc.load_state(dir);
  std::string error = same_parameters("weights after load_state:", parameters_copy(acc, model), saved);
  if (error.empty()) {
    step(1);
    error = same_parameters("the step after load_state:", parameters_copy(acc, model), after_one, 1e-6);
  }
  acc.wait_for_everyone();
  if (acc.is_local_main_process()) std::filesystem::remove_all(dir);
  return error;
}

}  // namespace

int run_self_check() {
  Options options(accelerator_option_table());
  options.set("timeout_seconds", int64_t{60});
  options.set("gradient_accumulation_steps", int64_t{1});  // the DDP check compares every step
  // Over several machines, each writes its own copy of the checkpoint (no shared file system needed).
  const ProcessEnv env = detect_process_env();
  options.set("save_on_each_node", env.local_world_size != env.world_size);
  Accelerator acc(options);
  auto& c = acc.collectives();
  const int64_t rank = acc.process_index(), world = acc.num_processes();
  const auto device = acc.device();
  auto values = [&](std::vector<float> v) { return torch::tensor(v).to(device); };

  std::vector<std::pair<std::string, Check>> checks = {
      {"process group: rank " + std::to_string(rank) + " of " + std::to_string(world) + " on " + device.str(),
       []() { return std::string(); }},  // joining the group is the check: the accelerator exists
      {"wait_for_everyone (barrier)", [&]() { acc.wait_for_everyone(); return std::string(); }},
      {"gather", [&]() {
         auto got = c.gather(values({float(rank), float(rank) + 0.5f}), "selfcheck_gather");
         std::vector<float> want;
         for (int64_t r = 0; r < world; ++r) want.insert(want.end(), {float(r), float(r) + 0.5f});
         return differs("gather", got, values(want));
       }},
      {"gather_object", [&]() -> std::string {
         auto got = c.gather_object("rank " + std::to_string(rank), "selfcheck_gather_object");
         for (int64_t r = 0; r < world; ++r)
           if (got.size() != size_t(world) || got[r] != "rank " + std::to_string(r))
             return "gather_object: item " + std::to_string(r) + " is wrong";
         return "";
       }},
      {"reduce (sum)", [&]() {
         return differs("reduce sum", c.reduce(values({float(rank + 1)}), Reduction::Sum, "selfcheck_sum"),
                        values({float(world * (world + 1) / 2)}));
       }},
      {"reduce (mean)", [&]() {
         return differs("reduce mean", c.reduce(values({float(rank + 1)}), Reduction::Mean, "selfcheck_mean"),
                        values({float(world + 1) / 2}));
       }},
      {"broadcast", [&]() {
         return differs("broadcast from the last process",
                        c.broadcast(values({float(rank) * 10}), world - 1, "selfcheck_broadcast"),
                        values({float(world - 1) * 10}));
       }},
      {"pad_across_processes", [&]() {
         // Process r has r + 1 ones; every process ends with `world` values, zeros at the end.
         auto got = c.pad_across_processes(torch::ones({rank + 1}).to(device), 0, 0.0, false, "selfcheck_pad");
         auto want = torch::cat({torch::ones({rank + 1}), torch::zeros({world - rank - 1})});
         return differs("pad_across_processes", got, want.to(device));
       }},
      {"split_between_processes", [&]() -> std::string {
         const int64_t n = 2 * world + 1;
         auto mine = c.split_between_processes(n, false);
         auto covered = c.gather(torch::tensor({mine.start, mine.end}).to(device), "selfcheck_split");
         auto v = covered.cpu();
         int64_t expected_start = 0;
         for (int64_t r = 0; r < world; ++r) {
           if (v[2 * r].item<int64_t>() != expected_start) return "split_between_processes: ranges are not contiguous";
           expected_start = v[2 * r + 1].item<int64_t>();
         }
         return expected_start == n ? "" : "split_between_processes: ranges do not cover every item";
       }},
      {"check_trigger", [&]() -> std::string {
         if (rank == world - 1) c.set_trigger();
         return c.check_trigger("selfcheck_trigger") ? "" : "a trigger set by the last process was not seen";
       }},
      {"DDP: 3 steps match one process on the whole batch", [&]() { return ddp_steps(acc); }},
      {"checkpoint: save_state, two more steps, load_state restores weights and Adam", [&]() {
         return checkpoint_round_trip(acc);
       }},
  };

  int failed = 0;
  for (const auto& [name, check] : checks) {
    std::string error;
    try {
      error = check();
    } catch (const std::exception& e) {
      error = e.what();
      auto nl = error.find('\n');
      if (nl != std::string::npos) error.resize(nl);
    }
    if (!error.empty()) ++failed;
    if (!error.empty()) std::printf("FAIL  %s: %s\n", name.c_str(), error.c_str());
    else if (acc.is_main_process()) std::printf("ok    %s\n", name.c_str());
    std::fflush(stdout);
  }
  // Every process's count, so that the main process can say whether all of them passed.
  int64_t total_failed = failed;
  try {
    total_failed = c.reduce(torch::tensor({double(failed)}).to(device), Reduction::Sum, "selfcheck_summary").item<double>();
  } catch (const std::exception& e) {
    std::printf("FAIL  summary: %s\n", e.what());
    return 1;
  }
  if (acc.is_main_process()) {
    if (total_failed == 0)
      std::printf("accelerate test: all %zu checks passed on %lld process(es)\n", checks.size(), (long long)world);
    else
      std::printf("accelerate test: %lld check(s) failed (over %lld process(es))\n", (long long)total_failed,
                  (long long)world);
  }
  return total_failed == 0 ? 0 : 1;
}

}  // namespace acc
