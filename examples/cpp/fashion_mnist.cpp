// The Fashion-MNIST job with the C++ API (namespace acc), for programs that link the
// implementation directly instead of the C ABI.
//
//   fashion_mnist_cpp [epochs] [train_samples] [data_dir]
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "accelerator/accelerator.h"
#include "data/map_dataloader.h"
#include "data/dataset.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "schedule/schedule_options.h"
#include "schedule/scheduler.h"
#include "tensor/losses.h"

namespace {

const char kUsage[] = "usage: fashion_mnist_cpp [epochs] [train_samples] [data_dir]\n";

// argv[i] as a whole number in [least, most], or `fallback` when absent; anything else is a usage error.
int64_t count_argument(int argc, char** argv, int i, int64_t least, int64_t most, int64_t fallback) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(argv[i], &end, 10);
  if (end == argv[i] || *end != '\0' || errno != 0 || value < least || value > most) {
    std::fprintf(stderr, "fashion_mnist_cpp: '%s' is not a whole number from %lld to %lld\n%s", argv[i],
                 static_cast<long long>(least), static_cast<long long>(most), kUsage);
    std::exit(2);
  }
  return value;
}

int train(int argc, char** argv) {
  const int64_t epochs = count_argument(argc, argv, 1, 1, INT32_MAX, 1);
  // 0, or as many as the training set has or more: the whole training set.
  const int64_t train_samples = count_argument(argc, argv, 2, 0, INT64_MAX, 0);
  const std::string dir = std::string(argc > 3 ? argv[3] : "/usr/share/datasets/fashion-mnist") + "/";

  acc::Options accelerator_options(acc::accelerator_option_table());
  accelerator_options.set("seed", int64_t{42});
  acc::Accelerator accelerator(accelerator_options);

  std::shared_ptr<acc::Dataset> train =
      acc::idx_dataset(dir + "train-images-idx3-ubyte.gz", dir + "train-labels-idx1-ubyte.gz");
  if (train_samples > 0 && train_samples < train->size())
    train = std::make_shared<acc::SubsetDataset>(train, 0, train_samples);
  auto test = acc::idx_dataset(dir + "t10k-images-idx3-ubyte.gz", dir + "t10k-labels-idx1-ubyte.gz");
  acc::DataLoaderOptions train_options;
  train_options.batch_size = 64;
  train_options.shuffle = true;
  acc::DataLoaderOptions test_options;
  test_options.batch_size = 1000;

  auto model = acc::model_from_spec(R"([
    {"type":"conv2d","in_channels":1,"out_channels":32,"kernel_size":3,"padding":1}, {"type":"relu"},
    {"type":"maxpool2d","kernel_size":2}, {"type":"flatten"},
    {"type":"linear","in_features":6272,"out_features":10}])");
  acc::Options optimizer_options(acc::optimizer_option_schema());
  optimizer_options.set("lr", 2e-3);
  std::shared_ptr<acc::Optimizer> optimizer =
      std::make_shared<acc::TorchOptimizer>(model, "adamw", optimizer_options);
  auto loader = std::make_shared<acc::MapDataLoader>(train, train_options);
  acc::Options schedule_options(acc::scheduler_option_table());
  schedule_options.set("num_training_steps", loader->length() * epochs);
  std::shared_ptr<acc::Scheduler> scheduler =
      std::make_shared<acc::LambdaScheduler>(optimizer, "linear", schedule_options);

  auto prepared_model = accelerator.prepare_model(model, std::nullopt);
  auto prepared_optimizer = accelerator.prepare_optimizer(optimizer, std::nullopt);
  auto prepared_loader = accelerator.prepare_dataloader(loader, std::nullopt);
  auto prepared_scheduler = accelerator.prepare_scheduler(scheduler);
  auto test_loader = accelerator.prepare_dataloader(std::make_shared<acc::MapDataLoader>(test, test_options), std::nullopt);

  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    at::Tensor loss_sum = at::zeros({}, accelerator.device());  // summed on the device: no sync per step
    int64_t batches = 0;
    while (auto batch = prepared_loader->next()) {
      accelerator.accumulate_begin();
      auto logits = prepared_model->forward({(*batch)[0]})[0].second;
      auto loss = acc::cross_entropy(logits, (*batch)[1], acc::Reduction::Mean, 0.0);
      accelerator.backward(loss);
      prepared_optimizer->step();
      prepared_scheduler->step();
      prepared_optimizer->zero_grad();
      accelerator.accumulate_end();
      loss_sum += loss.detach();
      ++batches;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    accelerator.print("epoch " + std::to_string(epoch + 1) + " loss " + std::to_string(loss_sum.item<double>() / batches) + " (" +
                      std::to_string(static_cast<int>(batches * train_options.batch_size / seconds)) + " samples/s)");
  }

  prepared_model->set_training(false);
  int64_t correct = 0, seen = 0;
  at::NoGradGuard no_grad;
  while (auto batch = test_loader->next()) {
    auto logits = prepared_model->forward({(*batch)[0]})[0].second;
    correct += logits.argmax(1).eq((*batch)[1]).sum().item<int64_t>();
    seen += (*batch)[1].size(0);
  }
  accelerator.print("test accuracy " + std::to_string(100.0 * correct / seen) + "%");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc > 4) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  try {
    return train(argc, argv);
  } catch (const std::exception& e) {  // acc::Error names the call and the cause (a missing file, ...)
    std::fprintf(stderr, "fashion_mnist_cpp: %s\n", e.what());
    return 1;
  }
}
