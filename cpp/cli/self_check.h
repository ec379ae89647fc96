// `accelerate test`: a short check of a job's processes, run on each of them by the launcher —
// every collective, a few DDP steps against a one-process reference, a checkpoint round trip.
#pragma once

namespace acc {

// Runs the checks in this process (one of the job's), prints one line per check (the main
// process prints every check, the others their failures) and returns 0 if every check passed
// on every process, else 1.
int run_self_check();

}  // namespace acc
