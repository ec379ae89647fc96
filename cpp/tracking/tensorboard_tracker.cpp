#include "tracking/tensorboard_tracker.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <exception>
#include <filesystem>
#include <limits>
#include <optional>

#include "common/environment.h"
#include "common/error.h"
#include "common/utf8.h"
#include "tracking/hparams.h"
#include "tracking/init_kwargs.h"
#include "tracking/proto/event.pb.h"
#include "tracking/proto/hparams.pb.h"
#include "tracking/tfrecord.h"

namespace acc::tracking {
namespace {

constexpr int kDtString = 7;       // TensorFlow's DT_STRING
constexpr int kDtypeFloat = 1;     // DT_FLOAT
constexpr int kDtypeDouble = 2;    // DT_DOUBLE
constexpr int kDataClassTensor = 2;
constexpr int kStatusSuccess = 1;  // HParams' Status.STATUS_SUCCESS

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string event_file_name() {
  static std::atomic<int> counter{0};
  return concat("events.out.tfevents.", static_cast<long long>(std::time(nullptr)), ".", host_name(), ".", getpid(),
                ".", counter++);
}

// Protobuf serializes at most 2 GiB (and returns "" beyond): an event must stay below that.
constexpr size_t kMaxEventBytes = (size_t{1} << 31) - 1;

std::string framed(const tb::Event& event) {
  const size_t bytes = event.ByteSizeLong();
  if (bytes > kMaxEventBytes)
    fail(Status::Io, "a TensorBoard event of ", bytes, " bytes: protobuf writes at most 2 GiB in one");
  std::string record;
  append_tfrecord(record, event.SerializeAsString());
  return record;
}

// A summary value carrying an HParams plugin payload (the plugin finds it by tag and plugin name).
void add_hparams_value(tb::Summary& summary, const char* tag, const tb::HParamsPluginData& data) {
  auto* value = summary.add_value();
  value->set_tag(tag);
  auto* plugin = value->mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name("hparams");
  plugin->set_content(data.SerializeAsString());
}

// A table cell's text: a '|' would end the cell and a line break the row.
std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' || c == '|') cell += '\\';
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (c == '\n' || c == '\r')
      cell += "<br>";
    else
      cell += c;
  }
  return cell;
}

// The hyper-parameters as a markdown table for the TEXT dashboard.
void add_text_value(tb::Summary& summary, const nlohmann::json& flat) {
  std::string table = "| hyper-parameter | value |\n|---|---|\n";
  for (const auto& [name, v] : flat.items())
    table += "| " + markdown_cell(name) + " | " + markdown_cell(v.is_string() ? v.get<std::string>() : v.dump()) + " |\n";
  auto* value = summary.add_value();
  value->set_tag("hparams/text_summary");
  auto* metadata = value->mutable_metadata();
  metadata->mutable_plugin_data()->set_plugin_name("text");
  metadata->set_data_class(kDataClassTensor);
  auto* tensor = value->mutable_tensor();
  tensor->set_dtype(kDtString);
  tensor->mutable_tensor_shape();  // a scalar: no dimensions
  tensor->add_string_val(table);
}

// A text as torch's SummaryWriter.add_text writes it (what Accelerate's tracker calls for a str):
// tag "<name>/text_summary", the text plugin, a string tensor of shape [1].
void add_text(tb::Summary& summary, const std::string& name, const std::string& text) {
  auto* value = summary.add_value();
  value->set_tag(name + "/text_summary");
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* tensor = value->mutable_tensor();
  tensor->set_dtype(kDtString);
  tensor->mutable_tensor_shape()->add_dim()->set_size(1);
  tensor->add_string_val(text);
}

// An image as torch's SummaryWriter.add_images writes it: tag `name`, the PNG and its size.
void add_image(tb::Summary& summary, const std::string& name, const EncodedImage& image) {
  auto* value = summary.add_value();
  value->set_tag(name);
  auto* out = value->mutable_image();
  out->set_height(static_cast<int32_t>(image.height));
  out->set_width(static_cast<int32_t>(image.width));
  out->set_colorspace(image.colorspace);
  out->set_encoded_image_string(image.png);
}

