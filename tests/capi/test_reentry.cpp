// Calls into an object from inside a callback that the object is running (a dataset's sample
// function calling the loader that fetches it, a schedule's factor stepping the schedule, a
// program's tracker adding trackers): refused with a message, the running call goes on unharmed.
// Each used to crash, hang or lose data.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "support.h"

using acc_test::to_floats;

namespace {

constexpr const char* kRefusal = "was called from inside a callback that this";

// A sample of one field, the number `value`, handed out through *out (a callback's return value).
int one_number_sample(float value, acc_tensor_list** out) {
  const int64_t dims[] = {1};
  acc_tensor* t = nullptr;
  if (acc_tensor_from_host(&value, sizeof value, dims, 1, ACC_DTYPE_FLOAT32, &t) != ACC_OK ||
      acc_tensor_list_create(out) != ACC_OK || acc_tensor_list_append(*out, nullptr, t) != ACC_OK)
    return 1;
  acc_tensor_free(t);
  return 0;
}

// A dataset of 8 one-number samples (the sample's index), read by `sample`, whose callback first
// calls `reenter` with the loader at sample `at` (once).
struct ReenteringLoader {
  acc_dataloader* loader = nullptr;
  acc_dataset* dataset = nullptr;
  int64_t at = 2;
  std::function<acc_status(acc_dataloader*)> reenter;
  acc_status inner = ACC_OK;
  std::string inner_message;
  bool fired = false;

  static int sample(void* self, int64_t index, acc_tensor_list** out) {
    auto& s = *static_cast<ReenteringLoader*>(self);
    if (index == s.at && !s.fired) {
      s.fired = true;
      s.inner = s.reenter(s.loader);
      s.inner_message = acc_last_error_message();
    }
    return one_number_sample(static_cast<float>(index), out);
  }

  ReenteringLoader(int workers, std::function<acc_status(acc_dataloader*)> call) : reenter(std::move(call)) {
    EXPECT_EQ(acc_dataset_from_callback(8, &sample, this, nullptr, &dataset), ACC_OK);
    acc_options* o = nullptr;
    EXPECT_EQ(acc_options_create(ACC_OPTIONS_DATALOADER, &o), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "batch_size", 2), ACC_OK);
    EXPECT_EQ(acc_options_set_int(o, "num_workers", workers), ACC_OK);
    EXPECT_EQ(acc_dataloader_create(dataset, o, &loader), ACC_OK) << acc_last_error_message();
    acc_options_free(o);
  }
  ~ReenteringLoader() {
    acc_dataloader_free(loader);
    acc_dataset_free(dataset);
  }

  // The epoch's batches, each as its first sample's value.
  std::vector<float> epoch() {
    std::vector<float> firsts;
    for (;;) {
      acc_tensor_list* batch = nullptr;
      EXPECT_EQ(acc_dataloader_next(loader, &batch), ACC_OK) << acc_last_error_message();
      if (!batch) return firsts;
      acc_tensor* x = nullptr;
      EXPECT_EQ(acc_tensor_list_get(batch, 0, &x), ACC_OK);
      firsts.push_back(to_floats(x)[0]);
      acc_tensor_free(x);
      acc_tensor_list_free(batch);
    }
  }
};

// A loader of `ds` in batches of 2, fetched ahead by one background worker.
acc_status one_worker_loader(acc_dataset* ds, acc_dataloader** out) {
  acc_options* o = nullptr;
  acc_status status = acc_options_create(ACC_OPTIONS_DATALOADER, &o);
  if (status == ACC_OK) status = acc_options_set_int(o, "batch_size", 2);
  if (status == ACC_OK) status = acc_options_set_int(o, "num_workers", 1);
  if (status == ACC_OK) status = acc_dataloader_create(ds, o, out);
  acc_options_free(o);
  return status;
}

}  // namespace

