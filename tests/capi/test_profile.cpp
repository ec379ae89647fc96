// Accelerate's accelerator.profile(): torch's profiler around training steps, its schedule, the Chrome
// trace per process and the key_averages table.
#include <nlohmann/json.hpp>

#include <set>
#include <thread>

#include "support.h"

using namespace acc_test;

namespace {

const char* kMlp = R"([{"type":"linear","in_features":4,"out_features":8},{"type":"relu"},
                       {"type":"linear","in_features":8,"out_features":1}])";

struct Training {
  acc_accelerator* acc = nullptr;
  acc_model* model = nullptr;
  acc_optimizer* opt = nullptr;

  Training() {
    EXPECT_EQ(acc_accelerator_create(nullptr, &acc), ACC_OK) << acc_last_error_message();
    model = spec_model(kMlp);
    opt = optimizer(model, "adamw", 0.01);
    EXPECT_EQ(acc_prepare(acc, &model, &opt, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  }
  ~Training() {
    acc_optimizer_free(opt);
    acc_model_free(model);
    acc_accelerator_free(acc);
  }
  // One step on a batch of `rows` rows: the rows show in the trace's input shapes.
  void step(int64_t rows) {
    acc_tensor* x = floats(std::vector<float>(rows * 4, 0.5f), {rows, 4});
    acc_tensor *out = nullptr, *loss = nullptr;
    ASSERT_EQ(acc_model_forward1(model, x, 0, &out), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_tensor_sum(out, &loss), ACC_OK);
    ASSERT_EQ(acc_backward(acc, loss), ACC_OK) << acc_last_error_message();
    ASSERT_EQ(acc_optimizer_step(opt), ACC_OK);
    ASSERT_EQ(acc_optimizer_zero_grad(opt), ACC_OK);
    for (acc_tensor* t : {x, out, loss}) acc_tensor_free(t);
  }
};

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("acc_profile_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

// The first dimension of the first input of every event named `name` in the trace.
std::vector<int64_t> batch_rows_of(const nlohmann::json& trace, const std::string& name) {
  std::vector<int64_t> rows;
  for (const auto& e : trace["traceEvents"])
    if (e.value("name", "") == name && e.contains("args") && e["args"].contains("Input Dims"))
      rows.push_back(e["args"]["Input Dims"][1][0].get<int64_t>());  // addmm(bias, input, weight.t())
  return rows;
}

std::string summary(acc_accelerator* acc) {
  char* text = nullptr;
  EXPECT_EQ(acc_profile_summary(acc, &text), ACC_OK) << acc_last_error_message();
  std::string copy = text ? text : "";
  acc_string_free(text);
  return copy;
}

}  // namespace

// Forward, backward and the optimizer's step are all in the trace, with shapes and FLOPs, and the
// table lists the same operators.
TEST(Profile, RecordsForwardBackwardAndOptimizerIntoAChromeTrace) {
  Training t;
  const std::string dir = temp_dir("trace");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_bool(o, "record_shapes", 1));
  ACC_ASSERT_OK(acc_options_set_bool(o, "with_flops", 1));
  ACC_ASSERT_OK(acc_options_set_bool(o, "profile_memory", 1));
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", dir.c_str()));
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  acc_options_free(o);
  t.step(3);
  ACC_ASSERT_OK(acc_profile_end(t.acc));

  const nlohmann::json trace = read_json(dir + "/profile_0.json");
  std::set<std::string> names;
  bool memory = false;
  for (const auto& e : trace["traceEvents"]) {
    names.insert(e.value("name", ""));
    memory = memory || e.value("ph", "") == "i";
  }
  for (const char* op : {"aten::addmm", "aten::relu", "AddmmBackward0", "aten::threshold_backward"})
    EXPECT_TRUE(names.count(op)) << op << " is not in the trace";
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.find("aten::lerp") == 0 || n.find("aten::addcdiv") == 0; }))
      << "AdamW's update is not in the trace";
  EXPECT_EQ(batch_rows_of(trace, "aten::addmm"), (std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(memory) << "profile_memory records allocations";

  const std::string table = summary(t.acc);
  EXPECT_NE(table.find("Self CPU time total: "), std::string::npos) << table;
  EXPECT_NE(table.find("Total FLOPs"), std::string::npos) << table;
  // torch's estimate, 2 * M * K * N per product: the two layers' forward products on 3 rows.
  const auto at = table.find("aten::addmm");
  ASSERT_NE(at, std::string::npos) << table;
  const std::string row = table.substr(at, table.find('\n', at) - at);
  EXPECT_EQ(row.substr(row.find_last_of(' ') + 1), std::to_string(2 * 3 * 4 * 8 + 2 * 3 * 8 * 1) + ".000") << row;
  std::filesystem::remove_all(dir);
}

// with_stack and with_modules: a TorchScript model's operators carry their source locations and the
// modules they ran in, as Kineto's trace writes them ("Call stack", "Module Hierarchy").
TEST(Profile, TorchScriptOperatorsCarryTheirStackAndModules) {
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript((acc_test::data_dir() + "/classifier.pt").c_str(), &model));
  acc_accelerator* acc = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(nullptr, &acc));
  const std::string dir = temp_dir("stack");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_bool(o, "with_stack", 1));
  ACC_ASSERT_OK(acc_options_set_bool(o, "with_modules", 1));
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", dir.c_str()));
  ACC_ASSERT_OK(acc_profile_begin(acc, o));
  acc_options_free(o);
  acc_tensor* x = floats(std::vector<float>(2 * 4, 0.5f), {2, 4});
  acc_tensor* labels = acc_test::longs({1, 0}, {2});
  const acc_tensor* inputs[] = {x, labels};
  acc_tensor_list* out = nullptr;
  ASSERT_EQ(acc_model_forward(model, inputs, 2, ACC_FORWARD_NO_GRAD, &out), ACC_OK) << acc_last_error_message();
  ACC_ASSERT_OK(acc_profile_end(acc));
  const nlohmann::json trace = read_json(dir + "/profile_0.json");
  if (trace.contains("schemaVersion")) GTEST_SKIP() << "Kineto's own trace file (it writes these fields itself)";
  bool stack = false, modules = false;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.contains("args")) continue;
    stack = stack || e["args"].contains("Call stack");
    modules = modules || (e["args"].contains("Module Hierarchy") &&
                          e["args"]["Module Hierarchy"].get<std::string>().find("fc1") != std::string::npos);
  }
  EXPECT_TRUE(stack) << "no operator has a call stack";
  EXPECT_TRUE(modules) << "no operator names the module fc1";
  for (acc_tensor* t : {x, labels}) acc_tensor_free(t);
  acc_tensor_list_free(out);
  acc_accelerator_free(acc);
  acc_model_free(model);
  std::filesystem::remove_all(dir);
}

