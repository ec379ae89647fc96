// GPU tests of the C++ core (linked through acc_use_core) and of what only C++ can measure: the
// fp16 GradScaler's fused CUDA kernels, an NCCL process group running every collective, the
// caching allocator's reserved memory around acc_free_memory, and LoftQ's round trips on CUDA.
#include <sched.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#ifdef ACC_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "../cpp/group_of_one.h"
#include "accelerator/prepared_model.h"
#include "common/device.h"
#include "common/options.h"
#include "gpu_support.h"
#include "model/model.h"
#include "model/peft/loftq.h"
#include "ops/collectives.h"
#include "optim/optimizer.h"
#include "parallel/sharded_optimizer.h"
#include "precision/grad_scaler.h"
#include "state/cpu_affinity.h"
#include "state/distributed.h"
#include "state/process_env.h"

// A test compiled without ACC_WITH_CUDA cannot test what it is about even where the library sees a
// GPU: a failure, not a skip.
#define ACC_REQUIRE_CUDA_BUILD() \
  GTEST_FAIL() << "the library sees a CUDA GPU but this test was compiled without ACC_WITH_CUDA"

namespace {

const c10::Device kGpu(c10::kCUDA, 0);

at::TensorOptions on_gpu(at::ScalarType dtype = at::kFloat) { return at::TensorOptions().device(kGpu).dtype(dtype); }

#ifdef ACC_WITH_CUDA
// An NCCL process group of this one process on GPU 0, on a fresh port (null after a test failure).
std::shared_ptr<acc::Distributed> nccl_group_of_one() {
  acc::set_current_device(kGpu);
  try {
    return acc_test::group_of_one(kGpu, acc::Backend::Nccl);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "NCCL process group: " << e.what();
    return nullptr;
  }
}

// The caching allocator's figures for GPU 0 (index 0 of each StatArray: all pools together).
// (libtorch 2.x refuses them before CUDA started: acc::initialize_cuda.)
auto gpu0_stats() {
  acc::initialize_cuda();
  return c10::cuda::CUDACachingAllocator::getDeviceStats(0);
}
void reset_gpu0_peaks() {
  acc::initialize_cuda();
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
}
int64_t reserved_bytes() { return gpu0_stats().reserved_bytes[0].current; }
int64_t allocated_bytes() { return gpu0_stats().allocated_bytes[0].current; }
#endif

constexpr int64_t kGiB = int64_t{1} << 30;

double gib(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

}  // namespace

TEST(GpuGradScaler, FusedCudaKernelsUnscaleDetectOverflowAndBackOff) {
  ACC_REQUIRE_CUDA();
  acc::GradScaler scaler({/*init_scale=*/1024.0, /*growth_factor=*/2.0, /*backoff_factor=*/0.5,
                          /*growth_interval=*/2000},
                         kGpu);
  const at::Tensor loss = at::scalar_tensor(3.0, on_gpu());
  at::Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.device(), kGpu);
  EXPECT_EQ(scaled.item<float>(), 3072.0f);

  // A step with an inf among its gradients: found, the finite ones still divided by the scale.
  acc::OverflowFlag key;  // one optimizer's
  at::Tensor good = at::full({1000}, 2048.0, on_gpu());
  at::Tensor bad = at::full({1000}, 1.0, on_gpu());
  bad.select(0, 500).fill_(std::numeric_limits<float>::infinity());
  scaler.unscale({good, bad}, key);
  EXPECT_TRUE(scaler.found_inf(key));
  EXPECT_TRUE(at::equal(good.cpu(), at::full({1000}, 2.0f))) << "2048 / 1024";
  scaler.note_optimizer_step();
  scaler.update();
  EXPECT_EQ(scaler.current_scale(), 512.0) << "backed off by 0.5";
  EXPECT_EQ(scaler.growth_tracker(), 0);

