// Overhead of the C API: the same training loop (a) in plain libtorch C++ and (b) through
// accelerate.h with a prepared model, optimizer and data loader, interleaved in one process.
// Also the cost of torch's profiler recording the C API loop, and the data loader's throughput over
// an in-memory and a memory-mapped dataset, and the cost of the SIGBUS guard under a memory-mapped
// batch's copy against index_select's unguarded copy of the same rows.
//
//   bench_overhead [--quick]
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "accelerate.h"
#include "bench_util.h"
#include "mlp.h"
#include "tensor/mmap.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  std::vector<int64_t> widths;  // in, hidden..., out
  int64_t batch;
};

// (a) plain libtorch: an nn::Sequential, AdamW, batches by index_select in a shuffled order.
struct PlainLoop {
  torch::nn::Sequential net;
  std::unique_ptr<torch::optim::AdamW> opt;
  at::Tensor x, y, order;
  int64_t batch, cursor = 0;

  PlainLoop(const Shape& s, const at::Tensor& xs, const at::Tensor& ys)
      : net(mlp_module(s.widths)), x(xs), y(ys), batch(s.batch) {
    opt = std::make_unique<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(1e-3));
    order = torch::randperm(x.size(0));
  }
  void step() {
    if (cursor + batch > x.size(0)) cursor = 0, order = torch::randperm(x.size(0));
    auto idx = order.slice(0, cursor, cursor + batch);
    cursor += batch;
    auto xb = x.index_select(0, idx), yb = y.index_select(0, idx);
    auto loss = torch::nn::functional::cross_entropy(net->forward(xb), yb);
    loss.backward();
    opt->step();
    // Gradients to none, as PyTorch 2's zero_grad() and Accelerate do (libtorch 1.13's
    // zero_grad() fills zeros instead), so both sides run the same loop.
    for (auto& p : net->parameters()) p.mutable_grad().reset();
  }
};

// (b) the C API: acc_prepare'd model, optimizer and loader; a fresh epoch when the loader ends.
struct CapiLoop {
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_dataloader* loader = nullptr;
  acc_dataset* ds = nullptr;

  // workers: the loader's background threads (1 is the default; 0 loads on the calling thread).
  CapiLoop(const Shape& s, const at::Tensor& xs, const at::Tensor& ys, int workers) {
    OK(acc_accelerator_create(nullptr, &acc));
    acc_tensor *x = nullptr, *y = nullptr;
    OK(acc_tensor_from_host(xs.data_ptr(), xs.nbytes(), xs.sizes().data(), 2, ACC_DTYPE_FLOAT32, &x));
    OK(acc_tensor_from_host(ys.data_ptr(), ys.nbytes(), ys.sizes().data(), 1, ACC_DTYPE_INT64, &y));
    const acc_tensor* fields[] = {x, y};
    OK(acc_dataset_from_tensors(fields, 2, &ds));
    acc_tensor_free(x);
    acc_tensor_free(y);
    acc_options* lo = nullptr;
    OK(acc_options_create(ACC_OPTIONS_DATALOADER, &lo));
    OK(acc_options_set_int(lo, "batch_size", s.batch));
    OK(acc_options_set_bool(lo, "shuffle", 1));
    OK(acc_options_set_bool(lo, "drop_last", 1));
    OK(acc_options_set_int(lo, "num_workers", workers));
    OK(acc_dataloader_create(ds, lo, &loader));
    acc_options_free(lo);
    OK(acc_model_from_spec(mlp_spec(s.widths).c_str(), &model));
    OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
    OK(acc_prepare(acc, &model, &opt, &loader, nullptr));
  }
  ~CapiLoop() {
    acc_model_free(model);
    acc_optimizer_free(opt);
    acc_dataloader_free(loader);
    acc_dataset_free(ds);
    acc_accelerator_free(acc);
  }
  void step() {
    acc_tensor_list* batch = nullptr;
    OK(acc_dataloader_next(loader, &batch));
    if (!batch) OK(acc_dataloader_next(loader, &batch));
    acc_tensor *x = nullptr, *y = nullptr, *logits = nullptr, *loss = nullptr;
    OK(acc_tensor_list_get(batch, 0, &x));
    OK(acc_tensor_list_get(batch, 1, &y));
    OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
    OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    OK(acc_backward(acc, loss));
    OK(acc_optimizer_step(opt));
    OK(acc_optimizer_zero_grad(opt));
    acc_tensor_free(x);
    acc_tensor_free(y);
    acc_tensor_free(logits);
    acc_tensor_free(loss);
    acc_tensor_list_free(batch);
  }
};

