// How values over a batch or over processes are combined: losses and collectives share it.
#pragma once

namespace acc {

// Same values as acc_reduction; also at::Reduction's.
enum class Reduction : int { None = 0, Mean = 1, Sum = 2 };

}  // namespace acc
