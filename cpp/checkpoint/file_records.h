// What a checkpoint's manifest records of its files: each file's size and CRC-32C, gathered from every
// process that wrote one, and a checksum of the manifest itself. load_state checks each file it
// reads against them once the file's own checks have passed (so a value out of range is still named
// by its key), which refuses what those checks cannot see: a JSON value changed to another valid
// one, a registered object's bytes, a file cut or extended. Checkpoints written before the records
// existed have none and load as before.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace acc {

inline constexpr const char* kManifestFilesKey = "files";
inline constexpr const char* kManifestCrcKey = "manifest_crc32c";

// {"size": bytes, "crc32c": "<decimal>"} of the file at `path`.
nlohmann::json file_record(const std::string& path);
// Refuses the file `name` at `path` when `manifest` records another size or checksum for it (nothing
// to check where it records none, or the file is not there: check_recorded_file_present says so).
void check_file_record(const nlohmann::json& manifest, const std::string& name, const std::string& path,
                       const std::string& manifest_path);
// Refuses the absence of a file `manifest` records (a part whose file may be absent, because its
// state was not saved then, is told the difference by this check running first).
void check_recorded_file_present(const nlohmann::json& manifest, const std::string& name, const std::string& path);
// `manifest` with the checksum of the rest of it added; the check of a manifest read back.
nlohmann::json with_manifest_checksum(nlohmann::json manifest);
void check_manifest_checksum(const nlohmann::json& manifest, const std::string& manifest_path);

}  // namespace acc
