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

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

void check_same_model_everywhere(const Model& model, const std::shared_ptr<Distributed>& dist, const std::string& what) {
  const auto all = Collectives(dist).gather_object(joined(describe(model)), what + " (the models compared)");
  const std::vector<std::string> first = split_lines(all[0]);
  for (size_t rank = 1; rank < all.size(); ++rank) {
    if (all[rank] == all[0]) continue;
    const std::vector<std::string> other = split_lines(all[rank]);
    size_t i = 0;
    while (i < first.size() && i < other.size() && first[i] == other[i]) ++i;
    const std::string mine = i < first.size() ? first[i] : "nothing more";
    const std::string theirs = i < other.size() ? other[i] : "nothing more";
    fail(Status::InvalidArgument, what, ": every process must prepare the same model; process ", rank, " has ",
         other.size(), " tensors and process 0 ", first.size(), ", the first difference at tensor ", i,
         ": process 0 has ", mine, ", process ", rank, " has ", theirs);
  }
}

}  // namespace acc
