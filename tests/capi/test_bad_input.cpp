// Bad input through the C API: calls out of order, arguments out of range, shapes whose sizes
// overflow, pointers that are not what they claim. Each must be an error status with a plain
// message, leave the out-parameters alone, and never crash.
#include <pthread.h>
#include <sys/stat.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support.h"

using acc_test::floats;
using acc_test::to_floats;

namespace {

const char* kLinear = R"([{"type":"linear","in_features":2,"out_features":1}])";

acc_accelerator* cpu_accelerator() { return acc_test::make_accelerator({{"cpu", "true"}}); }

acc_model* linear_model() {
  acc_model* m = nullptr;
  EXPECT_EQ(acc_model_from_spec(kLinear, &m), ACC_OK) << acc_last_error_message();
  return m;
}

}  // namespace

TEST(BadInput, EndWithoutBeginIsAnError) {
  acc_accelerator* a = cpu_accelerator();
  acc_model* raw = linear_model();
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(a, raw, ACC_PLACEMENT_DEFAULT, &model));

  ACC_EXPECT_ERROR(acc_accumulate_end(a), ACC_ERR_INVALID_ARGUMENT, "accumulate_begin");
  ACC_EXPECT_ERROR(acc_no_sync_end(a, model), ACC_ERR_INVALID_ARGUMENT, "no_sync_begin");
  ACC_EXPECT_ERROR(acc_main_process_first_end(a), ACC_ERR_INVALID_ARGUMENT, "main_process_first_begin");
  ACC_EXPECT_ERROR(acc_local_main_process_first_end(a), ACC_ERR_INVALID_ARGUMENT,
                   "local_main_process_first_begin");
  ACC_EXPECT_ERROR(acc_autocast_end(a), ACC_ERR_INVALID_ARGUMENT, "autocast_begin");

  // Matched pairs still work, nested ones too; a second end after them is an error again.
  ACC_ASSERT_OK(acc_accumulate_begin(a));
  ACC_ASSERT_OK(acc_accumulate_end(a));
  ACC_ASSERT_OK(acc_no_sync_begin(a, model));
  ACC_ASSERT_OK(acc_no_sync_begin(a, model));
  ACC_ASSERT_OK(acc_no_sync_end(a, model));
  ACC_ASSERT_OK(acc_no_sync_end(a, model));
  ACC_EXPECT_ERROR(acc_no_sync_end(a, model), ACC_ERR_INVALID_ARGUMENT, "no_sync_begin");
  ACC_ASSERT_OK(acc_main_process_first_begin(a));
  ACC_ASSERT_OK(acc_main_process_first_end(a));
  ACC_EXPECT_ERROR(acc_main_process_first_end(a), ACC_ERR_INVALID_ARGUMENT, "main_process_first_begin");
  ACC_ASSERT_OK(acc_local_main_process_first_begin(a));
  ACC_ASSERT_OK(acc_local_main_process_first_end(a));

  acc_model_free(model);
  acc_model_free(raw);
  acc_accelerator_free(a);
}

// A dimension the tensor does not have pads nothing, as Accelerate's _pad_across_processes returns
// such a tensor as it is (was refused here: found comparing with Accelerate).
TEST(BadInput, PadAcrossProcessesLeavesATensorWithoutTheDimensionAsItIs) {
  acc_accelerator* a = cpu_accelerator();
  acc_tensor* t = floats({1, 2, 3, 4, 5, 6}, {2, 3});
  acc_tensor* scalar = floats({7}, {});
  for (int64_t dim : {int64_t{2}, int64_t{-3}, INT64_MAX, INT64_MIN}) {
    acc_tensor* out = nullptr;
    ACC_ASSERT_OK(acc_pad_across_processes(a, t, dim, 0, 0, "x", &out));
    EXPECT_EQ(acc_test::shape(out), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(to_floats(out), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    acc_tensor_free(out);
  }
  acc_tensor* out = nullptr;
  ACC_ASSERT_OK(acc_pad_across_processes(a, scalar, 0, 0, 0, "x", &out));
  EXPECT_EQ(to_floats(out), (std::vector<float>{7}));
  acc_tensor_free(out);
  ACC_ASSERT_OK(acc_pad_across_processes(a, t, -1, 0, 0, "x", &out));
  acc_tensor_free(out);
  acc_tensor_free(scalar);
  acc_tensor_free(t);
  acc_accelerator_free(a);
}

TEST(BadInput, ASchedulerIsPreparedAfterItsOptimizer) {
  acc_accelerator* a = cpu_accelerator();
  acc_model* model = linear_model();
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt));
  acc_scheduler* sched = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt, "constant", nullptr, &sched));
  acc_scheduler* prepared = nullptr;
  ACC_EXPECT_ERROR(acc_prepare_scheduler(a, sched, &prepared), ACC_ERR_INVALID_ARGUMENT, "optimizer");
  EXPECT_EQ(prepared, nullptr);

  acc_optimizer* prepared_opt = nullptr;
  ACC_ASSERT_OK(acc_prepare_optimizer(a, opt, ACC_PLACEMENT_DEFAULT, &prepared_opt));
  ACC_ASSERT_OK(acc_prepare_scheduler(a, sched, &prepared));
  // Both at once: acc_prepare takes the optimizer first, whatever the order of the arguments.
  acc_optimizer* opt2 = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(model, "sgd", nullptr, &opt2));
  acc_scheduler* sched2 = nullptr;
  ACC_ASSERT_OK(acc_scheduler_create(opt2, "constant", nullptr, &sched2));
  ACC_ASSERT_OK(acc_prepare(a, nullptr, &opt2, nullptr, &sched2));

  for (acc_scheduler* s : {sched, prepared, sched2}) acc_scheduler_free(s);
  for (acc_optimizer* o : {opt, prepared_opt, opt2}) acc_optimizer_free(o);
  acc_model_free(model);
  acc_accelerator_free(a);
}