  // The next step: finite gradients, divided exactly by the new scale; no overflow.
  scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.item<float>(), 1536.0f);
  at::Tensor g = at::full({4096}, 1024.0, on_gpu());
  g.select(0, 7).fill_(-512.0);
  scaler.unscale({g}, key);
  EXPECT_FALSE(scaler.found_inf(key));
  at::Tensor expected = at::full({4096}, 2.0f);
  expected.select(0, 7).fill_(-1.0);
  EXPECT_TRUE(at::equal(g.cpu(), expected));
  scaler.note_optimizer_step();
  scaler.update();
  EXPECT_EQ(scaler.current_scale(), 512.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);

  // NaN is an overflow too.
  at::Tensor n = at::ones({3}, on_gpu());
  n.select(0, 1).fill_(std::numeric_limits<float>::quiet_NaN());
  scaler.unscale({n}, key);
  EXPECT_TRUE(scaler.found_inf(key));
  scaler.note_optimizer_step();
  scaler.update();
  EXPECT_EQ(scaler.current_scale(), 256.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GpuNccl, AProcessGroupOfOneRunsEveryCollective) {
  ACC_REQUIRE_CUDA();
#ifndef ACC_WITH_CUDA
  ACC_REQUIRE_CUDA_BUILD();
#else
  std::shared_ptr<acc::Distributed> dist;
  ASSERT_NO_FATAL_FAILURE(dist = nccl_group_of_one());
  EXPECT_EQ(dist->backend(), acc::Backend::Nccl);
  EXPECT_EQ(dist->device(), kGpu) << "NCCL stages its collectives on the GPU";
  EXPECT_EQ(dist->world_size(), 1);
  EXPECT_EQ(dist->rank(), 0);
  acc::Collectives c(dist);

  // gather: the one process's tensor, on its device; a 0-dim tensor counts as [1].
  const at::Tensor t = at::arange(6, on_gpu()).reshape({2, 3});
  at::Tensor g = c.gather(t, "gather");
  EXPECT_EQ(g.device(), kGpu);
  EXPECT_EQ(g.sizes(), t.sizes());
  EXPECT_TRUE(at::equal(g.cpu(), t.cpu()));
  at::Tensor s = c.gather(at::scalar_tensor(7.0, on_gpu()), "gather a scalar");
  EXPECT_EQ(s.dim(), 1);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<float>(), 7.0f);

  // gather_object: the bytes, NUL included.
  const std::string bytes("rank 0\0tail", 11);
  const auto objects = c.gather_object(bytes, "objects");
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0], bytes);

  // reduce: sum and mean of one process are its values; the input is left alone.
  const at::Tensor r = at::tensor({1.5f, -2.0f, 4.0f}).to(kGpu);
  const at::Tensor sum = c.reduce(r, acc::Reduction::Sum, "reduce sum");
  const at::Tensor mean = c.reduce(r, acc::Reduction::Mean, "reduce mean");
  EXPECT_EQ(sum.device(), kGpu);
  EXPECT_TRUE(at::equal(sum.cpu(), at::tensor({1.5f, -2.0f, 4.0f})));
  EXPECT_TRUE(at::equal(mean.cpu(), at::tensor({1.5f, -2.0f, 4.0f})));
  EXPECT_TRUE(at::equal(r.cpu(), at::tensor({1.5f, -2.0f, 4.0f})));
  EXPECT_NE(sum.data_ptr(), r.data_ptr()) << "reduce returns a new tensor";
  // A larger int64 sum (the trigger uses one too).
  const at::Tensor big = at::arange(1 << 20, on_gpu(at::kLong));
  EXPECT_TRUE(at::equal(c.reduce(big, acc::Reduction::Sum, "reduce int64").cpu(), big.cpu()));
  c.set_trigger();
  EXPECT_TRUE(c.check_trigger("trigger"));
  EXPECT_FALSE(c.check_trigger("trigger")) << "the check lowers it";

  // broadcast from process 0; a source outside the job is refused.
  const at::Tensor b = c.broadcast(r, 0, "broadcast");
  EXPECT_EQ(b.device(), kGpu);
  EXPECT_TRUE(at::equal(b.cpu(), r.cpu()));
  EXPECT_NE(b.data_ptr(), r.data_ptr()) << "broadcast returns a new tensor";
  EXPECT_ANY_THROW(c.broadcast(r, 1, "broadcast from nowhere"));

  // pad_across_processes: one process is already the longest; the shapes still go through NCCL.
  const at::Tensor p = c.pad_across_processes(t, 1, -1.0, false, "pad");
  EXPECT_TRUE(at::equal(p.cpu(), t.cpu()));
  const at::Tensor q = c.pad_across_processes(t, 0, 0.0, true, "pad first");
  EXPECT_TRUE(at::equal(q.cpu(), t.cpu()));

  // barrier
  EXPECT_NO_THROW(c.barrier("barrier"));
