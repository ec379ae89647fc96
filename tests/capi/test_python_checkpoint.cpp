// acc_load_state on a folder Python Accelerate's save_state wrote. tests/interop resumes real
// PyTorch runs saved that way; these check what such a folder must hold and how a damaged one is
// refused. The folders are made here with python_state_files and the library's own files taken out:
// what remains is Python Accelerate's layout (model.safetensors, optimizer.bin, scheduler.bin,
// random_states_0.pkl, in torch.save's format).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support.h"

namespace fs = std::filesystem;
using namespace acc_test;

namespace {

const char* kNet = R"([{"type":"linear","in_features":8,"out_features":16},{"type":"relu"},
                       {"type":"dropout","p":0.25},{"type":"linear","in_features":16,"out_features":3}])";

// A run: an accelerator, a model with dropout, an optimizer and a linear schedule, prepared.
struct Trainer {
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;
  acc_scheduler* sched = nullptr;

  explicit Trainer(const char* algorithm = "adamw", uint64_t seed = 7,
                   std::vector<std::pair<std::string, std::string>> options = {}) {
    options.insert(options.end(), {{"cpu", "1"}, {"python_state_files", "1"}, {"seed", std::to_string(seed)}});
    acc = make_accelerator(options);
    model = spec_model(kNet);
    if (std::string(algorithm).find("_8bit") !=
        std::string::npos) {  // the first weight's moments in 8 bits, the rest in 32
      acc_options* o = nullptr;
      EXPECT_EQ(acc_options_create(ACC_OPTIONS_OPTIMIZER, &o), ACC_OK);
      EXPECT_EQ(acc_options_set_double(o, "lr", 0.01), ACC_OK);
      EXPECT_EQ(acc_options_set_int(o, "min_8bit_size", 64), ACC_OK);
      if (std::string(algorithm) == "sgd_8bit") EXPECT_EQ(acc_options_set_double(o, "momentum", 0.9), ACC_OK);
      if (std::string(algorithm) == "ademamix_8bit") EXPECT_EQ(acc_options_set_int(o, "t_alpha", 4), ACC_OK);
      EXPECT_EQ(acc_optimizer_create(model, algorithm, o, &opt), ACC_OK) << acc_last_error_message();
      acc_options_free(o);
    } else {
      opt = optimizer(model, algorithm, 0.01);
    }
    acc_options* so = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_SCHEDULER, &so), ACC_OK);
    EXPECT_EQ(acc_options_set_int(so, "num_warmup_steps", 2), ACC_OK);
    EXPECT_EQ(acc_options_set_int(so, "num_training_steps", 20), ACC_OK);
    EXPECT_EQ(acc_scheduler_create(opt, "linear", so, &sched), ACC_OK) << acc_last_error_message();
    acc_options_free(so);
    EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, &sched), ACC_OK) << acc_last_error_message();
  }
  ~Trainer() {
    acc_scheduler_free(sched);
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }

  // Steps on batches that depend on the step only; dropout draws from the global generator.
  void train(int from, int steps) {
    for (int s = from; s < from + steps; ++s) {
      std::vector<float> x(4 * 8);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 + s * 3) % 11) / 5.0f - 1.0f;
      acc_tensor* inputs = floats(x, {4, 8});
      acc_tensor* targets = longs({s % 3, (s + 1) % 3, 0, 2}, {4});
      acc_tensor *out = nullptr, *loss = nullptr;
      ASSERT_EQ(acc_model_forward1(model, inputs, 0, &out), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_loss_cross_entropy(out, targets, ACC_REDUCTION_MEAN, 0.0, &loss), ACC_OK);
      ASSERT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_scheduler_step(sched), ACC_OK);
      ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
      for (acc_tensor* t : {inputs, targets, out, loss}) acc_tensor_free(t);
    }
  }

  std::vector<float> weights() const {
    acc_tensor_list* state = nullptr;
    EXPECT_EQ(acc_model_state_dict(model, &state), ACC_OK);
    return flat_floats(state);
  }
  int64_t scheduler_step() const {
    int64_t step = -1;
    EXPECT_EQ(acc_scheduler_get_step(sched, &step), ACC_OK);
    return step;
  }
};