TEST(Reentry, ALoaderRefusesItsOwnSampleCallbacksCalls) {
  // With the sample function on the caller's thread (0 workers) and on a background worker (1):
  // ending the epoch freed the prefetcher under the running fetch (SIGSEGV, SIGABRT), a next()
  // waited for itself (hang) or took a batch out of order.
  const std::vector<std::pair<const char*, std::function<acc_status(acc_dataloader*)>>> calls = {
      {"end_epoch", [](acc_dataloader* dl) { return acc_dataloader_end_epoch(dl); }},
      {"next",
       [](acc_dataloader* dl) {
         acc_tensor_list* batch = nullptr;
         const acc_status s = acc_dataloader_next(dl, &batch);
         acc_tensor_list_free(batch);
         return s;
       }},
      {"skip_first_batches", [](acc_dataloader* dl) { return acc_dataloader_skip_first_batches(dl, 1); }},
      {"set_epoch", [](acc_dataloader* dl) { return acc_dataloader_set_epoch(dl, 3); }},
  };
  for (int workers : {0, 1}) {
    for (const auto& [name, call] : calls) {
      SCOPED_TRACE(std::string(name) + " with " + std::to_string(workers) + " worker(s)");
      ReenteringLoader l(workers, call);
      EXPECT_EQ(l.epoch(), (std::vector<float>{0, 2, 4, 6}));
      EXPECT_TRUE(l.fired);
      EXPECT_EQ(l.inner, ACC_ERR_INVALID_ARGUMENT);
      EXPECT_NE(l.inner_message.find(std::string(name) + " " + kRefusal + " data loader is running"), std::string::npos)
          << l.inner_message;
      int64_t epoch = -1;
      ACC_ASSERT_OK(acc_dataloader_epoch(l.loader, &epoch));
      EXPECT_EQ(epoch, 1);
      EXPECT_EQ(l.epoch(), (std::vector<float>{0, 2, 4, 6}));  // the next epoch as ever
    }
  }
}

TEST(Reentry, ALoaderFreedFromItsBackgroundWorkersCallbackGoesAfterThatFetch) {
  // The sample function, on the loader's worker while no call is in flight, frees the loader: its
  // last reference went on that worker, whose prefetcher then joined its own thread (abort).
  struct Freeing {
    acc_dataloader* loader = nullptr;
    std::atomic<bool> freed{false};
    static int sample(void* self, int64_t index, acc_tensor_list** out) {
      auto& f = *static_cast<Freeing*>(self);
      if (index == 4 && !f.freed.exchange(true)) acc_dataloader_free(f.loader);
      return one_number_sample(static_cast<float>(index), out);
    }
  } f;
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_callback(8, &Freeing::sample, &f, nullptr, &ds));
  ACC_ASSERT_OK(one_worker_loader(ds, &f.loader));
  acc_tensor_list* batch = nullptr;
  ACC_ASSERT_OK(acc_dataloader_next(f.loader, &batch));  // the worker fetches ahead: samples 2 to 5
  acc_tensor_list_free(batch);
  for (int i = 0; i < 1000 && !f.freed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(f.freed);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the loader goes once that fetch ends
  ACC_EXPECT_ERROR(acc_dataloader_next(f.loader, &batch), ACC_ERR_INVALID_HANDLE, "");
  acc_dataset_free(ds);
}

