// tcp provider, GPU memory (fake CUDA driver): the staging pool under pressure (one
// buffer, many transfers on several QPs at once), its lifetime (made by the first GPU
// registration, freed with the device), and the errors: no driver, no pinned memory,
// a driver copy that fails.
#include <thread>

#include "cuda/cuda_driver.h"
#include "fabric/tcp/tcp_device.h"
#include "fabric/tcp/tcp_internal.h"
#include "fabric/tcp/tcp_staging.h"
#include "tcp_gpu_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

// Each QP moves kWrs slices of its own GPU buffer to the peer's GPU and reads them back
// into a third, all posted at once, while the other QPs do the same.
TEST_F(TcpGpuTest, OneStagingBufferCarriesManyConcurrentTransfersInOrder) {
  pa_.reset();
  pb_.reset();
  open(gpuConfig(1));
  constexpr int kQps = 4;
  constexpr uint32_t kWrs = 24;
  constexpr size_t kSlice = 2 * kStagingBytes + 555;
  std::vector<QpPair> pairs;
  std::vector<std::unique_ptr<Mem>> src, dst, back;
  for (int i = 0; i < kQps; ++i) {
    pairs.push_back(QpPair::make(*a_, *b_, 2 * kWrs, 1, 1024));
    src.push_back(std::make_unique<Mem>(fake(), *a_, kWrs * kSlice, true));
    dst.push_back(std::make_unique<Mem>(fake(), *b_, kWrs * kSlice, true));
    back.push_back(std::make_unique<Mem>(fake(), *a_, kWrs * kSlice, true));
    src[i]->fill(static_cast<uint8_t>(17 * i + 1));
  }
  // One send buffer and one receive buffer per device.
  EXPECT_EQ(fake().live().pinned_host, 4);
  std::vector<std::thread> threads;
  std::vector<std::vector<WorkCompletion>> got(kQps);
  for (int q = 0; q < kQps; ++q) {
    threads.emplace_back([&, q] {
      std::vector<Sge> sges(2 * kWrs);
      std::vector<SendWr> wrs(2 * kWrs);
      for (uint32_t i = 0; i < 2 * kWrs; ++i) {
        const bool write = i < kWrs;
        const uint64_t off = (i % kWrs) * kSlice;
        Mem& local = write ? *src[q] : *back[q];
        sges[i] = Sge{local.addr() + off, static_cast<uint32_t>(kSlice), local.mr->lkey()};
        wrs[i] = makeWr(i, write ? WrOpcode::kRdmaWrite : WrOpcode::kRdmaRead, &sges[i], 1,
                        dst[q]->addr() + off, dst[q]->mr->rkey());
        if (i + 1 < 2 * kWrs) wrs[i].next = &wrs[i + 1];
      }
      const SendWr* bad = nullptr;
      EXPECT_EQ(pairs[q].a->postSend(&wrs[0], &bad), 0);
      got[q] = pollN(*pairs[q].cq_a, 2 * kWrs);
    });
  }
  for (auto& t : threads) t.join();
  for (int q = 0; q < kQps; ++q) {
    ASSERT_EQ(got[q].size(), 2 * kWrs) << "QP " << q;
    for (uint32_t i = 0; i < 2 * kWrs; ++i) {
      EXPECT_EQ(got[q][i].wr_id, i) << "QP " << q << ": completions out of order";
      EXPECT_EQ(got[q][i].status, WcStatus::kSuccess) << toString(got[q][i].status);
    }
    EXPECT_TRUE(dst[q]->holds(static_cast<uint8_t>(17 * q + 1))) << "QP " << q;
    EXPECT_TRUE(back[q]->holds(static_cast<uint8_t>(17 * q + 1))) << "QP " << q;
  }
}

