// The SIGHUP disposition the launcher inherited: `nohup` ignores it, and the job should then
// survive a hang-up. Shared libraries may change it while they initialize, before main (Debian 13's
// libtorch loads Open MPI, whose initializer sets SIGHUP back to its default action), so a program
// records it from its ELF preinit array, which runs before any library's initializer.
#pragma once

namespace acc {

// Records whether SIGHUP is ignored now. Only plain system calls: it runs before the C++ runtime
// and every shared library are initialized.
void record_inherited_sighup();
// Whether SIGHUP was ignored at the start: as recorded, else (nothing recorded it) as it is now.
bool sighup_was_ignored();

}  // namespace acc