std::string start_records(const nlohmann::json& config, double wall_time, std::optional<int64_t> purge_step) {
  tb::Event version;
  version.set_wall_time(wall_time);
  version.set_file_version("brain.Event:2");
  std::string out = framed(version);
  if (purge_step) {  // SummaryWriter's two events: the version again at that step, and a session start
    version.set_step(*purge_step);
    out += framed(version);
    tb::Event start;
    start.set_wall_time(wall_time);
    start.set_step(*purge_step);
    start.mutable_session_log()->set_status(tb::SessionLog::START);
    out += framed(start);
  }

  const nlohmann::json flat = flatten_config(config);
  if (flat.empty()) return out;
  tb::HParamsPluginData data;
  auto* info = data.mutable_session_start_info();
  info->set_start_time_secs(wall_time);
  for (const auto& [name, v] : flat.items()) {  // as torch's hparams() sorts them:
    if (v.is_null()) continue;                  // None left out
    tb::HParamValue value;
    if (v.is_boolean())  // (a bool is an int to its isinstance test: a number)
      value.set_number_value(v.get<bool>() ? 1.0 : 0.0);
    else if (v.is_number())
      value.set_number_value(v.get<double>());
    else
      value.set_string_value(v.get<std::string>());
    (*info->mutable_hparams())[name] = value;
  }
  tb::Event event;
  event.set_wall_time(wall_time);
  add_hparams_value(*event.mutable_summary(), "_hparams_/session_start_info", data);
  add_text_value(*event.mutable_summary(), flat);
  return out + framed(event);
}

std::string end_record(double wall_time) {
  tb::HParamsPluginData data;
  data.mutable_session_end_info()->set_status(kStatusSuccess);
  data.mutable_session_end_info()->set_end_time_secs(wall_time);
  tb::Event event;
  event.set_wall_time(wall_time);
  add_hparams_value(*event.mutable_summary(), "_hparams_/session_end_info", data);
  return framed(event);
}

}  // namespace

void TensorBoardTracker::set_init_kwargs(const nlohmann::json& kwargs) {
  InitKwargs k("tensorboard", kwargs);
  const auto seconds = k.integer("flush_secs", 1, 86400);
  std::string suffix = k.text("filename_suffix").value_or("");
  require(suffix.size() <= 128 && suffix.find('/') == std::string::npos && suffix.find('\0') == std::string::npos &&
              is_utf8(suffix),
          "init_kwargs[\"tensorboard\"][\"filename_suffix\"] goes after the event file's name: UTF-8 of at most 128 ",
          "bytes without '/'");
  k.integer("max_queue", 1, int64_t{1} << 31);
  k.text("comment");
  const auto purge_step = k.integer("purge_step", 0, std::numeric_limits<int64_t>::max());
  k.refuse_the_rest();
  purge_step_ = purge_step;
  filename_suffix_ = std::move(suffix);
  flush_interval_ = std::chrono::seconds(seconds.value_or(1));
}

void TensorBoardTracker::check_log_kwargs(const nlohmann::json& kwargs, Logged values) const {
  InitKwargs k("tensorboard", kwargs, "log_kwargs");
  k.number("walltime", 0, 1e12);
  if (values == Logged::Numbers) {  // add_scalar's own; add_scalars and add_text take walltime alone
    k.boolean("new_style");
    k.boolean("double_precision");
  }
  k.refuse_the_rest();
}

void TensorBoardTracker::start(const std::string& project_name, const nlohmann::json& config) {
  // Each event is framed on its own: events the disk refused are written again once it has room.
  run_dir_ = open_run(project_name, event_file_name() + filename_suffix_, /*truncate=*/true, flush_interval_,
                      AsyncFile::AfterAnError::Retry);
  has_hparams_ = !config.empty();
  file_->append(start_records(config, now_seconds(), purge_step_));
}

void TensorBoardTracker::log(const std::shared_ptr<const Record>& record) {
  if (record->of_images) return log_images(record);
  if (record->of_histogram) return log_histogram(record);
  if (!record->group.empty()) return log_group(record);
  if (record->names.empty() && record->text_names.empty()) return;  // an event without values shows nothing
  running_file().post([record, name = name()](std::FILE*& file, const std::string& path) {
    const nlohmann::json& kwargs = log_kwargs_of(*record, name);
    const bool new_style = kwargs.value("new_style", false), in_double = kwargs.value("double_precision", false);
    tb::Event event;
    event.set_wall_time(kwargs.value("walltime", record->wall_time));
    event.set_step(record->step);
    auto* summary = event.mutable_summary();
    for (size_t i = 0; i < record->names.size(); ++i) {
      auto* value = summary->add_value();
      value->set_tag(record->names[i]);
      if (!new_style) {
        value->set_simple_value(static_cast<float>(record->values[i]));
        continue;
      }
      // torch's scalar(new_style=True): a 0-d tensor, float or double, owned by the scalars plugin.
      auto* tensor = value->mutable_tensor();
      if (in_double) {
        tensor->set_dtype(kDtypeDouble);
        tensor->add_double_val(record->values[i]);
      } else {
        tensor->set_dtype(kDtypeFloat);
        tensor->add_float_val(static_cast<float>(record->values[i]));
      }
      value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("scalars");
    }
    for (size_t i = 0; i < record->text_names.size(); ++i) add_text(*summary, record->text_names[i], record->texts[i]);
    write_all(file, path, framed(event));
  });
}

