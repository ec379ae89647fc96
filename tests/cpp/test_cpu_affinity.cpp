// enable_cpu_affinity: the kernel's CPU lists, the PCI device path of a GPU, and nothing pinned on
// the CPU (there is no GPU to be near, as in Accelerate).
#include <gtest/gtest.h>
#include <sched.h>

#include "common/error.h"
#include "state/cpu_affinity.h"

TEST(CpuAffinity, ReadsTheKernelsCpuLists) {
  EXPECT_EQ(acc::parse_cpu_list("0-3,8,10-11\n", "list"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(acc::parse_cpu_list("5", "list"), (std::vector<int>{5}));
  EXPECT_TRUE(acc::parse_cpu_list("\n", "list").empty());
  for (const char* bad : {"3-1", "a-b", "1,,2", "-4", "0-", "99999999"}) {
    try {
      acc::parse_cpu_list(bad, "local_cpulist");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const acc::Error& e) {
      EXPECT_EQ(e.status(), acc::Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("local_cpulist"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuAffinity, NamesTheGpusPciDevice) {
  EXPECT_EQ(acc::pci_device_path(0, 0x3b, 0), "/sys/bus/pci/devices/0000:3b:00.0");
  EXPECT_EQ(acc::pci_device_path(1, 0xaf, 0x1f), "/sys/bus/pci/devices/0001:af:1f.0");
}

TEST(CpuAffinity, OnTheCpuNothingIsPinned) {
  cpu_set_t before, after;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  EXPECT_TRUE(acc::pin_to_device_cores(c10::Device(c10::kCPU)).empty());
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}