TEST(Reentry, ALoaderWhoseLastReferenceASaveOnItsWorkerHeldGoesAfterThatFetch) {
  // A prepared loader's sample function, on its worker, saves the state; the save's pre-hook frees
  // the loader. The save's own list of loaders then held the last reference, which went on that
  // worker: its prefetcher joined its own thread (abort). The save completes and the loader goes.
  struct Saving {
    acc_accelerator* acc = nullptr;
    acc_dataloader* loader = nullptr;
    std::string folder;
    std::atomic<bool> saved{false};
    acc_status save = ACC_ERR_INTERNAL;
    std::string message;
    static int sample(void* self, int64_t index, acc_tensor_list** out) {
      auto& s = *static_cast<Saving*>(self);
      if (index == 4 && !s.saved) {
        s.save = acc_save_state(s.acc, s.folder.c_str(), nullptr);
        s.message = acc_last_error_message();
        s.saved = true;
      }
      return one_number_sample(static_cast<float>(index), out);
    }
    static int free_loader(void* self, const char*) {
      acc_dataloader_free(static_cast<Saving*>(self)->loader);
      return ACC_OK;
    }
  } s;
  s.folder = acc_test::temp_path("saved_from_a_worker");
  s.acc = acc_test::make_accelerator({{"cpu", "true"}});
  ACC_ASSERT_OK(acc_register_save_state_pre_hook(s.acc, &Saving::free_loader, &s, nullptr));
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_callback(8, &Saving::sample, &s, nullptr, &ds));
  ACC_ASSERT_OK(one_worker_loader(ds, &s.loader));
  ACC_ASSERT_OK(acc_prepare(s.acc, nullptr, nullptr, &s.loader, nullptr));
  const int64_t live_before = acc_debug_live_handles(ACC_HANDLE_DATALOADER);
  acc_tensor_list* batch = nullptr;
  ACC_ASSERT_OK(acc_dataloader_next(s.loader, &batch));  // the worker fetches ahead: samples 2 to 5
  acc_tensor_list_free(batch);
  for (int i = 0; i < 1000 && !s.saved; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(s.saved);
  EXPECT_EQ(s.save, ACC_OK) << s.message;
  EXPECT_EQ(acc_debug_live_handles(ACC_HANDLE_DATALOADER), live_before - 1);
  ACC_EXPECT_ERROR(acc_dataloader_next(s.loader, &batch), ACC_ERR_INVALID_HANDLE, "");
  EXPECT_TRUE(std::filesystem::exists(s.folder + "/accelerate_state.json"));
  acc_dataset_free(ds);
  acc_accelerator_free(s.acc);
}

namespace {

// A stream of the numbers 0..7 whose next function calls acc_dataloader_next on its own loader once.
struct ReenteringStream {
  acc_dataloader* loader = nullptr;
  int64_t position = 0;
  acc_status inner = ACC_OK;
  bool fired = false;

  static int start(void* self, int64_t) {
    static_cast<ReenteringStream*>(self)->position = 0;
    return 0;
  }
  static int next(void* self, acc_tensor_list** out) {
    auto& s = *static_cast<ReenteringStream*>(self);
    if (s.position == 3 && !s.fired) {
      s.fired = true;
      acc_tensor_list* batch = nullptr;
      s.inner = acc_dataloader_next(s.loader, &batch);
      acc_tensor_list_free(batch);
    }
    if (s.position >= 8) {
      *out = nullptr;
      return 0;
    }
    return one_number_sample(static_cast<float>(s.position++), out);
  }
};

}  // namespace