// torch.profiler.schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=1): of 8 steps only the 4th
// and 5th are recorded. Each step's batch has its own number of rows, so the trace tells which ran.
TEST(Profile, TheScheduleRecordsTheActiveStepsOfTheLastCycle) {
  Training t;
  const std::string dir = temp_dir("schedule");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_bool(o, "record_shapes", 1));
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_skip_first", 1));
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_wait", 1));
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_warmup", 1));
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_active", 2));
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_repeat", 1));
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", dir.c_str()));
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  for (int64_t step = 0; step < 8; ++step) {
    t.step(step + 1);
    ACC_ASSERT_OK(acc_profile_step(t.acc));
  }
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  EXPECT_EQ(batch_rows_of(read_json(dir + "/profile_0.json"), "aten::addmm"), (std::vector<int64_t>{4, 4, 5, 5}));

  // repeat 0: cycles go on until the end, and the last one is kept.
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_skip_first", 0));
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_wait", 0));
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_repeat", 0));
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  for (int64_t step = 0; step < 9; ++step) {  // cycles: steps 0-2, 3-5, 6-8 (warmup, then 2 active)
    t.step(step + 1);
    if (step < 8) ACC_ASSERT_OK(acc_profile_step(t.acc));  // a 10th step's warmup would end in an empty trace, as torch's
  }
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  EXPECT_EQ(batch_rows_of(read_json(dir + "/profile_0.json"), "aten::addmm"), (std::vector<int64_t>{8, 8, 9, 9}));
  acc_options_free(o);
  std::filesystem::remove_all(dir);
}

// Without a schedule every step is recorded; without output_trace_dir nothing is written, and the
// table is there after the end.
TEST(Profile, WithoutAScheduleEveryStepIsRecorded) {
  Training t;
  ACC_ASSERT_OK(acc_profile_begin(t.acc, nullptr));
  t.step(2);
  ACC_ASSERT_OK(acc_profile_step(t.acc));
  t.step(2);
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  const std::string table = summary(t.acc);
  // Two steps: two forwards of two linear layers.
  const auto at = table.find("aten::addmm");
  ASSERT_NE(at, std::string::npos) << table;
  const std::string row = table.substr(at, table.find('\n', at) - at);
  EXPECT_EQ(row.substr(row.find_last_not_of(' ') - 1), " 4") << "the calls column: " << row;
}

