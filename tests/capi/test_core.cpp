// Library information, error reporting, options.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support.h"

TEST(Core, VersionMatchesHeader) {
  int major = -1, minor = -1, patch = -1;
  acc_version(&major, &minor, &patch);
  EXPECT_EQ(major, ACC_VERSION_MAJOR);
  EXPECT_EQ(minor, ACC_VERSION_MINOR);
  EXPECT_EQ(patch, ACC_VERSION_PATCH);
  acc_version(nullptr, nullptr, nullptr);  // NULL pointers are allowed
  EXPECT_EQ(acc_abi_version(), ACC_ABI_VERSION);
}

TEST(Core, AbiCheckNamesBothVersions) {
  ACC_ASSERT_OK(acc_check_abi(ACC_ABI_VERSION));
  ACC_EXPECT_ERROR(acc_check_abi(ACC_ABI_VERSION + 41), ACC_ERR_VERSION_MISMATCH,
                   std::to_string(ACC_ABI_VERSION + 41));
  EXPECT_EQ(acc_last_error_code(), ACC_ERR_VERSION_MISMATCH);
}

TEST(Core, BuildInfoReportsTorchCudaAndBlas) {
  std::string info = acc_build_info();
  EXPECT_EQ(info.front(), '{');
  for (const char* key : {"\"libtorch\"", "\"cuda\"", "\"nccl\"", "\"blas\"", "\"library\""})
    EXPECT_NE(info.find(key), std::string::npos) << key << " missing from " << info;
  EXPECT_EQ(info.find("\"blas\":\"unknown\""), std::string::npos) << info;
  // The set-up installs OpenBLAS; a build info that reports another BLAS means a slow machine.
  if (std::getenv("ACC_EXPECT_OPENBLAS")) EXPECT_NE(info.find("OpenBLAS"), std::string::npos) << info;
}

TEST(Core, StatusNamesAreStable) {
  EXPECT_STREQ(acc_status_name(ACC_OK), "ACC_OK");
  EXPECT_STREQ(acc_status_name(ACC_ERR_IO), "ACC_ERR_IO");
  EXPECT_STREQ(acc_status_name(static_cast<acc_status>(999)), "unknown status");
  EXPECT_EQ(ACC_ERR_INVALID_ARGUMENT, 1);
  EXPECT_EQ(ACC_ERR_INTERNAL, 11);
}

TEST(Core, LastErrorIsPerThreadAndKeepsBacktrace) {
  acc_options* opts = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opts));
  ACC_EXPECT_ERROR(acc_options_set_double(opts, "learning_rate", 0.1), ACC_ERR_INVALID_ARGUMENT, "learning_rate");
  EXPECT_NE(std::string(acc_last_error_backtrace()), "");
  std::string other_thread_message = "unset";
  std::thread([&] { other_thread_message = acc_last_error_message(); }).join();
  EXPECT_EQ(other_thread_message, "");
  acc_options_free(opts);
}

TEST(Options, TypedSettersCheckTypeRangeAndKey) {
  acc_options* opts = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opts));
  ACC_ASSERT_OK(acc_options_set_double(opts, "lr", 0.05));
  ACC_ASSERT_OK(acc_options_set_int(opts, "momentum", 1));  // ints are fine for numbers
  ACC_ASSERT_OK(acc_options_set_bool(opts, "nesterov", 1));
  ACC_EXPECT_ERROR(acc_options_set_double(opts, "lr", -1.0), ACC_ERR_INVALID_ARGUMENT, "'lr' must be at least");
  ACC_EXPECT_ERROR(acc_options_set_string(opts, "lr", "fast"), ACC_ERR_INVALID_ARGUMENT, "'lr' takes a number");
  // A value of the right kind through the wrong setter: the message names the setter to use.
  ACC_EXPECT_ERROR(acc_options_set_string(opts, "lr", "0.1"), ACC_ERR_INVALID_ARGUMENT,
                   "option 'lr' takes a number, got the text '0.1' (set it with acc_options_set_double, or as text "
                   "with acc_options_set)");
  ACC_ASSERT_OK(acc_options_set(opts, "lr", "0.05"));  // text through the text setter
  ACC_EXPECT_ERROR(acc_options_set_double(opts, "beta1", 1.5), ACC_ERR_INVALID_ARGUMENT, "beta1");
  ACC_EXPECT_ERROR(acc_options_set_bool(opts, "nesterov_momentum", 1), ACC_ERR_INVALID_ARGUMENT,
                   "unknown optimizer option 'nesterov_momentum'");
  ACC_EXPECT_ERROR(acc_options_set_double(opts, nullptr, 1.0), ACC_ERR_INVALID_ARGUMENT, "key is NULL");
  char* text = nullptr;
  ACC_ASSERT_OK(acc_options_get(opts, "lr", &text));
  EXPECT_EQ(std::stod(text), 0.05);
  acc_string_free(text);
  acc_options_free(opts);
}