// The waker of a send stream stopped for a staging buffer: the pool's one send buffer is
// held here (as another stream would between its copy and its sendmsg), so the GPU
// WRITE cannot leave and nothing completes; when the buffer comes back the way a stream
// gives it back (release, and a wake of the service thread when someone waits), the
// waiting stream is kicked and the WRITE completes with every byte in place.
TEST_F(TcpGpuTest, AStreamWaitingForAStagingBufferIsKickedWhenOneComesBack) {
  pa_.reset();
  pb_.reset();
  open(gpuConfig(1));
  auto p = QpPair::make(*a_, *b_, 16, 1);
  Mem src(fake(), *a_, 3 * kStagingBytes, true);
  Mem dst(fake(), *b_, 3 * kStagingBytes, true);
  src.fill(77);
  DeviceState& dev = static_cast<TcpDevice&>(*a_).state();
  StagingPool* pool = dev.staging.load();
  ASSERT_NE(pool, nullptr);
  const int held = pool->acquire();
  ASSERT_GE(held, 0);
  ASSERT_EQ(pool->acquire(), -1);  // the only one
  Sge sge{src.addr(), static_cast<uint32_t>(src.length), src.mr->lkey()};
  post(*p.a, makeWr(5, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey()));
  WorkCompletion wc[1];
  EXPECT_EQ(p.cq_a->poll(wc, 1), 0);  // its payload cannot have left
  EXPECT_FALSE(dst.holds(77));
  if (pool->release(held)) dev.loop->wake();
  auto wcs = pollN(*p.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << toString(wcs[0].status);
  EXPECT_TRUE(dst.holds(77));
}

// Both ends send GPU memory to each other at once, each device with one send buffer:
// the receive side never waits for a send buffer, so neither end can stall the other.
TEST_F(TcpGpuTest, BothEndsSendingGpuMemoryThroughOneBufferEachFinish) {
  pa_.reset();
  pb_.reset();
  open(gpuConfig(1));
  constexpr uint32_t kWrs = 32;
  constexpr size_t kSlice = 4 * kStagingBytes + 9;
  auto p = QpPair::make(*a_, *b_, kWrs, 1, 1024);
  Mem a_src(fake(), *a_, kWrs * kSlice, true), a_dst(fake(), *a_, kWrs * kSlice, true);
  Mem b_src(fake(), *b_, kWrs * kSlice, true), b_dst(fake(), *b_, kWrs * kSlice, true);
  a_src.fill(61);
  b_src.fill(62);
  auto side = [&](QueuePair& qp, CompletionQueue& cq, Mem& src, Mem& dst,
                  std::vector<WorkCompletion>* out) {
    std::vector<Sge> sges(kWrs);
    std::vector<SendWr> wrs(kWrs);
    for (uint32_t i = 0; i < kWrs; ++i) {
      sges[i] = Sge{src.addr() + i * kSlice, static_cast<uint32_t>(kSlice), src.mr->lkey()};
      wrs[i] =
          makeWr(i, WrOpcode::kRdmaWrite, &sges[i], 1, dst.addr() + i * kSlice, dst.mr->rkey());
      if (i + 1 < kWrs) wrs[i].next = &wrs[i + 1];
    }
    const SendWr* bad = nullptr;
    EXPECT_EQ(qp.postSend(&wrs[0], &bad), 0);
    *out = pollN(cq, kWrs);
  };
  std::vector<WorkCompletion> got_a, got_b;
  std::thread ta([&] { side(*p.a, *p.cq_a, a_src, b_dst, &got_a); });
  std::thread tb([&] { side(*p.b, *p.cq_b, b_src, a_dst, &got_b); });
  ta.join();
  tb.join();
  ASSERT_EQ(got_a.size(), kWrs);
  ASSERT_EQ(got_b.size(), kWrs);
  for (uint32_t i = 0; i < kWrs; ++i) {
    EXPECT_EQ(got_a[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_b[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got_a[i].wr_id, i);
    EXPECT_EQ(got_b[i].wr_id, i);
  }
  EXPECT_TRUE(b_dst.holds(61));
  EXPECT_TRUE(a_dst.holds(62));
}

// The pool itself: a send stream that finds it empty is counted a waiter, and the
// release that follows says so (its caller wakes the service thread).
TEST(TcpStagingPool, AnEmptyPoolCountsItsWaitersAndTheReleaseSeesThem) {
  FakeCuda fake;
  const FakeCuda::Live baseline = fake.live();
  {
    auto pool = StagingPool::create(2, kStagingBytes, 0);
    ASSERT_TRUE(pool.ok()) << pool.status().toString();
    StagingPool& p = **pool;
    EXPECT_EQ(fake.live().pinned_host, 3);  // two send buffers, one receive buffer
    const int a = p.acquire();
    const int b = p.acquire();
    EXPECT_NE(a, b);
    EXPECT_GE(a, 0);
    EXPECT_GE(b, 0);
    EXPECT_EQ(p.acquire(), -1);
    EXPECT_FALSE(p.release(b));  // nobody waits
    EXPECT_EQ(p.acquire(), b);
    EXPECT_FALSE(p.wait());  // nothing free: a real wait
    EXPECT_TRUE(p.release(a));
    EXPECT_TRUE(p.wait());  // one is free now: try again instead
    EXPECT_TRUE(p.takeWaiters());
    EXPECT_FALSE(p.takeWaiters());
    // Copies go through the GPU's stream of the pool; a GPU it was not readied for fails.
    void* gpu = fake.appMalloc(0, 4096);
    std::memset(p.buffer(a), 0x5a, 4096);
    EXPECT_TRUE(p.copy(0, gpu, p.buffer(a), 4096));
    EXPECT_EQ(static_cast<uint8_t*>(gpu)[4095], 0x5a);
    EXPECT_FALSE(p.copy(1, gpu, p.buffer(a), 4096));
    fake.appFree(gpu);
  }
  EXPECT_EQ(fake.live().pinned_host, baseline.pinned_host);
  EXPECT_EQ(fake.live().streams, baseline.streams);
  EXPECT_EQ(fake.live().context_refs, baseline.context_refs);
}

TEST_F(TcpGpuTest, ThePoolIsMadeByTheFirstGpuRegistrationAndFreedWithTheDevice) {
  const FakeCuda::Live before = fake().live();
  EXPECT_EQ(before.pinned_host, 0);  // opening a device allocates nothing
  pa_.reset();
  pb_.reset();
  const FakeCuda::Live baseline = fake().live();
  const size_t fds = openFds();
  for (int round = 0; round < 8; ++round) {
    config::TcpFabricConfig cfg = gpuConfig(3);
    cfg.max_mrs = 4;  // a region that is not given back shows at once
    open(cfg);
    Mem host(fake(), *a_, 4096, false);
    EXPECT_EQ(fake().live().pinned_host, 0);  // host memory needs no staging
    {
      auto p = QpPair::make(*a_, *b_, 16, 1);
      for (int i = 0; i < 6; ++i) {  // register and release GPU memory, more than max_mrs
        Mem src(fake(), *a_, 3 * kStagingBytes, true);
        Mem dst(fake(), *b_, 3 * kStagingBytes, true);
        ASSERT_NE(src.mr, nullptr);
        ASSERT_NE(dst.mr, nullptr);
        src.fill(static_cast<uint8_t>(round + i));
        Sge sge{src.addr(), static_cast<uint32_t>(src.length), src.mr->lkey()};
        post(*p.a, makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey()));
        auto wcs = pollN(*p.cq_a, 1);
        ASSERT_EQ(wcs.size(), 1u);
        EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
        EXPECT_TRUE(dst.holds(static_cast<uint8_t>(round + i)));
        EXPECT_EQ(fake().live().pinned_host, 2 * (3 + 1));  // per device: 3 send, 1 receive
      }
    }
    pa_.reset();
    pb_.reset();
  }
  const FakeCuda::Live after = fake().live();
  EXPECT_EQ(after.pinned_host, baseline.pinned_host);
  EXPECT_EQ(after.streams, baseline.streams);
  EXPECT_EQ(after.context_refs, baseline.context_refs);
  EXPECT_EQ(after.allocations, baseline.allocations);
  EXPECT_EQ(openFds(), fds);
}

TEST_F(TcpGpuTest, HostMemoryIsNotRegisteredAsGpuMemory) {
  std::vector<uint8_t> host(4096);
  cuda::PointerInfo info;  // kHost
  auto r = a_->registerGpuMemory(host.data(), host.size(), kAllAccess, info);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not device memory"), std::string::npos);
}

TEST_F(TcpGpuTest, NoPinnedMemoryIsAClearRegistrationError) {
  fake().fail_host_alloc = cuda::CUDA_ERROR_OUT_OF_MEMORY;
  void* gpu = fake().appMalloc(0, 4096);
  auto info = cuda::classify(gpu);
  ASSERT_TRUE(info.ok());
  auto r = a_->registerGpuMemory(gpu, 4096, kAllAccess, *info);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cuMemHostAlloc"), std::string::npos)
      << r.status().toString();
  EXPECT_NE(r.status().message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos);
  EXPECT_EQ(fake().live().pinned_host, 0);  // what was allocated before the failure went back
  // The next registration tries again.
  fake().fail_host_alloc = cuda::CUDA_SUCCESS;
  {
    auto again = a_->registerGpuMemory(gpu, 4096, kAllAccess, *info);
    EXPECT_TRUE(again.ok()) << again.status().toString();
  }
  fake().appFree(gpu);
}

class TcpGpuNoGdr : public TcpGpuTest {
 protected:
  FakeCudaOptions fakeOptions() override {
    FakeCudaOptions o;
    o.gpus[0].gdr = false;
    return o;
  }
};

// As on soft and verbs (no provider is more forgiving than a NIC), and before any
// pinned memory is allocated.
TEST_F(TcpGpuNoGdr, AGpuWithoutGpuDirectRdmaIsRefused) {
  void* gpu = fake().appMalloc(0, 4096);
  auto info = cuda::classify(gpu);
  ASSERT_TRUE(info.ok());
  auto r = a_->registerGpuMemory(gpu, 4096, kAllAccess, *info);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("GPUDirect RDMA"), std::string::npos);
  EXPECT_EQ(fake().live().pinned_host, 0);
  fake().appFree(gpu);
}

class TcpGpuOldDriver : public TcpGpuTest {
 protected:
  FakeCudaOptions fakeOptions() override {
    FakeCudaOptions o;
    o.host_alloc_entries = false;
    return o;
  }
};

TEST_F(TcpGpuOldDriver, ADriverWithoutPinnedHostMemoryIsNamed) {
  void* gpu = fake().appMalloc(0, 4096);
  auto info = cuda::classify(gpu);
  ASSERT_TRUE(info.ok());
  auto r = a_->registerGpuMemory(gpu, 4096, kAllAccess, *info);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("cuMemHostAlloc"), std::string::npos);
  fake().appFree(gpu);
}

