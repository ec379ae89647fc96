// How many OpenMP threads each launched process gets when neither --num_cpu_threads_per_process nor
// OMP_NUM_THREADS says. Accelerate's launcher always sets OMP_NUM_THREADS: for a CPU job (--cpu,
// use_cpu) the machine's physical cores shared among its processes, else 1.
#pragma once

namespace acc {

// The machine's physical cores (psutil.cpu_count(logical=False)), from the kernel's CPU topology;
// the logical count where that is unreadable.
int physical_cores();

// Whether the kernel's NVIDIA driver reports a GPU. Read from /proc, so that the launcher never
// initialises CUDA itself.
bool machine_has_nvidia_gpu();

// `cpu_job`: the job trains on the CPU (asked for, or no GPU on the machine: this runtime trains
// there anyway). The processes sharing the machine are MPI's local size where an MPI launcher says
// it (MPI_LOCALNRANKS, OMPI_COMM_WORLD_LOCAL_SIZE, MV2_COMM_WORLD_LOCAL_SIZE, as Accelerate reads
// them), else `local_processes`. At least 1.
int default_threads_per_process(bool cpu_job, int local_processes);

// OMP_NUM_THREADS as Accelerate's launcher takes it from the environment: a count of at least 1;
// unset, unreadable, 0 or negative: none (Accelerate then computes its default, and 0 would stop
// libgomp).
bool inherited_thread_count_usable();

}  // namespace acc
