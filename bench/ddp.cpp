// Data-parallel step time on N processes (run it with accelerate-launch): (a) a plain libtorch loop
// that allreduces the flattened gradients after backward on its own Gloo group, against (b) the
// C API loop with a prepared model (c10d's Reducer, allreduce overlapped with backward), and (c)
// the same loop inside join_uneven_inputs (one small allreduce more per step) against (b), (d)
// inside LocalSGD averaging every 8 steps (no gradient allreduce) against (b), and (e) with
// PyTorch's PowerSGD comm hook at rank 4 (compressing from its third step) against (b), with the
// numbers each step sends.
//
//   accelerate-launch --num_processes 2 bench_ddp [--quick]
#include <torch/nn/functional/loss.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "accelerate.h"
#include "bench_util.h"
#include "common/compat.h"
#include "mlp.h"

namespace {

constexpr int64_t kBatch = 64;
const std::vector<int64_t> kWidths = {784, 1024, 1024, 10};

struct PlainDdp {
  torch::nn::Sequential net;
  std::unique_ptr<torch::optim::AdamW> opt;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  at::Tensor x, y;
  int world;

  // Rendezvous through the launcher's store at MASTER_PORT, under a prefix of its own (a second port
  // next to it could be any process's, an ephemeral port of a connection among them).
  PlainDdp(int rank, int world_size, int port) : net(mlp_module(kWidths)), world(world_size) {
    opt = std::make_unique<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(1e-3));
    auto launcher_store = acc::compat::make_tcp_store("127.0.0.1", static_cast<uint16_t>(port), /*is_server=*/false,
                                                      static_cast<size_t>(world_size), std::chrono::minutes(5));
    auto store = c10::make_intrusive<c10d::PrefixStore>("bench_plain_ddp", launcher_store);
    group = acc::compat::make_gloo_group(store, rank, world_size, std::chrono::minutes(5), /*loopback=*/true);
    x = torch::randn({kBatch, kWidths.front()});
    y = torch::randint(0, kWidths.back(), {kBatch});
  }
  void step() {
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    std::vector<at::Tensor> grads;
    for (auto& p : net->parameters()) grads.push_back(p.grad().flatten());
    std::vector<at::Tensor> flat{at::cat(grads)};
    group->allreduce(flat)->wait();
    flat[0].div_(world);
    int64_t offset = 0;
    for (auto& p : net->parameters()) {
      p.mutable_grad().copy_(flat[0].narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
    opt->step();
    for (auto& p : net->parameters()) p.mutable_grad().reset();
  }
};

struct CapiDdp {
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_tensor *x = nullptr, *y = nullptr;
  bool local_sgd = false;  // inside acc_local_sgd_begin/end: each step ends with acc_local_sgd_step

  explicit CapiDdp(const char* comm_hook = nullptr, const char* comm_state = nullptr) {
    acc_options* o = nullptr;
    OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
    if (comm_hook) OK(acc_options_set(o, "ddp_comm_hook", comm_hook));
    if (comm_state) OK(acc_options_set(o, "ddp_comm_state_option", comm_state));
    OK(acc_accelerator_create(o, &acc));
    acc_options_free(o);
    OK(acc_model_from_spec(mlp_spec(kWidths).c_str(), &model));
    OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
    OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
    at::Tensor xs = torch::randn({kBatch, kWidths.front()}), ys = torch::randint(0, kWidths.back(), {kBatch});
    OK(acc_tensor_from_host(xs.data_ptr(), xs.nbytes(), xs.sizes().data(), 2, ACC_DTYPE_FLOAT32, &x));
    OK(acc_tensor_from_host(ys.data_ptr(), ys.nbytes(), ys.sizes().data(), 1, ACC_DTYPE_INT64, &y));
  }
  ~CapiDdp() {
    acc_tensor_free(x);
    acc_tensor_free(y);
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
  void step() {
    acc_tensor *logits = nullptr, *loss = nullptr;
    OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &logits));
    OK(acc_loss_cross_entropy(logits, y, ACC_REDUCTION_MEAN, 0.0, &loss));
    OK(acc_backward(acc, loss));
    OK(acc_optimizer_step(opt));
    OK(acc_optimizer_zero_grad(opt));
    if (local_sgd) OK(acc_local_sgd_step(acc, model));
    acc_tensor_free(logits);
    acc_tensor_free(loss);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench_args(argc, argv).quick;
  const char* rank_text = std::getenv("RANK");
  const char* world_text = std::getenv("WORLD_SIZE");
  const char* port_text = std::getenv("MASTER_PORT");
  if (!rank_text || !world_text || !port_text) {
    std::fprintf(stderr, "run me with accelerate-launch --num_processes N\n");
    return 2;
  }
  const int rank = std::atoi(rank_text), world = std::atoi(world_text);
  torch::manual_seed(rank);
  CapiDdp capi;  // rendezvous at MASTER_PORT
  constexpr int64_t kPowerSgdRank = 4;
  CapiDdp power_sgd("power_sgd", R"({"matrix_approximation_rank": 4, "start_powerSGD_iter": 2})");
  PlainDdp plain(rank, world, std::atoi(port_text));
  const int rounds = quick ? 1 : 9, steps = quick ? 2 : 20;
  time_steps(plain, steps);
  time_steps(capi, steps);
  time_steps(power_sgd, std::max(steps, 3));  // past start_powerSGD_iter
  constexpr int64_t kLocalSgdSteps = 8;
  std::vector<double> a, b, c, d, e;
  for (int r = 0; r < rounds; ++r) {
    a.push_back(time_steps(plain, steps));
    b.push_back(time_steps(capi, steps));
    OK(acc_join_uneven_inputs_begin(capi.acc, capi.model, -1));
    c.push_back(time_steps(capi, steps));
    OK(acc_join_uneven_inputs_end(capi.acc, capi.model));  // outside the timing: every process ends together
    OK(acc_local_sgd_begin(capi.acc, capi.model, kLocalSgdSteps, 1));
    capi.local_sgd = true;
    d.push_back(time_steps(capi, steps));
    capi.local_sgd = false;
    OK(acc_local_sgd_end(capi.acc, capi.model));  // its last averaging outside the timing
    e.push_back(time_steps(power_sgd, steps));
  }
  if (rank == 0) {
    std::printf("DDP on %d processes, MLP 784-1024-1024-10, batch %lld per process: (a) libtorch + allreduce %.1f "
                "us/step   (b) C API (Reducer) %.1f us/step   (b)/(a) %.3f\n",
                world, static_cast<long long>(kBatch), median(a), median(b), median(b) / median(a));
    std::printf("the same inside join_uneven_inputs: (c) %.1f us/step   (c)/(b) %.3f\n", median(c),
                median(c) / median(b));
    std::printf("the same inside LocalSGD averaging every %lld steps: (d) %.1f us/step   (d)/(b) %.3f\n",
                static_cast<long long>(kLocalSgdSteps), median(d), median(d) / median(b));
    // What each step sends: every gradient (b), or P and Q of each weight matrix and the biases whole.
    int64_t whole = 0, compressed = 0;
    for (size_t i = 0; i + 1 < kWidths.size(); ++i) {
      const int64_t n = kWidths[i + 1], m = kWidths[i], r = std::min({n, m, kPowerSgdRank});
      whole += n * m + n;
      compressed += ((n + m) * r * 2 < n * m ? (n + m) * r : n * m) + n;
    }
    std::printf("the same with the PowerSGD comm hook, rank %lld: (e) %.1f us/step   (e)/(b) %.3f   numbers sent per "
                "step %lld instead of %lld (%.1fx fewer)\n",
                static_cast<long long>(kPowerSgdRank), median(e), median(e) / median(b), static_cast<long long>(compressed),
                static_cast<long long>(whole), static_cast<double>(whole) / static_cast<double>(compressed));
  }
  return 0;
}
