#include "checkpoint/file_records.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/crc32c.h"
#include "common/error.h"

namespace acc {
namespace {

std::string text_crc32c(const std::string& text) { return std::to_string(crc32c(text.data(), text.size())); }

// The manifest as it is checksummed: without its checksum, dumped with sorted keys.
std::string checksummed_text(nlohmann::json manifest) {
  manifest.erase(kManifestCrcKey);
  return manifest.dump();
}

}  // namespace

nlohmann::json file_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::Io, "cannot read back '", path, "' to record its checksum");
  std::vector<char> buffer(size_t{1} << 20);
  uint32_t crc = 0;
  uint64_t size = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<size_t>(in.gcount());
    crc = crc32c_extend(crc, buffer.data(), got);
    size += got;
  }
  if (in.bad()) fail(Status::Io, "cannot read back '", path, "' to record its checksum");
  return {{"size", size}, {"crc32c", std::to_string(crc)}};
}

void check_file_record(const nlohmann::json& manifest, const std::string& name, const std::string& path,
                       const std::string& manifest_path) {
  if (!manifest.is_object() || !manifest.contains(kManifestFilesKey)) return;
  const nlohmann::json& files = manifest[kManifestFilesKey];
  if (!files.is_object() || !files.contains(name)) return;
  // (It was there when it was read: gone now, what was read cannot be checked.)
  std::error_code error;
  if (!std::filesystem::exists(path, error))
    fail(Status::Io, "checkpoint file '", path, "' went away while the checkpoint was read");
  const nlohmann::json& recorded = files[name];
  if (recorded != file_record(path))
    fail(Status::Io, "checkpoint file '", path, "' is corrupt or was changed: its size or CRC-32C is not what ",
         manifest_path, " recorded when it was written");
}

void check_recorded_file_present(const nlohmann::json& manifest, const std::string& name, const std::string& path) {
  if (!manifest.is_object() || !manifest.contains(kManifestFilesKey)) return;
  const nlohmann::json& files = manifest[kManifestFilesKey];
  std::error_code error;
  if (files.is_object() && files.contains(name) && !std::filesystem::exists(path, error))
    fail(Status::Io, "checkpoint file '", path, "' is missing (the checkpoint's manifest records it)");
}

nlohmann::json with_manifest_checksum(nlohmann::json manifest) {
  manifest[kManifestCrcKey] = text_crc32c(checksummed_text(manifest));
  return manifest;
}

void check_manifest_checksum(const nlohmann::json& manifest, const std::string& manifest_path) {
  if (!manifest.is_object()) return;
  // Written together: one without the other is a manifest whose checksum's key was changed.
  if (!manifest.contains(kManifestCrcKey) && manifest.contains(kManifestFilesKey))
    fail(Status::Io, "checkpoint file '", manifest_path, "' is corrupt or was changed: it records its files but no ",
         "checksum of itself");
  if (!manifest.contains(kManifestCrcKey)) return;
  const nlohmann::json& recorded = manifest[kManifestCrcKey];
  if (!recorded.is_string() || recorded.get<std::string>() != text_crc32c(checksummed_text(manifest)))
    fail(Status::Io, "checkpoint file '", manifest_path, "' is corrupt or was changed: its contents do not match ",
         "the checksum it was written with");
}

}  // namespace acc
