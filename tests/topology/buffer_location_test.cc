// bufferLocationForRange(): the location of an address range inside registered
// buffers whose regions sit on different locations.
#include <gtest/gtest.h>

#include <vector>

#include "topology/rail_map.h"

namespace tent::topology {
namespace {

constexpr LocationId kNuma0 = 1, kNuma1 = 2, kGpu0 = 3, kGpu1 = 4;
constexpr LocationId kUntouched = 999;

// Buffer A: [0x10000, 0x13000) in three 4 KiB regions on NUMA 0, NUMA 1, GPU 0.
// Buffer B: [0x13000, 0x14000) right after A, one region on GPU 1.
// Buffer C: [0x20000, 0x21000) registered without any region.
std::vector<BufferLayout> buffers() {
  return {
      {0x10000,
       0x3000,
       {{0x10000, 0x1000, kNuma0}, {0x11000, 0x1000, kNuma1}, {0x12000, 0x1000, kGpu0}}},
      {0x13000, 0x1000, {{0x13000, 0x1000, kGpu1}}},
      {0x20000, 0x1000, {}},
  };
}

// The location found, kUntouched when the call returned false (and wrote nothing).
LocationId locate(uint64_t addr, uint64_t length) {
  auto b = buffers();
  LocationId out = kUntouched;
  bool ok = bufferLocationForRange(b, addr, length, &out);
  EXPECT_EQ(ok, out != kUntouched) << "addr " << addr << " length " << length;
  return out;
}

TEST(BufferLocation, InsideOneRegion) {
  EXPECT_EQ(locate(0x10000, 0x1000), kNuma0);
  EXPECT_EQ(locate(0x11800, 0x10), kNuma1);
  EXPECT_EQ(locate(0x12fff, 1), kGpu0);
  EXPECT_EQ(locate(0x13000, 0x1000), kGpu1);
}

TEST(BufferLocation, LargestOverlapWins) {
  EXPECT_EQ(locate(0x10800, 0xc00), kNuma0);   // 0x800 on NUMA 0, 0x400 on NUMA 1
  EXPECT_EQ(locate(0x10c00, 0xc00), kNuma1);   // 0x400 on NUMA 0, 0x800 on NUMA 1
  EXPECT_EQ(locate(0x10f00, 0x2000), kNuma1);  // NUMA 1 fully covered in the middle
  EXPECT_EQ(locate(0x10000, 0x3000), kNuma0);  // three equal parts: the lowest address
}

TEST(BufferLocation, TieGoesToTheLowerAddress) {
  EXPECT_EQ(locate(0x10800, 0x1000), kNuma0);
  EXPECT_EQ(locate(0x11800, 0x1000), kNuma1);
}

TEST(BufferLocation, OutsideEveryBufferIsAnError) {
  EXPECT_EQ(locate(0x0, 0x100), kUntouched);
  EXPECT_EQ(locate(0xff00, 0x200), kUntouched);  // starts before A
  EXPECT_EQ(locate(0x14000, 0x10), kUntouched);  // just past B
  EXPECT_EQ(locate(0x30000, 0x1000), kUntouched);
}

TEST(BufferLocation, StraddlingTwoBuffersIsAnError) {
  // A and B are adjacent: the range is covered, but not by one buffer.
  EXPECT_EQ(locate(0x12f00, 0x200), kUntouched);
  EXPECT_EQ(locate(0x10000, 0x4000), kUntouched);
}

TEST(BufferLocation, DegenerateInputs) {
  EXPECT_EQ(locate(0x10000, 0), kUntouched);           // empty range
  EXPECT_EQ(locate(~0ull - 0x10, 0x100), kUntouched);  // wraps around
  EXPECT_EQ(locate(0x20000, 0x100), kUntouched);       // buffer without regions
  auto b = buffers();
  EXPECT_FALSE(bufferLocationForRange(b, 0x10000, 0x10, nullptr));
  LocationId out = kUntouched;
  EXPECT_FALSE(bufferLocationForRange({}, 0x10000, 0x10, &out));
  EXPECT_EQ(out, kUntouched);
}

TEST(BufferLocation, ManyRegions) {
  // 1000 regions of 4 KiB alternating between two GPUs; a range of 2.5 regions.
  BufferLayout big{0x100000, 1000 * 0x1000, {}};
  for (uint64_t i = 0; i < 1000; ++i)
    big.regions.push_back({big.addr + i * 0x1000, 0x1000, i % 2 == 0 ? kGpu0 : kGpu1});
  std::vector<BufferLayout> list = {big};
  LocationId out = kUntouched;
  // Regions 500 (gpu0, 0x800 bytes), 501 (gpu1, full), 502 (gpu0, full). Overlaps are
  // compared per region, not summed per location: 501 and 502 tie, the lower one wins.
  ASSERT_TRUE(bufferLocationForRange(list, big.addr + 500 * 0x1000 + 0x800, 0x2800, &out));
  EXPECT_EQ(out, kGpu1);
  // Regions 500 (gpu0, 0x800), 501 (gpu1, 0x100): gpu0.
  ASSERT_TRUE(bufferLocationForRange(list, big.addr + 500 * 0x1000 + 0x800, 0x900, &out));
  EXPECT_EQ(out, kGpu0);
  ASSERT_TRUE(bufferLocationForRange(list, big.addr + 999 * 0x1000, 0x1000, &out));
  EXPECT_EQ(out, kGpu1);
}

}  // namespace
}  // namespace tent::topology