#endif
}

// enable_cpu_affinity: the process is pinned to the cores the kernel lists for the GPU's PCI device.
TEST(GpuCpuAffinity, PinsTheProcessToItsGpusCores) {
  ACC_REQUIRE_CUDA();
#ifndef ACC_WITH_CUDA
  ACC_REQUIRE_CUDA_BUILD();
#else
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const std::vector<int> cores = acc::pin_to_device_cores(kGpu);
  if (cores.empty()) GTEST_SKIP() << "the kernel lists no cores for this GPU's PCI device (see the warning)";
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_EQ(CPU_COUNT(&after), static_cast<int>(cores.size()));
  for (int core : cores) EXPECT_TRUE(CPU_ISSET(core, &after)) << core;
  std::printf("GPU 0's cores: %zu of %d\n", cores.size(), CPU_COUNT(&before));
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);  // the other tests run unpinned
#endif
}

TEST(GpuFreeMemory, GivesCachedTensorMemoryBack) {
  ACC_REQUIRE_CUDA();
#ifndef ACC_WITH_CUDA
  ACC_REQUIRE_CUDA_BUILD();
#else
  acc_accelerator* acc = acc_test::make_accelerator({});
  ASSERT_NE(acc, nullptr);
  const std::string device = acc_gpu::device_of(acc);
  ASSERT_EQ(device, "cuda:0");
  ACC_ASSERT_OK(acc_free_memory(acc));
  const int64_t r0 = reserved_bytes();

  // 1 GiB of tensors made by the library, then dropped: torch keeps the memory cached.
  std::vector<acc_tensor*> tensors(4, nullptr);
  const int64_t dims[1] = {int64_t{1} << 26};  // 2^26 floats: 256 MiB each
  for (auto& t : tensors) ACC_ASSERT_OK(acc_tensor_zeros(dims, 1, ACC_DTYPE_FLOAT32, device.c_str(), &t));
  const int64_t allocated = allocated_bytes();
  for (auto& t : tensors) acc_tensor_free(t);
  const int64_t r1 = reserved_bytes();
  ACC_ASSERT_OK(acc_free_memory(acc));
  const int64_t r2 = reserved_bytes();
  std::printf("reserved: %.3f GiB before, %.3f GiB with 1 GiB of tensors dropped (%.3f GiB were allocated), "
              "%.3f GiB after acc_free_memory\n", gib(r0), gib(r1), gib(allocated), gib(r2));
  EXPECT_GE(allocated, kGiB);
  EXPECT_GE(r1 - r0, kGiB) << "the dropped tensors' memory should still be cached before acc_free_memory";
  EXPECT_GE(r1 - r2, kGiB) << "acc_free_memory gave back less than the 1 GiB cached";
  acc_accelerator_free(acc);
#endif
}

TEST(GpuFreeMemory, ReleasesWhatThePreparedModelHeld) {
  ACC_REQUIRE_CUDA();
#ifndef ACC_WITH_CUDA
  ACC_REQUIRE_CUDA_BUILD();
#else
  acc_accelerator* acc = acc_test::make_accelerator({});
  ASSERT_NE(acc, nullptr);
  ACC_ASSERT_OK(acc_free_memory(acc));
  const int64_t r0 = reserved_bytes();
  // 16384 x 16384 float32 weights: 1 GiB on the GPU once prepared.
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":16384,"out_features":16384}])", &model));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  ACC_ASSERT_OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  const int64_t held = allocated_bytes();
  // The program lets go of its handles; what is left is the accelerator's (Accelerate's
  // `del model, optimizer` then `accelerator.free_memory()`).
  acc_optimizer_free(opt);
  acc_model_free(model);
  const int64_t r1 = reserved_bytes();
  ACC_ASSERT_OK(acc_free_memory(acc));
  const int64_t r2 = reserved_bytes();
  const int64_t after = allocated_bytes();
  std::printf("prepared model: %.3f GiB allocated; reserved %.3f GiB before it, %.3f GiB with it, %.3f GiB after "
              "acc_free_memory (%.3f GiB still allocated)\n", gib(held), gib(r0), gib(r1), gib(r2), gib(after));
  EXPECT_GE(held, kGiB);
  EXPECT_GE(r1 - r2, kGiB) << "acc_free_memory did not give the model's memory back";
  EXPECT_LE(after, held - kGiB) << "the model's weights are still allocated";
  acc_accelerator_free(acc);
