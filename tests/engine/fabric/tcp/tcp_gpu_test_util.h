// Helpers of the tcp provider's GPU tests (fake CUDA driver): memory on the host or
// on the fake GPU, registered; the bytes the driver copied through staging buffers.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_memory.h"
#include "tcp_test_util.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace tent::fabric::tcp::testing {

using cuda::testing::FakeCuda;
using cuda::testing::FakeCudaOptions;

inline constexpr uint64_t kStagingBytes = 4096;

inline config::TcpFabricConfig gpuConfig(uint32_t buffers = 4) {
  config::TcpFabricConfig c = testConfig();
  c.gpu_staging_buffers = buffers;
  c.gpu_staging_buffer_bytes = kStagingBytes;
  return c;
}

// Memory a transfer reads or writes: host memory (registerMemory) or "device memory"
// of the fake (registerGpuMemory; the fake's device memory is host memory the test
// can read).
struct Mem {
  uint8_t* ptr = nullptr;
  size_t length = 0;
  bool gpu = false;
  std::vector<uint8_t> host;
  std::unique_ptr<MemoryRegion> mr;

  Mem(FakeCuda& fake, Device& dev, size_t n, bool on_gpu) : length(n), gpu(on_gpu), fake_(&fake) {
    if (gpu) {
      ptr = static_cast<uint8_t*>(fake.appMalloc(0, n));
      auto info = cuda::classify(ptr);
      EXPECT_TRUE(info.ok() && info->kind == cuda::MemoryKind::kDevice);
      auto r = dev.registerGpuMemory(ptr, n, kAllAccess, *info);
      EXPECT_TRUE(r.ok()) << r.status().toString();
      if (r.ok()) mr = std::move(r).value();
    } else {
      host.assign(n, 0);
      ptr = host.data();
      auto r = dev.registerMemory(ptr, n, kAllAccess);
      EXPECT_TRUE(r.ok()) << r.status().toString();
      if (r.ok()) mr = std::move(r).value();
    }
  }
  ~Mem() {
    mr.reset();
    if (gpu) fake_->appFree(ptr);
  }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(ptr); }
  void fill(uint8_t seed) {
    for (size_t i = 0; i < length; ++i) ptr[i] = static_cast<uint8_t>(seed + i * 7 + i / 251);
  }
  bool holds(uint8_t seed) const {
    for (size_t i = 0; i < length; ++i) {
      if (ptr[i] != static_cast<uint8_t>(seed + i * 7 + i / 251)) return false;
    }
    return true;
  }

 private:
  FakeCuda* fake_ = nullptr;
};

// Bytes the driver copied to or from [m, m+length), each copy's other side inside a
// live pinned host allocation; -1 when a copy of that memory did not go through one.
inline int64_t stagedBytes(FakeCuda& fake, const Mem& m) {
  int64_t total = 0;
  for (const FakeCuda::Copy& c : fake.copies()) {
    const bool dst_here = c.dst >= m.addr() && c.dst < m.addr() + m.length;
    const bool src_here = c.src >= m.addr() && c.src < m.addr() + m.length;
    if (!dst_here && !src_here) continue;
    if (!fake.pinnedHost(dst_here ? c.src : c.dst, c.bytes)) return -1;
    total += static_cast<int64_t>(c.bytes);
  }
  return total;
}

class TcpGpuTest : public ::testing::Test {
 protected:
  virtual FakeCudaOptions fakeOptions() { return {}; }
  void open(config::TcpFabricConfig cfg = gpuConfig()) {
    pa_ = makeProvider(cfg);
    pb_ = makeProvider(cfg);
    ASSERT_NE(pa_, nullptr);
    ASSERT_NE(pb_, nullptr);
    a_ = &pa_->device(0);
    b_ = &pb_->device(0);
  }
  void SetUp() override {
    fake_ = std::make_unique<FakeCuda>(fakeOptions());
    open();
  }
  void TearDown() override {
    pa_.reset();
    pb_.reset();
    fake_.reset();
  }
  FakeCuda& fake() { return *fake_; }

  std::unique_ptr<FakeCuda> fake_;  // outlives the providers
  std::unique_ptr<Provider> pa_, pb_;
  Device* a_ = nullptr;
  Device* b_ = nullptr;
};

}  // namespace tent::fabric::tcp::testing
