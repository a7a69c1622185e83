// GPU memory on the verbs provider, against a fake libibverbs and the fake CUDA
// driver: dma-buf first (the range exported by cuMemGetHandleForAddressRange and
// registered with ibv_reg_dmabuf_mr), ibv_reg_mr (nvidia-peermem) as the fallback,
// one clear error when neither works, and a GPU without GPUDirect RDMA refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "config/config.h"
#include "cuda/cuda_memory.h"
#include "fabric/verbs/verbs_objects.h"
#include "fabric/verbs/verbs_provider.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "tests/support/fake_verbs/fake_verbs.h"

namespace tent::fabric {
namespace {

using cuda::testing::FakeCuda;
using cuda::testing::FakeCudaOptions;
using testing::fakeOps;
using testing::FakeVerbs;

constexpr size_t kMiB = size_t{1} << 20;

class VerbsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.addDevice("mlx5_0");
    fake_.setGid(0, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
  }
  void open(FakeCudaOptions options = {}, const VerbsOps* ops = nullptr) {
    cuda_ = std::make_unique<FakeCuda>(options);
    auto p = createVerbsProvider(config_, ops ? *ops : fakeOps());
    ASSERT_TRUE(p.ok()) << p.status().toString();
    provider_ = std::move(p).value();
  }
  void TearDown() override {
    provider_.reset();
    cuda_.reset();
  }
  // Device memory of the application, and what the engine would pass for it.
  cuda::PointerInfo gpuMemory(size_t length, void** out) {
    *out = cuda_->appMalloc(0, length);
    auto info = cuda::classify(*out);
    EXPECT_TRUE(info.ok());
    return *info;
  }
  Result<std::unique_ptr<MemoryRegion>> reg(void* addr, size_t length,
                                            const cuda::PointerInfo& info) {
    return provider_->device(0).registerGpuMemory(addr, length, kAccessRemoteWrite, info);
  }

