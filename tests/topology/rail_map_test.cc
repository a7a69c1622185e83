// The rail map: rank lists per location on the test topologies, device masks,
// fallback to rank 1 and 2, devices placed by PCI address or by configuration.
#include <gtest/gtest.h>

#include "tests/topology/test_data.h"
#include "topology/rail_map.h"

namespace tent::topology {
namespace {

using testing::dataFile;
using testing::namesOf;
using testing::railDevicesOf;
using Names = std::vector<std::string>;

constexpr uint64_t kAll = ~0ull;

Topology load(const std::string& name) {
  auto t = Topology::loadXml(dataFile(name));
  EXPECT_TRUE(t.ok()) << t.status().toString();
  return t.ok() ? std::move(t).value() : Topology();
}

struct Ranks {
  Names r0, r1, r2;
  int first;
};

void expectRanks(const RailMap& map, std::string_view location, const Ranks& want) {
  SCOPED_TRACE(std::string(location));
  LocationId id = map.locationId(location);
  ASSERT_EQ(map.locationName(id), location);
  const RankedDevices& r = map.ranked(id);
  EXPECT_EQ(namesOf(map, r.rank[0]), want.r0);
  EXPECT_EQ(namesOf(map, r.rank[1]), want.r1);
  EXPECT_EQ(namesOf(map, r.rank[2]), want.r2);
  EXPECT_EQ(r.first_rank, want.first);
}

Names preferredNames(const RailMap& map, std::string_view location, uint64_t mask,
                     size_t max = 16) {
  std::vector<uint32_t> out(max);
  size_t n = map.preferred(map.locationId(location), mask, out.data(), out.size());
  out.resize(n);
  return namesOf(map, out);
}

class TwoSocketRails : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = load("two_socket.xml");
    map_ = RailMap::build(railDevicesOf(topo_), topo_);
  }
  Topology topo_;
  RailMap map_;
};

TEST_F(TwoSocketRails, Locations) {
  ASSERT_EQ(map_.locationCount(), 6u);
  Names names;
  for (LocationId id = 0; id < map_.locationCount(); ++id) names.push_back(map_.locationName(id));
  EXPECT_EQ(names, (Names{"*", "cpu:0", "cpu:1", "cuda:0", "cuda:1", "cuda:2"}));
  EXPECT_EQ(map_.locationId("*"), kAnyLocation);
  EXPECT_EQ(map_.locationId("cpu:1"), 2u);
  EXPECT_EQ(map_.locationId("cpu:7"), kAnyLocation);
  EXPECT_EQ(map_.locationId("cuda:9"), kAnyLocation);
  EXPECT_EQ(map_.locationId("nonsense"), kAnyLocation);
}

TEST_F(TwoSocketRails, RankLists) {
  expectRanks(map_, "*", {{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}, {}, {}, 0});
  expectRanks(map_, "cpu:0", {{"mlx5_0", "mlx5_1"}, {}, {"mlx5_2", "mlx5_3"}, 0});
  expectRanks(map_, "cpu:1", {{"mlx5_2", "mlx5_3"}, {}, {"mlx5_0", "mlx5_1"}, 0});
  // mlx5_1 shares only the root complex with cuda0: same NUMA node, not the same switch.
  expectRanks(map_, "cuda:0", {{"mlx5_0"}, {"mlx5_1"}, {"mlx5_2", "mlx5_3"}, 0});
  // cuda1/cuda2 have no NIC on their switch: rank 1 serves them.
  expectRanks(map_, "cuda:1", {{}, {"mlx5_2", "mlx5_3"}, {"mlx5_0", "mlx5_1"}, 1});
  expectRanks(map_, "cuda:2", {{}, {"mlx5_2", "mlx5_3"}, {"mlx5_0", "mlx5_1"}, 1});
}