TEST(Reentry, AStreamLoaderRefusesItsOwnNextCallbacksCalls) {
  // The inner next() handed out an empty batch and the outer one lost samples 2 and 3.
  ReenteringStream stream;
  acc_dataset* ds = nullptr;
  ACC_ASSERT_OK(acc_dataset_from_iterator(&ReenteringStream::next, &ReenteringStream::start, &stream, nullptr, 8, &ds));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_DATALOADER, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "batch_size", 2));
  ACC_ASSERT_OK(acc_dataloader_create(ds, o, &stream.loader));
  acc_options_free(o);
  std::vector<float> values;
  for (acc_tensor_list* batch = nullptr; acc_dataloader_next(stream.loader, &batch) == ACC_OK && batch;) {
    acc_tensor* x = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_get(batch, 0, &x));
    for (float v : to_floats(x)) values.push_back(v);
    acc_tensor_free(x);
    acc_tensor_list_free(batch);
  }
  EXPECT_TRUE(stream.fired);
  EXPECT_EQ(stream.inner, ACC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(values, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  acc_dataloader_free(stream.loader);
  acc_dataset_free(ds);
}

namespace {

// LambdaLR's factor 1 / (step + 1), whose call at step 1 runs `reenter` on its own scheduler once.
struct ReenteringSchedule {
  acc_scheduler* scheduler = nullptr;
  std::function<acc_status(acc_scheduler*)> reenter;
  acc_status inner = ACC_OK;
  std::string inner_message;
  bool fired = false;

  static int factor(void* self, int64_t step, double* out) {
    auto& s = *static_cast<ReenteringSchedule*>(self);
    *out = 1.0 / static_cast<double>(step + 1);
    if (step == 1 && !s.fired) {
      s.fired = true;
      s.inner = s.reenter(s.scheduler);
      s.inner_message = acc_last_error_message();
    }
    return 0;
  }
};

}  // namespace

TEST(Reentry, AScheduleRefusesItsOwnFactorsCalls) {
  // then() inside the factor reallocated the phases the step was reading (SIGSEGV); a step inside
  // it returned OK and was then overwritten (one step counted for two).
  const std::vector<std::pair<const char*, std::function<acc_status(acc_scheduler*)>>> calls = {
      {"then", [](acc_scheduler* s) { return acc_scheduler_then(s, 3, "constant_lr", nullptr); }},
      {"step", [](acc_scheduler* s) { return acc_scheduler_step(s); }},
      {"chain", [](acc_scheduler* s) { return acc_scheduler_chain(s, "constant_lr", nullptr); }},
      // A scheduler of its own joining makes a new sequence or chain over this one: refused first.
      {"then", [](acc_scheduler* s) { return acc_scheduler_then(s, 3, "one_cycle", nullptr); }},
      {"chain", [](acc_scheduler* s) { return acc_scheduler_chain(s, "cyclic", nullptr); }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    acc_model* model = acc_test::spec_model(R"([{"type":"linear","in_features":2,"out_features":1}])");
    acc_optimizer* opt = acc_test::optimizer(model, "sgd", 0.1);
    ReenteringSchedule s{nullptr, call};
    ACC_ASSERT_OK(acc_scheduler_create_lambda(opt, &ReenteringSchedule::factor, &s, nullptr, &s.scheduler));
    ACC_ASSERT_OK(acc_scheduler_step(s.scheduler));
    EXPECT_TRUE(s.fired);
    EXPECT_EQ(s.inner, ACC_ERR_INVALID_ARGUMENT);
    EXPECT_NE(s.inner_message.find(std::string(name) + " " + kRefusal + " scheduler is running"), std::string::npos)
        << s.inner_message;
    int64_t step = 0;
    double lr = 0;
    ACC_ASSERT_OK(acc_scheduler_get_step(s.scheduler, &step));
    ACC_ASSERT_OK(acc_scheduler_get_last_lr(s.scheduler, 0, &lr));
    EXPECT_EQ(step, 1);
    EXPECT_EQ(lr, 0.1 * (1.0 / 2.0));
    ACC_ASSERT_OK(acc_scheduler_step(s.scheduler));  // and on as LambdaLR
    ACC_ASSERT_OK(acc_scheduler_get_last_lr(s.scheduler, 0, &lr));
    EXPECT_EQ(lr, 0.1 * (1.0 / 3.0));
    acc_scheduler_free(s.scheduler);
    acc_optimizer_free(opt);
    acc_model_free(model);
  }
}

namespace {

// Two program trackers, "a" and "b", recording what they hear; a's callbacks run `reenter` once.
struct ReenteringTrackers {
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "1"}});
  std::vector<std::string> heard;
  std::function<acc_status(acc_accelerator*)> reenter;
  const char* reenter_in = "";  // "init", "log" or "finish"
  acc_status inner = ACC_OK;
  std::string inner_message;
  bool fired = false;

  struct Tracker {
    ReenteringTrackers* set;
    std::string name;
  };
  Tracker a{this, "a"}, b{this, "b"};

  static void heard_in(void* tracker, const char* what) {
    auto& t = *static_cast<Tracker*>(tracker);
    t.set->heard.push_back(t.name + " " + what);
    if (t.name == "a" && std::string(what) == t.set->reenter_in && !t.set->fired) {
      t.set->fired = true;
      t.set->inner = t.set->reenter(t.set->acc);
      t.set->inner_message = acc_last_error_message();
    }
  }
  static int init(void* t, const char*, const char*) { return heard_in(t, "init"), 0; }
  static int log(void* t, const char* const*, const double*, size_t, int64_t) { return heard_in(t, "log"), 0; }
  static int finish(void* t) { return heard_in(t, "finish"), 0; }

  ReenteringTrackers(const char* in, std::function<acc_status(acc_accelerator*)> call)
      : reenter(std::move(call)), reenter_in(in) {
    EXPECT_EQ(acc_add_tracker(acc, "a", &init, &log, &finish, &a, nullptr), ACC_OK);
    EXPECT_EQ(acc_add_tracker(acc, "b", &init, &log, &finish, &b, nullptr), ACC_OK);
  }
  ~ReenteringTrackers() { acc_accelerator_free(acc); }
};

}  // namespace

