// tcp provider, GPU memory (fake CUDA driver): host<->GPU and GPU<->GPU WRITE and READ
// between two providers over 127.0.0.1 through the pinned staging buffers, every byte
// verified, every copy of device memory seen going through a staging buffer; the pool
// of one buffer shared by many transfers; its release; the errors.
#include "tcp_gpu_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

struct Case {
  bool local_gpu;
  bool remote_gpu;
  WrOpcode op;
  size_t bytes;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(c.local_gpu ? "Gpu" : "Host") +
         (c.op == WrOpcode::kRdmaWrite ? "Write" : "Read") + (c.remote_gpu ? "Gpu" : "Host") +
         std::to_string(c.bytes);
}

class TcpGpuTransfer : public TcpGpuTest, public ::testing::WithParamInterface<Case> {};

TEST_P(TcpGpuTransfer, EveryByteArrivesThroughTheStagingBuffers) {
  const Case c = GetParam();
  auto p = QpPair::make(*a_, *b_, 16, 4);
  Mem local(fake(), *a_, c.bytes, c.local_gpu);
  Mem remote(fake(), *b_, c.bytes, c.remote_gpu);
  Mem& src = c.op == WrOpcode::kRdmaWrite ? local : remote;
  Mem& dst = c.op == WrOpcode::kRdmaWrite ? remote : local;
  src.fill(29);
  Sge sge{local.addr(), static_cast<uint32_t>(c.bytes), local.mr->lkey()};
  post(*p.a, makeWr(7, c.op, &sge, 1, remote.addr(), remote.mr->rkey()));
  auto wcs = pollN(*p.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << toString(wcs[0].status);
  EXPECT_EQ(wcs[0].byte_len, c.bytes);
  EXPECT_TRUE(dst.holds(29));
  // Device memory moved only by the driver, through pinned buffers: what was received
  // exactly once, what was sent at least once (a send the socket cut short is copied
  // again for the next call).
  const int64_t want = static_cast<int64_t>(c.bytes);
  const int64_t received = stagedBytes(fake(), dst);
  const int64_t sent = stagedBytes(fake(), src);
  EXPECT_EQ(received, dst.gpu ? want : 0);
  EXPECT_TRUE(src.gpu ? sent >= want : sent == 0) << sent;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (size_t bytes : {size_t{1}, size_t{4096}, size_t{3 * kStagingBytes + 123}, size_t{1} << 20}) {
    for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead}) {
      out.push_back({true, false, op, bytes});
      out.push_back({false, true, op, bytes});
      out.push_back({true, true, op, bytes});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sizes, TcpGpuTransfer, ::testing::ValuesIn(cases()), caseName);

TEST_F(TcpGpuTest, OneWrMixesHostAndGpuPieces) {
  auto p = QpPair::make(*a_, *b_, 16, 4);
  const size_t piece = 2 * kStagingBytes + 17;
  Mem host(fake(), *a_, piece, false);
  Mem gpu(fake(), *a_, piece, true);
  Mem remote(fake(), *b_, 2 * piece, true);
  Mem back_host(fake(), *a_, piece, false);
  Mem back_gpu(fake(), *a_, piece, true);
  host.fill(3);
  gpu.fill(101);
  Sge out[] = {{host.addr(), static_cast<uint32_t>(piece), host.mr->lkey()},
               {gpu.addr(), static_cast<uint32_t>(piece), gpu.mr->lkey()}};
  post(*p.a, makeWr(1, WrOpcode::kRdmaWrite, out, 2, remote.addr(), remote.mr->rkey()));
  Sge in[] = {{back_gpu.addr(), static_cast<uint32_t>(piece), back_gpu.mr->lkey()},
              {back_host.addr(), static_cast<uint32_t>(piece), back_host.mr->lkey()}};
  post(*p.a, makeWr(2, WrOpcode::kRdmaRead, in, 2, remote.addr(), remote.mr->rkey()));
  auto wcs = pollN(*p.cq_a, 2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << toString(wc.status);
  EXPECT_EQ(std::memcmp(remote.ptr, host.ptr, piece), 0);
  EXPECT_EQ(std::memcmp(remote.ptr + piece, gpu.ptr, piece), 0);
  // READ back in the other order: the GPU gets the first half, the host the second.
  EXPECT_EQ(std::memcmp(back_gpu.ptr, host.ptr, piece), 0);
  EXPECT_EQ(std::memcmp(back_host.ptr, gpu.ptr, piece), 0);
  EXPECT_EQ(stagedBytes(fake(), back_host), 0);
  EXPECT_EQ(stagedBytes(fake(), back_gpu), static_cast<int64_t>(piece));
}

class TcpGpuDeferred : public TcpGpuTest {
 protected:
  FakeCudaOptions fakeOptions() override {
    FakeCudaOptions o;
    o.deferred_streams = true;  // stream work runs when someone synchronises
    return o;
  }
};

TEST_F(TcpGpuDeferred, CopiesAreDoneBeforeTheBytesLeave) {
  auto p = QpPair::make(*a_, *b_, 16, 4);
  Mem src(fake(), *a_, 3 * kStagingBytes, true);
  Mem dst(fake(), *b_, 3 * kStagingBytes, true);
  Mem back(fake(), *a_, 3 * kStagingBytes, true);
  src.fill(41);
  Sge sge{src.addr(), static_cast<uint32_t>(src.length), src.mr->lkey()};
  post(*p.a, makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey()));
  Sge in{back.addr(), static_cast<uint32_t>(back.length), back.mr->lkey()};
  post(*p.a, makeWr(2, WrOpcode::kRdmaRead, &in, 1, dst.addr(), dst.mr->rkey()));
  auto wcs = pollN(*p.cq_a, 2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  // Nobody ran the streams: the provider waited for its own copies.
  EXPECT_TRUE(dst.holds(41));
  EXPECT_TRUE(back.holds(41));
  EXPECT_EQ(fake().queuedOps(), 0u);
}

TEST_F(TcpGpuTest, HostMemoryKeepsTheZeroCopyPath) {
  auto p = QpPair::make(*a_, *b_, 16, 4);
  Mem gpu(fake(), *a_, 64, true);  // the pool exists now
  Mem src(fake(), *a_, 3 * kStagingBytes, false);
  Mem dst(fake(), *b_, 3 * kStagingBytes, false);
  src.fill(5);
  const size_t copies = fake().copies().size();
  Sge sge{src.addr(), static_cast<uint32_t>(src.length), src.mr->lkey()};
  post(*p.a, makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey()));
  post(*p.a, makeWr(2, WrOpcode::kRdmaRead, &sge, 1, dst.addr(), dst.mr->rkey()));
  auto wcs = pollN(*p.cq_a, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_TRUE(dst.holds(5));
  EXPECT_EQ(fake().copies().size(), copies);
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
