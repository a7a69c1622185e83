// The datapath lookups (RailMap::preferred, bufferLocationForRange) must not allocate:
// this binary (on its own: it replaces the global operator new) counts operator new
// calls on this thread while a CountAllocations is alive.
#include <gtest/gtest.h>

#include "tests/support/counting_allocator.h"
#include "tests/topology/test_data.h"
#include "topology/rail_map.h"

namespace tent::topology {
namespace {

TEST(NoAllocation, DatapathLookups) {
  auto topo = Topology::loadXml(testing::dataFile("eight_gpu_node.xml"));
  ASSERT_TRUE(topo.ok()) << topo.status().toString();
  RailMap map = RailMap::build(testing::railDevicesOf(*topo), *topo);
  std::vector<BufferLayout> buffers = {
      {0x1000, 0x2000, {{0x1000, 0x1000, 1}, {0x2000, 0x1000, 2}}}};
  LocationId cuda3 = map.locationId("cuda:3");
  uint32_t out[8];
  LocationId where = kAnyLocation;

  size_t allocations = 0;
  size_t n = 0;
  bool found = false;
  {
    tent::testing::CountAllocations counting;
    n = map.preferred(cuda3, ~(1ull << 3), out, 8);
    found = bufferLocationForRange(buffers, 0x1800, 0x1000, &where);
    allocations = counting.count();
  }

  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(n, 3u);  // the rest of socket 0 once mlx5_3 is masked
  EXPECT_TRUE(found);
  EXPECT_EQ(where, 1u);

  // The counter works: a vector allocation is seen.
  {
    tent::testing::CountAllocations counting;
    std::vector<int>* v = new std::vector<int>(16);
    allocations = counting.count();
    delete v;
  }
  EXPECT_GE(allocations, 1u);
}

}  // namespace
}  // namespace tent::topology