TEST(BadInput, OutParametersAreRequiredAndUntouchedOnFailure) {
  acc_accelerator* a = cpu_accelerator();
  int64_t start = -7, end = -7, padding = -7;
  ACC_EXPECT_ERROR(acc_split_between_processes(a, 5, 1, &start, &end, nullptr), ACC_ERR_INVALID_ARGUMENT, "padding");
  ACC_EXPECT_ERROR(acc_split_between_processes(a, 5, 1, &start, nullptr, &padding), ACC_ERR_INVALID_ARGUMENT, "end");
  EXPECT_EQ(start, -7);
  EXPECT_EQ(padding, -7);
  ACC_EXPECT_ERROR(acc_split_between_processes(a, -1, 1, &start, &end, &padding), ACC_ERR_INVALID_ARGUMENT, "n");
  ACC_ASSERT_OK(acc_split_between_processes(a, 5, 1, &start, &end, &padding));
  EXPECT_EQ(start, 0);
  EXPECT_EQ(end, 5);
  EXPECT_EQ(padding, 0);

  acc_string_list* list = nullptr;
  ACC_ASSERT_OK(acc_gather_object(a, "abc", 3, "bytes", &list));
  const void* data = reinterpret_cast<const void*>(0x1);
  ACC_EXPECT_ERROR(acc_string_list_get_bytes(list, 0, &data, nullptr), ACC_ERR_INVALID_ARGUMENT, "size");
  EXPECT_EQ(data, reinterpret_cast<const void*>(0x1));
  acc_string_list_free(list);
  acc_accelerator_free(a);
}

TEST(BadInput, CallersMistakesAreInvalidArgumentWithAPlainMessage) {
  acc_accelerator* a = cpu_accelerator();
  acc_model* model = linear_model();
  // Larger than float32 can hold: clips nothing, as a bound of +inf would.
  ACC_ASSERT_OK(acc_clip_grad_value(a, model, 1e308));

  const std::string long_path = "/tmp/" + std::string(100000, 'x');
  acc_model* loaded = nullptr;
  const acc_status status = acc_model_load_torchscript(long_path.c_str(), &loaded);
  EXPECT_TRUE(status == ACC_ERR_IO || status == ACC_ERR_INVALID_ARGUMENT) << acc_status_name(status);
  EXPECT_EQ(std::string(acc_last_error_message()).find("unexpected"), std::string::npos) << acc_last_error_message();
  char* dir = nullptr;
  const acc_status save = acc_save_state(a, long_path.c_str(), &dir);
  EXPECT_TRUE(save == ACC_ERR_IO || save == ACC_ERR_INVALID_ARGUMENT) << acc_status_name(save);
  EXPECT_EQ(std::string(acc_last_error_message()).find("unexpected"), std::string::npos) << acc_last_error_message();
  // The same path on load (a collective's step, whose failures every process shares): the system's
  // refusal is still IO, not an internal error.
  ACC_EXPECT_ERROR(acc_load_state(a, long_path.c_str(), nullptr), ACC_ERR_IO, "File name too long");
  EXPECT_EQ(dir, nullptr);

  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"linear","in_features":1e400,"out_features":1}])", &loaded),
                   ACC_ERR_INVALID_ARGUMENT, "1e400");
  EXPECT_EQ(loaded, nullptr);

  // A name that is not UTF-8 cannot go into a JSON file or an event file.
  ACC_ASSERT_OK(acc_model_from_spec(kLinear, &loaded));
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(loaded, &state));
  acc_model_free(loaded);
  acc_tensor* x = floats({1}, {1});
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&list));
  ACC_ASSERT_OK(acc_tensor_list_append(list, "\xff\xfe", x));
  const std::string file = acc_test::temp_path("bad_name.safetensors");
  ACC_EXPECT_ERROR(acc_save(a, list, file.c_str()), ACC_ERR_INVALID_ARGUMENT, "UTF-8");
  EXPECT_EQ(acc_test::read_file(file), "") << "nothing is written";
  acc_tensor_list_free(list);
  acc_tensor_list_free(state);
  acc_tensor_free(x);
  acc_model_free(model);
  acc_accelerator_free(a);
}

