// Every function of accelerate.h called with each kind of mistake (generate_calls.py writes the
// calls from the header, so a new function is covered the day it is declared): NULL pointers,
// out-of-range numbers, odd strings, and handles that are foreign or already freed. Each call runs
// in a child process of its own and must return: no signal, no hang, no ACC_ERR_INTERNAL, a message
// with every error, the out-parameters left alone on failure, and no NULL, foreign or freed handle
// accepted.
//
// Usage: acc_every_function_tests [fresh|prepared|stepped] [KEY=VALUE,...]: the live objects as made,
// prepared by the accelerator, or prepared with a forward and backward done (gradients present);
// the accelerator options after the state (e.g. zero_stage=3,mixed_precision=bf16).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "accelerate.h"

namespace {

constexpr int kNoStatus = -1;  // a function that returns no status
const char* const kVariants[] = {"null", "negative", "large", "foreign", "freed"};
constexpr int kTimeoutSeconds = 30;

// Live objects of each handle type, and the same types created and freed again.
struct Live {
  acc_accelerator *accelerator = nullptr, *freed_accelerator = nullptr;
  acc_model *model = nullptr, *freed_model = nullptr;
  acc_optimizer *optimizer = nullptr, *freed_optimizer = nullptr;
  acc_scheduler *scheduler = nullptr, *freed_scheduler = nullptr;
  acc_dataset *dataset = nullptr, *freed_dataset = nullptr;
  acc_dataloader *dataloader = nullptr, *freed_dataloader = nullptr;
  acc_tensor *tensor = nullptr, *freed_tensor = nullptr;
  acc_tensor_list *tensor_list = nullptr, *freed_tensor_list = nullptr;
  acc_options *options = nullptr, *freed_options = nullptr;
  acc_progress *progress = nullptr, *freed_progress = nullptr;
  acc_string_list *string_list = nullptr, *freed_string_list = nullptr;
  acc_averaged_model *averaged_model = nullptr, *freed_averaged_model = nullptr;
  const acc_tensor* tensors[2] = {nullptr, nullptr};
  const acc_tensor* freed_tensors[2] = {nullptr, nullptr};
};

// What the calls point at: out-parameters (checked for writes after a failure), bytes the library
// never handed out, arrays of extreme values, odd strings.
void* out_slots[64];
unsigned char out_bytes[64 * 16];
constexpr unsigned char kUntouched = 0x5a;
alignas(64) unsigned char foreign[4096];
const acc_tensor* const foreign_tensors[2] = {reinterpret_cast<const acc_tensor*>(foreign),
                                              reinterpret_cast<const acc_tensor*>(foreign + 64)};
int64_t extreme_values[16] = {INT64_MAX, -1, INT64_MIN, 0, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23};
const char* const kOddText = "\xff\xfe/../\x01{\"a\":[1e999]}";
const char* const odd_strings[4] = {"a", "\xff", "", nullptr};

struct Function {
  const char* name;
  bool returns_status;
  bool takes_handle;
  int (*calls[5])(Live&);
};

#include "every_function_calls.inc"

// What main's arguments ask for.
std::string g_state = "fresh";
std::vector<std::pair<std::string, std::string>> g_options;

// The set of objects one call works on (and once more, freed).
bool make(Live& live, bool freed) {
  auto ok = [](acc_status s) { return s == ACC_OK; };
  acc_options* o = nullptr;
  acc_accelerator* a = nullptr;
  acc_model* m = nullptr;
  acc_optimizer* opt = nullptr;
  acc_scheduler* s = nullptr;
  acc_tensor* t = nullptr;
  acc_dataset* ds = nullptr;
  acc_dataloader* dl = nullptr;
  acc_tensor_list* tl = nullptr;
  acc_progress* p = nullptr;
  acc_string_list* sl = nullptr;
  acc_averaged_model* avg = nullptr;
  const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t dims[2] = {4, 2};
  if (!ok(acc_options_create(ACC_OPTIONS_ACCELERATOR, &o)) || !ok(acc_options_set(o, "cpu", "true")))
    return false;
  for (const auto& [key, value] : g_options)
    if (!ok(acc_options_set(o, key.c_str(), value.c_str()))) return false;
  if (!ok(acc_accelerator_create(o, &a)) ||
      !ok(acc_model_from_spec(R"([{"type":"linear","in_features":2,"out_features":1}])", &m)) ||
      !ok(acc_optimizer_create(m, "adamw", nullptr, &opt)) || !ok(acc_scheduler_create(opt, "constant", nullptr, &s)) ||
      !ok(acc_tensor_from_host(x, sizeof(x), dims, 2, ACC_DTYPE_FLOAT32, &t)))
    return false;
  const acc_tensor* fields[1] = {t};
  if (!ok(acc_dataset_from_tensors(fields, 1, &ds)) || !ok(acc_dataloader_create(ds, nullptr, &dl)) ||
      !ok(acc_tensor_list_create(&tl)) || !ok(acc_progress_create(a, 10, "d", &p)) ||
      !ok(acc_model_parameter_names(m, &sl)) || !ok(acc_averaged_model_create(m, nullptr, &avg)))
    return false;
  if (!freed && g_state != "fresh") {
    if (!ok(acc_prepare(a, &m, &opt, &dl, &s))) return false;
    if (g_state == "stepped") {  // a forward and backward: the gradients are there
      acc_tensor_list* batch = nullptr;
      acc_tensor *input = nullptr, *output = nullptr, *loss = nullptr;
      const bool stepped = ok(acc_dataloader_next(dl, &batch)) && ok(acc_tensor_list_get(batch, 0, &input)) &&
                           ok(acc_model_forward1(m, input, ACC_FORWARD_DEFAULT, &output)) &&
                           ok(acc_tensor_mean(output, &loss)) && ok(acc_backward(a, loss));
      for (acc_tensor* used : {input, output, loss}) acc_tensor_free(used);
      acc_tensor_list_free(batch);
      if (!stepped) return false;
    }
  }
  if (!freed) {
    live.accelerator = a, live.model = m, live.optimizer = opt, live.scheduler = s, live.dataset = ds;
    live.dataloader = dl, live.tensor = t, live.tensor_list = tl, live.options = o, live.progress = p;
    live.string_list = sl, live.averaged_model = avg, live.tensors[0] = live.tensors[1] = t;
    return true;
  }
  live.freed_accelerator = a, live.freed_model = m, live.freed_optimizer = opt, live.freed_scheduler = s;
  live.freed_dataset = ds, live.freed_dataloader = dl, live.freed_tensor = t, live.freed_tensor_list = tl;
  live.freed_options = o, live.freed_progress = p, live.freed_string_list = sl, live.freed_averaged_model = avg;
  live.freed_tensors[0] = live.freed_tensors[1] = t;
  acc_progress_free(p);
  acc_averaged_model_free(avg);
  acc_scheduler_free(s);
  acc_optimizer_free(opt);
  acc_dataloader_free(dl);
  acc_dataset_free(ds);
  acc_tensor_free(t);
  acc_tensor_list_free(tl);
  acc_string_list_free(sl);
  acc_model_free(m);
  acc_options_free(o);
  acc_accelerator_free(a);
  return true;
}

// Frees the live objects of `live` (the freed ones are gone already).
void release(Live& live) {
  acc_progress_free(live.progress);
  acc_averaged_model_free(live.averaged_model);
  acc_scheduler_free(live.scheduler);
  acc_optimizer_free(live.optimizer);
  acc_dataloader_free(live.dataloader);
  acc_dataset_free(live.dataset);
  acc_tensor_free(live.tensor);
  acc_tensor_list_free(live.tensor_list);
  acc_string_list_free(live.string_list);
  acc_model_free(live.model);
  acc_options_free(live.options);
  acc_accelerator_free(live.accelerator);
  live = Live();
}

bool out_parameters_untouched() {
  for (void* slot : out_slots)
    if (slot) return false;
  for (unsigned char b : out_bytes)
    if (b != kUntouched) return false;
  return true;
}

// The threads of this process (Threads: in /proc/self/status), 0 when unknown.
int thread_count() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return 0;
  char line[256];
  int threads = 0;
  while (std::fgets(line, sizeof line, status))
    if (std::sscanf(line, "Threads: %d", &threads) == 1) break;
  std::fclose(status);
  return threads;
}

