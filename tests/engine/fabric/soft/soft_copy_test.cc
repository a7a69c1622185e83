// The soft NIC's payload copy (soft_copy.h): streamed (non-temporal) from
// fabric.soft.stream_copy_min_bytes on, cached below, memmove when the ranges
// overlap; every length and alignment delivers exactly its bytes and nothing beside.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "fabric/soft/soft_copy.h"
#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

constexpr uint8_t kGuard = 0xA5;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 8));
  return v;
}

// dst gets src[0, n) at `dst_off`, every other byte stays kGuard.
void checkCopy(size_t n, size_t src_off, size_t dst_off, uint64_t stream_min) {
  const std::vector<uint8_t> src = pattern(n + src_off, 7);
  std::vector<uint8_t> dst(n + dst_off + 64, kGuard);
  dmaCopy(dst.data() + dst_off, src.data() + src_off, n, stream_min);
  for (size_t i = 0; i < dst.size(); ++i) {
    const bool inside = i >= dst_off && i < dst_off + n;
    const uint8_t want = inside ? src[src_off + (i - dst_off)] : kGuard;
    ASSERT_EQ(dst[i], want) << "n=" << n << " src_off=" << src_off << " dst_off=" << dst_off
                            << " stream_min=" << stream_min << " byte " << i;
  }
}

TEST(DmaCopy, EveryLengthAndAlignmentDeliversExactlyItsBytes) {
  for (uint64_t stream_min : {uint64_t{0}, uint64_t{1}, uint64_t{64}, uint64_t{65536}})
    for (size_t src_off = 0; src_off < 17; src_off += 3)
      for (size_t dst_off = 0; dst_off < 17; ++dst_off)
        for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 1000})
          checkCopy(n, src_off, dst_off, stream_min);
}

TEST(DmaCopy, LongCopiesAcrossTheThreshold) {
  for (size_t n : {65535, 65536, 65537, 262144 + 77})
    for (size_t dst_off : {0, 1, 8, 15})
      for (uint64_t stream_min : {uint64_t{0}, uint64_t{65536}})
        checkCopy(n, 5, dst_off, stream_min);
}

TEST(DmaCopy, OverlappingRangesMoveAsMemmoveDoesWhateverTheThreshold) {
  for (ptrdiff_t shift : {-100, -1, 1, 33, 4096}) {
    const size_t n = 8192;
    std::vector<uint8_t> buf = pattern(n + 8192, 3), want = buf;
    uint8_t* src = buf.data() + 4096;
    std::memmove(want.data() + 4096 + shift, want.data() + 4096, n);
    dmaCopy(src + shift, src, n, 1);  // streaming asked for, overlap forbids it
    EXPECT_EQ(buf, want) << "shift " << shift;
  }
}

// Through a QP: WRITE and READ of misaligned, odd-length payloads on both sides of a
// low threshold, bytes verified and the canaries around them intact.
TEST(SoftStreamCopy, WritesAndReadsDeliverTheirBytesStreamedOrNot) {
  for (uint64_t stream_min : {uint64_t{0}, uint64_t{4096}}) {
    config::SoftFabricConfig cfg = testConfig();
    cfg.stream_copy_min_bytes = stream_min;
    auto provider = makeProvider({softDevice("soft0")}, {}, cfg);
    ASSERT_NE(provider, nullptr);
    const bool says = provider->linkModel().find("non-temporal from 4096 B") != std::string::npos;
    EXPECT_EQ(says, stream_min != 0) << provider->linkModel();
    Device& dev = provider->device(0);
    auto pair = QpPair::make(dev, dev);
    for (size_t length : {size_t{100}, size_t{4095}, size_t{4096}, size_t{70001}}) {
      GuardedBuffer local(dev, length, kAllAccess, 67), remote(dev, length, kAllAccess, 64);
      local.fill(11);
      remote.fill(22);
      auto w =
          transferOne(pair, WrOpcode::kRdmaWrite, local, remote.addr(), remote.mr->rkey(), length);
      ASSERT_EQ(w.status, WcStatus::kSuccess);
      EXPECT_TRUE(remote.holds(11)) << "WRITE of " << length << " B, stream_min " << stream_min;
      remote.fill(33);
      auto r =
          transferOne(pair, WrOpcode::kRdmaRead, local, remote.addr(), remote.mr->rkey(), length);
      ASSERT_EQ(r.status, WcStatus::kSuccess);
      EXPECT_TRUE(local.holds(33)) << "READ of " << length << " B, stream_min " << stream_min;
      EXPECT_TRUE(local.canariesIntact() && remote.canariesIntact());
    }
  }
}

}  // namespace
}  // namespace tent::fabric::soft::testing
