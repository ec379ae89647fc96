// Experiment tracking and the progress display.
#include "guard.h"
#include "handles.h"
#include "host_callbacks.h"
#include "tracking/callback_tracker.h"
#include "tracking/histogram.h"

using namespace acc::capi;

namespace {

std::optional<int64_t> step_arg(int64_t step) {
  if (step < 0) return std::nullopt;
  return step;
}

}  // namespace

extern "C" {

acc_status acc_add_tracker(acc_accelerator* acc, const char* name, acc_tracker_init_fn init, acc_tracker_log_fn log,
                           acc_tracker_finish_fn finish, void* user_data, acc_free_fn free_user_data) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    auto& a = accelerator_arg(acc);
    const std::string tracker = text_arg(name, "name");
    acc::tracking::CallbackTracker::Callbacks callbacks;
    if (init)
      callbacks.init = [init, data, tracker](const std::string& project, const std::string& config) {
        invoke_host("the init callback of tracker \"" + tracker + "\"",
                    [&] { return init(data.get(), project.c_str(), config.c_str()); });
      };
    if (log)
      callbacks.log = [log, data, tracker](const acc::tracking::Record& r) {
        std::vector<const char*> names;
        names.reserve(r.names.size());
        for (const auto& n : r.names) names.push_back(n.c_str());
        invoke_host("the log callback of tracker \"" + tracker + "\"",
                    [&] { return log(data.get(), names.data(), r.values.data(), names.size(), r.step); });
      };
    if (finish)
      callbacks.finish = [finish, data, tracker] {
        invoke_host("the finish callback of tracker \"" + tracker + "\"", [&] { return finish(data.get()); });
      };
    a.trackers().add(std::make_shared<acc::tracking::CallbackTracker>(tracker, std::move(callbacks), data));
  });
}

acc_status acc_tracker_set_log_text(acc_accelerator* acc, const char* name, acc_tracker_log_text_fn log_text) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    const std::string tracker = text_arg(name, "name");
    a.trackers().change_program_tracker(tracker, [&](acc::tracking::CallbackTracker& added) {
      if (!log_text) return added.set_log_text(nullptr);
      added.set_log_text([log_text, data = added.user_data(), tracker](const acc::tracking::Record& r) {
        std::vector<const char*> names, texts;
        for (size_t i = 0; i < r.text_names.size(); ++i) {
          names.push_back(r.text_names[i].c_str());
          texts.push_back(r.texts[i].c_str());
        }
        invoke_host("the log_text callback of tracker \"" + tracker + "\"",
                    [&] { return log_text(data.get(), names.data(), texts.data(), names.size(), r.step); });
      });
    });
  });
}

acc_status acc_tracker_set_log_images(acc_accelerator* acc, const char* name, acc_tracker_log_images_fn log_images) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    const std::string tracker = text_arg(name, "name");
    a.trackers().change_program_tracker(tracker, [&](acc::tracking::CallbackTracker& added) {
      if (!log_images) return added.set_log_images(nullptr);
      added.set_log_images([log_images, data = added.user_data(), tracker](const acc::tracking::Record& r) {
        std::vector<const char*> names;
        std::vector<const unsigned char*> pngs;
        std::vector<size_t> sizes;
        for (size_t i = 0; i < r.image_names.size(); ++i) {
          names.push_back(r.image_names[i].c_str());
          pngs.push_back(reinterpret_cast<const unsigned char*>(r.images[i].png.data()));
          sizes.push_back(r.images[i].png.size());
        }
        invoke_host("the log_images callback of tracker \"" + tracker + "\"", [&] {
          return log_images(data.get(), names.data(), pngs.data(), sizes.data(), names.size(), r.step);
        });
      });
    });
  });
}

acc_status acc_tracker_set_log_histogram(acc_accelerator* acc, const char* name,
                                         acc_tracker_log_histogram_fn log_histogram) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    const std::string tracker = text_arg(name, "name");
    a.trackers().change_program_tracker(tracker, [&](acc::tracking::CallbackTracker& added) {
      if (!log_histogram) return added.set_log_histogram(nullptr);
      added.set_log_histogram([log_histogram, data = added.user_data(), tracker](const acc::tracking::Record& r) {
        const acc::tracking::Histogram& h = r.histogram;
        invoke_host("the log_histogram callback of tracker \"" + tracker + "\"", [&] {
          return log_histogram(data.get(), r.histogram_name.c_str(), h.min, h.max, h.num, h.sum, h.sum_squares,
                               h.bucket_limit.data(), h.bucket.data(), h.bucket.size(), r.step);
        });
      });
    });
  });
}

acc_status acc_init_trackers(acc_accelerator* acc, const char* project_name, const char* config_json) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    a.init_trackers(text_arg(project_name, "project_name"), config_json ? config_json : "");
  });
}

acc_status acc_init_trackers_ex(acc_accelerator* acc, const char* project_name, const char* config_json,
                                const char* init_kwargs_json) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    a.init_trackers(text_arg(project_name, "project_name"), config_json ? config_json : "",
                    init_kwargs_json ? init_kwargs_json : "");
  });
}

