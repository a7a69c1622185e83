// The datapath lookups (RailMap::preferred, bufferLocationForRange) must not allocate:
// this binary (on its own: it replaces the global operator new) counts operator new
// calls while a flag is set.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "tests/topology/test_data.h"
#include "topology/rail_map.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<size_t> g_allocations{0};
}  // namespace

// These replacements pair malloc with free on purpose; GCC cannot see that.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// std::stable_sort and friends use the nothrow forms: they must pair with our delete.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size) {
  return ::operator new(size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return ::operator new(size, tag);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

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

  g_allocations = 0;
  g_counting = true;
  size_t n = map.preferred(cuda3, ~(1ull << 3), out, 8);
  bool found = bufferLocationForRange(buffers, 0x1800, 0x1000, &where);
  g_counting = false;

  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_EQ(n, 3u);  // the rest of socket 0 once mlx5_3 is masked
  EXPECT_TRUE(found);
  EXPECT_EQ(where, 1u);

  // The counter works: a vector allocation is seen.
  g_counting = true;
  std::vector<int>* v = new std::vector<int>(16);
  g_counting = false;
  delete v;
  EXPECT_GE(g_allocations.load(), 1u);
}

}  // namespace
}  // namespace tent::topology