TEST(BadInput, AnEmptyPathIsRefusedAndAFailedWriteLeavesNoTemporaryBehind) {
  acc_tensor* x = floats({1, 2}, {2});
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&list));
  ACC_ASSERT_OK(acc_tensor_list_append(list, "x", x));
  ACC_EXPECT_ERROR(acc_tensor_list_save_safetensors(list, ""), ACC_ERR_INVALID_ARGUMENT, "path is empty");
  {
    // A name given twice, apart once sorted by dtype (the header could hold only one of them, and the
    // data would have a hole no reader takes): refused, nothing written.
    const int32_t ints[] = {3, 4, 5};
    const int64_t three[] = {3};
    acc_tensor* i = nullptr;
    ACC_ASSERT_OK(acc_tensor_from_host(ints, sizeof ints, three, 1, ACC_DTYPE_INT32, &i));
    acc_tensor_list* twice = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_create(&twice));
    ACC_ASSERT_OK(acc_tensor_list_append(twice, "w", x));
    ACC_ASSERT_OK(acc_tensor_list_append(twice, "z", x));
    ACC_ASSERT_OK(acc_tensor_list_append(twice, "w", i));
    const std::string path = acc_test::temp_path("twice.safetensors");
    ACC_EXPECT_ERROR(acc_tensor_list_save_safetensors(twice, path.c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "tensor name 'w' is repeated");
    EXPECT_FALSE(std::filesystem::exists(path));
    acc_tensor_list_free(twice);
    acc_tensor_free(i);
  }
  acc_model* model = linear_model();
  ACC_EXPECT_ERROR(acc_model_save_torchscript(model, ""), ACC_ERR_INVALID_ARGUMENT, "path is empty");
  acc_model* loaded = nullptr;
  ACC_EXPECT_ERROR(acc_model_load_torchscript("", &loaded), ACC_ERR_INVALID_ARGUMENT, "path is empty");

  // A path that is a folder: the rename into place fails, and the temporary it wrote is gone too.
  const std::string folder = acc_test::temp_path("a_folder.safetensors");
  std::filesystem::create_directories(folder);
  ACC_EXPECT_ERROR(acc_tensor_list_save_safetensors(list, folder.c_str()), ACC_ERR_IO, folder);
  EXPECT_TRUE(acc_test::temporaries_of(folder).empty());
  EXPECT_TRUE(std::filesystem::is_directory(folder));
  acc_model_free(model);
  acc_tensor_list_free(list);
  acc_tensor_free(x);
}

TEST(BadInput, ShapesWhoseSizeOverflowsAreRefused) {
  const std::string file = acc_test::temp_path("mmap_overflow.bin");
  {
    FILE* f = std::fopen(file.c_str(), "wb");
    const char bytes[64] = {};
    std::fwrite(bytes, 1, sizeof bytes, f);
    std::fclose(f);
  }
  acc_tensor* t = nullptr;
  const int64_t wrap_row[] = {-1, int64_t{1} << 62};
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap(file.c_str(), 0, ACC_DTYPE_FLOAT32, wrap_row, 2, &t),
                   ACC_ERR_INVALID_ARGUMENT, "overflow");
  const int64_t wrap_total[] = {int64_t{1} << 31, int64_t{1} << 31};
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap(file.c_str(), 0, ACC_DTYPE_FLOAT64, wrap_total, 2, &t),
                   ACC_ERR_INVALID_ARGUMENT, "overflow");
  EXPECT_EQ(t, nullptr);
  std::remove(file.c_str());
  // (2^62 + 1) * 4 bytes wraps to 4: a 4-byte buffer must not pass for that shape.
  float four_bytes = 1.0f;
  const int64_t wraps_to_four[] = {(int64_t{1} << 62) + 1};
  ACC_EXPECT_ERROR(
      acc_tensor_from_host_borrow(&four_bytes, 4, wraps_to_four, 1, ACC_DTYPE_FLOAT32, nullptr, nullptr, &t),
      ACC_ERR_INVALID_ARGUMENT, "overflow");
  ACC_EXPECT_ERROR(acc_tensor_from_host(&four_bytes, 4, wraps_to_four, 1, ACC_DTYPE_FLOAT32, &t),
                   ACC_ERR_INVALID_ARGUMENT, "overflow");
  EXPECT_EQ(t, nullptr);

  acc_tensor* values = floats({1, 2, 3, 4}, {4});
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(&values, 1, &ds));
  acc_dataset* sub = nullptr;
  ACC_EXPECT_ERROR(acc_dataset_subset(ds, 2, INT64_MAX, &sub), ACC_ERR_INVALID_ARGUMENT, "outside");
  ACC_EXPECT_ERROR(acc_dataset_subset(ds, INT64_MAX, 2, &sub), ACC_ERR_INVALID_ARGUMENT, "outside");
  EXPECT_EQ(sub, nullptr);

  const int64_t indices[] = {0, 1};
  const size_t sizes[] = {SIZE_MAX, 3};
  acc_dataloader* dl = nullptr;
  ACC_EXPECT_ERROR(acc_dataloader_create_from_batches(ds, indices, sizes, 2, nullptr, &dl), ACC_ERR_INVALID_ARGUMENT,
                   "batch_sizes");
  EXPECT_EQ(dl, nullptr);
  acc_dataset_free(ds);
  acc_tensor_free(values);
}

namespace {

struct Kept {
  acc_bytes* sink = nullptr;
};

int keep_sink(void* self, acc_bytes* out) {
  static_cast<Kept*>(self)->sink = out;
  return acc_bytes_append(out, "x", 1) == ACC_OK ? 0 : 1;
}
int accept_bytes(void*, const void*, size_t) { return 0; }

}  // namespace