acc_status acc_log(acc_accelerator* acc, const char* const* names, const double* values, size_t n, int64_t step) {
  return acc_log_ex(acc, names, values, n, step, nullptr);
}

acc_status acc_log_ex(acc_accelerator* acc, const char* const* names, const double* values, size_t n, int64_t step,
                      const char* log_kwargs_json) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    auto keys = names_arg(names, n, "names");
    acc::require(n == 0 || values != nullptr, "values is NULL");
    a.log(std::move(keys), std::vector<double>(values, values + n), step_arg(step),
          log_kwargs_json ? log_kwargs_json : "");
  });
}

acc_status acc_log_scalars(acc_accelerator* acc, const char* main_tag, const char* const* names, const double* values,
                           size_t n, int64_t step) {
  return acc_log_scalars_ex(acc, main_tag, names, values, n, step, nullptr);
}

acc_status acc_log_scalars_ex(acc_accelerator* acc, const char* main_tag, const char* const* names,
                              const double* values, size_t n, int64_t step, const char* log_kwargs_json) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    const std::string group = text_arg(main_tag, "main_tag");
    auto keys = names_arg(names, n, "names");
    acc::require(n == 0 || values != nullptr, "values is NULL");
    a.trackers().log_scalars(group, std::move(keys), std::vector<double>(values, values + n), step_arg(step),
                             log_kwargs_json ? log_kwargs_json : "");
  });
}

acc_status acc_log_text(acc_accelerator* acc, const char* const* names, const char* const* texts, size_t n,
                        int64_t step) {
  return acc_log_text_ex(acc, names, texts, n, step, nullptr);
}

acc_status acc_log_text_ex(acc_accelerator* acc, const char* const* names, const char* const* texts, size_t n,
                           int64_t step, const char* log_kwargs_json) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    auto keys = names_arg(names, n, "names");
    auto values = names_arg(texts, n, "texts");
    a.trackers().log_text(std::move(keys), std::move(values), step_arg(step), log_kwargs_json ? log_kwargs_json : "");
  });
}

acc_status acc_log_images(acc_accelerator* acc, const char* const* names, const acc_tensor* const* images, size_t n,
                          int64_t step, const char* dataformats) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    auto keys = names_arg(names, n, "names");
    const auto tensors = tensors_arg(images, n, "images");
    a.trackers().log_images(std::move(keys), tensors, dataformats ? text_arg(dataformats, "dataformats") : "NCHW",
                            step_arg(step));
  });
}

acc_status acc_log_histogram(acc_accelerator* acc, const char* name, const acc_tensor* values, int64_t step,
                             const char* bins, int64_t max_bins) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    const std::string key = text_arg(name, "name");
    const at::Tensor& tensor = live(values, "values").tensor;
    const auto how = acc::tracking::parse_histogram_bins(bins ? text_arg(bins, "bins") : "", max_bins);
    a.trackers().log_histogram(key, tensor, how, step_arg(step));
  });
}

acc_status acc_log_scalar(acc_accelerator* acc, const char* name, double value, int64_t step) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    a.log({text_arg(name, "name")}, {value}, step_arg(step));
  });
}

acc_status acc_end_training(acc_accelerator* acc) {
  return guarded([&] { accelerator_arg(acc).end_training(); });
}

acc_status acc_tracker_names(const acc_accelerator* acc, acc_string_list** out) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    out_param(out, "out");
    emit(out, a.trackers().names());
  });
}

acc_status acc_tracker_log_artifact(acc_accelerator* acc, const char* tracker, const char* local_path,
                                    const char* artifact_path) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    a.trackers().log_artifact(text_arg(tracker, "tracker"), path_arg(local_path, "local_path"),
                              artifact_path ? artifact_path : "");
  });
}

acc_status acc_tracker_path(const acc_accelerator* acc, const char* name, char** out) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    const std::string tracker = text_arg(name, "name");
    out_param(out, "out");
    *out = owned_string(a.trackers().path(tracker));
  });
}

acc_status acc_progress_create(const acc_accelerator* acc, int64_t total, const char* description,
                               acc_progress** out) {
  return guarded([&] {
    auto& a = accelerator_arg(acc);
    out_param(out, "out");
    // Each machine's first process shows it, as Accelerate's tqdm(main_process_only=True).
    emit(out,
         std::make_unique<acc::tracking::Progress>(total, description ? description : "", a.is_local_main_process()));
  });
}

acc_status acc_progress_update(acc_progress* p, int64_t n) {
  return guarded([&] { live(p, "p").progress->update(n); });
}

acc_status acc_progress_set_postfix(acc_progress* p, const char* text) {
  return guarded([&] { live(p, "p").progress->set_postfix(text_arg(text, "text")); });
}

acc_status acc_progress_close(acc_progress* p) {
  return guarded([&] { live(p, "p").progress->close(); });
}

void acc_progress_free(acc_progress* p) { release(p); }

}  // extern "C"