TEST(TcpGpuNoDriver, RegisteringGpuMemoryWithoutCudaSaysWhatIsMissing) {
  cuda::setDriverLibraryOverride("libtent-test-no-such-cuda.so.1");
  auto provider = makeProvider(gpuConfig());
  ASSERT_NE(provider, nullptr);
  std::vector<uint8_t> bytes(4096);
  cuda::PointerInfo info;  // what a caller believes is device memory of cuda:0
  info.kind = cuda::MemoryKind::kDevice;
  info.device = 0;
  info.range_base = reinterpret_cast<uint64_t>(bytes.data());
  info.range_size = bytes.size();
  auto r = provider->device(0).registerGpuMemory(bytes.data(), bytes.size(), kAllAccess, info);
  cuda::setDriverLibraryOverride("");
  ASSERT_FALSE(r.ok());
  const std::string text = r.status().toString();
  EXPECT_NE(text.find("CUDA driver"), std::string::npos) << text;
  EXPECT_NE(text.find("libtent-test-no-such-cuda.so.1"), std::string::npos) << text;
  EXPECT_NE(text.find("pinned host buffers"), std::string::npos) << text;
  EXPECT_NE(text.find("tcp0"), std::string::npos) << text;
}

struct FailCase {
  bool local_gpu;
  WrOpcode op;
  WcStatus expect;
};

