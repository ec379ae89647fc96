#include "tracking/tracker_set.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>

#include "common/error.h"
#include "common/json_input.h"
#include "common/own_callbacks.h"
#include "common/text.h"
#include "common/utf8.h"
#include "tracking/callback_tracker.h"
#include "tracking/clearml_tracker.h"
#include "tracking/csv_tracker.h"
#include "tracking/dvclive_tracker.h"
#include "tracking/hparams.h"
#include "tracking/jsonl_tracker.h"
#include "tracking/mlflow_store.h"
#include "tracking/mlflow_tracker.h"
#include "tracking/tensorboard_tracker.h"
#include "tracking/trackio_tracker.h"
#include "tracking/wandb_tracker.h"

namespace acc::tracking {
namespace {

const std::vector<std::string> kBuiltIn = {"tensorboard", "jsonl",   "csv",   "mlflow",
                                           "dvclive",     "trackio", "wandb", "clearml"};
// What "all" stands for: dvclive writes into the working folder (./dvclive, ./dvc.yaml), trackio
// into its projects' folder (~/.cache/huggingface/trackio), wandb into ./wandb and clearml into
// ~/.clearml/cache/offline, not the logging folder, so each is named on its own.
const std::vector<std::string> kAll = {"tensorboard", "jsonl", "csv", "mlflow"};

std::shared_ptr<Tracker> make_builtin(const std::string& name, const std::string& dir) {
  if (name == "tensorboard") return std::make_shared<TensorBoardTracker>(dir);
  if (name == "jsonl") return std::make_shared<JsonlTracker>(dir);
  if (name == "mlflow") return std::make_shared<MlflowTracker>(dir);
  if (name == "dvclive") return std::make_shared<DvcliveTracker>();
  if (name == "trackio") return std::make_shared<TrackioTracker>();
  if (name == "wandb") return std::make_shared<WandbTracker>();
  if (name == "clearml") return std::make_shared<ClearmlTracker>();
  return std::make_shared<CsvTracker>(dir);
}

}  // namespace

std::vector<std::string> parse_log_with(const std::string& log_with) {
  std::vector<std::string> names;
  if (trimmed(log_with).empty()) return names;  // no tracker
  size_t start = 0;
  while (start <= log_with.size()) {
    size_t comma = log_with.find(',', start);
    if (comma == std::string::npos) comma = log_with.size();
    const std::string name = lowercase(trimmed(log_with.substr(start, comma - start)));
    start = comma + 1;
    // A list with an empty name ("csv,", ",") is most likely a name lost: said rather than skipped.
    require(!name.empty(), "log_with: an empty tracker name in \"", log_with,
            "\" (names are separated by single commas)");
    if (name == "all") {
      for (const auto& b : kAll)
        if (std::find(names.begin(), names.end(), b) == names.end()) names.push_back(b);
      continue;
    }
    require(std::find(kBuiltIn.begin(), kBuiltIn.end(), name) != kBuiltIn.end(), "log_with: unknown tracker \"", name,
            "\" (known: tensorboard, jsonl, csv, mlflow, dvclive, trackio, wandb, clearml, all; other trackers are "
            "added by the "
            "program)");
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

TrackerSet::TrackerSet(const std::string& log_with, std::string logging_dir, bool main_process)
    : logging_dir_(std::move(logging_dir)), main_(main_process) {
  for (const auto& name : parse_log_with(log_with)) {
    // MLflow's store may be elsewhere (MLFLOW_TRACKING_URI): its tracker says where it can write.
    if (name == "mlflow")
      static_cast<void>(mlflow::store_root(logging_dir_));
    else if (name != "dvclive" && name != "trackio" && name != "wandb" &&
             name != "clearml")  // they write where their packages do
      require(!logging_dir_.empty(), "log_with \"", name, "\" writes files and needs project_dir or logging_dir");
    trackers_.push_back(make_builtin(name, logging_dir_));
    if (name == "csv" || name == "jsonl") hparams_file_ = true;  // their runs keep the config beside them
  }
}

TrackerSet::~TrackerSet() {
  try {
    end();
  } catch (...) {
  }
  // A forked child's copies of the built-in trackers are left be: their destructors would end the
  // parent's runs (MLflow's status, ClearML's zip). A program's trackers go, their user data freed.
  if (forked_child())
    for (auto& tracker : trackers_)
      if (!dynamic_cast<CallbackTracker*>(tracker.get())) new std::shared_ptr<Tracker>(std::move(tracker));
}

bool TrackerSet::forked_child() const { return ::getpid() != owner_; }

std::unique_lock<std::recursive_mutex> TrackerSet::hold_to_change(const char* call) {
  refuse_from_callbacks(call);
  require(!forked_child(), call, ": the trackers are those of process ", owner_, ", of which this process (",
          ::getpid(), ") is a fork; a new accelerator logs in this one");
  return std::unique_lock<std::recursive_mutex>(mutex_);
}

std::unique_lock<std::recursive_mutex> TrackerSet::lock_in_owner() const {
  if (forked_child()) return {};
  return std::unique_lock<std::recursive_mutex>(mutex_);
}

template <typename Call>
void TrackerSet::each(Call call) {
  if (!main_) return;
  const OwnCallbacksRunning running(this);  // a program's trackers
  std::exception_ptr first;
  for (auto& tracker : trackers_) {
    try {
      call(*tracker);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void TrackerSet::refuse_from_callbacks(const char* call) const {
  refuse_inside_own_callbacks(this, "accelerator's set of trackers", call);
}

void TrackerSet::add(std::shared_ptr<Tracker> tracker) {
  const auto lock = hold_to_change("add_tracker");
  require(tracker != nullptr, "no tracker given");
  require(!tracker->name().empty(), "a tracker needs a name");
  for (const auto& t : trackers_)
    require(t->name() != tracker->name(), "a tracker named \"", tracker->name(), "\" is already there");
  trackers_.push_back(tracker);
  const OwnCallbacksRunning running(this);
  if (running_ && main_) tracker->start(project_name_, config_);
}

void TrackerSet::init(const std::string& project_name, const std::string& config_json,
                      const std::string& init_kwargs_json) {
  const auto lock = hold_to_change("init_trackers");
  require(!project_name.empty(), "init_trackers needs a project name");
  require(project_name.find("..") == std::string::npos && project_name.front() != '/',
          "the project name \"", project_name, "\" must stay inside the logging folder");
  const nlohmann::json config = parse_config(config_json);
  const nlohmann::json init_kwargs = per_tracker_kwargs(init_kwargs_json, "init_kwargs");
  for (auto& tracker : trackers_) {
    const auto given = init_kwargs.find(tracker->name());
    tracker->set_init_kwargs(given == init_kwargs.end() ? nlohmann::json::object() : *given);
    tracker->check_project_name(project_name);
  }
  if (running_) end();
  project_name_ = project_name;
  config_ = config;
  next_step_ = 0;
  running_ = true;
  try {
    if (main_ && hparams_file_) write_config_file(make_run_dir(logging_dir_, project_name), config);
    each([&](Tracker& t) { t.start(project_name, config); });
  } catch (...) {
    // No half-started run: the trackers that did start finish, and log stays an error.
    try {
      end();
    } catch (...) {
    }
    throw;
  }
}

int64_t TrackerSet::check_call(const char* call, const std::vector<std::string>& names, std::optional<int64_t> step,
                               Logged what) const {
  auto takes = [what](const Tracker& t) {
    switch (what) {
      case Logged::Images:
        return t.takes_images();
      case Logged::Texts:
        return t.takes_texts();
      case Logged::Histograms:
        return t.takes_histograms();
      default:
        return true;
    }
  };
  if (!running_) fail(Status::NotInitialized, call, " needs init_trackers first (or after end_training)");
  // A few names per call: compared pairwise, with no allocation on the training thread.
  for (size_t i = 0; i < names.size(); ++i) {
    require(!names[i].empty(), call, ": a value name is empty");
    require(is_utf8(names[i]), call, ": value name ", i, " is not valid UTF-8");
    for (size_t j = 0; j < i; ++j)
      require(names[j] != names[i], call, ": the name \"", names[i], "\" appears twice in one call");
    for (const auto& tracker : trackers_)  // on every process alike
      if (takes(*tracker)) tracker->check_name(names[i]);
  }
  const int64_t at = step.value_or(next_step_);
  require(at < std::numeric_limits<int64_t>::max(), call, ": step ", at, " leaves no step after it (the next call ",
          "without a step would log at it): steps must be below 2^63 - 1");
  return at;
}

bool TrackerSet::any_tracker(bool (Tracker::*takes)() const) const {
  return std::any_of(trackers_.begin(), trackers_.end(), [takes](const auto& t) { return ((*t).*takes)(); });
}

std::shared_ptr<Record> TrackerSet::take_step(int64_t at, bool given, Logged what) {
  next_step_ = at + 1;
  if (!main_) return nullptr;
  auto record = std::make_shared<Record>();
  record->step = at;
  record->step_given = given;
  record->wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  record->of_images = what == Logged::Images;
  record->of_histogram = what == Logged::Histograms;
  return record;
}

nlohmann::json TrackerSet::per_tracker_kwargs(const std::string& json_text, const char* what) const {
  const nlohmann::json kwargs =
      trimmed(json_text).empty() ? nlohmann::json::object() : parse_json_input(json_text, what);
  require(kwargs.is_object(), what, " is a JSON object from tracker names to their keyword arguments, not ",
          kwargs.type_name());
  for (const auto& item : kwargs.items()) {
    const bool in_use =
        std::any_of(trackers_.begin(), trackers_.end(), [&](const auto& t) { return t->name() == item.key(); });
    if (!in_use)
      fail(Status::InvalidArgument, what, " names \"", printable_utf8(item.key()),
           "\", which is no tracker of this accelerator (its trackers: ", listed_names(), ")");
  }
  return kwargs;
}

void TrackerSet::log(std::vector<std::string> names, std::vector<double> values, std::optional<int64_t> step,
                     const std::string& log_kwargs_json) {
  const auto lock = hold_to_change("log");
  require(names.size() == values.size(), "log: ", names.size(), " names but ", values.size(), " values");
  const int64_t at = check_call("log", names, step);
  nlohmann::json log_kwargs = checked_log_kwargs(log_kwargs_json, Logged::Numbers);
  auto record = take_step(at, step.has_value(), Logged::Numbers);
  if (!record) return;  // a call without values is still a line in JSONL and CSV
  record->log_kwargs = std::move(log_kwargs);
  record->names = std::move(names);
  record->values = std::move(values);
  std::shared_ptr<const Record> shared = std::move(record);
  each([&](Tracker& t) { t.log(shared); });
}

nlohmann::json TrackerSet::checked_log_kwargs(const std::string& log_kwargs_json, Logged values) const {
  if (log_kwargs_json.empty()) return nullptr;
  nlohmann::json log_kwargs = per_tracker_kwargs(log_kwargs_json, "log_kwargs");
  for (const auto& tracker : trackers_)
    if (const auto given = log_kwargs.find(tracker->name()); given != log_kwargs.end())
      tracker->check_log_kwargs(*given, values);
  return log_kwargs;
}

void TrackerSet::log_scalars(const std::string& group, std::vector<std::string> names, std::vector<double> values,
                             std::optional<int64_t> step, const std::string& log_kwargs_json) {
  const auto lock = hold_to_change("log_scalars");
  require(!group.empty() && is_utf8(group), "log_scalars: the main tag must be non-empty UTF-8");
  require(names.size() == values.size(), "log_scalars: ", names.size(), " names but ", values.size(), " values");
  std::vector<std::string> flat;
  for (const auto& name : names) {
    // TensorBoard's folder for it is "<group>_<name>" inside the run's: no name may lead out of it.
    for (const auto& part : split_trimmed(name, '/'))
      require(part != "..", "log_scalars: the name \"", name, "\" would lead out of the run's folder");
    flat.push_back(group + "/" + name);
  }
  const int64_t at = check_call("log_scalars", flat, step, Logged::Group);
  nlohmann::json log_kwargs = checked_log_kwargs(log_kwargs_json, Logged::Group);
  auto record = take_step(at, step.has_value(), Logged::Group);
  if (!record) return;
  record->log_kwargs = std::move(log_kwargs);
  record->names = std::move(flat);
  record->values = std::move(values);
  record->group = group;
  record->group_names = std::move(names);
  std::shared_ptr<const Record> shared = std::move(record);
  each([&](Tracker& t) { t.log(shared); });
}

void TrackerSet::log_text(std::vector<std::string> names, std::vector<std::string> texts, std::optional<int64_t> step,
                          const std::string& log_kwargs_json) {
  const auto lock = hold_to_change("log_text");
  require(names.size() == texts.size(), "log_text: ", names.size(), " names but ", texts.size(), " texts");
  for (size_t i = 0; i < texts.size(); ++i)
    require(is_utf8(texts[i]), "log_text: the text of \"", names[i], "\" is not valid UTF-8");
  const int64_t at = check_call("log_text", names, step, Logged::Texts);
  nlohmann::json log_kwargs = checked_log_kwargs(log_kwargs_json, Logged::Texts);
  auto record = take_step(at, step.has_value(), Logged::Texts);
  if (!record) return;
  record->log_kwargs = std::move(log_kwargs);
  record->text_names = std::move(names);
  record->texts = std::move(texts);
  std::shared_ptr<const Record> shared = std::move(record);
  each([&](Tracker& t) { t.log(shared); });
}

void TrackerSet::log_images(std::vector<std::string> names, const std::vector<at::Tensor>& images,
                            const std::string& dataformats, std::optional<int64_t> step) {
  const auto lock = hold_to_change("log_images");
  require(names.size() == images.size(), "log_images: ", names.size(), " names but ", images.size(), " images");
  for (size_t i = 0; i < images.size(); ++i) check_image(images[i], dataformats, names[i]);
  const int64_t at = check_call("log_images", names, step, Logged::Images);
  for (const auto& t : trackers_)
    if (t->takes_images())
      for (const auto& name : names) t->check_image_name(name);
  // Encoded before the step is taken: an image that cannot be (out of memory) leaves the step as it was.
  std::vector<EncodedImage> encoded;
  std::vector<std::vector<EncodedImage>> apart;
  const bool wanted = any_tracker(&Tracker::takes_images);
  if (main_ && wanted) {
    const bool grids = std::any_of(trackers_.begin(), trackers_.end(),
                                   [](const auto& t) { return t->takes_images() && !t->takes_images_apart(); });
    const bool one_by_one = any_tracker(&Tracker::takes_images_apart);
    for (size_t i = 0; i < images.size(); ++i) {
      if (grids) encoded.push_back(encode_image(images[i], dataformats, names[i]));
      if (one_by_one) apart.push_back(encode_images_apart(images[i], dataformats, names[i]));
    }
  }
  auto record = take_step(at, step.has_value(), Logged::Images);
  if (!record || !wanted) return;  // no tracker shows images: nothing to hand out
  record->images = std::move(encoded);
  record->images_apart = std::move(apart);
  record->image_names = std::move(names);
  std::shared_ptr<const Record> shared = std::move(record);
  each([&](Tracker& t) {
    if (t.takes_images()) t.log(shared);
  });
}

void TrackerSet::log_histogram(const std::string& name, const at::Tensor& values, const HistogramBins& bins,
                               std::optional<int64_t> step) {
  const auto lock = hold_to_change("log_histogram");
  check_histogram_values(values, name);
  const int64_t at = check_call("log_histogram", {name}, step, Logged::Histograms);
  const bool wanted = any_tracker(&Tracker::takes_histograms);
  // Made and checked before the step is taken: values they refuse leave the step as it was.
  Histogram histogram;
  if (main_ && wanted) {
    histogram = make_histogram(values, bins);
    for (const auto& t : trackers_)
      if (t->takes_histograms()) t->check_histogram(histogram);
  }
  auto record = take_step(at, step.has_value(), Logged::Histograms);
  if (!record || !wanted) return;
  record->histogram_name = name;
  record->histogram = std::move(histogram);
  std::shared_ptr<const Record> shared = std::move(record);
  each([&](Tracker& t) {
    if (t.takes_histograms()) t.log(shared);
  });
}

void TrackerSet::end() {
  refuse_from_callbacks("end_training");
  if (forked_child()) return;  // the run is the parent's to end
  const auto lock = lock_in_owner();
  if (!running_) return;
  running_ = false;
  each([](Tracker& t) { t.finish(); });
}

std::vector<std::string> TrackerSet::names() const {
  const auto lock = lock_in_owner();
  std::vector<std::string> out;
  for (const auto& t : trackers_) out.push_back(t->name());
  return out;
}

std::string TrackerSet::listed_names() const {
  std::string known;
  for (const auto& t : trackers_) known += (known.empty() ? "" : ", ") + t->name();
  return known.empty() ? "none" : known;
}

const Tracker& TrackerSet::find(const std::string& name) const {
  for (const auto& t : trackers_)
    if (t->name() == name) return *t;
  fail(Status::InvalidArgument, "no tracker named \"", name, "\" (trackers: ", listed_names(), ")");
}

Tracker& TrackerSet::find(const std::string& name) {
  return const_cast<Tracker&>(static_cast<const TrackerSet&>(*this).find(name));
}

void TrackerSet::log_artifact(const std::string& tracker, const std::string& local_path,
                              const std::string& artifact_path) {
  const auto lock = hold_to_change("log_artifact");
  Tracker& t = find(tracker);
  if (!running_) fail(Status::NotInitialized, "log_artifact needs init_trackers first (or after end_training)");
  require(!local_path.empty(), "log_artifact: local_path is empty");
  // MLflow's verify_artifact_path: relative, and not leading out of the run's artifacts.
  if (!artifact_path.empty()) {
    require(artifact_path.front() != '/', "log_artifact: the artifact path \"", artifact_path, "\" is absolute");
    for (const auto& part : split_trimmed(artifact_path, '/'))
      require(part != "..", "log_artifact: the artifact path \"", artifact_path, "\" leads out of the run's artifacts");
  }
  if (main_) t.log_artifact(local_path, artifact_path);
}

void TrackerSet::change_program_tracker(const std::string& name,
                                        const std::function<void(CallbackTracker& tracker)>& change) {
  const auto lock = hold_to_change("changing a program's tracker");
  find(name);  // an unknown name is refused naming the trackers there are
  for (const auto& t : trackers_)
    if (auto* added = dynamic_cast<CallbackTracker*>(t.get()); added && t->name() == name) return change(*added);
  fail(Status::InvalidArgument, "\"", name, "\" is a built-in tracker: only a tracker added with acc_add_tracker ",
       "takes a callback of the program");
}

std::string TrackerSet::path(const std::string& name) const {
  const auto lock = lock_in_owner();
  const Tracker& t = find(name);
  return main_ ? t.path() : "";
}

}  // namespace acc::tracking