TEST_F(TwoSocketRails, PreferredAppliesMaskAndFallsBack) {
  EXPECT_EQ(preferredNames(map_, "cuda:0", kAll), (Names{"mlx5_0"}));
  EXPECT_EQ(preferredNames(map_, "cuda:0", kAll & ~1ull), (Names{"mlx5_1"}));      // rank 1
  EXPECT_EQ(preferredNames(map_, "cuda:0", 0b1100), (Names{"mlx5_2", "mlx5_3"}));  // rank 2
  EXPECT_EQ(preferredNames(map_, "cuda:1", kAll), (Names{"mlx5_2", "mlx5_3"}));
  EXPECT_EQ(preferredNames(map_, "cuda:1", 0b1011), (Names{"mlx5_3"}));
  EXPECT_EQ(preferredNames(map_, "cuda:1", ~(1ull << 2)), (Names{"mlx5_3"}));
  EXPECT_EQ(preferredNames(map_, "cpu:1", 0b0011), (Names{"mlx5_0", "mlx5_1"}));
  EXPECT_TRUE(preferredNames(map_, "cpu:1", 0).empty());
  EXPECT_EQ(preferredNames(map_, "*", 0b1010), (Names{"mlx5_1", "mlx5_3"}));
}

TEST_F(TwoSocketRails, PreferredHonoursMaxAndBadIds) {
  EXPECT_EQ(preferredNames(map_, "*", kAll, 2), (Names{"mlx5_0", "mlx5_1"}));
  uint32_t out[4];
  EXPECT_EQ(map_.preferred(1000, kAll, out, 4), 4u);  // unknown id: like "*"
  EXPECT_EQ(map_.preferred(kAnyLocation, kAll, nullptr, 4), 0u);
  EXPECT_EQ(map_.preferred(kAnyLocation, kAll, out, 0), 0u);
}

