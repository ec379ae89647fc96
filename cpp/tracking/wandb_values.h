// Values as a W&B run stores them: JSON texts with W&B's bare NaN, Infinity and -Infinity (what
// wandb's encoder writes and its reader takes), one item per leaf of a step's tree of values (a
// dict's values under its key's path, as wandb's handler splits them), and the objects of its media
// types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tracking/histogram.h"

namespace acc::tracking::wandb {

// `value` as value_json: compact, floats as Python's repr writes them ("1.0", "1e-05"), NaN and
// infinities as W&B's bare tokens, strings as JSON escapes them.
std::string value_json(const nlohmann::ordered_json& value);

struct Leaf {
  std::vector<std::string> path;
  std::string value_json;
};

// The leaves of `tree` (an object): every value that is not an object, by its path of keys. Lists
// are leaves.
std::vector<Leaf> leaves(const nlohmann::ordered_json& tree);

// Where wandb files a media value logged under `key` at `step`, relative to the run's files/ folder:
// <folder>/<key>_<step>_<the first 20 hex digits of the file's SHA-256><extension>, the key made
// safe as wandb makes it (leading '/' dropped, "." and ".." parts as "_" and "__"; a '/' makes a
// subfolder).
std::string media_path(const std::string& folder, const std::string& key, int64_t step, const std::string& sha256,
                       const std::string& extension);

// A list of PNG images (what Accelerate's log_images logs: a list of wandb.Image under each key):
// wandb's "images/separated" object, the first image's size, each file's path.
nlohmann::ordered_json image_list_value(int64_t width, int64_t height, const std::vector<std::string>& paths);

// wandb.Histogram(np_histogram=(counts, edges)) of TensorBoard's histogram (tracking/histogram.h).
nlohmann::ordered_json histogram_value(const Histogram& histogram);

}  // namespace acc::tracking::wandb
