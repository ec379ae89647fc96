#include "parallel/replica_check.h"

#include <sstream>
#include <vector>

#include "common/error.h"
#include "ops/collectives.h"

namespace acc {
namespace {

// One line per tensor: "parameter <name> [sizes] <dtype> trained|frozen" or "buffer <name> ...".
std::vector<std::string> describe(const Model& model) {
  std::vector<std::string> lines;
  auto add = [&](const char* kind, const NamedTensors& tensors) {
    for (const auto& [name, t] : tensors) {
      std::ostringstream line;
      line << kind << " " << name << " " << t.sizes() << " " << t.scalar_type();
      if (std::string(kind) == "parameter") line << (t.requires_grad() ? " trained" : " frozen");
      lines.push_back(line.str());
    }
  };
  add("parameter", model.named_parameters());
  add("buffer", model.named_buffers());
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

}  // namespace

void check_same_model_everywhere(const Model& model, const std::shared_ptr<Distributed>& dist, const std::string& what) {
  const std::string differences =
      Collectives(dist).differences_from_process_0(joined(describe(model)), what + " (the models compared)", 1);
  if (!differences.empty())
    fail(Status::InvalidArgument, what, ": every process must prepare the same model, and the first tensor that ",
         "differs: ", differences);
}

}  // namespace acc