// The run's state saved in Python Accelerate's layout only: the library's own files taken out.
std::string python_folder(Trainer& run, const std::string& name) {
  const std::string dir = temp_path(name);
  EXPECT_EQ(acc_save_state(run.acc, dir.c_str(), nullptr), ACC_OK) << acc_last_error_message();
  for (const char* ours : {"accelerate_state.json", "optimizer.safetensors", "scheduler.json",
                           "random_states_0.safetensors", "dataloader_state_0.json"})
    fs::remove(dir + "/" + ours);
  return dir;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

// A run resumed from Python's files goes on exactly as the run that saved them: weights, optimizer
// moments, schedule and the generator dropout draws from. bitsandbytes' 8-bit optimizers too, their
// codes and maxima nested in optimizer.bin as its state_dict nests them.
TEST(PythonCheckpoint, ResumesWhereTheRunStood) {
  for (const char* algorithm :
       {"adamw", "adamw_8bit", "lion_8bit", "ademamix_8bit", "sgd_8bit", "rmsprop_8bit", "adagrad_8bit"}) {
    SCOPED_TRACE(algorithm);
    Trainer saved(algorithm);
    saved.train(0, 3);
    const std::string dir = python_folder(saved, std::string("python_layout_") + algorithm);
    EXPECT_EQ(entries(dir),
              (std::vector<std::string>{"model.safetensors", "optimizer.bin", "random_states_0.pkl", "scheduler.bin"}));
    saved.train(3, 3);

    Trainer resumed(algorithm, 99);
    resumed.train(0, 1);  // a different state everywhere, which the load replaces
    ACC_ASSERT_OK(acc_load_state(resumed.acc, dir.c_str(), nullptr));
    EXPECT_EQ(resumed.scheduler_step(), 3);
    resumed.train(3, 3);
    EXPECT_EQ(resumed.weights(), saved.weights());
    EXPECT_EQ(resumed.scheduler_step(), saved.scheduler_step());
  }
}

// Every damaged file is refused with its name before anything changes; the intact folder then loads.
TEST(PythonCheckpoint, RefusesDamagedFilesBeforeAnythingChanges) {
  Trainer source;
  source.train(0, 3);
  const std::string intact = python_folder(source, "python_intact");
  Trainer sgd("sgd");
  sgd.train(0, 2);
  const std::string other_algorithm = python_folder(sgd, "python_sgd");
  Trainer bnb("adamw_8bit");
  bnb.train(0, 2);
  const std::string bitsandbytes = python_folder(bnb, "python_bnb");

  Trainer target("adamw", 99);
  target.train(0, 1);
  const std::vector<float> before = target.weights();
  struct Damage {
    const char* file;
    std::function<std::string(const std::string&)> change;  // the file's new bytes from its old
    acc_status status;
    const char* needle;
  };
  const std::vector<Damage> damages = {
      {"optimizer.bin", [](const std::string& b) { return b.substr(0, b.size() / 2); }, ACC_ERR_IO, "optimizer.bin"},
      {"scheduler.bin",
       [](std::string b) {
         // A bit of the pickle itself (an offset of its own could fall in the archive's alignment padding,
         // which no reader looks at).
         b.at(b.find("last_epoch")) ^= 0x10;
         return b;
       },
       ACC_ERR_IO, "scheduler.bin"},
      {"random_states_0.pkl", [&](const std::string&) { return read_file(intact + "/scheduler.bin"); }, ACC_ERR_IO,
       "has no 'step'"},
      {"optimizer.bin", [&](const std::string&) { return read_file(bitsandbytes + "/optimizer.bin"); },
       ACC_ERR_INVALID_ARGUMENT, "is bitsandbytes' quantised state, but the optimizer is adamw"},
      {"optimizer.bin", [&](const std::string&) { return read_file(other_algorithm + "/optimizer.bin"); },
       ACC_ERR_INVALID_ARGUMENT, "is not a hyper-parameter of the adamw optimizer"},
      {"model.safetensors", [](const std::string& b) { return b.substr(0, 100); }, ACC_ERR_IO, "model.safetensors"},
      {"optimizer.bin", [](const std::string&) { return std::string("not a zip"); }, ACC_ERR_IO,
       "not in torch.save's zip format"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.needle);
    const std::string dir = temp_path("python_damaged");
    fs::remove_all(dir);
    fs::copy(intact, dir);
    write_bytes(dir + "/" + d.file, d.change(read_file(dir + "/" + d.file)));
    ACC_EXPECT_ERROR(acc_load_state(target.acc, dir.c_str(), nullptr), d.status, d.needle);
    EXPECT_EQ(target.weights(), before);
    EXPECT_EQ(target.scheduler_step(), 1);
  }
  ACC_ASSERT_OK(acc_load_state(target.acc, intact.c_str(), nullptr));
  EXPECT_EQ(target.weights(), source.weights());
}

// The folder must hold what the accelerator prepared, as a checkpoint of the library's own must;
// what its files cannot restore is refused, not skipped.
TEST(PythonCheckpoint, MustHoldWhatTheAcceleratorPrepared) {
  Trainer source;
  source.train(0, 2);
  const std::string dir = python_folder(source, "python_counts");
  Trainer target("adamw", 99);

  // A folder saved into twice, with and without safe_serialization, holds both weight files: as
  // Accelerate, the safetensors one is read (the other here is no state dict at all).
  fs::copy_file(dir + "/optimizer.bin", dir + "/pytorch_model.bin");
  ACC_ASSERT_OK(acc_load_state(target.acc, dir.c_str(), nullptr));
  EXPECT_EQ(target.weights(), source.weights());

  fs::rename(dir + "/scheduler.bin", dir + "/scheduler.bin.away");
  ACC_EXPECT_ERROR(acc_load_state(target.acc, dir.c_str(), nullptr), ACC_ERR_INVALID_ARGUMENT, "holds 0 schedulers");
  fs::rename(dir + "/scheduler.bin.away", dir + "/scheduler.bin");

  // fp16's GradScaler state (a GPU run's scaler.pt) is not read without fp16, as Accelerate's
  // load_accelerator_state skips it where there is no scaler (found by a hunt: refused, so a GPU
  // run could not be resumed on a CPU).
  write_bytes(dir + "/scaler.pt", "a GradScaler's state, not read here");
  ACC_ASSERT_OK(acc_load_state(target.acc, dir.c_str(), nullptr));
  EXPECT_EQ(target.weights(), source.weights());
  fs::remove(dir + "/scaler.pt");

  int calls = 0;
  auto save = [](void*, acc_bytes*) -> int { return 0; };
  auto load = [](void* user, const void*, size_t) -> int {
    ++*static_cast<int*>(user);
    return 0;
  };
  ACC_ASSERT_OK(acc_register_for_checkpointing(target.acc, save, load, &calls, nullptr));
  ACC_EXPECT_ERROR(acc_load_state(target.acc, dir.c_str(), nullptr), ACC_ERR_UNSUPPORTED,
                   "registered for checkpointing");
  EXPECT_EQ(calls, 0);

  // Neither the library's manifest nor Python's random states: not a checkpoint at all.
  fs::remove(dir + "/random_states_0.pkl");
  Trainer plain("adamw", 99);
  ACC_EXPECT_ERROR(acc_load_state(plain.acc, dir.c_str(), nullptr), ACC_ERR_IO, "random_states_0.pkl");
}

// load_state without a folder takes the highest-numbered checkpoint, Python Accelerate's too (as
// Accelerate's load_state does): one written by Python after ours was passed over for an older one
// of ours, and the next saves then collided with ours. The iteration goes on past its number.
TEST(PythonCheckpoint, TheNewestCheckpointMayBePythonAcceleratesOwn) {
  const std::string project = fresh_dir("python_newest");
  const std::vector<std::pair<std::string, std::string>> automatic = {{"project_dir", project},
                                                                      {"automatic_checkpoint_naming", "1"}};
  Trainer ours("adamw", 7, automatic);
  ACC_ASSERT_OK(acc_save_state(ours.acc, nullptr, nullptr));  // checkpoint_0
  ours.train(0, 1);
  ACC_ASSERT_OK(acc_save_state(ours.acc, nullptr, nullptr));  // checkpoint_1
  ours.train(1, 2);
  fs::rename(python_folder(ours, "python_newest_2"), project + "/checkpoints/checkpoint_2");
  ours.train(3, 3);

  Trainer resumed("adamw", 99, automatic);
  const auto taken = [](char* s) {
    std::string text = s ? s : "";
    acc_string_free(s);
    return text;
  };
  char* loaded = nullptr;
  ACC_ASSERT_OK(acc_load_state(resumed.acc, nullptr, &loaded));
  EXPECT_EQ(taken(loaded), project + "/checkpoints/checkpoint_2");
  EXPECT_EQ(resumed.scheduler_step(), 3);
  int64_t iteration = 0;
  ACC_ASSERT_OK(acc_accelerator_iteration(resumed.acc, &iteration));
  EXPECT_EQ(iteration, 3);
  resumed.train(3, 3);
  EXPECT_EQ(resumed.weights(), ours.weights());
  char* written = nullptr;
  ACC_ASSERT_OK(acc_save_state(resumed.acc, nullptr, &written));
  EXPECT_EQ(taken(written), project + "/checkpoints/checkpoint_3");
}