void overhead(const Shape& s, int rounds, int steps) {
  const int64_t n = 4096;
  torch::manual_seed(0);
  at::Tensor xs = torch::randn({n, s.widths.front()}), ys = torch::randint(0, s.widths.back(), {n});
  PlainLoop plain(s, xs, ys);
  CapiLoop capi(s, xs, ys, 1), inline_capi(s, xs, ys, 0);
  time_steps(plain, steps);  // warm up all
  time_steps(capi, steps);
  time_steps(inline_capi, steps);
  std::vector<double> a, b, c;
  for (int r = 0; r < rounds; ++r) {  // interleaved rounds, so drift hits every side alike
    a.push_back(time_steps(plain, steps));
    b.push_back(time_steps(capi, steps));
    c.push_back(time_steps(inline_capi, steps));
  }
  std::printf("%-28s batch %3lld   (a) libtorch %9.1f us/step   (b) C API %9.1f us/step   (b)/(a) %.3f   "
              "(c) C API, loader without a worker thread %9.1f us/step   (c)/(a) %.3f\n",
              s.name, static_cast<long long>(s.batch), median(a), median(b), median(b) / median(a), median(c),
              median(c) / median(a));
}

// The same C API loop with torch's profiler recording it (acc_profile_begin, default settings: CPU
// operators, no shapes): each profiled round is its own profile, ended outside the timing.
void profiled(const Shape& s, int rounds, int steps) {
  const int64_t n = 4096;
  torch::manual_seed(0);
  at::Tensor xs = torch::randn({n, s.widths.front()}), ys = torch::randint(0, s.widths.back(), {n});
  CapiLoop loop(s, xs, ys, 1);
  time_steps(loop, steps);
  std::vector<double> plain, recorded;
  for (int r = 0; r < rounds; ++r) {
    plain.push_back(time_steps(loop, steps));
    OK(acc_profile_begin(loop.acc, nullptr));
    recorded.push_back(time_steps(loop, steps));
    OK(acc_profile_end(loop.acc));
  }
  std::printf("%-28s batch %3lld   (b) C API %9.1f us/step   (e) profiled %9.1f us/step   (e)/(b) %.3f\n", s.name,
              static_cast<long long>(s.batch), median(plain), median(recorded), median(recorded) / median(plain));
}

double loader_throughput(acc_dataset* ds, int batches, int workers) {
  acc_options* lo = nullptr;
  OK(acc_options_create(ACC_OPTIONS_DATALOADER, &lo));
  OK(acc_options_set_int(lo, "batch_size", 64));
  OK(acc_options_set_bool(lo, "shuffle", 1));
  OK(acc_options_set_int(lo, "num_workers", workers));
  acc_dataloader* dl = nullptr;
  OK(acc_dataloader_create(ds, lo, &dl));
  acc_options_free(lo);
  int64_t samples = 0;
  const auto start = Clock::now();
  for (int i = 0; i < batches; ++i) {
    acc_tensor_list* batch = nullptr;
    OK(acc_dataloader_next(dl, &batch));
    if (!batch) OK(acc_dataloader_next(dl, &batch));
    acc_tensor* x = nullptr;
    OK(acc_tensor_list_get(batch, 0, &x));
    int64_t numel = 0;
    OK(acc_tensor_numel(x, &numel));
    samples += numel / 784;
    acc_tensor_free(x);
    acc_tensor_list_free(batch);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  acc_dataloader_free(dl);
  return static_cast<double>(samples) / seconds;
}

// A memory-mapped batch as the loader copies it (select_mapped_rows: a file-size check and the copy
// under the SIGBUS guard) against index_select's plain copy of the same rows, rounds interleaved.
void guarded_batches(const std::string& path, int batches) {
  const at::Tensor mapped = acc::mmap_tensor(path, 0, at::kFloat, {-1, 784});
  mapped.sum();  // every page mapped in before either copy is timed
  batches = static_cast<int>(std::min<int64_t>(batches, mapped.size(0) / 64));  // one permutation's worth
  std::vector<double> plain, guarded;
  for (int round = 0; round < 7; ++round) {
    const at::Tensor order = torch::randperm(mapped.size(0)).slice(0, 0, int64_t{batches} * 64);
    const std::vector<int64_t> indices(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    auto start = Clock::now();
    for (int b = 0; b < batches; ++b) at::index_select(mapped, 0, order.slice(0, b * 64, (b + 1) * 64));
    plain.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / batches);
    start = Clock::now();
    for (int b = 0; b < batches; ++b)
      acc::select_mapped_rows(mapped, {indices.begin() + b * 64, indices.begin() + (b + 1) * 64});
    guarded.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / batches);
  }
  std::printf("  memory-mapped batch of 64: index_select %.1f us, guarded copy %.1f us (%.3fx)\n", median(plain),
              median(guarded), median(guarded) / median(plain));
}