TEST(BadInput, ASinkIsOnlyValidDuringItsCallback) {
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"project_dir", acc_test::temp_path("sink")}});
  Kept kept;
  ACC_ASSERT_OK(acc_register_for_checkpointing(a, keep_sink, accept_bytes, &kept, nullptr));
  const std::string dir = acc_test::temp_path("sink/ckpt");
  ACC_ASSERT_OK(acc_save_state(a, dir.c_str(), nullptr));
  ASSERT_NE(kept.sink, nullptr);
  ACC_EXPECT_ERROR(acc_bytes_append(kept.sink, "y", 1), ACC_ERR_INVALID_HANDLE, "sink");
  long long foreign = 0;
  ACC_EXPECT_ERROR(acc_bytes_append(reinterpret_cast<acc_bytes*>(&foreign), "y", 1), ACC_ERR_INVALID_HANDLE, "sink");
  acc_accelerator_free(a);
  std::system(("rm -rf " + acc_test::temp_path("sink")).c_str());
}

namespace {

std::string nested_json(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }
std::string nested_object(size_t depth) {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += "{\"a\":";
  return text + "1" + std::string(depth, '}');
}

}  // namespace

TEST(BadInput, DeeplyNestedJsonIsRefusedNotAStackOverflow) {
  acc_model* model = nullptr;
  ACC_EXPECT_ERROR(acc_model_from_spec(nested_json(100000).c_str(), &model), ACC_ERR_INVALID_ARGUMENT, "nested deeper");
  EXPECT_EQ(model, nullptr);

  const std::string dir = acc_test::temp_path("deep_config");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "jsonl"}, {"project_dir", dir}});
  ACC_EXPECT_ERROR(acc_init_trackers(a, "run", nested_object(100000).c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "nested deeper");
  // A reasonable nesting still works.
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nested_object(20).c_str()));
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
  std::system(("rm -rf " + dir).c_str());
}

TEST(BadInput, AConfigFileOfNestedAliasesIsRefusedAtOnce) {
  const std::string path = acc_test::temp_path("laughs.yaml");
  {
    std::string text = "distributed_type: 'NO'\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
    for (int i = 1; i < 10; ++i) {
      text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
      for (int k = 0; k < 10; ++k) text += (k ? ", *a" : "*a") + std::to_string(i - 1);
      text += "]\n";
    }
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  {
    const acc_test::ScopedEnv config("ACCELERATE_CONFIG_FILE", path.c_str());
    acc_accelerator* a = nullptr;
    ACC_EXPECT_ERROR(acc_accelerator_create(nullptr, &a), ACC_ERR_INVALID_ARGUMENT, "expands to more than");
    EXPECT_EQ(a, nullptr);
  }
  std::remove(path.c_str());
}

// A FIFO where a file is read (a model, a checkpoint's manifest, an adapter's config, a sharded
// model's index) is refused at once: opening it would wait for a writer forever.
TEST(BadInput, AFifoInPlaceOfAFileIsRefusedNotWaitedOn) {
  const std::string dir = acc_test::temp_path("fifos");
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir + "/state " + dir + "/lora " + dir + "/sharded").c_str()), 0);
  for (const char* file : {"/model.pt", "/state/accelerate_state.json", "/lora/adapter_config.json",
                           "/sharded/model.safetensors.index.json"})
    ASSERT_EQ(mkfifo((dir + file).c_str(), 0600), 0) << file;
  acc_model* model = nullptr;
  ACC_EXPECT_ERROR(acc_model_load_torchscript((dir + "/model.pt").c_str(), &model), ACC_ERR_IO, "not a regular file");
  EXPECT_EQ(model, nullptr);
  model = linear_model();
  ACC_EXPECT_ERROR(acc_model_load_lora(model, (dir + "/lora").c_str()), ACC_ERR_IO, "not a regular file");
  ACC_EXPECT_ERROR(acc_model_load_safetensors(model, (dir + "/sharded").c_str(), 1, nullptr, nullptr), ACC_ERR_IO,
                   "not a regular file");
  acc_accelerator* a = cpu_accelerator();
  ACC_EXPECT_ERROR(acc_load_state(a, (dir + "/state").c_str(), nullptr), ACC_ERR_IO, "not a regular file");
  acc_accelerator_free(a);
  acc_model_free(model);
  std::system(("rm -rf " + dir).c_str());
}

// A byte count no buffer can hold is the caller's mistake, not an internal error.
TEST(BadInput, AnImpossibleByteCountIsInvalid) {
  acc_accelerator* a = cpu_accelerator();
  const char byte = 1;
  acc_string_list* out = nullptr;
  for (const size_t size : {SIZE_MAX, size_t{1} << 62}) {
    ACC_EXPECT_ERROR(acc_gather_object(a, &byte, size, "g", &out), ACC_ERR_INVALID_ARGUMENT,
                     "size " + std::to_string(size) + " is larger than any object can be");
    ACC_EXPECT_ERROR(acc_broadcast_object(a, &byte, size, 0, "b", &out), ACC_ERR_INVALID_ARGUMENT,
                     "is larger than any object can be");
  }
  EXPECT_EQ(out, nullptr);
  acc_accelerator_free(a);
}

// The checkpoint counter names checkpoint_<iteration>: at its largest value there is no next name.
TEST(BadInput, ACheckpointCounterAtItsLargestIsRefused) {
  const std::string dir = acc_test::temp_path("iteration_max");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"},
                                                   {"project_dir", dir},
                                                   {"automatic_checkpoint_naming", "true"},
                                                   {"iteration", std::to_string(INT64_MAX)}});
  char* saved = nullptr;
  ACC_EXPECT_ERROR(acc_save_state(a, nullptr, &saved), ACC_ERR_INVALID_ARGUMENT, "largest value");
  EXPECT_EQ(saved, nullptr);
  acc_accelerator_free(a);
  std::system(("rm -rf " + dir).c_str());
}

