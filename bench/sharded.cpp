// Sharded data parallelism against DDP, in one run (start it with accelerate-launch): for DDP and
// zero_stage 1, 2, 3 (and 3 with offload_params, which on the CPU saves nothing and adds a host copy
// of the gradients' slice: its GPU figures come from tests/gpu; and 3 under FSDP's NO_WRAP, one unit
// for the whole model, as Accelerate's FSDP does without a wrap policy) each process builds the same ~59M-parameter MLP, trains it with AdamW, and
// reports
//   - the memory its parameters, gradients and optimizer state take while it trains: the peak of the
//     bytes held by live CPU tensors over the timed steps (a counting allocator under libtorch's CPU
//     allocator) minus those held before the model was made; batches are tiny so activations are
//     negligible. (Building and preparing are the last figure's.)
//     Also the peak resident memory over the same steps (VmHWM after /proc/self/clear_refs), which
//     adds what the C library's allocator keeps and the collectives' own buffers;
//   - the median step time (forward, backward, step, zero_grad);
//   - the peak of live tensor bytes from building the model through acc_prepare, on the main
//     process and on the others: with FSDP's cpu_ram_efficient_loading only the main process builds
//     the weights, and stage 3 keeps only the shards of what it is given.
// Then the same MLP fine-tuned with LoRA adapters (r 8) on every linear layer, its base frozen: DDP
// against stage 3, which shards the frozen base too (their ratios are against DDP + LoRA).
// Every variant is measured twice, the second pass in reverse order (memory: the smaller peak).
//
//   accelerate-launch --num_processes N bench_sharded [--quick]
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tensor_memory.h"

namespace {

const std::vector<int64_t> kWidths = {1024, 4096, 4096, 4096, 4096, 1024};  // 58.7M parameters
const std::vector<int64_t> kQuickWidths = {64, 256, 64};
constexpr int64_t kRows = 8;

// A /proc/self/status field in MiB.
double status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  return 0;
}

void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
}

struct Run {
  const char* name;
  const char* stage;
  const char* offload;
  const char* wrap_policy = nullptr;  // auto_wrap_policy; none: the spec's layers are the units
  bool main_process_loads = false;   // built under FSDP_CPU_RAM_EFFICIENT_LOADING
  bool lora = false;                 // LoRA adapters on every linear layer, the base frozen
  size_t baseline = 0;               // the run its ratios are against
  double mib = 1e300;      // live tensor bytes, MiB
  double prepare_mib = 1e300;  // live tensor bytes from building the model through prepare, MiB
  double rss_mib = 1e300;  // resident memory, MiB
  std::vector<double> times;  // microseconds per step
  double us = 0;
};