TEST_F(TwoSocketRails, CpusNearDevice) {
  EXPECT_EQ(map_.cpusNearDevice(0), topo_.cpusOfNuma(0));
  EXPECT_EQ(map_.cpusNearDevice(3), (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_TRUE(map_.cpusNearDevice(4).empty());
}

TEST(EightGpuRails, EachGpuHasItsSwitchNicAtRankZero) {
  Topology topo = load("eight_gpu_node.xml");
  RailMap map = RailMap::build(railDevicesOf(topo), topo);
  ASSERT_EQ(map.locationCount(), 1u + 2u + 8u);
  for (int k = 0; k < 8; ++k) {
    Names same_socket, other_socket;
    for (int j = 0; j < 8; ++j) {
      if (j == k) continue;
      ((j < 4) == (k < 4) ? same_socket : other_socket).push_back("mlx5_" + std::to_string(j));
    }
    expectRanks(map, "cuda:" + std::to_string(k),
                {{"mlx5_" + std::to_string(k)}, same_socket, other_socket, 0});
  }
  expectRanks(
      map, "cpu:0",
      {{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}, {}, {"mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"}, 0});
  expectRanks(
      map, "cpu:1",
      {{"mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"}, {}, {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}, 0});
  // Masking out cuda5's own NIC falls back to the rest of socket 1.
  EXPECT_EQ(preferredNames(map, "cuda:5", ~(1ull << 5)), (Names{"mlx5_4", "mlx5_6", "mlx5_7"}));
}

TEST(NvmlGpuRails, FallbackToRankTwo) {
  Topology topo = load("two_numa_nvml_gpu.xml");
  RailMap map = RailMap::build(railDevicesOf(topo), topo);
  expectRanks(map, "cuda:0", {{}, {}, {"mlx5_0"}, 2});
  expectRanks(map, "cpu:1", {{}, {}, {"mlx5_0"}, 2});
  expectRanks(map, "cpu:0", {{"mlx5_0"}, {}, {}, 0});
  EXPECT_EQ(preferredNames(map, "cuda:0", kAll), (Names{"mlx5_0"}));
}

TEST(NoNicRails, EveryLocationEmpty) {
  Topology topo = load("one_numa_no_nic.xml");
  RailMap map = RailMap::build(railDevicesOf(topo), topo);
  ASSERT_EQ(map.locationCount(), 2u);
  expectRanks(map, "*", {{}, {}, {}, -1});
  expectRanks(map, "cpu:0", {{}, {}, {}, -1});
  EXPECT_TRUE(preferredNames(map, "cpu:0", kAll).empty());
}

TEST(RailMapDevices, PlacedByPciAddressOverConfiguredNuma) {
  Topology topo = load("two_socket.xml");
  // Given out of PCI order, with a wrong NUMA node and an upper-case address.
  std::vector<RailDevice> devices = {{"b", 0, "0000:88:00.0", {}}, {"a", 1, "0000:04:00.0", {}}};
  RailMap map = RailMap::build(devices, topo);
  EXPECT_EQ(map.device(0).numa_node, 1);
  EXPECT_EQ(map.device(1).numa_node, 0);
  EXPECT_EQ(map.device(0).pcie_path, topo.rdmaDevices()[2].pcie_path);
  expectRanks(map, "*", {{"a", "b"}, {}, {}, 0});  // PCI order, not list order
  expectRanks(map, "cuda:0", {{"a"}, {}, {"b"}, 0});
  expectRanks(map, "cuda:1", {{}, {"b"}, {"a"}, 1});

  devices[0].pci = "0000:88:00.1";
  for (auto& c : devices[0].pci) c = static_cast<char>(std::toupper(c));
  RailMap upper = RailMap::build(devices, topo);
  EXPECT_EQ(upper.device(0).numa_node, 1);
}

TEST(RailMapDevices, SoftDevicesWithOnlyNumaNode) {
  Topology topo = load("two_socket.xml");
  std::vector<RailDevice> devices = {
      {"soft0", 1, "", {}}, {"soft1", 0, "", {}}, {"soft2", 3, "", {}}, {"soft3", -1, "", {}}};
  RailMap map = RailMap::build(devices, topo);
  expectRanks(map, "*", {{"soft0", "soft1", "soft2", "soft3"}, {}, {}, 0});  // by index
  expectRanks(map, "cpu:0", {{"soft1"}, {}, {"soft0", "soft2", "soft3"}, 0});
  expectRanks(map, "cuda:0", {{}, {"soft1"}, {"soft0", "soft2", "soft3"}, 1});
  // NUMA node 3 is not on this machine, but a device names it: it gets a location.
  expectRanks(map, "cpu:3", {{"soft2"}, {}, {"soft0", "soft1", "soft3"}, 0});
  EXPECT_TRUE(map.cpusNearDevice(2).empty());
  EXPECT_TRUE(map.cpusNearDevice(3).empty());
  EXPECT_EQ(map.cpusNearDevice(0), topo.cpusOfNuma(1));
}

TEST(RailMapDevices, DevicesWithPciBeforeThoseWithout) {
  Topology topo = load("two_socket.xml");
  std::vector<RailDevice> devices = {{"soft0", 0, "", {}}, {"nic", 0, "0000:05:00.0", {}}};
  RailMap map = RailMap::build(devices, topo);
  expectRanks(map, "cpu:0", {{"nic", "soft0"}, {}, {}, 0});
}

TEST(RailMapDevices, MaskBitsPastSixtyThreeAlwaysAllowed) {
  Topology topo = load("one_numa_no_nic.xml");
  std::vector<RailDevice> devices;
  for (int i = 0; i < 70; ++i) devices.push_back({"soft" + std::to_string(i), 0, "", {}});
  RailMap map = RailMap::build(devices, topo);
  std::vector<uint32_t> out(70);
  size_t n = map.preferred(map.locationId("cpu:0"), 0, out.data(), out.size());
  ASSERT_EQ(n, 6u);
  EXPECT_EQ(out[0], 64u);
  EXPECT_EQ(out[5], 69u);
  EXPECT_EQ(map.preferred(map.locationId("cpu:0"), 1ull << 63, out.data(), out.size()), 7u);
  EXPECT_EQ(out[0], 63u);
}

TEST(RailMapDefault, HasOnlyTheAnyLocation) {
  RailMap map;
  EXPECT_EQ(map.deviceCount(), 0u);
  ASSERT_EQ(map.locationCount(), 1u);
  EXPECT_EQ(map.locationName(kAnyLocation), "*");
  EXPECT_EQ(map.locationId("cpu:0"), kAnyLocation);
  EXPECT_EQ(map.ranked(kAnyLocation).first_rank, -1);
  uint32_t out[2];
  EXPECT_EQ(map.preferred(kAnyLocation, kAll, out, 2), 0u);
}

}  // namespace
}  // namespace tent::topology