#endif
}

// Sharded data parallelism's CPU offload on CUDA (NCCL, one process: every stage's collectives run):
// AdamW's two moments live in host memory, so after a step the GPU holds at least their bytes less;
// stage 3 with offload_params keeps no parameter shard on the GPU at rest. The weights after 3 steps
// equal those trained without offload, up to the rounding of CPU against CUDA AdamW kernels.
// Stage 3 flattens a model built on the CPU unit by unit straight into the GPU's shard: with its
// parameters offloaded, the GPU holds its gradients' shard (here, one process: the whole model's
// size) and one unit at a time while preparing, never the parameters too (moved whole first, as
// before, the peak was both), and the model trains on the GPU as one moved there whole first.
TEST(GpuSharding, Stage3PreparesAModelTheGpuHoldsOneUnitOfAtATime) {
  ACC_REQUIRE_CUDA();
#ifndef ACC_WITH_CUDA
  ACC_REQUIRE_CUDA_BUILD();
#else
  const std::string layer = "{\"type\":\"linear\",\"in_features\":1024,\"out_features\":1024}";
  const std::string spec = "[" + layer + "," + layer + "," + layer + "," + layer + "]";
  const int64_t unit_bytes = (1024 * 1024 + 1024) * 4;  // 4 MiB; the model is 16 MiB
  auto train = [&](bool built_on_gpu, int64_t* prepare_peak) {
    std::vector<at::Tensor> weights;
    auto dist = nccl_group_of_one();
    if (!dist) return weights;
    at::manual_seed(11);
    auto model = acc::model_from_spec(spec);
    if (built_on_gpu) model->to(kGpu, c10::nullopt);
    c10::cuda::device_synchronize();
    reset_gpu0_peaks();
    const int64_t before = allocated_bytes();
    acc::ShardingOptions options;
    options.stage = 3;
    options.offload_params = true;
    auto engine = std::make_shared<acc::ShardedDataParallel>(model, dist, options, acc::DataParallelOptions{}, kGpu);
    model->to(kGpu, c10::nullopt);  // what prepare does after: buffers and frozen parameters
    c10::cuda::device_synchronize();
    *prepare_peak = gpu0_stats().allocated_bytes[0].peak - before;
    acc::Options adamw(acc::optimizer_option_schema());
    adamw.set("lr", 0.01);
    acc::ShardedOptimizer optimizer(std::make_shared<acc::TorchOptimizer>(model, "adamw", adamw), engine);
    acc::PreparedModel prepared(model, c10::kCUDA, std::nullopt, engine);
    const at::Tensor x = at::randn({8, 1024}).to(kGpu);
    for (int step = 0; step < 2; ++step) {
      prepared.forward({x}).at(0).second.pow(2).mean().backward();
      optimizer.step();
      optimizer.zero_grad();
    }
    for (const auto& entry : engine->full_state_dict("the test")) weights.push_back(entry.second.cpu());
    return weights;
  };
  int64_t peak_from_cpu = 0, peak_from_gpu = 0;
  const auto from_cpu = train(false, &peak_from_cpu), from_gpu = train(true, &peak_from_gpu);
  std::printf("preparing zero_stage 3 + offload_params: %.1f MiB peak on the GPU (model: %.1f MiB)\n",
              peak_from_cpu / 1048576.0, 4 * unit_bytes / 1048576.0);
  EXPECT_LE(peak_from_cpu, 4 * unit_bytes + unit_bytes + (1 << 20))
      << "the GPU held more than the gradients' shard and one unit while preparing";
  ASSERT_FALSE(from_cpu.empty());
  ASSERT_EQ(from_cpu.size(), from_gpu.size());
  for (size_t i = 0; i < from_cpu.size(); ++i) EXPECT_TRUE(at::equal(from_cpu[i], from_gpu[i])) << "tensor " << i;
#endif
}

