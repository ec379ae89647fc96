// The job's accelerator, created once per process by test_dist.cpp's environment and shared by every
// multi-process test file (a process joins the process group once).
#pragma once

#include <cstdint>

#include "accelerate.h"

extern acc_accelerator* g_acc;
extern int64_t g_rank, g_world;
