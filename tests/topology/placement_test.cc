// Lcore placement help: warnings for rail lcores pinned away from their NIC.
#include <gtest/gtest.h>

#include "tests/topology/test_data.h"
#include "topology/placement.h"

namespace tent::topology {
namespace {

using testing::dataFile;
using testing::railDevicesOf;

config::LcoreSpec lcore(int cpu, std::vector<std::string> rails, bool background = false) {
  config::LcoreSpec spec;
  spec.cpu = cpu;
  for (auto& r : rails) spec.pollers.push_back({config::PollerKind::kRail, r});
  if (background) spec.pollers.push_back({config::PollerKind::kBackground, ""});
  return spec;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class Placement : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Topology::loadXml(dataFile("two_socket.xml"));
    ASSERT_TRUE(t.ok()) << t.status().toString();
    topo_ = std::move(t).value();
    rails_ = RailMap::build(railDevicesOf(topo_), topo_);
  }
  std::vector<PlacementWarning> check(const std::vector<config::LcoreSpec>& lcores) {
    return checkRailLcorePlacement(lcores, rails_, topo_);
  }
  Topology topo_;
  RailMap rails_;
};

TEST_F(Placement, GoodLayoutHasNoWarning) {
  auto w = check({lcore(0, {"mlx5_0", "mlx5_1"}), lcore(4, {"mlx5_2"}), lcore(12, {"mlx5_3"}),
                  lcore(-1, {"mlx5_0"}), lcore(5, {}, true)});
  EXPECT_TRUE(w.empty()) << w.front().message;
}

TEST_F(Placement, RailLcoreOnTheOtherSocket) {
  auto w = check({lcore(0, {"mlx5_0"}), lcore(4, {"mlx5_1"}, true)});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].lcore, 1u);
  EXPECT_EQ(w[0].cpu, 4);
  EXPECT_EQ(w[0].device, "mlx5_1");
  EXPECT_EQ(w[0].cpu_numa, 1);
  EXPECT_EQ(w[0].device_numa, 0);
  EXPECT_TRUE(contains(w[0].message, "lcore 1 (cpu 4, NUMA 1)")) << w[0].message;
  EXPECT_TRUE(contains(w[0].message, "CPUs near it: 0-3,8-11")) << w[0].message;
}

TEST_F(Placement, RailStarWithDevicesOnOtherNodes) {
  auto w = check({lcore(1, {"*"})});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].device, "*");
  EXPECT_TRUE(contains(w[0].message, "mlx5_2 (NUMA 1), mlx5_3 (NUMA 1)")) << w[0].message;
}

TEST_F(Placement, UnknownDeviceAndUnknownCpu) {
  auto w = check({lcore(0, {"mlx5_9"}), lcore(64, {"mlx5_0"})});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(contains(w[0].message, "names no device")) << w[0].message;
  EXPECT_EQ(w[1].cpu, 64);
  EXPECT_EQ(w[1].cpu_numa, -1);
  EXPECT_TRUE(contains(w[1].message, "does not have")) << w[1].message;
}

TEST(PlacementOneNuma, SoftDevicesOnTheOnlyNode) {
  auto t = Topology::loadXml(dataFile("one_numa_no_nic.xml"));
  ASSERT_TRUE(t.ok());
  RailMap rails = RailMap::build({{"soft0", 0, "", {}}}, *t);
  EXPECT_TRUE(checkRailLcorePlacement({lcore(1, {"*", "soft0"})}, rails, *t).empty());
  EXPECT_EQ(rails.cpusNearDevice(0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(CpuList, Format) {
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_EQ(formatCpuList({5}), "5");
  EXPECT_EQ(formatCpuList({11, 3, 1, 2, 0, 8, 10, 2}), "0-3,8,10-11");
}

}  // namespace
}  // namespace tent::topology