// As torch's add_scalars: each value in an event file of its own run folder, "<run>/<group>_<name>"
// (a '/' in the group as '_'), tagged with the group, so that TensorBoard draws them in one chart.
void TensorBoardTracker::log_group(const std::shared_ptr<const Record>& record) {
  std::string folder_prefix = record->group;
  std::replace(folder_prefix.begin(), folder_prefix.end(), '/', '_');
  for (size_t i = 0; i < record->group_names.size(); ++i) {
    const std::string folder = run_dir_ + "/" + folder_prefix + "_" + record->group_names[i];
    auto found = group_files_.find(folder);
    if (found == group_files_.end()) {
      // Kept only once it is open: a folder that cannot be made leaves no entry for finish() to close.
      std::error_code ec;
      std::filesystem::create_directories(folder, ec);
      if (ec) fail(Status::Io, "cannot create the TensorBoard folder ", folder, ": ", ec.message());
      auto opened = std::make_unique<AsyncFile>(folder + "/" + event_file_name() + filename_suffix_, /*truncate=*/true,
                                                flush_interval_, AsyncFile::AfterAnError::Retry);
      opened->append(
          start_records(nlohmann::json::object(), record->wall_time, std::nullopt));  // add_scalars: no purge
      found = group_files_.emplace(folder, std::move(opened)).first;
    }
    found->second->post([record, i, name = name()](std::FILE*& f, const std::string& path) {
      tb::Event event;
      event.set_wall_time(log_kwargs_of(*record, name).value("walltime", record->wall_time));
      event.set_step(record->step);
      auto* value = event.mutable_summary()->add_value();
      value->set_tag(record->group);
      value->set_simple_value(static_cast<float>(record->values[i]));
      write_all(f, path, framed(event));
    });
  }
}

// An event per image, as torch's add_images writes each (and as Accelerate's log_images calls it).
void TensorBoardTracker::log_images(const std::shared_ptr<const Record>& record) {
  for (size_t i = 0; i < record->images.size(); ++i)
    require(record->images[i].png.size() + record->image_names[i].size() + 64 <= kMaxEventBytes,  // + its fields
            "log_images: the PNG of \"", record->image_names[i], "\" is ", record->images[i].png.size(),
            " bytes: a TensorBoard event ", "(a protobuf) holds at most 2 GiB");
  running_file().post([record](std::FILE*& file, const std::string& path) {
    for (size_t i = 0; i < record->images.size(); ++i) {
      tb::Event event;
      event.set_wall_time(record->wall_time);
      event.set_step(record->step);
      add_image(*event.mutable_summary(), record->image_names[i], record->images[i]);
      write_all(file, path, framed(event));
    }
  });
}

// As torch's add_histogram: one event, its summary value tagged with the name, holding the histogram.
void TensorBoardTracker::log_histogram(const std::shared_ptr<const Record>& record) {
  running_file().post([record](std::FILE*& file, const std::string& path) {
    tb::Event event;
    event.set_wall_time(record->wall_time);
    event.set_step(record->step);
    auto* value = event.mutable_summary()->add_value();
    value->set_tag(record->histogram_name);
    const Histogram& h = record->histogram;
    auto* histo = value->mutable_histo();
    histo->set_min(h.min);
    histo->set_max(h.max);
    histo->set_num(h.num);
    histo->set_sum(h.sum);
    histo->set_sum_squares(h.sum_squares);
    for (const double limit : h.bucket_limit) histo->add_bucket_limit(limit);
    for (const double count : h.bucket) histo->add_bucket(count);
    write_all(file, path, framed(event));
  });
}

void TensorBoardTracker::finish() {
  // The run's file is closed even when the session's end cannot be written (a writer that failed
  // earlier reports it here): the error is reported once and the next run starts afresh.
  std::exception_ptr failure;
  try {
    if (file_ && has_hparams_) file_->append(end_record(now_seconds()));  // the HParams session ends
  } catch (...) {
    failure = std::current_exception();
  }
  try {
    FileTracker::finish();
  } catch (...) {
    if (!failure) failure = std::current_exception();
  }
  for (auto& [folder, file] : group_files_) {
    try {
      file->close();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  group_files_.clear();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace acc::tracking