// The driver refuses every copy: the side that copies fails the WR, as the contract
// names it (ours: local protection; the responder's: remote access).
TEST_F(TcpGpuTest, AFailedDriverCopyFailsTheWrNeverSilently) {
  const FailCase cases[] = {
      {true, WrOpcode::kRdmaWrite, WcStatus::kLocalProtection},  // GPU -> staging, here
      {true, WrOpcode::kRdmaRead, WcStatus::kLocalProtection},   // staging -> GPU, here
      {false, WrOpcode::kRdmaWrite, WcStatus::kRemoteAccess},    // staging -> GPU, there
      {false, WrOpcode::kRdmaRead, WcStatus::kRemoteAccess},     // GPU -> staging, there
  };
  for (const FailCase& c : cases) {
    SCOPED_TRACE(std::string(c.local_gpu ? "local" : "remote") + " GPU, " +
                 (c.op == WrOpcode::kRdmaWrite ? "WRITE" : "READ"));
    auto p = QpPair::make(*a_, *b_, 16, 1);
    Mem local(fake(), *a_, 2 * kStagingBytes, c.local_gpu);
    Mem remote(fake(), *b_, 2 * kStagingBytes, !c.local_gpu);
    local.fill(1);
    remote.fill(2);
    fake().fail_memcpy = cuda::CUDA_ERROR_INVALID_VALUE;
    Sge sge{local.addr(), static_cast<uint32_t>(local.length), local.mr->lkey()};
    post(*p.a, makeWr(9, c.op, &sge, 1, remote.addr(), remote.mr->rkey()));
    auto wcs = pollN(*p.cq_a, 1);
    fake().fail_memcpy = cuda::CUDA_SUCCESS;
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, c.expect) << toString(wcs[0].status);
    EXPECT_TRUE(local.holds(1));
    EXPECT_TRUE(remote.holds(2));
    // The device goes on: a new QP moves the same memory.
    auto q = QpPair::make(*a_, *b_, 16, 1);
    post(*q.a, makeWr(10, c.op, &sge, 1, remote.addr(), remote.mr->rkey()));
    wcs = pollN(*q.cq_a, 1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << toString(wcs[0].status);
    EXPECT_TRUE((c.op == WrOpcode::kRdmaWrite ? remote : local)
                    .holds(c.op == WrOpcode::kRdmaWrite ? 1 : 2));
  }
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
