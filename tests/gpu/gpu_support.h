// Helpers of the GPU suite's GoogleTest cases. CTest runs each case on its own (one entry per case,
// label gpu) and shows it as skipped when GoogleTest reports it skipped.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../capi/support.h"
#include "accelerate.h"
#include "gpu_check.h"

// First statement of every test that needs a GPU: skips it without one, fails it where a GPU is
// present but unusable (gpu_check.h).
#define ACC_REQUIRE_CUDA()                                                      \
  do {                                                                          \
    const acc_gpu::CudaCheck acc_cuda_check_ = acc_gpu::check_cuda();           \
    if (acc_cuda_check_.state == acc_gpu::Cuda::Broken) GTEST_FAIL() << acc_cuda_check_.why; \
    if (acc_cuda_check_.state == acc_gpu::Cuda::Absent) GTEST_SKIP() << acc_cuda_check_.why; \
  } while (0)

// Runs a Python step (acc_gpu::run_python); exit 77 skips the test with the script's explanation,
// any other non-zero exit fails it with the script's output.
#define ACC_RUN_PYTHON(script, ...)                                                            \
  do {                                                                                         \
    const acc_gpu::Run acc_run_ = acc_gpu::run_python(script, {__VA_ARGS__});                  \
    if (acc_run_.code == 77) GTEST_SKIP() << acc_run_.output;                                  \
    ASSERT_EQ(acc_run_.code, 0) << "python step " << script << " failed:\n" << acc_run_.output; \
    std::printf("%s", acc_run_.output.c_str());                                                \
  } while (0)

namespace acc_gpu {

struct Run {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command; its exit code (or -1 when it did not exit normally) and its output.
inline Run run_command(const std::string& command) {
  Run run;
  std::fflush(stdout);
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    run.output = "cannot start: " + command;
    return run;
  }
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// The python3 that holds torch (CMake's ACC_PYTHON_TORCH, passed as an environment variable).
inline std::string python() {
  const char* p = std::getenv("ACC_PYTHON_TORCH");
  return p && *p && std::string(p).find("NOTFOUND") == std::string::npos ? p : "";
}

// One of the suite's Python scripts (tests/gpu/NAME) with arguments. Without a python3 it counts
// as a skip (77), like a script that finds a package missing.
inline Run run_python(const std::string& script, const std::vector<std::string>& args) {
  if (python().empty()) return {77, "no python3 with torch (ACC_PYTHON_TORCH is not set)"};
  const char* dir = std::getenv("ACC_GPU_TEST_SCRIPTS");
  std::string command = shell_quote(python()) + " " + shell_quote(std::string(dir ? dir : ".") + "/" + script);
  for (const auto& a : args) command += " " + shell_quote(a);
  return run_command(command);
}

// An empty folder for one test's files, kept after the run for inspection:
// $ACC_GPU_TEST_WORK/<name> (the build tree's tests/gpu_work), else under TMPDIR.
inline std::string work_dir(const std::string& name) {
  const char* base = std::getenv("ACC_GPU_TEST_WORK");
  const std::string dir = base && *base ? std::string(base) + "/" + name : acc_test::temp_path(name);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  EXPECT_FALSE(ec) << "cannot create " << dir << ": " << ec.message();
  return dir;
}

// The accelerator's device as text ("cuda:0").
inline std::string device_of(const acc_accelerator* acc) {
  char* name = nullptr;
  EXPECT_EQ(acc_accelerator_device(acc, &name), ACC_OK) << acc_last_error_message();
  std::string out = name ? name : "";
  acc_string_free(name);
  return out;
}

inline std::string device_of(const acc_tensor* t) {
  char* name = nullptr;
  EXPECT_EQ(acc_tensor_device(t, &name), ACC_OK) << acc_last_error_message();
  std::string out = name ? name : "";
  acc_string_free(name);
  return out;
}

inline acc_dtype dtype_of(const acc_tensor* t) {
  acc_dtype d = ACC_DTYPE_UNDEFINED;
  EXPECT_EQ(acc_tensor_dtype(t, &d), ACC_OK) << acc_last_error_message();
  return d;
}

// A copy of t on `device` (NULL: the same) in `dtype` (UNDEFINED: the same).
inline acc_tensor* to(const acc_tensor* t, const char* device, acc_dtype dtype = ACC_DTYPE_UNDEFINED) {
  acc_tensor* out = nullptr;
  EXPECT_EQ(acc_tensor_to(t, device, dtype, &out), ACC_OK) << acc_last_error_message();
  return out;
}

// Host values as a tensor on `device` (the CPU copy is released).
inline acc_tensor* floats_on(const std::vector<float>& values, const std::vector<int64_t>& dims,
                             const std::string& device) {
  acc_tensor* host = acc_test::floats(values, dims);
  acc_tensor* out = to(host, device.c_str());
  acc_tensor_free(host);
  return out;
}

inline acc_tensor* longs_on(const std::vector<int64_t>& values, const std::vector<int64_t>& dims,
                            const std::string& device) {
  acc_tensor* host = acc_test::longs(values, dims);
  acc_tensor* out = to(host, device.c_str());
  acc_tensor_free(host);
  return out;
}

// n values in [-1, 1) from a fixed linear congruential sequence (the same on every machine).
inline std::vector<float> uniform(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<float>((state >> 40) & 0xFFFFFF) / static_cast<float>(1 << 23) - 1.0f;
  }
  return v;
}

// A parameter's values (on the host).
inline std::vector<float> parameter(const acc_model* m, const char* name) {
  acc_tensor* p = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name, &p), ACC_OK) << name << ": " << acc_last_error_message();
  std::vector<float> v = p ? acc_test::to_floats(p) : std::vector<float>{};
  acc_tensor_free(p);
  return v;
}

}  // namespace acc_gpu
