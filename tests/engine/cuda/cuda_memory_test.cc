// GPU memory through the driver table, against the fake driver: what a pointer is,
// VMM ranges split at their physical chunks, the GPUs and their errors, and the
// engine's own device allocations (and that they all come back).
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace tent::cuda {
namespace {

using testing::FakeCuda;
using testing::FakeCudaOptions;
using testing::FakeGpuSpec;

constexpr size_t kMiB = size_t{1} << 20;

FakeCudaOptions gpus(int n) {
  FakeCudaOptions o;
  o.gpus.assign(n, FakeGpuSpec{});
  for (int i = 0; i < n; ++i) o.gpus[i].pci = "0000:" + std::to_string(0x3b + i) + ":00.0";
  return o;
}

uint64_t u(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

TEST(CudaClassify, HostMemoryIsHostWithOrWithoutCuda) {
  std::vector<char> host(4096);
  {
    auto info = classify(host.data());  // no driver installed, none on this machine
    ASSERT_TRUE(info.ok()) << info.status().toString();
    EXPECT_EQ(info->kind, MemoryKind::kHost);
  }
  FakeCuda fake;
  auto info = classify(host.data());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->kind, MemoryKind::kHost);
}

TEST(CudaClassify, ACudaNotInitialisedByTheApplicationHoldsNoDeviceMemory) {
  FakeCudaOptions o;
  o.app_initialised = false;
  FakeCuda fake(o);
  int x = 0;
  auto info = classify(&x);
  ASSERT_TRUE(info.ok()) << info.status().toString();
  EXPECT_EQ(info->kind, MemoryKind::kHost);
}

TEST(CudaClassify, CuMemAllocMemoryIsDeviceMemoryOfItsGpuWithItsRange) {
  FakeCuda fake(gpus(2));
  void* p = fake.appMalloc(1, 3 * kMiB);
  auto info = classify(static_cast<char*>(p) + 4096);
  ASSERT_TRUE(info.ok()) << info.status().toString();
  EXPECT_EQ(info->kind, MemoryKind::kDevice);
  EXPECT_EQ(info->device, 1);
  EXPECT_EQ(info->range_base, u(p));
  EXPECT_EQ(info->range_size, 3 * kMiB);
  EXPECT_TRUE(info->legacy_ipc);
  fake.appFree(p);
}

TEST(CudaChunks, AVmmRangeOfThreeChunksSplitsAtEachChunk) {
  FakeCuda fake;
  char* base = static_cast<char*>(fake.appVmm(0, {2 * kMiB, 4 * kMiB, 2 * kMiB}));
  auto whole = chunksOf(base, 8 * kMiB);
  ASSERT_TRUE(whole.ok()) << whole.status().toString();
  ASSERT_EQ(whole->size(), 3u);
  EXPECT_EQ((*whole)[0].addr, u(base));
  EXPECT_EQ((*whole)[0].length, 2 * kMiB);
  EXPECT_EQ((*whole)[1].addr, u(base + 2 * kMiB));
  EXPECT_EQ((*whole)[1].length, 4 * kMiB);
  EXPECT_EQ((*whole)[2].length, 2 * kMiB);
  for (const auto& c : *whole) {
    EXPECT_EQ(c.info.kind, MemoryKind::kDevice);
    EXPECT_FALSE(c.info.legacy_ipc);
    EXPECT_EQ(c.info.handle_types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    EXPECT_EQ(c.info.range_base, c.addr);
  }
  // A range that starts inside the first chunk and ends inside the last.
  auto inner = chunksOf(base + kMiB, 6 * kMiB);
  ASSERT_TRUE(inner.ok());
  ASSERT_EQ(inner->size(), 3u);
  EXPECT_EQ((*inner)[0].addr, u(base + kMiB));
  EXPECT_EQ((*inner)[0].length, kMiB);
  EXPECT_EQ((*inner)[0].info.range_base, u(base));
  EXPECT_EQ((*inner)[2].length, kMiB);
  // One chunk: one piece.
  auto one = chunksOf(base + 3 * kMiB, kMiB);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
  fake.appVmmFree(base);
}

TEST(CudaChunks, ARangeRunningPastDeviceMemoryIsRefusedNamingWhere) {
  FakeCuda fake;
  char* base = static_cast<char*>(fake.appVmm(0, {2 * kMiB}));
  auto r = chunksOf(base, 3 * kMiB);  // the reservation ends after 2 MiB
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not device memory throughout"), std::string::npos)
      << r.status().toString();
  auto capped = chunksOf(base, 2 * kMiB, 1);
  EXPECT_TRUE(capped.ok());
  fake.appVmmFree(base);
  char* three = static_cast<char*>(fake.appVmm(0, {2 * kMiB, 2 * kMiB, 2 * kMiB}));
  auto over = chunksOf(three, 6 * kMiB, 2);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("more than 2 physical allocations"), std::string::npos);
  fake.appVmmFree(three);
}

TEST(CudaDevices, ANonexistentGpuIsNotFoundSayingWhatTheDriverSees) {
  FakeCuda fake;  // one GPU
  EXPECT_TRUE(checkDevice(0).ok());
  Status s = checkDevice(3);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no such GPU cuda:3: the CUDA driver sees 1 GPU (cuda:0)"),
            std::string::npos)
      << s.toString();
}

TEST(CudaDevices, ADriverWithoutGpusSaysSo) {
  FakeCudaOptions o;
  o.gpus.clear();
  FakeCuda fake(o);
  auto n = deviceCount();
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("sees no GPU"), std::string::npos) << n.status().toString();
}