TEST(Options, TextSetterParsesByType) {
  acc_options* opts = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_SCHEDULER, &opts));
  ACC_ASSERT_OK(acc_options_set(opts, "num_warmup_steps", "10"));
  ACC_ASSERT_OK(acc_options_set(opts, "num_cycles", "1.5"));
  ACC_EXPECT_ERROR(acc_options_set(opts, "num_warmup_steps", "10.5"), ACC_ERR_INVALID_ARGUMENT, "integer");
  ACC_EXPECT_ERROR(acc_options_set(opts, "num_warmup_steps", "-3"), ACC_ERR_INVALID_ARGUMENT, "at least 0");
  ACC_EXPECT_ERROR(acc_options_set(opts, "gamma", "nan"), ACC_ERR_INVALID_ARGUMENT, "finite");
  const std::pair<const char*, const char*> blanks[] = {  // blanks before are refused as blanks after
      {"num_warmup_steps", " 10"}, {"num_warmup_steps", "10 "}, {"num_warmup_steps", "\t10"},
      {"num_cycles", " 1.5"},      {"num_cycles", "1.5\n"}};
  for (const auto& [key, text] : blanks) ACC_EXPECT_ERROR(acc_options_set(opts, key, text), ACC_ERR_INVALID_ARGUMENT, "got '");
  ACC_EXPECT_ERROR(acc_options_set(opts, "num_cycles", "0x10"), ACC_ERR_INVALID_ARGUMENT, "got '");  // decimal only
  ACC_ASSERT_OK(acc_options_set(opts, "num_cycles", "1e-320"));  // a subnormal, as acc_options_set_double takes it
  ACC_EXPECT_ERROR(acc_options_set(opts, "warmup", "1"), ACC_ERR_INVALID_ARGUMENT, "known: num_warmup_steps");
  char* text = nullptr;
  ACC_ASSERT_OK(acc_options_get(opts, "num_warmup_steps", &text));
  EXPECT_STREQ(text, "10");
  acc_string_free(text);
  ACC_ASSERT_OK(acc_options_get(opts, "power", &text));  // an unset key reports its default
  EXPECT_EQ(std::stod(text), 1.0);
  acc_string_free(text);
  acc_options_free(opts);
  ACC_EXPECT_ERROR(acc_options_create(static_cast<acc_options_kind>(77), &opts), ACC_ERR_INVALID_ARGUMENT, "77");
  ACC_EXPECT_ERROR(acc_options_create(ACC_OPTIONS_OPTIMIZER, nullptr), ACC_ERR_INVALID_ARGUMENT, "out");
}

TEST(Handles, FreedAndForeignHandlesAreRejected) {
  acc_options* opts = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opts));
  acc_options_free(opts);
  ACC_EXPECT_ERROR(acc_options_set_double(opts, "lr", 0.1), ACC_ERR_INVALID_HANDLE, "not a live acc_options");
  acc_options_free(opts);  // a second free is ignored, not a double free
  acc_options_free(nullptr);
  int not_a_handle = 0;
  ACC_EXPECT_ERROR(acc_options_set_double(reinterpret_cast<acc_options*>(&not_a_handle), "lr", 0.1),
                   ACC_ERR_INVALID_HANDLE, "acc_options");
  ACC_EXPECT_ERROR(acc_options_set_double(nullptr, "lr", 0.1), ACC_ERR_INVALID_HANDLE, "opts is NULL");
  // A handle of another type is not taken for this one.
  acc_tensor* t = acc_test::floats({1}, {1});
  ACC_EXPECT_ERROR(acc_options_set_double(reinterpret_cast<acc_options*>(t), "lr", 0.1), ACC_ERR_INVALID_HANDLE,
                   "acc_options");
  acc_tensor_free(t);
}