// Counts and sums at the edge of int64: refused where they would wrap, right where they do not.
TEST(BadInput, CountsAtTheEdgeOfInt64NeverWrap) {
  // A loader's length with a batch size near INT64_MAX: one batch, not -1 or 0.
  acc_tensor* xs = floats(std::vector<float>(10, 1.0f), {10, 1});
  const acc_tensor* fields[] = {xs};
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(fields, 1, &ds));
  for (const int64_t batch : {INT64_MAX - 8, INT64_MAX}) {
    acc_options* lo = nullptr;
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &lo));
    ACC_ASSERT_OK(acc_options_set_int(lo, "batch_size", batch));
    acc_dataloader* dl = nullptr;
    ACC_ASSERT_OK(acc_dataloader_create(ds, lo, &dl));
    int64_t length = -7;
    ACC_ASSERT_OK(acc_dataloader_length(dl, &length));
    EXPECT_EQ(length, 1) << "batch_size " << batch;
    // The epoch after INT64_MAX does not exist.
    ACC_EXPECT_ERROR(acc_dataloader_set_epoch(dl, INT64_MAX), ACC_ERR_INVALID_ARGUMENT, "below 2^63 - 1");
    ACC_ASSERT_OK(acc_dataloader_set_epoch(dl, INT64_MAX - 1));
    // That epoch runs; the one after it, 2^63 - 1, cannot start (nothing could follow it).
    acc_tensor_list* list = nullptr;
    ACC_ASSERT_OK(acc_dataloader_next(dl, &list));
    ASSERT_NE(list, nullptr);
    acc_tensor_list_free(list);
    ACC_ASSERT_OK(acc_dataloader_next(dl, &list));
    EXPECT_EQ(list, nullptr) << "the epoch's end";
    int64_t epoch = 0;
    ACC_ASSERT_OK(acc_dataloader_epoch(dl, &epoch));
    EXPECT_EQ(epoch, INT64_MAX);
    ACC_EXPECT_ERROR(acc_dataloader_next(dl, &list), ACC_ERR_INVALID_ARGUMENT,
                     "epoch 9223372036854775807 cannot start");
    ACC_ASSERT_OK(acc_dataloader_epoch(dl, &epoch));
    EXPECT_EQ(epoch, INT64_MAX) << "never wraps";
    ACC_ASSERT_OK(acc_dataloader_set_epoch(dl, 0));
    ACC_ASSERT_OK(acc_dataloader_next(dl, &list));
    EXPECT_NE(list, nullptr);
    acc_tensor_list_free(list);
    acc_dataloader_free(dl);
    acc_options_free(lo);
  }
  acc_dataset_free(ds);
  acc_tensor_free(xs);

  // warmup + stable + decay steps that do not fit; one_cycle's divisors of 0 (PyTorch divides by them).
  acc_model* m = linear_model();
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "sgd", nullptr, &opt));
  acc_options* so = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &so));
  ACC_ASSERT_OK(acc_options_set_int(so, "num_warmup_steps", 2));
  ACC_ASSERT_OK(acc_options_set_int(so, "num_decay_steps", 2));
  ACC_ASSERT_OK(acc_options_set_int(so, "num_stable_steps", INT64_MAX));
  acc_scheduler* sched = nullptr;
  ACC_EXPECT_ERROR(acc_scheduler_create(opt, "warmup_stable_decay", so, &sched), ACC_ERR_INVALID_ARGUMENT,
                   "does not fit in 64 bits");
  acc_options_free(so);
  for (const char* key : {"div_factor", "final_div_factor"}) {
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &so));
    ACC_ASSERT_OK(acc_options_set_double(so, "max_lr", 0.1));
    ACC_ASSERT_OK(acc_options_set_int(so, "total_steps", 10));
    ACC_ASSERT_OK(acc_options_set_double(so, key, 0.0));
    ACC_EXPECT_ERROR(acc_scheduler_create(opt, "one_cycle", so, &sched), ACC_ERR_INVALID_ARGUMENT, "must be > 0");
    acc_options_free(so);
  }
  EXPECT_EQ(sched, nullptr);

  // An averaged model whose count is at its largest takes no more updates (and stays as it was).
  acc_averaged_model* avg = nullptr;
  ACC_ASSERT_OK(acc_averaged_model_create(m, nullptr, &avg));
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_averaged_model_state_dict(avg, &state));
  acc_tensor* most = acc_test::longs({INT64_MAX}, {});
  acc_tensor_list* full = acc_test::changed_list(
      state, [&](const std::string& key, const acc_tensor* t) { return key == "n_averaged" ? most : t; });
  acc_tensor_free(most);
  ACC_ASSERT_OK(acc_averaged_model_load_state_dict(avg, full));
  ACC_EXPECT_ERROR(acc_averaged_model_update(avg, m), ACC_ERR_INVALID_ARGUMENT, "one more update does not fit");
  int64_t count = 0;
  ACC_ASSERT_OK(acc_averaged_model_count(avg, &count));
  EXPECT_EQ(count, INT64_MAX);
  acc_tensor_list_free(full);
  acc_tensor_list_free(state);
  acc_averaged_model_free(avg);
  acc_optimizer_free(opt);
  acc_model_free(m);

  // A timeout whose milliseconds would wrap.
  acc_options* ao = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &ao));
  ACC_EXPECT_ERROR(acc_options_set_int(ao, "timeout_seconds", INT64_MAX), ACC_ERR_INVALID_ARGUMENT,
                   "'timeout_seconds' must be at most");
  acc_options_free(ao);
}