// torch's profiler runs per thread, so an accelerator freed on another thread with its profile open
// cannot stop it there: the profiling thread's next profile stops it first instead of being refused.
TEST(Profile, AProfileLeftOpenByAnAcceleratorFreedElsewhereDoesNotBlockTheNext) {
  acc_accelerator* first = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(nullptr, &first));
  ACC_ASSERT_OK(acc_profile_begin(first, nullptr));
  std::thread([&] { acc_accelerator_free(first); }).join();
  acc_accelerator* second = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(nullptr, &second));
  ACC_ASSERT_OK(acc_profile_begin(second, nullptr));
  ACC_ASSERT_OK(acc_profile_end(second));
  acc_accelerator_free(second);
}

TEST(Profile, MisuseIsAnErrorThatSaysWhatToDo) {
  Training t;
  char* text = nullptr;
  ACC_EXPECT_ERROR(acc_profile_summary(t.acc, &text), ACC_ERR_INVALID_ARGUMENT, "no profile has ended yet");
  EXPECT_EQ(text, nullptr);
  ACC_EXPECT_ERROR(acc_profile_step(t.acc), ACC_ERR_INVALID_ARGUMENT, "without profile_begin");
  ACC_EXPECT_ERROR(acc_profile_end(t.acc), ACC_ERR_INVALID_ARGUMENT, "without profile_begin");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_EXPECT_ERROR(acc_options_set_int(o, "schedule_active", -1), ACC_ERR_INVALID_ARGUMENT, "schedule_active");
  ACC_EXPECT_ERROR(acc_options_set_string(o, "activities", "tpu"), ACC_ERR_INVALID_ARGUMENT, "activities");
  ACC_ASSERT_OK(acc_options_set_int(o, "schedule_wait", 2));
  ACC_EXPECT_ERROR(acc_profile_begin(t.acc, o), ACC_ERR_INVALID_ARGUMENT, "needs schedule_active");
  acc_options_free(o);
  acc_options* wrong = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_LORA, &wrong));
  ACC_EXPECT_ERROR(acc_profile_begin(t.acc, wrong), ACC_ERR_INVALID_ARGUMENT, "profile options are needed");
  acc_options_free(wrong);

  const std::string traces = temp_dir("refused_end");
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", traces.c_str()));
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  acc_options_free(o);
  ACC_EXPECT_ERROR(acc_profile_begin(t.acc, nullptr), ACC_ERR_INVALID_ARGUMENT, "already running");
  // torch's profiler records the thread that began it: another thread cannot step or end it, and
  // its refused end writes no trace (nor, on several processes, meets the others' end barrier).
  std::thread other([&] {
    ACC_EXPECT_ERROR(acc_profile_step(t.acc), ACC_ERR_INVALID_ARGUMENT, "thread that began the profile");
    ACC_EXPECT_ERROR(acc_profile_end(t.acc), ACC_ERR_INVALID_ARGUMENT, "thread that began the profile");
  });
  other.join();
  EXPECT_FALSE(std::filesystem::exists(traces + "/profile_0.json"));
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  EXPECT_TRUE(std::filesystem::exists(traces + "/profile_0.json"));
  std::filesystem::remove_all(traces);
  ACC_ASSERT_OK(acc_profile_begin(t.acc, nullptr));  // a new one after the end
  ACC_ASSERT_OK(acc_profile_end(t.acc));

  char* device = nullptr;
  ACC_ASSERT_OK(acc_accelerator_device(t.acc, &device));
  const bool on_cpu = std::string(device) == "cpu";
  acc_string_free(device);
  if (on_cpu) {  // a CUDA build on a machine without a GPU too
    ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
    ACC_ASSERT_OK(acc_options_set_string(o, "activities", "cuda"));
    ACC_EXPECT_ERROR(acc_profile_begin(t.acc, o), ACC_ERR_UNSUPPORTED, "needs the accelerator on a GPU (it runs on cpu)");
    acc_options_free(o);
  }

  // An output_trace_dir that cannot be made: the end fails naming it, and the profiler is stopped.
  const std::string file = temp_dir("a_file");
  std::ofstream(file) << "x";
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", (file + "/traces").c_str()));
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  ACC_EXPECT_ERROR(acc_profile_end(t.acc), ACC_ERR_IO, "cannot make the folder of the trace '" + file + "/traces/");
  ACC_ASSERT_OK(acc_profile_begin(t.acc, nullptr));
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  acc_options_free(o);
  std::filesystem::remove(file);
}