void measure(Run& run, const std::vector<int64_t>& widths, int steps, int64_t rank) {
  const int64_t tensors_before = counting()->live();
  const double before = status_mib("VmRSS:");
  acc_options* o = nullptr;
  OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  OK(acc_options_set(o, "zero_stage", run.stage));
  OK(acc_options_set(o, "offload_params", run.offload));
  if (run.wrap_policy) OK(acc_options_set(o, "auto_wrap_policy", run.wrap_policy));
  OK(acc_options_set(o, "offload_optimizer", run.offload));
  acc_accelerator* acc = nullptr;
  OK(acc_accelerator_create(o, &acc));
  acc_options_free(o);
  OK(acc_set_seed(1));
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  counting()->reset_peak();
  if (run.main_process_loads) {
    setenv("ACCELERATE_USE_FSDP", "true", 1);
    setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "true", 1);
  }
  OK(acc_model_from_spec(mlp_spec(widths).c_str(), &model));
  unsetenv("ACCELERATE_USE_FSDP");
  unsetenv("FSDP_CPU_RAM_EFFICIENT_LOADING");
  if (run.lora) {
    std::string targets;
    for (size_t i = 0; i + 1 < widths.size(); ++i) targets += (i ? "," : "") + std::to_string(2 * i);
    acc_options* lora = nullptr;
    OK(acc_options_create(ACC_OPTIONS_LORA, &lora));
    OK(acc_options_set_int(lora, "r", 8));
    OK(acc_model_add_lora(model, targets.c_str(), lora, nullptr));
    acc_options_free(lora);
  }
  OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
  OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  run.prepare_mib = std::min(run.prepare_mib, static_cast<double>(counting()->peak() - tensors_before) / (1 << 20));
  std::vector<float> xs(static_cast<size_t>(kRows * widths.front()), 0.5f);
  std::vector<int64_t> ys(kRows, rank % widths.back());
  const int64_t xdims[] = {kRows, widths.front()}, ydims[] = {kRows};
  acc_tensor *x = nullptr, *y = nullptr;
  OK(acc_tensor_from_host(xs.data(), xs.size() * sizeof(float), xdims, 2, ACC_DTYPE_FLOAT32, &x));
  OK(acc_tensor_from_host(ys.data(), ys.size() * sizeof(int64_t), ydims, 1, ACC_DTYPE_INT64, &y));
  struct Loop {
    acc_accelerator* acc;
    acc_model* model;
    acc_optimizer* opt;
    acc_tensor *x, *y;
    void step() {
      acc_tensor *logits = nullptr, *loss = nullptr;
      OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
      OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
      OK(acc_backward(acc, loss));
      OK(acc_optimizer_step(opt));
      OK(acc_optimizer_zero_grad(opt));
      acc_tensor_free(logits);
      acc_tensor_free(loss);
    }
  } loop{acc, model, opt, x, y};
  loop.step();  // Adam's state is made on the first step
  reset_peak();
  counting()->reset_peak();
  for (int i = 0; i < steps; ++i) run.times.push_back(time_steps(loop, 1));
  run.rss_mib = std::min(run.rss_mib, status_mib("VmHWM:") - before);
  run.mib = std::min(run.mib, static_cast<double>(counting()->peak() - tensors_before) / (1 << 20));
  acc_tensor_free(x);
  acc_tensor_free(y);
  acc_optimizer_free(opt);
  acc_model_free(model);
  OK(acc_wait_for_everyone(acc));
  acc_accelerator_free(acc);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  counting();  // before any tensor exists
  acc_accelerator* job = nullptr;
  OK(acc_accelerator_create(nullptr, &job));  // joins the process group once, for the whole run
  int64_t rank = 0, world = 1;
  OK(acc_accelerator_process_index(job, &rank));
  OK(acc_accelerator_num_processes(job, &world));
  const auto& widths = quick ? kQuickWidths : kWidths;
  std::vector<Run> runs = {{"DDP", "0", "false"},
                           {"ZeRO-1", "1", "false"},
                           {"ZeRO-2", "2", "false"},
                           {"ZeRO-3", "3", "false"},
                           {"ZeRO-3 + offload", "3", "true"},
                           {"ZeRO-3 NO_WRAP", "3", "false", "NO_WRAP"},
                           {"ZeRO-3, main loads", "3", "false", nullptr, true},
                           {"DDP + LoRA", "0", "false", nullptr, false, true, 7},
                           {"ZeRO-3 + LoRA", "3", "false", nullptr, false, true, 7}};
  // Two passes, the second in reverse order, so that a machine that gets busier or quieter during
  // the run does not favour the variants measured first.
  for (auto& run : runs) measure(run, widths, quick ? 2 : 5, rank);
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) measure(*it, widths, quick ? 2 : 5, rank);
  for (auto& run : runs) run.us = median(run.times);
  // Each process's figures; the table shows the largest over processes (preparing: the main
  // process's, and the largest of the others').
  constexpr int kFigures = 4;
  std::vector<double> prepare_main(runs.size()), prepare_others(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    Run& run = runs[i];
    float values[kFigures] = {static_cast<float>(run.mib), static_cast<float>(run.rss_mib), static_cast<float>(run.us),
                              static_cast<float>(run.prepare_mib)};
    const int64_t dims[] = {kFigures};
    acc_tensor *t = nullptr, *all = nullptr;
    OK(acc_tensor_from_host(values, sizeof values, dims, 1, ACC_DTYPE_FLOAT32, &t));
    OK(acc_gather(job, t, "figures", &all));
    std::vector<float> got(static_cast<size_t>(kFigures * world));
    OK(acc_tensor_to_host(all, got.data(), got.size() * sizeof(float)));
    run.mib = run.rss_mib = run.us = 0;
    for (int64_t r = 0; r < world; ++r) {
      const float* mine = &got[static_cast<size_t>(kFigures * r)];
      run.mib = std::max(run.mib, static_cast<double>(mine[0]));
      run.rss_mib = std::max(run.rss_mib, static_cast<double>(mine[1]));
      run.us = std::max(run.us, static_cast<double>(mine[2]));
      if (r == 0) prepare_main[i] = mine[3];
      else prepare_others[i] = std::max(prepare_others[i], static_cast<double>(mine[3]));
    }
    acc_tensor_free(t);
    acc_tensor_free(all);
  }
  if (rank == 0) {
    int64_t params = 0;
    for (size_t i = 0; i + 1 < widths.size(); ++i) params += widths[i] * widths[i + 1] + widths[i + 1];
    std::printf("sharded data parallelism on %lld processes, MLP of %.1fM parameters, AdamW, %lld rows per process\n",
                static_cast<long long>(world), params / 1e6, static_cast<long long>(kRows));
    std::printf("%-18s %12s %8s %10s %8s %10s %8s\n", "", "tensors MiB", "vs DDP", "RSS MiB", "vs DDP", "step ms",
                "vs DDP");
    for (const auto& run : runs) {
      const Run& base = runs[run.baseline];
      if (&run == &base && run.baseline) std::printf("\nLoRA (r 8) on every linear layer, the base frozen\n");
      std::printf("%-18s %12.0f %8.3f %10.0f %8.3f %10.1f %8.3f\n", run.name, run.mib, run.mib / base.mib,
                  run.rss_mib, run.rss_mib / base.rss_mib, run.us / 1000, run.us / base.us);
    }
    std::printf("\nbuilding the model and preparing it: peak live tensor MiB (vs DDP's main process)\n");
    std::printf("%-18s %14s %8s %16s %8s\n", "", "main process", "vs DDP", "others (largest)", "vs DDP");
    for (size_t i = 0; i < runs.size(); ++i) {
      const size_t base = runs[i].baseline;
      std::printf("%-18s %14.0f %8.3f %16.0f %8.3f\n", runs[i].name, prepare_main[i],
                  prepare_main[i] / prepare_main[base], prepare_others[i], prepare_others[i] / prepare_main[base]);
    }
  }
  acc_accelerator_free(job);
  return 0;
}