// acc_model_to after steps: the optimizer's state follows the parameters (PyTorch's load_state_dict
// rule), so the next step runs in the new dtype; a rate the dtype cannot hold is the caller's
// mistake, refused before the step changes anything.
TEST(BadInput, TheOptimizerFollowsTheModelsDtypeAndRefusesRatesItCannotHold) {
  for (const char* algorithm : {"adam", "rmsprop", "adagrad", "nadam", "radam", "adadelta", "adamax", "rprop"}) {
    SCOPED_TRACE(algorithm);
    acc_model* m = linear_model();
    acc_optimizer* opt = nullptr;
    ACC_ASSERT_OK(acc_optimizer_create(m, algorithm, nullptr, &opt));
    auto step = [&] {
      acc_tensor* x = floats({1.0f, 2.0f}, {1, 2});
      acc_tensor* x_now = nullptr;
      acc_dtype dtype = ACC_DTYPE_UNDEFINED;
      acc_tensor* w = nullptr;
      EXPECT_EQ(acc_model_parameter(m, "0.weight", &w), ACC_OK);
      EXPECT_EQ(acc_tensor_dtype(w, &dtype), ACC_OK);
      EXPECT_EQ(acc_tensor_to(x, nullptr, dtype, &x_now), ACC_OK);
      acc_tensor *out = nullptr, *loss = nullptr;
      EXPECT_EQ(acc_model_forward1(m, x_now, 0, &out), ACC_OK) << acc_last_error_message();
      EXPECT_EQ(acc_tensor_sum(out, &loss), ACC_OK);
      EXPECT_EQ(acc_tensor_backward(loss), ACC_OK);
      const acc_status status = acc_optimizer_step(opt);
      EXPECT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
      for (acc_tensor* t : {x, x_now, w, out, loss}) acc_tensor_free(t);
      return status;
    };
    ACC_ASSERT_OK(step());
    for (const acc_dtype dtype : {ACC_DTYPE_FLOAT64, ACC_DTYPE_BFLOAT16, ACC_DTYPE_FLOAT32}) {
      ACC_ASSERT_OK(acc_model_to(m, nullptr, dtype));
      EXPECT_EQ(step(), ACC_OK) << "after acc_model_to " << dtype << ": " << acc_last_error_message();
    }
    ACC_ASSERT_OK(acc_optimizer_set_lr(opt, 0, 1e308));
    ACC_EXPECT_ERROR(step(), ACC_ERR_INVALID_ARGUMENT, "does not fit the parameters' dtype Float");
    acc_optimizer_free(opt);
    acc_model_free(m);
  }
  // Another hyper-parameter too large for float32: the caller's mistake, not an internal error.
  acc_model* m = linear_model();
  acc_options* oo = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &oo));
  ACC_ASSERT_OK(acc_options_set_double(oo, "weight_decay", 1e308));
  acc_optimizer* opt = nullptr;
  ACC_ASSERT_OK(acc_optimizer_create(m, "adam", oo, &opt));
  acc_tensor* x = floats({1.0f, 2.0f}, {1, 2});
  acc_tensor *out = nullptr, *loss = nullptr;
  ACC_ASSERT_OK(acc_model_forward1(m, x, 0, &out));
  ACC_ASSERT_OK(acc_tensor_sum(out, &loss));
  ACC_ASSERT_OK(acc_tensor_backward(loss));
  ACC_EXPECT_ERROR(acc_optimizer_step(opt), ACC_ERR_INVALID_ARGUMENT, "a hyper-parameter does not fit");
  for (acc_tensor* t : {x, out, loss}) acc_tensor_free(t);
  acc_optimizer_free(opt);
  acc_options_free(oo);
  acc_model_free(m);
}