namespace {

// What an on_trace_ready handler saw: the steps it was called at, and each cycle's table and trace.
struct TraceReadyLog {
  acc_accelerator* acc = nullptr;
  std::string dir;
  std::vector<int64_t> steps;
  std::vector<std::string> tables;
  int64_t fail_at = -1;
  int freed = 0;

  static int ready(void* self, int64_t step) {
    auto& log = *static_cast<TraceReadyLog*>(self);
    log.steps.push_back(step);
    if (step == log.fail_at) {
      acc_callback_set_error("the handler's disk is full");
      return 1;
    }
    char* table = nullptr;
    if (acc_profile_summary(log.acc, &table) != ACC_OK) return 1;
    log.tables.emplace_back(table);
    acc_string_free(table);
    const std::string path = log.dir + "/cycle_" + std::to_string(step) + ".json";
    return acc_profile_export_chrome_trace(log.acc, path.c_str()) == ACC_OK ? 0 : 1;
  }
  static void release(void* self) { ++static_cast<TraceReadyLog*>(self)->freed; }
};

acc_options* cycles_of_two_active_steps() {
  acc_options* o = nullptr;
  EXPECT_EQ(acc_options_create(ACC_OPTIONS_PROFILE, &o), ACC_OK);
  EXPECT_EQ(acc_options_set_bool(o, "record_shapes", 1), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "schedule_wait", 1), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "schedule_active", 2), ACC_OK);
  EXPECT_EQ(acc_options_set_int(o, "schedule_repeat", 2), ACC_OK);
  return o;
}

}  // namespace

// torch.profiler's on_trace_ready: with schedule(wait=1, active=2, repeat=2) over 7 steps it runs
// when each cycle's active steps end (prof.step() 3 and 6), in that step; the handler reads that
// cycle's table and writes its trace, each holding that cycle's batches alone.
TEST(Profile, OnTraceReadyRunsAsEachRecordedCycleEnds) {
  Training t;
  TraceReadyLog log{t.acc, temp_dir("trace_ready")};
  std::filesystem::create_directories(log.dir);
  ACC_ASSERT_OK(acc_profile_on_trace_ready(t.acc, &TraceReadyLog::ready, &log, &TraceReadyLog::release));
  acc_options* o = cycles_of_two_active_steps();
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  for (int64_t step = 0; step < 7; ++step) {
    t.step(step + 1);
    ACC_ASSERT_OK(acc_profile_step(t.acc));
  }
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  EXPECT_EQ(log.steps, (std::vector<int64_t>{3, 6}));
  ASSERT_EQ(log.tables.size(), 2u);
  EXPECT_NE(log.tables[0].find("aten::addmm"), std::string::npos) << log.tables[0];
  EXPECT_EQ(batch_rows_of(read_json(log.dir + "/cycle_3.json"), "aten::addmm"), (std::vector<int64_t>{2, 2, 3, 3}));
  EXPECT_EQ(batch_rows_of(read_json(log.dir + "/cycle_6.json"), "aten::addmm"), (std::vector<int64_t>{5, 5, 6, 6}));

  // A profile ended while recording calls it at the end; a failing handler fails that call, and
  // the profile ends all the same.
  log.steps.clear();
  log.fail_at = 2;
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  t.step(1);
  ACC_ASSERT_OK(acc_profile_step(t.acc));
  t.step(2);
  ACC_ASSERT_OK(acc_profile_step(t.acc));
  ACC_EXPECT_ERROR(acc_profile_end(t.acc), ACC_ERR_IO, "the handler's disk is full");
  EXPECT_EQ(log.steps, (std::vector<int64_t>{2}));
  ACC_EXPECT_ERROR(acc_profile_step(t.acc), ACC_ERR_INVALID_ARGUMENT, "without profile_begin");
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));  // a new profile can begin

  // A failure in a step fails that step; the schedule goes on recording the next cycle.
  log.steps.clear();
  log.fail_at = 3;
  for (int64_t step = 0; step < 6; ++step) {
    t.step(step + 1);
    if (step == 2)
      ACC_EXPECT_ERROR(acc_profile_step(t.acc), ACC_ERR_IO, "on_trace_ready at step 3");
    else
      ACC_ASSERT_OK(acc_profile_step(t.acc));
  }
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  EXPECT_EQ(log.steps, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(batch_rows_of(read_json(log.dir + "/cycle_6.json"), "aten::addmm"), (std::vector<int64_t>{5, 5, 6, 6}));

  EXPECT_EQ(log.freed, 0);
  ACC_ASSERT_OK(acc_profile_on_trace_ready(t.acc, nullptr, nullptr, nullptr));  // removed: released
  EXPECT_EQ(log.freed, 1);
  acc_options_free(o);
  std::filesystem::remove_all(log.dir);
}

