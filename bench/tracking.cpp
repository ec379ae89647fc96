// Cost of experiment tracking: acc_log of 4 scalars to every built-in tracker (TensorBoard, JSONL,
// CSV, MLflow's file store), and to each alone, compared with a small training step; the step time
// with and without logging every step (rounds interleaved, medians); acc_log_images of a batch of 64
// Fashion-MNIST-sized images (a grid, PNG-encoded on the calling thread) and acc_log_histogram of a
// million values against that step. Files go to a temporary project folder.
//
//   bench_tracking [--quick]
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "accelerate.h"
#include "bench_util.h"

namespace {

using Clock = std::chrono::steady_clock;

// CPU time in microseconds of this thread or of the whole process (every thread).
double cpu_micros(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// A 256-256-10 MLP on one fixed batch of 64: forward, loss, backward, AdamW step.
struct Step {
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *y = nullptr;
  acc_accelerator* acc;

  explicit Step(acc_accelerator* a) : acc(a) {
    const std::string spec = mlp_spec({256, 256, 10});
    OK(acc_model_from_spec(spec.c_str(), &model));
    OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
    OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
    std::mt19937 rng(0);
    std::normal_distribution<float> normal;
    std::vector<float> xs(64 * 256);
    for (auto& v : xs) v = normal(rng);
    std::vector<int64_t> ys(64);
    for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<int64_t>(i % 10);
    const int64_t xd[] = {64, 256}, yd[] = {64};
    OK(acc_tensor_from_host(xs.data(), xs.size() * sizeof(float), xd, 2, ACC_DTYPE_FLOAT32, &x));
    OK(acc_tensor_from_host(ys.data(), ys.size() * sizeof(int64_t), yd, 1, ACC_DTYPE_INT64, &y));
  }
  ~Step() {
    acc_tensor_free(x);
    acc_tensor_free(y);
    acc_model_free(model);
    acc_optimizer_free(opt);
  }
  double run() {
    acc_tensor *logits = nullptr, *loss = nullptr;
    double value = 0;
    OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
    OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    OK(acc_backward(acc, loss));
    OK(acc_optimizer_step(opt));
    OK(acc_optimizer_zero_grad(opt));
    OK(acc_tensor_item(loss, &value));
    acc_tensor_free(logits);
    acc_tensor_free(loss);
    return value;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  const int rounds = quick ? 3 : 15, steps = quick ? 20 : 200, calls = quick ? 2000 : 100000;
  const std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/acc_bench_tracking_" +
                          std::to_string(getpid());
  acc_options* o = nullptr;
  OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  OK(acc_options_set(o, "cpu", "true"));
  OK(acc_options_set(o, "log_with", "all"));
  OK(acc_options_set(o, "project_dir", dir.c_str()));
  acc_accelerator* acc = nullptr;
  OK(acc_accelerator_create(o, &acc));
  acc_options_free(o);
  OK(acc_init_trackers(acc, "bench", R"({"lr": 0.001, "batch_size": 64})"));

  const char* names[] = {"train/loss", "train/lr", "train/grad_norm", "train/samples_per_s"};
  double values[] = {0.5, 1e-3, 1.25, 12345.0};

  // 1. acc_log alone: what the training thread pays per call (the files are written elsewhere).
  std::vector<double> per_call;
  const double thread_cpu = cpu_micros(CLOCK_THREAD_CPUTIME_ID), process_cpu = cpu_micros(CLOCK_PROCESS_CPUTIME_ID);
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < calls / rounds; ++i) {
      values[0] = 1.0 / (i + 1);
      OK(acc_log(acc, names, values, 4, -1));
    }
    per_call.push_back(micros_since(start) / (calls / rounds));
  }
  const double caller_cpu = cpu_micros(CLOCK_THREAD_CPUTIME_ID) - thread_cpu;
  const auto drain = Clock::now();
  OK(acc_end_training(acc));
  const double drain_ms = micros_since(drain) / 1000.0;
  const double all_cpu = cpu_micros(CLOCK_PROCESS_CPUTIME_ID) - process_cpu;

  // 2. A training step with and without acc_log of its loss and 3 other values.
  OK(acc_init_trackers(acc, "bench_steps", nullptr));
  Step step(acc);
  for (int i = 0; i < steps; ++i) step.run();  // warm-up
  std::vector<double> plain, logged;
  for (int r = 0; r < rounds; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < steps; ++i) step.run();
    plain.push_back(micros_since(start) / steps);
    start = Clock::now();
    for (int i = 0; i < steps; ++i) {
      values[0] = step.run();
      OK(acc_log(acc, names, values, 4, -1));
    }
    logged.push_back(micros_since(start) / steps);
  }
  // 3. acc_log_images of a batch of 64 gray 28x28 images, interleaved with the plain step.
  std::vector<float> pixels(64 * 28 * 28);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform;
  for (auto& v : pixels) v = uniform(rng);
  const int64_t dims[] = {64, 1, 28, 28};
  acc_tensor* images = nullptr;
  OK(acc_tensor_from_host(pixels.data(), pixels.size() * sizeof(float), dims, 4, ACC_DTYPE_FLOAT32, &images));
  const char* image_name = "samples";
  const int image_calls = quick ? 5 : 50;
  std::vector<double> imaged, stepped;
  for (int r = 0; r < rounds; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < image_calls; ++i) OK(acc_log_images(acc, &image_name, &images, 1, -1, nullptr));
    imaged.push_back(micros_since(start) / image_calls);
    start = Clock::now();
    for (int i = 0; i < image_calls; ++i) step.run();
    stepped.push_back(micros_since(start) / image_calls);
  }
  acc_tensor_free(images);
  // 3b. acc_log_histogram of a million values (the tensorflow bins), interleaved with the plain step.
  std::vector<float> weights(1000000);
  std::normal_distribution<float> spread(0.f, 0.05f);
  for (auto& w : weights) w = spread(rng);
  const int64_t wdims[] = {1000, 1000};
  acc_tensor* weight = nullptr;
  OK(acc_tensor_from_host(weights.data(), weights.size() * sizeof(float), wdims, 2, ACC_DTYPE_FLOAT32, &weight));
  const int histogram_calls = quick ? 3 : 20;
  std::vector<double> histogrammed, stepped_too;
  for (int r = 0; r < rounds; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < histogram_calls; ++i) OK(acc_log_histogram(acc, "weights", weight, -1, nullptr, 0));
    histogrammed.push_back(micros_since(start) / histogram_calls);
    start = Clock::now();
    for (int i = 0; i < histogram_calls; ++i) step.run();
    stepped_too.push_back(micros_since(start) / histogram_calls);
  }
  acc_tensor_free(weight);
  OK(acc_end_training(acc));

  // 4. Each built-in tracker alone, rounds interleaved: the process's CPU per acc_log call of 4
  // scalars, from the call until the tracker has written it out (end_training drains it).
  const std::vector<std::string> kinds = {"tensorboard", "jsonl", "csv",   "mlflow",
                                          "dvclive",     "trackio", "wandb", "clearml"};
  // DVCLive's files go where init_kwargs say (its default is the working folder), trackio's database
  // where TRACKIO_DIR says and ClearML's session where CLEARML_CACHE_DIR says (their defaults are in
  // the home folder), W&B's run into WANDB_DIR (its default is the working folder).
  ::setenv("TRACKIO_DIR", (dir + "/alone/trackio").c_str(), 1);
  ::setenv("WANDB_DIR", (dir + "/alone").c_str(), 1);
  ::setenv("WANDB_MODE", "offline", 1);
  ::setenv("CLEARML_CACHE_DIR", (dir + "/alone/clearml").c_str(), 1);
  ::setenv("CLEARML_OFFLINE_MODE", "1", 1);
  const std::string dvclive_kwargs = "{\"dvclive\": {\"dir\": \"" + dir + "/alone/dvclive\", \"dvcyaml\": \"" + dir +
                                     "/alone/dvc.yaml\", \"save_dvc_exp\": false}}";
  std::vector<std::vector<double>> alone(kinds.size());
  const int alone_calls = calls / rounds;
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < kinds.size(); ++k) {
      acc_options* ko = nullptr;
      OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &ko));
      OK(acc_options_set(ko, "cpu", "true"));
      OK(acc_options_set(ko, "log_with", kinds[k].c_str()));
      OK(acc_options_set(ko, "project_dir", (dir + "/alone").c_str()));
      acc_accelerator* ka = nullptr;
      OK(acc_accelerator_create(ko, &ka));
      acc_options_free(ko);
      OK(acc_init_trackers_ex(ka, "alone", nullptr, kinds[k] == "dvclive" ? dvclive_kwargs.c_str() : nullptr));
      const double before = cpu_micros(CLOCK_PROCESS_CPUTIME_ID);
      for (int i = 0; i < alone_calls; ++i) {
        values[0] = 1.0 / (i + 1);
        OK(acc_log(ka, names, values, 4, -1));
      }
      OK(acc_end_training(ka));
      alone[k].push_back((cpu_micros(CLOCK_PROCESS_CPUTIME_ID) - before) / alone_calls);
      acc_accelerator_free(ka);
    }

  std::printf("acc_log, 4 scalars to tensorboard+jsonl+csv+mlflow: %.2f us per call (median of %d rounds, %d calls)\n",
              median(per_call), rounds, calls);
  std::printf("CPU time per call: %.2f us on the calling thread, %.2f us in all (the writer threads included)\n",
              caller_cpu / calls, all_cpu / calls);
  std::printf("end_training after %d calls (drains the writer threads): %.1f ms\n", calls, drain_ms);
  std::printf(
      "training step (256-256-10 MLP, batch 64, AdamW): %.1f us without logging, %.1f us with acc_log "
      "each step (%+.1f%%)\n",
      median(plain), median(logged), 100.0 * (median(logged) / median(plain) - 1.0));
  std::printf(
      "acc_log_images, 64 gray 28x28 images (one 224x224 grid PNG): %.1f us per call against a %.1f us "
      "training step (%.2fx)\n",
      median(imaged), median(stepped), median(imaged) / median(stepped));
  std::printf(
      "acc_log_histogram, 1,000,000 values (tensorflow bins): %.1f us per call against a %.1f us training step "
      "(%.2fx)\n",
      median(histogrammed), median(stepped_too), median(histogrammed) / median(stepped_too));
  std::printf("each tracker alone, CPU per acc_log call of 4 scalars until written (median of %d rounds of %d):",
              rounds, alone_calls);
  for (size_t k = 0; k < kinds.size(); ++k)
    std::printf(" %s %.2f us (%.2fx jsonl's)%s", kinds[k].c_str(), median(alone[k]),
                median(alone[k]) / median(alone[1]), k + 1 < kinds.size() ? "," : "\n");
  acc_accelerator_free(acc);
  return std::system(("rm -rf '" + dir + "'").c_str()) == 0 ? 0 : 1;
}
