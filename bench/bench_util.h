// What the benchmarks share, without torch headers (the C-API-only benchmarks compile fast): a check
// that stops at the first C API error, medians, timing a step function, and the MLP layer spec.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "accelerate.h"

#define OK(expr)                                                                 \
  do {                                                                           \
    if ((expr) != ACC_OK) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #expr, acc_last_error_message());        \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

// A benchmark's command line: --quick (the short run CTest makes) and, where `operand` names one,
// one more argument (save_state's folder); --help says so. Anything else is a usage error, so
// that a mistyped flag neither runs the long benchmark nor becomes a folder's name.
struct BenchArgs {
  bool quick = false;
  const char* operand = nullptr;
};

inline BenchArgs bench_args(int argc, char** argv, const char* operand = nullptr) {
  BenchArgs args;
  const auto usage = [&](FILE* to) {
    std::fprintf(to, "usage: %s [--quick]%s%s%s\n", argv[0], operand ? " [" : "", operand ? operand : "",
                 operand ? "]" : "");
  };
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      std::exit(0);
    }
    if (std::strcmp(argv[i], "--quick") == 0 && !args.quick) {
      args.quick = true;
    } else if (operand && !args.operand && argv[i][0] != '-') {
      args.operand = argv[i];
    } else {
      std::fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[i]);
      usage(stderr);
      std::exit(2);
    }
  }
  return args;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds per call of `f`, over `calls` calls.
template <typename F>
double time_calls(F&& f, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
}

// Microseconds per call of loop.step(), over `steps` calls.
template <typename Loop>
double time_steps(Loop& loop, int steps) {
  return time_calls([&] { loop.step(); }, steps);
}

// Median microseconds per step of a and b, measured in alternating rounds after `warm_up` steps of
// each, so that a busy machine slows both alike.
template <typename A, typename B>
std::pair<double, double> interleaved(A& a, B& b, int rounds, int steps, int warm_up = 3) {
  for (int i = 0; i < warm_up; ++i) a.step(), b.step();
  std::vector<double> ta, tb;
  for (int r = 0; r < rounds; ++r) {
    ta.push_back(time_steps(a, steps));
    tb.push_back(time_steps(b, steps));
  }
  return {median(ta), median(tb)};
}

// The line of one comparison: a's and b's medians (interleaved's), and b's over a's.
inline void report(const char* what, const char* name_a, const char* name_b, std::pair<double, double> t) {
  std::printf("%-34s %s %9.0f us/step   %s %9.0f us/step   ratio %.3f\n", what, name_a, t.first, name_b, t.second,
              t.second / t.first);
}

// A ReLU MLP of the given widths (in, hidden..., out) as a C-API layer spec.
inline std::string mlp_spec(const std::vector<int64_t>& widths) {
  std::string json = "[";
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i) json += R"(,{"type":"relu"},)";
    json += R"({"type":"linear","in_features":)" + std::to_string(widths[i]) + R"(,"out_features":)" +
            std::to_string(widths[i + 1]) + "}";
  }
  return json + "]";
}
