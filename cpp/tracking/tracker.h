// What every tracker implements: Accelerate's GeneralTracker (start with a configuration, log,
// finish). The TrackerSet calls them on the main process only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracking/histogram.h"
#include "tracking/image_summary.h"

namespace acc::tracking {

// The values of one log call: numbers (acc_log, or a group of them: acc_log_scalars), texts
// (acc_log_text) or images (acc_log_images), each list by name. Shared, immutable: trackers that write in the
// background keep it.
struct Record {
  int64_t step = 0;
  bool step_given = false;  // false: `step` is the set's next one (wandb keeps a count of its own)
  double wall_time = 0;  // seconds since the Unix epoch
  std::vector<std::string> names;
  std::vector<double> values;
  // acc_log_scalars: the values' main tag, and each value's own name (`names` are "<group>/<name>").
  std::string group;
  std::vector<std::string> group_names;
  std::vector<std::string> text_names;
  std::vector<std::string> texts;  // valid UTF-8
  bool of_images = false;  // an acc_log_images call: to the trackers that take images (numbers and texts are empty)
  std::vector<std::string> image_names;
  std::vector<EncodedImage> images;                     // a batch as one grid, as TensorBoard shows it
  std::vector<std::vector<EncodedImage>> images_apart;  // each batch's images one by one (if a tracker takes them)
  bool of_histogram = false;  // an acc_log_histogram call: to the trackers that take histograms
  std::string histogram_name;
  Histogram histogram;
  // Accelerate's log_kwargs (acc_log_ex, acc_log_scalars_ex, acc_log_text_ex): an object from tracker
  // names to the keyword arguments of their log (each checked by its tracker's check_log_kwargs);
  // null for none.
  nlohmann::json log_kwargs;
};

// What one log call holds: numbers (acc_log), a group of them under a main tag (acc_log_scalars),
// texts, images or a histogram. It decides which trackers get the call and, for numbers, groups and
// texts, the log_kwargs a tracker takes (TensorBoard's add_scalar, add_scalars and add_text take
// different ones).
enum class Logged { Numbers, Group, Texts, Images, Histograms };

// The keyword arguments `record` gives the tracker `tracker` (an empty object for none).
const nlohmann::json& log_kwargs_of(const Record& record, const std::string& tracker);

class Tracker {
 public:
  virtual ~Tracker() = default;
  virtual const std::string& name() const = 0;
  // Accelerate's init_kwargs for this tracker (its class's keyword arguments beyond the project
  // name: tracking/init_kwargs.h), given on every process before a run starts ({} when none, which
  // resets them). InvalidArgument for a key the tracker does not take, Unsupported for one it knows
  // but does not build. By default a tracker takes none.
  virtual void set_init_kwargs(const nlohmann::json& kwargs);
  // Accelerate's log_kwargs for this tracker: the keyword arguments of one log call of `values`,
  // checked on every process before the call takes its step (log reads them from the record). By
  // default a tracker takes none (InvalidArgument for any).
  virtual void check_log_kwargs(const nlohmann::json& kwargs, Logged values) const;
  // Refuses, on every process before the main one starts the run, a project name this tracker
  // cannot take.
  virtual void check_project_name(const std::string&) const {}
  // A run begins: the project name and its hyper-parameters (a JSON object).
  virtual void start(const std::string& project_name, const nlohmann::json& config) = 0;
  virtual void log(const std::shared_ptr<const Record>& record) = 0;
  // Whether the tracker gets the records of acc_log_images (the others never see them).
  virtual bool takes_images() const { return false; }
  // Refuses, on every process before the call takes its step, an image name the tracker cannot file.
  virtual void check_image_name(const std::string&) const {}
  // Whether the tracker takes a batch of images as its images one by one (Record::images_apart).
  virtual bool takes_images_apart() const { return false; }
  // Refuses, on the main process before the call takes its step, a histogram the tracker cannot keep.
  virtual void check_histogram(const Histogram&) const {}
  // Whether the tracker gets the records of acc_log_histogram (the others never see them).
  virtual bool takes_histograms() const { return false; }
  // Whether the tracker writes the texts of acc_log_text (the others skip them, and their names).
  virtual bool takes_texts() const { return true; }
  // Refuses, on the calling thread and before any tracker logs, a value name this tracker cannot
  // write (log itself runs on a writer thread).
  virtual void check_name(const std::string&) const {}
  // Keeps a file or a folder's files with the current run, under `artifact_path` (relative, checked
  // by the caller; "" for the run's artifact root): MLflow's log_artifact / log_artifacts. By
  // default a tracker keeps none (Unsupported).
  virtual void log_artifact(const std::string& local_path, const std::string& artifact_path);
  // The run ends: everything is written out. start() may begin another run afterwards.
  virtual void finish() = 0;
  // The file the tracker writes in the current (or last) run; "" when it writes no file.
  virtual std::string path() const { return ""; }
};

// The folder of a run: <logging_dir>/<project_name>, created if needed (Io error otherwise).
std::string make_run_dir(const std::string& logging_dir, const std::string& project_name);

}  // namespace acc::tracking