namespace {

// A handler that calls the profile's own begin, step and end: each refused, in a step and in the end.
struct ReentrantHandler {
  acc_accelerator* acc = nullptr;
  std::vector<std::string> refusals;
  static int ready(void* self, int64_t) {
    auto& h = *static_cast<ReentrantHandler*>(self);
    const auto note = [&h](acc_status status) {
      h.refusals.push_back(status == ACC_ERR_INVALID_ARGUMENT ? acc_last_error_message() : acc_status_name(status));
    };
    note(acc_profile_step(h.acc));
    note(acc_profile_end(h.acc));
    note(acc_profile_begin(h.acc, nullptr));
    return 0;
  }
};

}  // namespace

// Inside on_trace_ready the profile is between two steps: its own begin, step and end are refused
// there (a step would recurse into the handler, an end would leave the profile half ended), and
// the profile goes on as if the handler had not called them.
TEST(Profile, TheHandlerCannotBeginStepOrEndTheProfile) {
  Training t;
  ReentrantHandler handler{t.acc};
  ACC_ASSERT_OK(acc_profile_on_trace_ready(t.acc, &ReentrantHandler::ready, &handler, nullptr));
  acc_options* o = cycles_of_two_active_steps();
  const std::string traces = temp_dir("reentrant");
  ACC_ASSERT_OK(acc_options_set_string(o, "output_trace_dir", traces.c_str()));
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  for (int64_t step = 0; step < 4; ++step) {  // the handler runs at step 3
    t.step(step + 1);
    ACC_ASSERT_OK(acc_profile_step(t.acc));
  }
  EXPECT_FALSE(std::filesystem::exists(traces + "/profile_0.json")) << "the handler's refused end wrote the trace";
  ACC_ASSERT_OK(acc_profile_end(t.acc));  // recording the second cycle: the handler runs in the end too
  EXPECT_TRUE(std::filesystem::exists(traces + "/profile_0.json"));
  std::filesystem::remove_all(traces);
  ASSERT_EQ(handler.refusals.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const char* want = i % 3 == 2   ? "profile begin inside on_trace_ready"
                       : i % 3 == 0 ? "profile step inside on_trace_ready"
                                    : "profile end inside on_trace_ready";
    EXPECT_NE(handler.refusals[i].find(want), std::string::npos) << handler.refusals[i];
  }
  ACC_ASSERT_OK(acc_profile_begin(t.acc, nullptr));  // ended whole: a new profile begins
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  ACC_ASSERT_OK(acc_profile_on_trace_ready(t.acc, nullptr, nullptr, nullptr));
  acc_options_free(o);
}

TEST(Profile, ATraceIsExportedOnlyOnceACycleWasRecorded) {
  Training t;
  ACC_EXPECT_ERROR(acc_profile_export_chrome_trace(t.acc, "/tmp/never.json"), ACC_ERR_INVALID_ARGUMENT,
                   "no profile has ended yet");
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_PROFILE, &o));
  ACC_ASSERT_OK(acc_options_set_bool(o, "record_shapes", 1));
  ACC_ASSERT_OK(acc_profile_begin(t.acc, o));
  acc_options_free(o);
  ACC_EXPECT_ERROR(acc_profile_export_chrome_trace(t.acc, nullptr), ACC_ERR_INVALID_ARGUMENT, "path");
  t.step(2);
  ACC_ASSERT_OK(acc_profile_end(t.acc));
  const std::string dir = temp_dir("export");
  std::filesystem::create_directories(dir);
  ACC_ASSERT_OK(acc_profile_export_chrome_trace(t.acc, (dir + "/trace.json").c_str()));
  EXPECT_EQ(batch_rows_of(read_json(dir + "/trace.json"), "aten::addmm"), (std::vector<int64_t>{2, 2}));
  // Its folder is made (as torch's tensorboard_trace_handler makes its own); one that cannot be is
  // an error that says why.
  ACC_ASSERT_OK(acc_profile_export_chrome_trace(t.acc, (dir + "/cycles/first/trace.json").c_str()));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/cycles/first/trace.json"));
  ACC_EXPECT_ERROR(acc_profile_export_chrome_trace(t.acc, (dir + "/trace.json/inside.json").c_str()), ACC_ERR_IO,
                   "Not a directory");
  std::filesystem::remove_all(dir);
}