TEST(Reentry, TrackersRefuseTheirOwnCallbacksCalls) {
  // add_tracker inside a callback grew the list being walked (SIGSEGV); log, init_trackers and
  // end_training inside one handed b a log before its init, or a finish before its init.
  const std::vector<std::tuple<const char*, const char*, std::function<acc_status(acc_accelerator*)>>> calls = {
      {"add_tracker", "log",
       [](acc_accelerator* acc) { return acc_add_tracker(acc, "c", nullptr, nullptr, nullptr, nullptr, nullptr); }},
      {"log", "init", [](acc_accelerator* acc) { return acc_log_scalar(acc, "x", 1, -1); }},
      {"end_training", "init", [](acc_accelerator* acc) { return acc_end_training(acc); }},
      {"init_trackers", "finish", [](acc_accelerator* acc) { return acc_init_trackers(acc, "again", nullptr); }},
  };
  for (const auto& [name, in, call] : calls) {
    SCOPED_TRACE(std::string(name) + " inside " + in);
    ReenteringTrackers t(in, call);
    ACC_ASSERT_OK(acc_init_trackers(t.acc, "run", nullptr));
    ACC_ASSERT_OK(acc_log_scalar(t.acc, "loss", 1.0, -1));
    ACC_ASSERT_OK(acc_end_training(t.acc));
    EXPECT_TRUE(t.fired);
    EXPECT_EQ(t.inner, ACC_ERR_INVALID_ARGUMENT);
    EXPECT_NE(t.inner_message.find(std::string(name) + " " + kRefusal), std::string::npos) << t.inner_message;
    EXPECT_EQ(t.heard, (std::vector<std::string>{"a init", "b init", "a log", "b log", "a finish", "b finish"}));
  }
}

namespace {

int succeeds(void*, int64_t) { return ACC_OK; }

// A run that fails with a library call's error, then searches again inside (any call that runs a
// callback of its own).
int fails_then_nests(void*, int64_t) {
  acc_tensor* t = nullptr;
  const int64_t dims[] = {5};
  const double one = 1;
  const acc_status failed = acc_tensor_from_host(&one, sizeof one, dims, 1, ACC_DTYPE_FLOAT64, &t);
  int64_t found = 0;
  if (acc_find_executable_batch_size(4, &succeeds, nullptr, &found) != ACC_OK) return ACC_ERR_INTERNAL;
  return failed;
}

}  // namespace

TEST(Reentry, ANestedCallbackLeavesTheOuterFailuresMessage) {
  // The nested search restarted the outer run's record of errors: its failure lost its message.
  int64_t found = 0;
  ACC_EXPECT_ERROR(acc_find_executable_batch_size(8, &fails_then_nests, nullptr, &found), ACC_ERR_INVALID_ARGUMENT,
                   "the run with batch size 8 failed: nbytes is 8 but the shape holds 5 elements");
}