TEST(Handles, StringFreeIgnoresWhatTheLibraryDidNotHandOut) {
  acc_options* opts = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opts));
  char* text = nullptr;
  ACC_ASSERT_OK(acc_options_get(opts, "lr", &text));
  acc_string_free(text);
  acc_string_free(text);  // freed already: glibc would abort on a second free()
  char on_the_stack[] = "not the library's";
  acc_string_free(on_the_stack);  // free() of it would abort
  EXPECT_STREQ(on_the_stack, "not the library's");
  acc_options_free(opts);
}

TEST(Handles, AFreedHandleStaysInvalidWhateverIsCreatedAfterIt) {
  // Allocators hand a freed block to the next allocation of its size at once: were handles placed
  // there, the freed handle would act on the new object, and a second free would release it.
  acc_tensor* freed = acc_test::floats({1, 2, 3}, {3});
  const auto freed_address = reinterpret_cast<uintptr_t>(freed);
  acc_tensor_free(freed);
  std::vector<acc_tensor*> fresh;
  for (int i = 0; i < 256; ++i) {
    fresh.push_back(acc_test::floats({static_cast<float>(i)}, {1}));
    EXPECT_NE(reinterpret_cast<uintptr_t>(fresh.back()), freed_address) << i;
  }
  int64_t n = 0;
  ACC_EXPECT_ERROR(acc_tensor_numel(freed, &n), ACC_ERR_INVALID_HANDLE, "not a live acc_tensor");
  acc_tensor_free(freed);  // releases nothing
  for (size_t i = 0; i < fresh.size(); ++i) {
    ACC_ASSERT_OK(acc_tensor_numel(fresh[i], &n));
    EXPECT_EQ(acc_test::to_floats(fresh[i]), std::vector<float>{static_cast<float>(i)});
    acc_tensor_free(fresh[i]);
  }
}

namespace {
// This process's virtual memory size in kB (VmSize in /proc/self/status), or -1.
long virtual_memory_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}
}  // namespace

// A service that makes and frees handles for days keeps a flat footprint, address space included
// (which `ulimit -v` and strict overcommit count): a million handles made and freed leave no trace.
TEST(Handles, MakingAndFreeingHandlesCostsNoLastingAddressSpace) {
  for (int i = 0; i < 10000; ++i) {  // warm-up: the registry's table at its working size
    acc_tensor_list* list = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_create(&list));
    acc_tensor_list_free(list);
  }
  const long before = virtual_memory_kb();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 1000000; ++i) {
    acc_tensor_list* list = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_create(&list));
    acc_tensor_list_free(list);
  }
  EXPECT_LT(virtual_memory_kb() - before, 16 * 1024) << "kB of address space kept by a million freed handles";
}

// A handle freed while a C call is using it (here by that call's own callback; likewise by another
// thread, or a binding's close() or garbage collector) goes when the call returns, not under it.
TEST(Handles, AHandleFreedDuringACallThatUsesItGoesWhenTheCallReturns) {
  struct Probe {
    acc_dataset* dataset = nullptr;
    bool destroyed = false;
    bool destroyed_inside_callback = false;
  } probe;
  auto sample = [](void* user, int64_t index, acc_tensor_list** out) -> int {
    auto* p = static_cast<Probe*>(user);
    acc_dataset_free(p->dataset);
    p->destroyed_inside_callback = p->destroyed;
    acc_tensor* t = acc_test::floats({static_cast<float>(index)}, {1});
    if (acc_tensor_list_create(out) != ACC_OK || acc_tensor_list_append(*out, nullptr, t) != ACC_OK) return 1;
    acc_tensor_free(t);
    return 0;
  };
  auto destroy = [](void* user) { static_cast<Probe*>(user)->destroyed = true; };
  const int64_t before = acc_debug_live_handles(ACC_HANDLE_DATASET);
  ACC_ASSERT_OK(acc_dataset_from_callback(4, sample, &probe, destroy, &probe.dataset));
  acc_tensor_list* item = nullptr;
  ACC_ASSERT_OK(acc_dataset_get(probe.dataset, 2, &item));
  EXPECT_FALSE(probe.destroyed_inside_callback) << "the dataset was destroyed under the call using it";
  EXPECT_TRUE(probe.destroyed) << "the freed dataset was not destroyed when the call returned";
  EXPECT_EQ(acc_debug_live_handles(ACC_HANDLE_DATASET), before);
  int64_t size = 0;
  ACC_EXPECT_ERROR(acc_dataset_size(probe.dataset, &size), ACC_ERR_INVALID_HANDLE, "not a live acc_dataset");
  acc_tensor_list_free(item);
}

