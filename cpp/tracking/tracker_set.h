// The trackers of an Accelerator: the built-in ones named by log_with ("tensorboard", "jsonl",
// "csv", "mlflow", "dvclive", "trackio", "wandb", "clearml", "all", or a comma-separated list) and
// those the program adds. Accelerate's
// init_trackers / log / end_training; only the main process writes, but every process checks
// its calls the same way, so a mistake fails everywhere.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tracking/tracker.h"

namespace acc::tracking {

class CallbackTracker;

class TrackerSet {
 public:
  // Unknown names are InvalidArgument; built-in trackers need a logging_dir (Accelerate's rule).
  TrackerSet(const std::string& log_with, std::string logging_dir, bool main_process);
  ~TrackerSet();  // ends a run still open, errors ignored
  TrackerSet(const TrackerSet&) = delete;
  TrackerSet& operator=(const TrackerSet&) = delete;

  // A tracker of the program (its name must be new). Added during a run, it starts at once.
  void add(std::shared_ptr<Tracker> tracker);
  // Starts a run: config_json is a JSON object of hyper-parameters ("" for none); init_kwargs_json
  // ("" for none) Accelerate's init_kwargs, a JSON object from tracker names (of trackers in use)
  // to the keyword arguments each takes (Tracker::set_init_kwargs), checked on every process.
  void init(const std::string& project_name, const std::string& config_json, const std::string& init_kwargs_json = "");
  // Logs values by name at `step` (none: one past the last step logged, 0 at first). Names must be
  // non-empty and distinct. log_kwargs_json ("" for none): Accelerate's log_kwargs, a JSON object
  // from tracker names (of trackers in use) to the keyword arguments of their log
  // (Tracker::check_log_kwargs), checked on every process before the step is taken. Every tracker
  // receives the call even if one fails; the first failure is rethrown.
  void log(std::vector<std::string> names, std::vector<double> values, std::optional<int64_t> step,
           const std::string& log_kwargs_json = "");
  // Logs texts by name (valid UTF-8), as log does numbers: Accelerate's log of str values.
  void log_text(std::vector<std::string> names, std::vector<std::string> texts, std::optional<int64_t> step,
                const std::string& log_kwargs_json = "");
  // Logs numbers under one main tag, as log does (Accelerate's log of a dict value: TensorBoard's
  // add_scalars). TensorBoard writes each into its own run folder, "<group>_<name>" (a '/' in the group
  // becomes '_'), tagged with the group; the other trackers get them as "<group>/<name>".
  void log_scalars(const std::string& group, std::vector<std::string> names, std::vector<double> values,
                   std::optional<int64_t> step, const std::string& log_kwargs_json = "");
  // Logs images by name, as log does numbers, to the trackers that take images (TensorBoard's,
  // trackio's, W&B's, ClearML's): Accelerate's log_images. Each is checked on every process and
  // encoded on the main one (image_summary.h): as one grid per name, and as its images one by one
  // where a tracker takes them so.
  void log_images(std::vector<std::string> names, const std::vector<at::Tensor>& images, const std::string& dataformats,
                  std::optional<int64_t> step);
  // Logs the histogram of `values` by name, as log does numbers, to the trackers that take histograms
  // (TensorBoard's, trackio's, W&B's): torch's SummaryWriter.add_histogram (tracking/histogram.h).
  // The tensor is checked on every process, the histogram made and checked by those trackers on the
  // main one (where its values may still be refused).
  void log_histogram(const std::string& name, const at::Tensor& values, const HistogramBins& bins,
                     std::optional<int64_t> step);
  // MLflow's log_artifact(s) on the tracker `tracker`: the file or folder at `local_path` kept with
  // the current run under `artifact_path` ("" for its root; relative, without '..': checked on
  // every process). NotInitialized outside a run; the copy is made on the main process, where
  // `local_path` is read.
  void log_artifact(const std::string& tracker, const std::string& local_path, const std::string& artifact_path);
  // Ends the run: trackers finish and their files are complete on disk. In a process forked from
  // the one that made the set, nothing ends: the run is the parent's (and init is refused).
  void end();

  std::vector<std::string> names() const;
  // Runs `change` on the tracker of the program called `name`, while no other thread logs to it
  // (InvalidArgument for a built-in one or an unknown name).
  void change_program_tracker(const std::string& name, const std::function<void(CallbackTracker& tracker)>& change);
  // Where tracker `name` writes ("" for trackers without a file, before a run, off the main process).
  std::string path(const std::string& name) const;

 private:
  // Refuses `call` from inside a program tracker's callback that this set runs: it would change
  // the list of trackers or the run being walked (see own_callbacks.h).
  void refuse_from_callbacks(const char* call) const;
  const Tracker& find(const std::string& name) const;
  Tracker& find(const std::string& name);
  // The trackers' names, "a, b", or "none".
  std::string listed_names() const;
  template <typename Call>
  void each(Call call);
  // init_kwargs or log_kwargs (`what`): `json_text` ("" for none) parsed, an object whose keys are
  // the names of trackers in use.
  nlohmann::json per_tracker_kwargs(const std::string& json_text, const char* what) const;
  // log_kwargs_json ("" for none) parsed and checked by each tracker it names, for a call of `values`;
  // null for none (nothing is parsed on the training thread for a plain log).
  nlohmann::json checked_log_kwargs(const std::string& log_kwargs_json, Logged values) const;
  // Checks a call's names (against the trackers that take what it logs) and step: the step it
  // logs at. `call` names it in errors.
  int64_t check_call(const char* call, const std::vector<std::string>& names, std::optional<int64_t> step,
                     Logged what = Logged::Numbers) const;
  // Whether a tracker of the set says yes to `takes` (takes_images, ...).
  bool any_tracker(bool (Tracker::*takes)() const) const;
  // Advances the step past `at` (`given`: the caller named it); the record to hand out (null off the
  // main process).
  std::shared_ptr<Record> take_step(int64_t at, bool given, Logged what);

  // Threads of one accelerator log, start and end runs at once: each call holds the set (recursive:
  // init ends the run before it, a name lookup lists the names).
  mutable std::recursive_mutex mutex_;
  // The process that made the set (a forked child's copy leaves the parent's runs alone).
  const pid_t owner_ = ::getpid();
  bool forked_child() const;
  // The set's lock for `call`, which changes the set or its run: refused from inside the set's own
  // callbacks, and in a forked child (the parent's runs and trackers are the parent's), before the
  // lock is taken.
  std::unique_lock<std::recursive_mutex> hold_to_change(const char* call);
  // The set's lock for reading, where this process made the set. A forked child never takes it (a
  // parent's thread may have held it at the fork, and none of the child's would let it go): there
  // the calls that change the set are refused first, so the child's copy is only read.
  std::unique_lock<std::recursive_mutex> lock_in_owner() const;
  std::string logging_dir_;
  bool main_;
  bool running_ = false;
  int64_t next_step_ = 0;
  std::string project_name_;
  nlohmann::json config_;
  bool hparams_file_ = false;  // a built-in tracker that keeps hparams.json in the run's folder
  std::vector<std::shared_ptr<Tracker>> trackers_;
};

// The built-in tracker names in log_with, in order, without duplicates ("all": every built-in one).
std::vector<std::string> parse_log_with(const std::string& log_with);

}  // namespace acc::tracking