void loaders(int batches) {
  const int64_t n = 60000, d = 784;
  torch::manual_seed(0);
  at::Tensor xs = torch::rand({n, d}), ys = torch::randint(0, 10, {n});
  const std::string path = "/tmp/acc_bench_features.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(xs.data_ptr()), static_cast<std::streamsize>(xs.nbytes()));
  }
  acc_tensor *x = nullptr, *y = nullptr, *mapped = nullptr;
  OK(acc_tensor_from_host(xs.data_ptr(), xs.nbytes(), xs.sizes().data(), 2, ACC_DTYPE_FLOAT32, &x));
  OK(acc_tensor_from_host(ys.data_ptr(), ys.nbytes(), ys.sizes().data(), 1, ACC_DTYPE_INT64, &y));
  const int64_t dims[] = {-1, d};
  OK(acc_tensor_from_file_mmap(path.c_str(), 0, ACC_DTYPE_FLOAT32, dims, 2, &mapped));
  const acc_tensor* memory_fields[] = {x, y};
  const acc_tensor* mapped_fields[] = {mapped, y};
  acc_dataset *memory = nullptr, *file = nullptr, *callback = nullptr;
  OK(acc_dataset_from_tensors(memory_fields, 2, &memory));
  OK(acc_dataset_from_tensors(mapped_fields, 2, &file));
  // A host-program dataset: each sample copied out of the host's arrays by a callback.
  static const float* features = static_cast<const float*>(xs.data_ptr());
  static const int64_t* labels = static_cast<const int64_t*>(ys.data_ptr());
  auto sample = [](void*, int64_t i, acc_tensor_list** out) -> int {
    const int64_t dims[1] = {784};
    acc_tensor *f = nullptr, *l = nullptr;
    if (acc_tensor_from_host(features + i * 784, 784 * sizeof(float), dims, 1, ACC_DTYPE_FLOAT32, &f) != ACC_OK ||
        acc_tensor_from_host(labels + i, sizeof(int64_t), nullptr, 0, ACC_DTYPE_INT64, &l) != ACC_OK ||
        acc_tensor_list_create(out) != ACC_OK)
      return 1;
    acc_status s1 = acc_tensor_list_append(*out, nullptr, f), s2 = acc_tensor_list_append(*out, nullptr, l);
    acc_tensor_free(f);
    acc_tensor_free(l);
    return s1 == ACC_OK && s2 == ACC_OK ? 0 : 1;
  };
  OK(acc_dataset_from_callback(n, sample, nullptr, nullptr, &callback));
  std::printf("data loader, batch 64 x 784 float32, shuffled, samples/s:\n");
  for (int workers : {1, 2})
    std::printf("  %d worker(s): in-memory %.0f, memory-mapped %.0f, callback %.0f\n", workers,
                loader_throughput(memory, batches, workers), loader_throughput(file, batches, workers),
                loader_throughput(callback, batches / 10, workers));
  guarded_batches(path, batches);
  for (acc_tensor* t : {x, y, mapped}) acc_tensor_free(t);
  acc_dataset_free(memory);
  acc_dataset_free(file);
  acc_dataset_free(callback);
  std::remove(path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  std::printf("accelerate overhead benchmark (%s, %d intra-op threads)\n", acc_build_info(), at::get_num_threads());
  overhead({"MLP 784-1024-1024-10", {784, 1024, 1024, 10}, 64}, quick ? 1 : 15, quick ? 2 : 40);
  overhead({"MLP 32-64-10", {32, 64, 10}, 8}, quick ? 1 : 15, quick ? 2 : 400);
  std::printf("torch's profiler recording the loop (acc_profile_begin ... acc_profile_end):\n");
  profiled({"MLP 784-1024-1024-10", {784, 1024, 1024, 10}, 64}, quick ? 1 : 15, quick ? 2 : 40);
  profiled({"MLP 32-64-10", {32, 64, 10}, 8}, quick ? 1 : 15, quick ? 2 : 400);
  loaders(quick ? 20 : 3000);
  return 0;
}