TEST(CudaDevices, WithoutADriverTheErrorNamesTheLibrary) {
  setDriverLibraryOverride("libtent-test-no-such-cuda.so.1");
  Status s = checkDevice(0);
  setDriverLibraryOverride("");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("libtent-test-no-such-cuda.so.1"), std::string::npos);
}

TEST(CudaDevices, PciBusIdsAreLowerCase) {
  FakeCudaOptions o;
  o.gpus[0].pci = "0000:3B:00.0";
  FakeCuda fake(o);
  auto id = pciBusId(0);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "0000:3b:00.0");
}

TEST(CudaLocation, ParsesCudaOrdinals) {
  EXPECT_EQ(*parseCudaLocation("cuda:0"), 0);
  EXPECT_EQ(*parseCudaLocation("cuda:12"), 12);
  EXPECT_EQ(*parseCudaLocation("cpu:0"), -1);
  EXPECT_EQ(*parseCudaLocation("*"), -1);
  EXPECT_FALSE(parseCudaLocation("cuda:").ok());
  EXPECT_FALSE(parseCudaLocation("cuda:x").ok());
  EXPECT_FALSE(parseCudaLocation("cuda:-1").ok());
}

TEST(CudaAllocate, VmmMemoryExportableAsAFileDescriptorWhenTheGpuSupportsIt) {
  FakeCuda fake;
  const auto before = fake.live();
  auto a = allocateDevice(0, 3 * kMiB);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_TRUE(a->vmm);
  EXPECT_EQ(a->mapped, 4 * kMiB);  // rounded up to the 2 MiB granularity
  EXPECT_EQ(fake.calls("cuMemCreate"), 1);
  EXPECT_EQ(fake.calls("cuMemAlloc"), 0);
  auto info = classify(a->ptr);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->kind, MemoryKind::kDevice);
  EXPECT_EQ(info->device, 0);
  EXPECT_EQ(info->handle_types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(fake.live().context_refs, before.context_refs + 1);  // held by the allocation
  ASSERT_TRUE(freeDevice(*a).ok());
  const auto after = fake.live();
  EXPECT_EQ(after.physical, before.physical);
  EXPECT_EQ(after.reservations, before.reservations);
  EXPECT_EQ(after.context_refs, before.context_refs);
}

TEST(CudaAllocate, CuMemAllocWhenTheGpuHasNoVmmOrNoFileDescriptorHandles) {
  for (int variant = 0; variant < 3; ++variant) {
    FakeCudaOptions o;
    if (variant == 0) o.gpus[0].vmm = false;
    if (variant == 1) o.gpus[0].posix_fd = false;
    if (variant == 2) o.vmm_entries = false;  // an old driver: no VMM entry points
    FakeCuda fake(o);
    auto a = allocateDevice(0, kMiB);
    ASSERT_TRUE(a.ok()) << a.status().toString();
    EXPECT_FALSE(a->vmm);
    EXPECT_EQ(fake.calls("cuMemAlloc"), 1);
    auto info = classify(a->ptr);
    ASSERT_TRUE(info.ok());
    EXPECT_TRUE(info->legacy_ipc);
    ASSERT_TRUE(freeDevice(*a).ok());
    EXPECT_EQ(fake.live().allocations, 0);
    EXPECT_EQ(fake.live().context_refs, 0);
  }
}

TEST(CudaAllocate, OutOfDeviceMemoryIsResourceExhausted) {
  FakeCuda fake;
  fake.fail_alloc = CUDA_ERROR_OUT_OF_MEMORY;
  auto a = allocateDevice(0, kMiB);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(a.status().message().find("cuda:0"), std::string::npos) << a.status().toString();
  EXPECT_EQ(fake.live().context_refs, 0);
}

TEST(CudaAllocate, ChurnReturnsEveryObject) {
  FakeCuda fake(gpus(2));
  for (int i = 0; i < 50; ++i) {
    auto a = allocateDevice(i % 2, (i % 3 + 1) * kMiB);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(freeDevice(*a).ok());
  }
  const auto l = fake.live();
  EXPECT_EQ(l.physical, 0);
  EXPECT_EQ(l.reservations, 0);
  EXPECT_EQ(l.allocations, 0);
  EXPECT_EQ(l.context_refs, 0);
}

TEST(CudaContext, TheScopeRestoresTheApplicationsContext) {
  FakeCuda fake(gpus(2));
  CUcontext app = nullptr;
  ASSERT_EQ(fake.table().cuDevicePrimaryCtxRetain(&app, 1), CUDA_SUCCESS);
  ASSERT_EQ(fake.table().cuCtxSetCurrent(app), CUDA_SUCCESS);
  {
    auto scope = ScopedContext::enter(0);
    ASSERT_TRUE(scope.ok());
    CUcontext now = nullptr;
    fake.table().cuCtxGetCurrent(&now);
    EXPECT_NE(now, app);
  }
  CUcontext now = nullptr;
  fake.table().cuCtxGetCurrent(&now);
  EXPECT_EQ(now, app);
  fake.table().cuCtxSetCurrent(nullptr);
  fake.table().cuDevicePrimaryCtxRelease(1);
  EXPECT_EQ(fake.live().context_refs, 0);
}

}  // namespace
}  // namespace tent::cuda