// Stage 3 shards a frozen base too and frees each frozen unit during backward once its calls are
// done (parallel/frozen_release.h): with offload_params the GPU never holds the 48 MiB frozen base
// whole while training, only a few 4 MiB units in flight (the trainable first layer's gradient and
// reduction bucket, the unit staged from host memory, the next unit gathered before the previous
// one is freed). The weights equal those of the same model trained on the GPU without sharding.
TEST(GpuSharding, Stage3KeepsAFrozenBaseOffTheGpuButForAFewUnits) {
  ACC_REQUIRE_CUDA();
#ifndef ACC_WITH_CUDA
  ACC_REQUIRE_CUDA_BUILD();
#else
  const std::string layer = "{\"type\":\"linear\",\"in_features\":1024,\"out_features\":1024}";
  std::string spec = "[" + layer;
  for (int i = 0; i < 12; ++i) spec += "," + layer;
  spec += ",{\"type\":\"linear\",\"in_features\":1024,\"out_features\":16}]";
  const char* frozen = "1.*,2.*,3.*,4.*,5.*,6.*,7.*,8.*,9.*,10.*,11.*,12.*";
  const int64_t unit_bytes = (1024 * 1024 + 1024) * 4;  // 4 MiB; the frozen base is 12 of them
  auto train = [&](bool sharded, int64_t* step_peak) {
    at::manual_seed(5);
    auto model = acc::model_from_spec(spec);
    model->set_requires_grad(frozen, false);
    std::shared_ptr<acc::ShardedDataParallel> engine;
    if (sharded) {
      auto dist = nccl_group_of_one();
      if (!dist) return std::vector<at::Tensor>{};
      acc::ShardingOptions options;
      options.stage = 3;
      options.offload_params = true;
      engine = std::make_shared<acc::ShardedDataParallel>(model, dist, options, acc::DataParallelOptions{}, kGpu);
    }
    model->to(kGpu, c10::nullopt);
    acc::Options sgd(acc::optimizer_option_schema());
    sgd.set("lr", 0.1);
    std::shared_ptr<acc::Optimizer> optimizer = std::make_shared<acc::TorchOptimizer>(model, "sgd", sgd);
    if (engine) optimizer = std::make_shared<acc::ShardedOptimizer>(optimizer, engine);
    acc::PreparedModel prepared(model, c10::kCUDA, std::nullopt, engine);
    const at::Tensor x = at::randn({8, 1024}).to(kGpu);
    for (int step = 0; step < 2; ++step) {
      c10::cuda::device_synchronize();
      reset_gpu0_peaks();
      const int64_t before = allocated_bytes();
      prepared.forward({x}).at(0).second.pow(2).mean().backward();
      optimizer->step();
      optimizer->zero_grad();
      c10::cuda::device_synchronize();
      *step_peak = gpu0_stats().allocated_bytes[0].peak - before;
    }
    std::vector<at::Tensor> weights;
    for (const auto& entry : engine ? engine->full_state_dict("the test") : model->state_dict())
      weights.push_back(entry.second.cpu());
    return weights;
  };
  int64_t sharded_peak = 0, plain_peak = 0;
  const auto sharded = train(true, &sharded_peak), plain = train(false, &plain_peak);
  std::printf("a training step with a 48 MiB frozen base: %.1f MiB peak above rest on the GPU under zero_stage 3 + "
              "offload_params, %.1f MiB unsharded (where the base stays whole)\n",
              sharded_peak / 1048576.0, plain_peak / 1048576.0);
  EXPECT_LE(sharded_peak, 6 * unit_bytes) << "the GPU held more of the frozen base than a few units at once";
  ASSERT_FALSE(sharded.empty());
  ASSERT_EQ(sharded.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::allclose(sharded[i], plain[i], 1e-5, 1e-6)) << "tensor " << i;
#endif
}

