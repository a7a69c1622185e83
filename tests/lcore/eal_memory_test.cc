// eal.memory_mb against the machine, before EAL starts: more than there is fails with
// a message naming the key, what it asks and what there is (DPDK itself crashed).
#include "lcore/eal_memory.h"

#include <gtest/gtest.h>

namespace tent::lcore {
namespace {

constexpr uint64_t kMiB = 1 << 20;

config::Config withMemory(uint32_t mb, bool no_huge = true) {
  config::Config c;
  c.source = "tent.yaml";
  c.eal.memory_mb = mb;
  c.eal.no_huge = no_huge;
  return c;
}

MachineMemory machine(uint64_t available_mib) {
  MachineMemory m;
  m.available_bytes = available_mib * kMiB;
  m.address_space_limit = UINT64_MAX;
  m.address_space_used = 100 * kMiB;
  return m;
}

TEST(EalMemory, WithoutHugepagesItMustFitWhatIsAvailable) {
  EXPECT_TRUE(checkEalMemory(withMemory(64), machine(1024)).ok());
  EXPECT_TRUE(checkEalMemory(withMemory(1024), machine(1024)).ok());
  Status s = checkEalMemory(withMemory(65536), machine(1024));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "tent.yaml: eal.memory_mb: 65536 MiB is more than this machine has available "
            "(1024 MiB MemAvailable)");
}

TEST(EalMemory, WithoutHugepagesItMustFitUnderTheAddressSpaceLimit) {
  MachineMemory m = machine(65536);
  m.address_space_limit = 2048 * kMiB;
  m.address_space_used = 1536 * kMiB;
  EXPECT_TRUE(checkEalMemory(withMemory(512), m).ok());
  Status s = checkEalMemory(withMemory(1024), m);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("eal.memory_mb: 1024 MiB does not fit under this process's "
                             "address-space limit (RLIMIT_AS 2048 MiB, 1536 MiB in use)"),
            std::string::npos)
      << s.message();
}

TEST(EalMemory, WithHugepagesItMustFitTheFreeOnes) {
  MachineMemory m = machine(65536);
  m.hugepages_free_bytes = 512 * kMiB;
  EXPECT_TRUE(checkEalMemory(withMemory(512, false), m).ok());
  Status s = checkEalMemory(withMemory(1024, false), m);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("eal.memory_mb: 1024 MiB of hugepages, but 512 MiB are free"),
            std::string::npos)
      << s.message();
}

TEST(EalMemory, ThisMachine) {
  const MachineMemory m = readMachineMemory();
  EXPECT_GT(m.available_bytes, 0u);
  EXPECT_GT(m.address_space_used, 0u);
  EXPECT_TRUE(checkEalMemory(withMemory(64), m).ok());
  const uint64_t too_much = m.available_bytes / kMiB + 1;
  if (too_much <= UINT32_MAX) {
    Status s = checkEalMemory(withMemory(static_cast<uint32_t>(too_much)), m);
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.toString();
  }
}

}  // namespace
}  // namespace tent::lcore
