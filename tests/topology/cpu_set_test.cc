// CPU lists, the affinity mask and the cgroup cpuset (v1 and v2 layouts, in a
// temporary directory standing in for /sys/fs/cgroup).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "topology/cpu_set.h"

namespace tent::topology {
namespace {

namespace fs = std::filesystem;

TEST(CpuList, ParsesTheKernelsFormat) {
  auto c = parseCpuList("0-3,8,10-11\n");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(*c, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*parseCpuList("5,1,1-2"), (std::vector<int>{1, 2, 5}));
  EXPECT_TRUE(parseCpuList("")->empty());
}

TEST(CpuList, RefusesGarbageNamingIt) {
  for (const char* bad : {"a", "1-", "-3", "3-1", "1,,2", "1;2", "99999999"}) {
    auto c = parseCpuList(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find(bad), std::string::npos) << c.status().message();
  }
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

TEST(CgroupCpus, ReadsV2AndV1Layouts) {
  const fs::path root = fs::path(::testing::TempDir()) / ("cgroup-" + std::to_string(getpid()));
  write(root / "job/rank3/cpuset.cpus.effective", "8-11\n");
  EXPECT_EQ(cgroupCpus("0::/job/rank3\n", root.string()), (std::vector<int>{8, 9, 10, 11}));
  write(root / "cpuset/rank5/cpuset.effective_cpus", "2,6\n");
  EXPECT_EQ(cgroupCpus("4:memory:/x\n3:cpuset:/rank5\n0::/\n", root.string()),
            (std::vector<int>{2, 6}));
  // No file (no cpuset controller there): no restriction.
  EXPECT_TRUE(cgroupCpus("0::/absent\n", root.string()).empty());
  EXPECT_TRUE(cgroupCpus("garbage", root.string()).empty());
  fs::remove_all(root);
}

TEST(ProcessAllowedCpus, IsTheAffinityWithinTheCpuset) {
  const AllowedCpus a = processAllowedCpus();
  ASSERT_FALSE(a.cpus.empty());
  EXPECT_EQ(a.affinity, affinityCpus());
  for (int cpu : a.cpus) {
    EXPECT_TRUE(std::count(a.affinity.begin(), a.affinity.end(), cpu)) << cpu;
    if (!a.cpuset.empty()) {
      EXPECT_TRUE(std::count(a.cpuset.begin(), a.cpuset.end(), cpu)) << cpu;
    }
  }
}

}  // namespace
}  // namespace tent::topology