// acc_model_to between a forward and its backward: the gradients arrive in the dtype the graph was
// recorded in, not the parameters' new one. The step refuses them, naming the parameter, before
// anything changes (ATen's kernels would fail inside, an internal assertion, after some state moved).
TEST(BadInput, AGradientFromAForwardBeforeTheModelMovedIsRefused) {
  for (const char* algorithm : {"adamw", "sgd", "adagrad", "rprop"}) {
    SCOPED_TRACE(algorithm);
    acc_model* m = linear_model();
    acc_optimizer* opt = nullptr;
    ACC_ASSERT_OK(acc_optimizer_create(m, algorithm, nullptr, &opt));
    // A forward in `dtype`, then the backward, with the model moved to bf16 between them if asked.
    auto backward = [&](acc_dtype dtype, bool move_between) {
      acc_tensor* x = floats({1.0f, 2.0f}, {1, 2});
      acc_tensor *x_now = nullptr, *out = nullptr, *loss = nullptr;
      ACC_ASSERT_OK(acc_tensor_to(x, nullptr, dtype, &x_now));
      ACC_ASSERT_OK(acc_model_forward1(m, x_now, 0, &out));
      ACC_ASSERT_OK(acc_tensor_sum(out, &loss));
      if (move_between) ACC_ASSERT_OK(acc_model_to(m, nullptr, ACC_DTYPE_BFLOAT16));
      ACC_ASSERT_OK(acc_tensor_backward(loss));
      for (acc_tensor* t : {x, x_now, out, loss}) acc_tensor_free(t);
    };
    auto weights = [&] {  // as float32 (to_floats reads float32)
      acc_tensor *w = nullptr, *w32 = nullptr;
      EXPECT_EQ(acc_model_parameter(m, "0.weight", &w), ACC_OK);
      EXPECT_EQ(acc_tensor_to(w, nullptr, ACC_DTYPE_FLOAT32, &w32), ACC_OK);
      std::vector<float> values = acc_test::to_floats(w32);
      acc_tensor_free(w);
      acc_tensor_free(w32);
      return values;
    };
    backward(ACC_DTYPE_FLOAT32, false);  // a step first, so that the rule has state
    ACC_ASSERT_OK(acc_optimizer_step(opt));
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    backward(ACC_DTYPE_FLOAT32, true);
    ASSERT_FALSE(HasFatalFailure());
    const std::vector<float> before = weights();
    ACC_EXPECT_ERROR(acc_optimizer_step(opt), ACC_ERR_INVALID_ARGUMENT,
                     "parameter '0.weight' is BFloat16 on cpu but its gradient is Float on cpu");
    EXPECT_EQ(weights(), before);
    // Gradients made again after the move: the step goes on.
    ACC_ASSERT_OK(acc_optimizer_zero_grad(opt));
    backward(ACC_DTYPE_BFLOAT16, false);
    EXPECT_EQ(acc_optimizer_step(opt), ACC_OK) << acc_last_error_message();
    EXPECT_NE(weights(), before);
    acc_optimizer_free(opt);
    acc_model_free(m);
  }
}

// JSON integers above INT64_MAX would wrap to negative sizes; an input index past any forward's
// argument list would make the model demand that many inputs.
TEST(BadInput, SpecNumbersOutsideWhatTheyCanBeAreRefused) {
  acc_model* model = nullptr;
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":18446744073709551615}])", &model),
                   ACC_ERR_INVALID_ARGUMENT, "'out_features' must be an integer");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"avgpool2d","kernel_size":[2,18446744073709551615]}])", &model),
                   ACC_ERR_INVALID_ARGUMENT, "kernel_size");
  ACC_EXPECT_ERROR(acc_model_from_spec(R"([{"type":"relu","from":{"input":9223372036854775807}}])", &model),
                   ACC_ERR_INVALID_ARGUMENT, "input k < 64");
  // 3 * embed_dim rows of the packed q, k, v projection would overflow.
  ACC_EXPECT_ERROR(
      acc_model_from_spec(R"([{"type":"multihead_attention","embed_dim":4611686018427387904,"num_heads":1}])", &model),
      ACC_ERR_INVALID_ARGUMENT, "too large");
  EXPECT_EQ(model, nullptr);
  // A bucket size whose byte count would overflow.
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o));
  ACC_EXPECT_ERROR(acc_options_set_int(o, "ddp_bucket_cap_mb", int64_t{1} << 50), ACC_ERR_INVALID_ARGUMENT,
                   "ddp_bucket_cap_mb");
  acc_options_free(o);
}

namespace {

// classifier.pt with a function nested `depth` deep (`kind`: brackets or unary minus signs) added to
// its code, the archive otherwise as torch writes it (deflated code records, valid CRCs).
std::string archive_with_nesting(const std::string& kind, int depth) {
  const std::string out = acc_test::temp_path("nested_" + kind + std::to_string(depth) + ".pt");
  const std::string body = kind == "brackets" ? "'(' * n + 'x' + ')' * n" : "'-' * n + 'x'";
  const std::string script =
      "import sys, zipfile\n"
      "src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
      "with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, 'w') as b:\n"
      "    for i in a.infolist():\n"
      "        data = a.read(i)\n"
      "        if i.filename.endswith('/code/__torch__.py'):\n"
      "            data += ('\\ndef deep(x: int) -> int:\\n  return ' + " +
      body +
      " + '\\n').encode()\n"
      "        b.writestr(i, data)\n";
  const std::string py = out + ".py";
  std::ofstream(py) << script;
  EXPECT_EQ(std::system(("python3 '" + py + "' '" + acc_test::data_dir() + "/classifier.pt' '" + out + "' " +
                         std::to_string(depth))
                            .c_str()),
            0);
  return out;
}

struct LoadOnThread {
  std::string path;
  acc_status status = ACC_ERR_INTERNAL;
};

}  // namespace

// libtorch parses a TorchScript archive's code recursively: code nested thousands deep killed the
// process (SIGSEGV, its stack overflowed). Past the bound it is refused naming the record; within it,
// the load runs on a stack of its own, so it works from a thread with a small stack too (a JVM's).
TEST(BadInput, TorchScriptCodeNestedTooDeepIsRefusedNotACrash) {
  for (const std::string kind : {"brackets", "unary"}) {
    const std::string deep = archive_with_nesting(kind, 20000);
    acc_model* m = nullptr;
    ACC_EXPECT_ERROR(acc_model_load_torchscript(deep.c_str(), &m), ACC_ERR_IO, "code/__torch__.py' holds code nested");
    EXPECT_EQ(m, nullptr);
  }
  LoadOnThread load{archive_with_nesting("brackets", 1500)};
  pthread_attr_t attributes;
  ASSERT_EQ(pthread_attr_init(&attributes), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attributes, size_t{256} << 10), 0);  // 256 KiB
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attributes,
                [](void* argument) -> void* {
                  auto* job = static_cast<LoadOnThread*>(argument);
                  acc_model* m = nullptr;
                  job->status = acc_model_load_torchscript(job->path.c_str(), &m);
                  acc_model_free(m);
                  return nullptr;
                },
                &load),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);
  EXPECT_EQ(load.status, ACC_OK) << acc_last_error_message();
}

