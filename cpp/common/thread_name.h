// Names for the threads the library starts ("acc-loader", "acc-tracker", "acc-release"), as `top -H`,
// gdb and /proc/<pid>/task/*/comm show them.
#pragma once

namespace acc {

// Names the calling thread (at most 15 bytes are kept; the kernel's limit).
void name_this_thread(const char* name);

}  // namespace acc
