// save_state / load_state against writing and reading the same bytes as plain safetensors, side by
// side: what the checkpoint machinery costs on top of the tensor I/O (the staging folder and rename,
// the save's id, the CRC-32 of every file and of each safetensors file's data, reading back and
// checking them at load, staging every part before applying it).
//
//   bench_save_state [--quick] [FOLDER]   (default FOLDER: $TMPDIR or /tmp)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench_util.h"

namespace {

double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const BenchArgs args = bench_args(argc, argv, "FOLDER");
  const bool quick = args.quick;
  const char* tmp = std::getenv("TMPDIR");
  const std::string root = std::string(args.operand ? args.operand
                                       : tmp        ? tmp
                                                    : "/tmp") +
                           "/acc_bench_save_state_" + std::to_string(getpid());
  std::filesystem::create_directories(root);
  const std::vector<int64_t> widths = quick ? std::vector<int64_t>{64, 128, 10} : std::vector<int64_t>{1024, 4096, 4096, 4096, 1024};
  acc_options* o = nullptr;
  OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  OK(acc_options_set(o, "cpu", "true"));
  acc_accelerator* acc = nullptr;
  OK(acc_accelerator_create(o, &acc));
  acc_options_free(o);
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  OK(acc_model_from_spec(mlp_spec(widths).c_str(), &model));
  OK(acc_optimizer_create(model, "adamw", nullptr, &opt));
  OK(acc_prepare(acc, &model, &opt, nullptr, nullptr));
  // One step, so that AdamW holds its two moments: the checkpoint is about 3x the weights.
  int64_t params = 0;
  OK(acc_model_parameter_count(model, nullptr, &params));
  std::vector<float> xs(static_cast<size_t>(8 * widths.front()), 0.5f);
  const int64_t dims[2] = {8, widths.front()};
  acc_tensor *x = nullptr, *y = nullptr, *loss = nullptr;
  OK(acc_tensor_from_host(xs.data(), xs.size() * sizeof(float), dims, 2, ACC_DTYPE_FLOAT32, &x));
  OK(acc_model_forward1(model, x, ACC_FORWARD_DEFAULT, &y));
  OK(acc_tensor_mean(y, &loss));
  OK(acc_backward(acc, loss));
  OK(acc_optimizer_step(opt));
  // The baseline: the weights in one file, and two tensors of the same shapes per parameter (the
  // moments) in another; loading puts the weights into the model and reads every moment.
  acc_tensor_list *state = nullptr, *moments = nullptr;
  OK(acc_model_state_dict(model, &state));
  OK(acc_tensor_list_create(&moments));
  size_t n = 0;
  OK(acc_tensor_list_size(state, &n));
  for (const char* copy : {"exp_avg.", "exp_avg_sq."})
    for (size_t i = 0; i < n; ++i) {
      const char* name = nullptr;
      acc_tensor* t = nullptr;
      OK(acc_tensor_list_name(state, i, &name));
      OK(acc_tensor_list_get(state, i, &t));
      OK(acc_tensor_list_append(moments, (std::string(copy) + name).c_str(), t));
      acc_tensor_free(t);
    }
  const int rounds = quick ? 1 : 5;
  std::vector<double> plain_save, plain_load, save, load;
  for (int r = 0; r < rounds; ++r) {
    const std::string plain = root + "/plain_" + std::to_string(r), dir = root + "/ckpt_" + std::to_string(r);
    std::filesystem::create_directories(plain);
    const std::string weights = plain + "/model.safetensors", moments_file = plain + "/moments.safetensors";
    plain_save.push_back(seconds_of([&] {
      OK(acc_tensor_list_save_safetensors(state, weights.c_str()));
      OK(acc_tensor_list_save_safetensors(moments, moments_file.c_str()));
    }));
    plain_load.push_back(seconds_of([&] {
      OK(acc_model_load_safetensors(model, weights.c_str(), 1, nullptr, nullptr));
      acc_tensor_list* back = nullptr;
      OK(acc_tensor_list_load_safetensors(moments_file.c_str(), &back));
      size_t k = 0;
      OK(acc_tensor_list_size(back, &k));
      for (size_t i = 0; i < k; ++i) {  // read every byte, as restoring an optimizer does
        acc_tensor *t = nullptr, *sum = nullptr;
        OK(acc_tensor_list_get(back, i, &t));
        OK(acc_tensor_sum(t, &sum));
        acc_tensor_free(sum);
        acc_tensor_free(t);
      }
      acc_tensor_list_free(back);
    }));
    save.push_back(seconds_of([&] { OK(acc_save_state(acc, dir.c_str(), nullptr)); }));
    load.push_back(seconds_of([&] { OK(acc_load_state(acc, dir.c_str(), nullptr)); }));
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(plain);
  }
  std::printf("checkpoint of an MLP of %lld parameters with AdamW (%.0f MB of tensors), page cache warm:\n",
              static_cast<long long>(params), 3.0 * 4 * static_cast<double>(params) / 1e6);
  std::printf("  save: plain safetensors (weights, moments) %.3f s   save_state %.3f s   ratio %.2f\n",
              median(plain_save), median(save), median(save) / median(plain_save));
  std::printf("  load: weights into the model + moments read %.3f s   load_state %.3f s   ratio %.2f\n",
              median(plain_load), median(load), median(load) / median(plain_load));
  std::filesystem::remove_all(root);
  for (acc_tensor* t : {x, y, loss}) acc_tensor_free(t);
  acc_tensor_list_free(state);
  acc_tensor_list_free(moments);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_accelerator_free(acc);
  return 0;
}
