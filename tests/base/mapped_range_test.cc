// checkMappedRange: a range is registrable when every byte lies in a mapping with the
// access asked for; holes, guard pages and read-only pages are named.
#include "base/mapped_range.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace tent {
namespace {

const std::string kMaps =
    "1000-3000 rw-p 00000000 00:00 0 \n"
    "3000-4000 r--p 00000000 00:00 0          /lib/x.so\n"
    "5000-6000 ---p 00000000 00:00 0 \n"
    "6000-8000 rw-s 00000000 00:05 7          /dev/shm/tent\n";

TEST(MappedRange, AcrossAdjacentMappingsWithTheAccessAsked) {
  EXPECT_TRUE(checkMappedRangeIn(kMaps, 0x1000, 0x2000, true).ok());
  EXPECT_TRUE(checkMappedRangeIn(kMaps, 0x2fff, 2, false).ok());  // rw then r--
  EXPECT_TRUE(checkMappedRangeIn(kMaps, 0x6000, 0x2000, true).ok());
}

TEST(MappedRange, NamesTheFirstAddressThatFails) {
  Status ro = checkMappedRangeIn(kMaps, 0x2000, 0x1800, true);
  EXPECT_EQ(ro.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ro.message(),
            "memory range [0x2000, 0x3800): 0x3000 is mapped without write access "
            "(registration asks for read and write)");
  Status hole = checkMappedRangeIn(kMaps, 0x3800, 0x1000, false);
  EXPECT_EQ(hole.message(), "memory range [0x3800, 0x4800): 0x4000 is not mapped in this process");
  Status guard = checkMappedRangeIn(kMaps, 0x5800, 0x1000, false);
  EXPECT_NE(guard.message().find("0x5800 is mapped without read access"), std::string::npos)
      << guard.message();
  EXPECT_FALSE(checkMappedRangeIn(kMaps, 0x7000, 0x2000, false).ok());  // runs off the end
  EXPECT_FALSE(checkMappedRangeIn(kMaps, 0x500, 0x100, false).ok());    // below everything
  EXPECT_FALSE(checkMappedRangeIn(kMaps, 0x1000, 0, false).ok());
  EXPECT_FALSE(checkMappedRangeIn(kMaps, ~uintptr_t{0} - 4, 16, false).ok());
}

TEST(MappedRange, ThisProcessForReal) {
  std::vector<char> heap(1 << 20);
  EXPECT_TRUE(checkMappedRange(reinterpret_cast<uintptr_t>(heap.data()), heap.size(), true).ok());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const auto a = reinterpret_cast<uintptr_t>(p);
  ASSERT_EQ(mprotect(p, page, PROT_READ), 0);
  EXPECT_TRUE(checkMappedRange(a, 2 * page, false).ok());
  EXPECT_FALSE(checkMappedRange(a, 2 * page, true).ok());
  ASSERT_EQ(munmap(p, 2 * page), 0);
  EXPECT_FALSE(checkMappedRange(a, page, false).ok());
}

}  // namespace
}  // namespace tent