namespace {

// Counts free_user_data's calls on an int of the test.
void count_free(void* counter) { ++*static_cast<int*>(counter); }
int unit_factor(void*, int64_t, double* factor) { return *factor = 1.0, 0; }
int failing_factor(void*, int64_t, double*) { return 1; }
int unit_group_factor(void*, size_t, int64_t, double* factor) { return *factor = 1.0, 0; }
int no_sample(void*, int64_t, acc_tensor_list**) { return 1; }
int no_batch(void*, const acc_tensor_list* const*, size_t, acc_tensor_list**) { return 1; }
int no_bytes(void*, acc_bytes*) { return 0; }
int no_hook(void*, const char*) { return 0; }
int no_models_hook(void*, acc_checkpoint_models*, const char*) { return 0; }
int no_trace(void*, int64_t) { return 0; }

}  // namespace

// One rule for every function taking user data (found by a hunt: whether a failed registration
// freed it depended on which argument was wrong, so no C caller could free it correctly): the call
// owns it, and a failure of any kind frees it once before returning.
TEST(BadInput, UserDataIsFreedOnceWhateverMadeTheCallFail) {
  acc_model* model = linear_model();
  acc_optimizer* opt = acc_test::optimizer(model, "sgd", 0.1);
  acc_accelerator* acc = cpu_accelerator();
  acc_tensor* rows = floats({1, 2, 3, 4}, {2, 2});
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_tensors(&rows, 1, &ds));
  acc_dataloader* dl = nullptr;
  ACC_ASSERT_OK(acc_dataloader_create(ds, nullptr, &dl));
  acc_scheduler* sched = nullptr;
  acc_dataset* made = nullptr;
  uint64_t id = 0;
  struct Case {
    const char* what;
    std::function<acc_status(void*)> call;
  };
  const std::vector<Case> cases = {
      {"lambda, no optimizer",
       [&](void* c) { return acc_scheduler_create_lambda(nullptr, unit_factor, c, count_free, &sched); }},
      {"lambda, no out",
       [&](void* c) { return acc_scheduler_create_lambda(opt, unit_factor, c, count_free, nullptr); }},
      {"lambda, no lambda", [&](void* c) { return acc_scheduler_create_lambda(opt, nullptr, c, count_free, &sched); }},
      {"lambda failing at step 0",
       [&](void* c) { return acc_scheduler_create_lambda(opt, failing_factor, c, count_free, &sched); }},
      {"group lambda, 5 groups",
       [&](void* c) { return acc_scheduler_create_group_lambda(opt, 5, unit_group_factor, c, count_free, &sched); }},
      {"cyclic, freed optimizer",
       [&](void* c) {
         return acc_scheduler_create_cyclic(reinterpret_cast<acc_optimizer*>(&id), nullptr, unit_factor, c, count_free,
                                            &sched);
       }},
      {"dataset, no out", [&](void* c) { return acc_dataset_from_callback(4, no_sample, c, count_free, nullptr); }},
      {"dataset, size -1", [&](void* c) { return acc_dataset_from_callback(-1, no_sample, c, count_free, &made); }},
      {"iterator, no next",
       [&](void* c) { return acc_dataset_from_iterator(nullptr, nullptr, c, count_free, -1, &made); }},
      {"collate, no loader", [&](void* c) { return acc_dataloader_set_collate(nullptr, no_batch, c, count_free); }},
      {"collate, no collate", [&](void* c) { return acc_dataloader_set_collate(dl, nullptr, c, count_free); }},
      {"checkpointing, no accelerator",
       [&](void* c) { return acc_register_for_checkpointing(nullptr, no_bytes, nullptr, c, count_free); }},
      {"checkpointing, no load",
       [&](void* c) { return acc_register_for_checkpointing(acc, no_bytes, nullptr, c, count_free); }},
      {"save hook, no accelerator",
       [&](void* c) { return acc_register_save_state_pre_hook(nullptr, no_hook, c, count_free); }},
      {"load hook, no hook",
       [&](void* c) { return acc_register_load_state_pre_hook_removable(acc, nullptr, c, count_free, &id); }},
      {"models hook, no accelerator",
       [&](void* c) { return acc_register_save_state_models_pre_hook(nullptr, no_models_hook, c, count_free, &id); }},
      {"trace ready, no accelerator",
       [&](void* c) { return acc_profile_on_trace_ready(nullptr, no_trace, c, count_free); }},
      {"tracker, no accelerator",
       [&](void* c) { return acc_add_tracker(nullptr, "mine", nullptr, nullptr, nullptr, c, count_free); }},
  };
  for (const Case& c : cases) {
    int frees = 0;
    EXPECT_NE(c.call(&frees), ACC_OK) << c.what;
    EXPECT_EQ(frees, 1) << c.what;
  }
  EXPECT_EQ(sched, nullptr);
  EXPECT_EQ(made, nullptr);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_tensor_free(rows);
  acc_accelerator_free(acc);
  acc_optimizer_free(opt);
  acc_model_free(model);
}