// The objects made once by the parent, which each child inherits as made (null: each child makes its
// own). Only while the parent has one thread: a child has only the thread that forked, and a thread
// the objects rely on (a worker, a writer) would be missing there.
Live* g_premade = nullptr;

// Whether the objects, once made, leave a process with this one thread (then each child may inherit
// them). Asked of a child: torch 2's autograd engine starts threads at the first backward and then
// refuses to run in a forked process, so a parent that made stepped objects could fork no child
// that makes its own.
bool objects_leave_one_thread() {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(3);
    Live probe;
    _exit(make(probe, true) && make(probe, false) && thread_count() == 1 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// In the child: makes the objects (unless inherited), calls, and writes
// "<status>\t<untouched>\t<message>" to `fd`.
[[noreturn]] void run_in_child(const Function& f, int variant, int fd) {
  alarm(kTimeoutSeconds);
  std::memset(foreign, 0xa5, sizeof(foreign));
  std::memset(out_bytes, kUntouched, sizeof(out_bytes));
  Live made;
  if (!g_premade && (!make(made, true) || !make(made, false))) {
    dprintf(fd, "setup\t1\t%s\n", acc_last_error_message());
    _exit(0);
  }
  Live& live = g_premade ? *g_premade : made;
  const int status = f.calls[variant](live);
  const char* message = status > 0 ? acc_last_error_message() : "";
  dprintf(fd, "%d\t%d\t%s\n", status, out_parameters_untouched() ? 1 : 0, message ? message : "");
  _exit(0);
}

// The child's verdict; empty when the call behaved.
std::string judge(const Function& f, int variant) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  std::fflush(stdout);  // or the child's freopen would write what the parent still buffers
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(3);
    run_in_child(f, variant, fds[1]);
  }
  close(fds[1]);
  std::string report;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  if (WIFSIGNALED(wait_status))
    return WTERMSIG(wait_status) == SIGALRM ? "did not return within " + std::to_string(kTimeoutSeconds) + " s"
                                             : "crashed: " + std::string(strsignal(WTERMSIG(wait_status)));
  if (report.rfind("setup", 0) == 0) return "the objects to call it with could not be made: " + report;
  const size_t tab = report.find('\t'), tab2 = report.find('\t', tab + 1);
  if (tab == std::string::npos || tab2 == std::string::npos) return "the child ended without a report";
  const int status = std::stoi(report.substr(0, tab));
  const bool untouched = report[tab + 1] == '1';
  std::string message = report.substr(tab2 + 1);
  if (!message.empty() && message.back() == '\n') message.pop_back();
  if (!f.returns_status) return "";
  if (status == ACC_ERR_INTERNAL) return "ACC_ERR_INTERNAL (a caller's mistake must get a plain error): " + message;
  if (status != ACC_OK && message.empty()) return std::string(acc_status_name(static_cast<acc_status>(status))) +
                                                  " without a message";
  if (status != ACC_OK && !untouched) return "wrote an out-parameter although it failed: " + message;
  const bool bad_handles = variant == 0 || variant == 3 || variant == 4;  // null, foreign, freed
  if (status == ACC_OK && f.takes_handle && bad_handles) return "accepted a handle that is not live";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_state = argv[1];
  if (g_state != "fresh" && g_state != "prepared" && g_state != "stepped") {
    std::fprintf(stderr, "usage: %s [fresh|prepared|stepped] [KEY=VALUE,...]\n", argv[0]);
    return 2;
  }
  if (argc > 2) {
    std::string list = argv[2];
    for (size_t begin = 0; begin < list.size();) {
      const size_t end = std::min(list.find(',', begin), list.size()), eq = list.find('=', begin);
      if (eq >= end) {
        std::fprintf(stderr, "%s: '%s' is not KEY=VALUE\n", argv[0], list.substr(begin, end - begin).c_str());
        return 2;
      }
      g_options.emplace_back(list.substr(begin, eq - begin), list.substr(eq + 1, end - eq - 1));
      begin = end + 1;
    }
  }
  // Calls may write files (save_state of an odd path): into a folder of our own, removed at the end.
  char folder[] = "/tmp/acc_every_function_XXXXXX";
  if (!mkdtemp(folder) || chdir(folder) != 0) return 2;
  // Made once here and inherited by every child, when nothing runs beside this thread (the C API's
  // objects start no thread of their own on one process without workers or trackers).
  Live premade;
  if (objects_leave_one_thread() && make(premade, true) && make(premade, false) && thread_count() == 1)
    g_premade = &premade;
  std::printf("%s objects: %s\n", g_state.c_str(),
              g_premade ? "made once, inherited by each call's process" : "made in each call's process");
  int calls = 0, failures = 0;
  for (const Function& f : kFunctions) {
    for (int v = 0; v < 5; ++v) {
      ++calls;
      const std::string verdict = judge(f, v);
      if (verdict.empty()) continue;
      ++failures;
      std::printf("FAILED %s (%s arguments): %s\n", f.name, kVariants[v], verdict.c_str());
    }
  }
  release(premade);
  std::filesystem::remove_all(folder);
  std::printf("%s objects: %d calls of %zu functions, %d failed\n", g_state.c_str(), calls, sizeof(kFunctions) / sizeof(kFunctions[0]), failures);
  return failures == 0 ? 0 : 1;
}
