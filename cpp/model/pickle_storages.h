// The tensor storages a PyTorch pickle (a TorchScript archive's data.pkl or constants.pkl) refers
// to, read by walking its opcodes without running anything: each storage's record key and the
// bytes it declares (its element count times its type's size).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc {

struct StorageRef {
  std::string key;
  std::optional<uint64_t> nbytes;  // unknown for a storage type not listed here; UINT64_MAX if absurd
};

// nullopt when the pickle uses an opcode this walk does not know (it then tells nothing).
std::optional<std::vector<StorageRef>> pickle_storages(std::string_view pickle);

}  // namespace acc