TEST(Handles, LiveCountsFollowCreateAndFree) {
  const int64_t before = acc_debug_live_handles(ACC_HANDLE_TENSOR);
  acc_tensor* a = acc_test::floats({1, 2}, {2});
  acc_tensor* b = acc_test::floats({1, 2}, {2});
  EXPECT_EQ(acc_debug_live_handles(ACC_HANDLE_TENSOR), before + 2);
  acc_tensor_free(a);
  acc_tensor_free(b);
  EXPECT_EQ(acc_debug_live_handles(ACC_HANDLE_TENSOR), before);
}

TEST(Random, TheGlobalGeneratorAsPythonSeesIt) {
  // PyTorch's own numbers after torch.manual_seed (tests/data/export_shuffles.py).
  std::ifstream in(std::string(std::getenv("ACC_TEST_DATA")) + "/random_stream.json");
  ASSERT_TRUE(in.good()) << "run the export_pytorch_shuffles fixture";
  const auto expected = nlohmann::json::parse(in);
  auto hexes = [](const nlohmann::json& values) {
    std::vector<float> out;
    for (const auto& v : values) out.push_back(static_cast<float>(std::strtod(v.get<std::string>().c_str(), nullptr)));
    return out;
  };
  ACC_ASSERT_OK(acc_set_seed(expected["seed"].get<uint64_t>()));
  acc_tensor* state = nullptr;
  ACC_ASSERT_OK(acc_random_get_state(&state));
  EXPECT_EQ(acc_test::to_host<uint8_t>(state), expected["state"].get<std::vector<uint8_t>>());
  const int64_t five = 5, two_by_three[2] = {2, 3};
  acc_tensor *uniform = nullptr, *normal = nullptr;
  ACC_ASSERT_OK(acc_tensor_rand(&five, 1, &uniform));
  ACC_ASSERT_OK(acc_tensor_randn(two_by_three, 2, &normal));
  EXPECT_EQ(acc_test::to_floats(uniform), hexes(expected["rand"]));
  EXPECT_EQ(acc_test::to_floats(normal), hexes(expected["randn"]));
  // Back to the saved state: the same draws again.
  ACC_ASSERT_OK(acc_random_set_state(state));
  acc_tensor* again = nullptr;
  ACC_ASSERT_OK(acc_tensor_rand(&five, 1, &again));
  EXPECT_EQ(acc_test::to_floats(again), hexes(expected["rand"]));
  // A tensor that is not a state is refused and changes nothing.
  acc_tensor* bogus = acc_test::floats({1, 2, 3}, {3});
  ACC_EXPECT_ERROR(acc_random_set_state(bogus), ACC_ERR_INVALID_ARGUMENT, "uint8 tensor of");
  ACC_EXPECT_ERROR(acc_random_set_state(nullptr), ACC_ERR_INVALID_HANDLE, "state is NULL");
  ACC_EXPECT_ERROR(acc_tensor_rand(nullptr, 1, &again), ACC_ERR_INVALID_ARGUMENT, "dims is NULL");
  acc_tensor* after = nullptr;
  ACC_ASSERT_OK(acc_tensor_randn(two_by_three, 2, &after));
  EXPECT_EQ(acc_test::to_floats(after), hexes(expected["randn"]));  // the stream went on where it was
  for (acc_tensor* t : {state, uniform, normal, again, bogus, after}) acc_tensor_free(t);
}