  FakeVerbs fake_;
  config::VerbsFabricConfig config_;
  std::unique_ptr<FakeCuda> cuda_;
  std::unique_ptr<Provider> provider_;
};

TEST_F(VerbsGpuTest, DmabufIsTheFirstChoice) {
  open();
  void* p = nullptr;
  auto info = gpuMemory(2 * kMiB, &p);
  char* at = static_cast<char*>(p) + 4096 + 100;  // not page-aligned, inside the allocation
  auto mr = reg(at, 65536, info);
  ASSERT_TRUE(mr.ok()) << mr.status().toString();
  ASSERT_EQ(fake_.dmabuf_regs.size(), 1u);
  EXPECT_TRUE(fake_.reg_addrs.empty()) << "ibv_reg_mr must not be used when dma-buf works";
  const auto& r = fake_.dmabuf_regs[0];
  EXPECT_EQ(r.iova, reinterpret_cast<uint64_t>(at));
  EXPECT_EQ(r.offset, 100u);  // into the exported pages
  EXPECT_EQ(r.length, 65536u);
  EXPECT_EQ(r.access, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
  auto exports = cuda_->dmabufExports();
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(exports[0].ptr, reinterpret_cast<uint64_t>(p) + 4096);
  EXPECT_EQ(exports[0].size, 65536u + 4096u);  // whole pages around the range
  EXPECT_EQ(exports[0].fd, r.fd);
  EXPECT_EQ(fcntl(r.fd, F_GETFD), -1) << "the dma-buf descriptor is closed once registered";
  EXPECT_EQ((*mr)->rkey(), 0x1001u);
  mr.value().reset();
  EXPECT_EQ(fake_.mrs, 0);
}

TEST_F(VerbsGpuTest, PeermemWhenTheGpuHasNoDmabuf) {
  FakeCudaOptions o;
  o.gpus[0].dma_buf = false;
  open(o);
  void* p = nullptr;
  auto info = gpuMemory(kMiB, &p);
  auto mr = reg(p, kMiB, info);
  ASSERT_TRUE(mr.ok()) << mr.status().toString();
  EXPECT_TRUE(fake_.dmabuf_regs.empty());
  ASSERT_EQ(fake_.reg_addrs.size(), 1u);
  EXPECT_EQ(fake_.reg_addrs[0], p);
}

TEST_F(VerbsGpuTest, PeermemWhenTheNicRefusesTheDmabuf) {
  open();
  fake_.fail_reg_dmabuf_mr = EOPNOTSUPP;
  void* p = nullptr;
  auto info = gpuMemory(kMiB, &p);
  auto mr = reg(p, kMiB, info);
  ASSERT_TRUE(mr.ok()) << mr.status().toString();
  EXPECT_EQ(fake_.dmabuf_regs.size(), 1u);
  EXPECT_EQ(fake_.reg_addrs.size(), 1u);
  EXPECT_EQ(fcntl(fake_.dmabuf_regs[0].fd, F_GETFD), -1);
}

TEST_F(VerbsGpuTest, PeermemWhenLibibverbsOrTheDriverLacksDmabuf) {
  VerbsOps old_rdma_core = fakeOps();
  old_rdma_core.reg_dmabuf_mr = nullptr;
  open({}, &old_rdma_core);
  void* p = nullptr;
  auto info = gpuMemory(kMiB, &p);
  ASSERT_TRUE(reg(p, kMiB, info).ok());
  EXPECT_EQ(fake_.reg_addrs.size(), 1u);
  provider_.reset();
  cuda_.reset();
  FakeCudaOptions old_driver;
  old_driver.dmabuf_entry = false;  // CUDA before 11.7
  open(old_driver);
  info = gpuMemory(kMiB, &p);
  ASSERT_TRUE(reg(p, kMiB, info).ok());
  EXPECT_TRUE(fake_.dmabuf_regs.empty());
  EXPECT_EQ(fake_.reg_addrs.size(), 2u);
}

TEST_F(VerbsGpuTest, NeitherPathGivesOneErrorWithBothReasons) {
  FakeCudaOptions o;
  o.gpus[0].dma_buf = false;
  open(o);
  fake_.fail_reg_mr = true;
  void* p = nullptr;
  auto info = gpuMemory(kMiB, &p);
  auto mr = reg(p, kMiB, info);
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(mr.status().code(), StatusCode::kIoError);
  const std::string& m = mr.status().message();
  EXPECT_NE(m.find("mlx5_0"), std::string::npos) << m;
  EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
  EXPECT_NE(m.find("does not support dma-buf"), std::string::npos) << m;
  EXPECT_NE(m.find("nvidia-peermem"), std::string::npos) << m;
  EXPECT_EQ(fake_.mrs, 0);
}

TEST_F(VerbsGpuTest, AFailedDmabufExportFallsBackAndIsNamedWhenAllFails) {
  open();
  cuda_->fail_dmabuf = cuda::CUDA_ERROR_NOT_SUPPORTED;
  fake_.fail_reg_mr = true;
  void* p = nullptr;
  auto info = gpuMemory(kMiB, &p);
  auto mr = reg(p, kMiB, info);
  ASSERT_FALSE(mr.ok());
  EXPECT_NE(mr.status().message().find("cuMemGetHandleForAddressRange"), std::string::npos)
      << mr.status().toString();
  EXPECT_TRUE(fake_.dmabuf_regs.empty());
}

TEST_F(VerbsGpuTest, AGpuWithoutGpuDirectRdmaIsRefused) {
  FakeCudaOptions o;
  o.gpus[0].gdr = false;
  open(o);
  void* p = nullptr;
  auto info = gpuMemory(kMiB, &p);
  auto mr = reg(p, kMiB, info);
  ASSERT_FALSE(mr.ok());
  EXPECT_EQ(mr.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(mr.status().message().find("GPUDirect RDMA"), std::string::npos)
      << mr.status().toString();
  EXPECT_TRUE(fake_.dmabuf_regs.empty());
  EXPECT_TRUE(fake_.reg_addrs.empty());
}

TEST_F(VerbsGpuTest, VmmChunkMemoryRegistersThroughDmabufToo) {
  open();
  auto* base = static_cast<char*>(cuda_->appVmm(0, {2 * kMiB, 2 * kMiB}));
  auto pieces = cuda::chunksOf(base, 4 * kMiB);
  ASSERT_TRUE(pieces.ok());
  ASSERT_EQ(pieces->size(), 2u);
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  for (const auto& c : *pieces) {
    auto mr = reg(reinterpret_cast<void*>(c.addr), c.length, c.info);
    ASSERT_TRUE(mr.ok()) << mr.status().toString();
    mrs.push_back(std::move(mr).value());
  }
  ASSERT_EQ(fake_.dmabuf_regs.size(), 2u);
  EXPECT_EQ(fake_.dmabuf_regs[1].iova, reinterpret_cast<uint64_t>(base + 2 * kMiB));
  mrs.clear();
  cuda_->appVmmFree(base);
}

}  // namespace
}  // namespace tent::fabric
