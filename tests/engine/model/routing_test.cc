#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "config/config.h"
#include "model/rdma_context.h"
#include "datapath/slice_poller.h"
#include "model/slicing.h"
#include "topology/rail_map.h"
#include "topology/topology.h"

namespace tent::rdma {
namespace {

TEST(Slicing, CountsAndTailMerge) {
  EXPECT_EQ(sliceCount(0, 100), 0u);
  EXPECT_EQ(sliceCount(1, 100), 1u);
  EXPECT_EQ(sliceCount(100, 100), 1u);
  EXPECT_EQ(sliceCount(149, 100), 1u);  // short tail (49 < 50) merges
  EXPECT_EQ(sliceCount(150, 100), 2u);  // a half block stands alone
  EXPECT_EQ(sliceCount(1000, 100), 10u);
  EXPECT_EQ(sliceCount(1010, 100), 10u);
  EXPECT_EQ(sliceCount(1060, 100), 11u);
}

TEST(Slicing, RangesTileTheRequest) {
  for (uint64_t len : {1ull, 99ull, 100ull, 149ull, 150ull, 1010ull, 1060ull, 65536ull * 7 + 3}) {
    for (uint64_t block : {100ull, 4096ull, 65536ull}) {
      uint64_t n = sliceCount(len, block), expect_off = 0;
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t off = 0, piece = 0;
        sliceRange(len, block, i, &off, &piece);
        EXPECT_EQ(off, expect_off);
        EXPECT_GT(piece, 0u);
        EXPECT_LT(piece, block + block / 2 + 1);
        expect_off += piece;
      }
      EXPECT_EQ(expect_off, len) << len << " / " << block;
    }
  }
}

// 64-bit lengths, and slices never longer than one WR (the max message size): the
// 4 GiB + 4 KiB request of issue 13 tiles exactly, with no piece over 2^31.
TEST(Slicing, LongRequestsTileInSlicesThatFitOneWr) {
  const uint64_t max_wr = uint64_t{1} << 31;
  for (uint64_t len : {(uint64_t{4} << 30) + 4096, uint64_t{4} << 30, (uint64_t{1} << 40) + 7}) {
    for (uint64_t block : {uint64_t{65536}, uint64_t{1} << 30, max_wr}) {
      const uint64_t n = sliceCount(len, block, max_wr);
      uint64_t expect_off = 0;
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t off = 0, piece = 0;
        sliceRange(len, block, i, &off, &piece, max_wr);
        ASSERT_EQ(off, expect_off);
        ASSERT_GT(piece, 0u);
        ASSERT_LE(piece, max_wr);
        expect_off += piece;
      }
      EXPECT_EQ(expect_off, len) << len << " / " << block;
    }
  }
  // A short tail merges only while the merged slice fits: 4096 + 100 > 4096.
  EXPECT_EQ(sliceCount(3 * 4096 + 100, 4096, 4096), 4u);
  EXPECT_EQ(sliceCount(3 * 4096 + 100, 4096), 3u);
  EXPECT_EQ(sliceCount(3 * 4096 + 100, 0, 4096), 4u);  // no block: cut at the max
}

// Config says what the engine does: the top of each range is what the code holds,
// so no value is clamped silently (issue 13: direct.qp_depth, workers.burst).
TEST(ConfigRanges, AreWhatTheEngineSupports) {
  auto allowedOf = [](const std::string& path) {
    for (const auto& k : config::keyList())
      if (k.path == path) return k.allowed;
    return std::string("<missing>");
  };
  const std::string lanes = "[1, " + std::to_string(RdmaContext::kMaxLaneDepth) + "]";
  const std::string burst = "[1, " + std::to_string(SlicePoller::kMaxPost) + "]";
  EXPECT_NE(allowedOf("direct.qp_depth").find(lanes), std::string::npos)
      << allowedOf("direct.qp_depth");
  EXPECT_NE(allowedOf("workers.burst").find(burst), std::string::npos)
      << allowedOf("workers.burst");
}

TEST(Slicing, EvenSplitCoversEveryByte) {
  for (uint32_t parts : {1u, 2u, 3u, 8u}) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < parts; ++i) {
      uint64_t off = 0, piece = 0;
      evenSplit(1001, parts, i, &off, &piece);
      EXPECT_EQ(off, sum);
      sum += piece;
    }
    EXPECT_EQ(sum, 1001u);
  }
}

// Four devices: 0 and 1 on NUMA 0, 2 and 3 on NUMA 1.
topology::RailMap fourRails() {
  std::vector<topology::RailDevice> d = {
      {"d0", 0, "", {}}, {"d1", 0, "", {}}, {"d2", 1, "", {}}, {"d3", 1, "", {}}};
  return topology::RailMap::build(d, topology::Topology());
}

TEST(DeviceChoice, RankZeroOfTheLocation) {
  auto rails = fourRails();
  uint32_t out[kMaxDevices];
  size_t n = localCandidates(rails, rails.locationId("cpu:1"), ~0ull, 0, out, kMaxDevices);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(std::set<uint32_t>(out, out + n), (std::set<uint32_t>{2, 3}));
  n = localCandidates(rails, rails.locationId("*"), ~0ull, 0, out, kMaxDevices);
  EXPECT_EQ(n, 4u);
}

TEST(DeviceChoice, MaskAndPausedDevices) {
  auto rails = fourRails();
  uint32_t out[kMaxDevices];
  auto cpu0 = rails.locationId("cpu:0");
  size_t n = localCandidates(rails, cpu0, ~0ull & ~1ull, 0, out, kMaxDevices);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(out[0], 1u);
  n = localCandidates(rails, cpu0, ~0ull, /*paused=*/0b10, out, kMaxDevices);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(out[0], 0u);
  // Both rank-0 devices masked: the next rank.
  n = localCandidates(rails, cpu0, 0b1100, 0, out, kMaxDevices);
  EXPECT_EQ(n, 2u);
  // Every candidate paused: paused devices are used rather than none.
  n = localCandidates(rails, cpu0, 0b0011, 0b0011, out, kMaxDevices);
  EXPECT_EQ(n, 2u);
}

TEST(DeviceChoice, PeerDeviceSameNameElseRoundRobinOverRankZero) {
  std::vector<int> same = {1, -1, 0};  // local 0 -> peer 1, local 1 -> none, local 2 -> peer 0
  std::vector<uint16_t> rank0 = {2, 3};
  EXPECT_EQ(choosePeerDevice(same, 0, rank0, 4, 0), 1);
  EXPECT_EQ(choosePeerDevice(same, 2, rank0, 4, 5), 0);
  std::set<int> seen;
  for (uint64_t rr = 0; rr < 4; ++rr) seen.insert(choosePeerDevice(same, 1, rank0, 4, rr));
  EXPECT_EQ(seen, (std::set<int>{2, 3}));
  EXPECT_EQ(choosePeerDevice(same, 1, {}, 3, 4), 1);  // no rank-0 list: every device
  EXPECT_EQ(choosePeerDevice(same, 1, {}, 0, 4), -1);
}

TEST(DeviceChoice, LargeRequestSpreadsOverRankZeroRoundRobin) {
  auto rails = fourRails();
  uint32_t out[kMaxDevices];
  size_t n = localCandidates(rails, rails.locationId("cpu:0"), ~0ull, 0, out, kMaxDevices);
  std::vector<int> used(4, 0);
  for (uint16_t slice = 0; slice < 8; ++slice) used[out[slice % n]]++;
  EXPECT_EQ(used, (std::vector<int>{4, 4, 0, 0}));
}

}  // namespace
}  // namespace tent::rdma