TEST(GpuSharding, CpuOffloadKeepsOptimizerStateAndShardsOffTheGpu) {
  ACC_REQUIRE_CUDA();
#ifndef ACC_WITH_CUDA
  ACC_REQUIRE_CUDA_BUILD();
#else
  constexpr int64_t kWidth = 2048;
  const std::string spec = "[{\"type\":\"linear\",\"in_features\":2048,\"out_features\":2048}]";
  const int64_t param_bytes = (kWidth * kWidth + kWidth) * 4;  // 16 MiB
  struct Trained {
    int64_t after_step = 0;  // bytes allocated on the GPU after the last step, before zero_grad
    int64_t at_rest = 0;     // after zero_grad
    std::vector<at::Tensor> weights;
  };
  auto train = [&](int64_t stage, bool offload) {
    Trained out;
    auto dist = nccl_group_of_one();
    if (!dist) return out;
    const int64_t baseline = allocated_bytes();
    at::manual_seed(7);
    auto model = acc::model_from_spec(spec);
    model->to(kGpu, c10::nullopt);
    const at::Tensor x = at::randn({16, kWidth}).to(kGpu);
    acc::ShardingOptions options;
    options.stage = stage;
    options.offload_optimizer = offload;
    options.offload_params = offload && stage == 3;
    auto engine = std::make_shared<acc::ShardedDataParallel>(model, dist, options, acc::DataParallelOptions{});
    acc::Options adamw(acc::optimizer_option_schema());
    adamw.set("lr", 0.01);
    acc::ShardedOptimizer optimizer(std::make_shared<acc::TorchOptimizer>(model, "adamw", adamw), engine);
    acc::PreparedModel prepared(model, c10::kCUDA, std::nullopt, engine);
    for (int step = 0; step < 3; ++step) {
      prepared.forward({x}).at(0).second.pow(2).mean().backward();
      optimizer.step();
      c10::cuda::device_synchronize();
      out.after_step = allocated_bytes() - baseline;
      optimizer.zero_grad();
    }
    out.at_rest = allocated_bytes() - baseline;
    for (const auto& entry : engine->full_state_dict("the test")) out.weights.push_back(entry.second.cpu());
    std::printf("zero_stage %lld%s: %.1f MiB on the GPU after a step, %.1f MiB at rest\n",
                static_cast<long long>(stage), offload ? " + offload" : "", out.after_step / 1048576.0,
                out.at_rest / 1048576.0);
    return out;
  };
  for (int64_t stage : {1, 2, 3}) {
    SCOPED_TRACE("zero_stage " + std::to_string(stage));
    const Trained plain = train(stage, false), offloaded = train(stage, true);
    ASSERT_FALSE(plain.weights.empty());
    ASSERT_EQ(plain.weights.size(), offloaded.weights.size());
    for (size_t i = 0; i < plain.weights.size(); ++i)
      EXPECT_TRUE(at::allclose(plain.weights[i], offloaded.weights[i], 1e-5, 1e-7)) << "tensor " << i;
    EXPECT_GE(plain.after_step - offloaded.after_step, 2 * param_bytes - (1 << 20)) << "AdamW's moments stayed on the GPU";
    if (stage == 3) EXPECT_LT(offloaded.at_rest, param_bytes / 8) << "stage 3's shard stayed on the GPU";
  }
#endif
}

// LoftQ's quantisation (model/peft/loftq.h) is element-wise arithmetic, block maxima and bucketing: on
// CUDA it gives the CPU's values bit for bit (NF4 over 64-value blocks with a shorter last one, a
// block of zeros; row-wise int8 through float16).
TEST(GpuLoftq, RoundTripsOnCudaEqualTheCpus) {
  ACC_REQUIRE_CUDA();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
  at::Tensor weight = at::randn({96, 70}, generator, at::kFloat) * at::logspace(-3, 2, 70);
  weight.view(-1).slice(0, 128, 192).zero_();
  const at::Tensor on_gpu_weight = weight.to(kGpu);
  for (const bool nf4 : {true, false}) {
    const at::Tensor cpu = nf4 ? acc::nf4_round_trip(weight) : acc::int8_round_trip(weight);
    const at::Tensor cuda = nf4 ? acc::nf4_round_trip(on_gpu_weight) : acc::int8_round_trip(on_gpu_weight);
    EXPECT_EQ(cuda.device(), kGpu);
    EXPECT_TRUE(at::equal(cuda.cpu(), cpu)) << (nf4 ? "nf4" : "int8") << ": largest difference "
                                            << (cuda.cpu() - cpu).abs().max().item<double>();
  }
  // A layer's start: the quantised weight as on the CPU, B A (which SVD's signs leave alone) close.
  acc::LoftqConfig config;
  config.iter = 1;
  const auto cpu = acc::loftq_start("fc", weight, 4, config);
  const auto cuda = acc::loftq_start("fc", on_gpu_weight, 4, config);
  EXPECT_TRUE(at::equal(cuda.residual.cpu(), cpu.residual));
  EXPECT_TRUE(at::allclose(cuda.b.matmul(cuda.a).cpu(), cpu.b.matmul(cpu.a), 1e-4, 1e-5));
}
