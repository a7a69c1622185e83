// allocateLocalMemory("cuda:N") never hands out host memory: device memory of GPU N,
// or a clear error naming what is missing (no CUDA driver, no such GPU). Through the
// fake CUDA driver (tests/cuda/fake_cuda.h); no GPU on the build machine.
#include <gtest/gtest.h>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"
#include "tests/support/engine_test_util.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace tent::testing {
namespace {

constexpr const char* kNoCuda = "libtent-test-no-such-cuda.so.1";

// Stands for a machine without the NVIDIA driver, even where one is installed.
class NoCudaDriver {
 public:
  NoCudaDriver() { cuda::setDriverLibraryOverride(kNoCuda); }
  ~NoCudaDriver() { cuda::setDriverLibraryOverride(""); }
};

TEST(GpuLocation, WithoutTheCudaDriverCudaMemoryIsAnErrorNamingTheDriver) {
  NoCudaDriver none;
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  auto mem = engine->allocateLocalMemory(1 << 20, "cuda:0");
  ASSERT_FALSE(mem.ok()) << "cuda:0 without a CUDA driver must not give host memory";
  EXPECT_EQ(mem.status().code(), StatusCode::kNotFound);
  EXPECT_NE(mem.status().message().find("cuda:0"), std::string::npos) << mem.status().toString();
  EXPECT_NE(mem.status().message().find(kNoCuda), std::string::npos) << mem.status().toString();
  EXPECT_EQ(engine->transport().localMemory().table()->buffers.size(), 0u);
}

TEST(GpuLocation, ANonexistentGpuIsAnErrorSayingWhichGpusExist) {
  cuda::testing::FakeCuda fake;  // one GPU
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  auto mem = engine->allocateLocalMemory(1 << 20, "cuda:3");
  ASSERT_FALSE(mem.ok()) << "cuda:3 on a one-GPU machine must not give host memory";
  EXPECT_EQ(mem.status().code(), StatusCode::kNotFound);
  EXPECT_NE(mem.status().message().find("no such GPU cuda:3: the CUDA driver sees 1 GPU (cuda:0)"),
            std::string::npos)
      << mem.status().toString();
  EXPECT_EQ(fake.live().context_refs, 0);
}

TEST(GpuLocation, AMalformedCudaLocationIsInvalid) {
  cuda::testing::FakeCuda fake;
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  auto mem = engine->allocateLocalMemory(4096, "cuda:first");
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().code(), StatusCode::kInvalidArgument);
}

TEST(GpuLocation, CudaMemoryIsDeviceMemoryOfThatGpuAndComesBack) {
  cuda::testing::FakeCudaOptions two;
  two.gpus.resize(2);
  cuda::testing::FakeCuda fake(two);
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  // The first GPU memory may leave state with its device until the engine closes (the
  // tcp provider's staging pool holds the GPU's primary context): churn after it.
  {
    auto first = engine->allocateLocalMemory(3 << 20, "cuda:1");
    ASSERT_TRUE(first.ok()) << first.status().toString();
    ASSERT_TRUE(engine->freeLocalMemory(*first).ok());
  }
  const auto before = fake.live();
  for (int i = 0; i < 20; ++i) {
    auto mem = engine->allocateLocalMemory(3 << 20, "cuda:1");
    ASSERT_TRUE(mem.ok()) << mem.status().toString();
    auto info = cuda::classify(*mem);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->kind, cuda::MemoryKind::kDevice);
    EXPECT_EQ(info->device, 1);
    ASSERT_TRUE(engine->freeLocalMemory(*mem).ok());
  }
  const auto after = fake.live();
  EXPECT_EQ(after.physical, before.physical);
  EXPECT_EQ(after.reservations, before.reservations);
  EXPECT_EQ(after.context_refs, before.context_refs);
  engine.reset();
  EXPECT_EQ(fake.live().context_refs, 0);
  EXPECT_EQ(fake.live().pinned_host, 0);
}

TEST(GpuLocation, TheEngineFreesDeviceMemoryLeftAllocatedWhenItCloses) {
  cuda::testing::FakeCuda fake;
  {
    auto engine = makeEngine(simYaml());
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->allocateLocalMemory(1 << 20, "cuda:0").ok());
  }
  EXPECT_EQ(fake.live().physical, 0);
  EXPECT_EQ(fake.live().reservations, 0);
  EXPECT_EQ(fake.live().context_refs, 0);
}

}  // namespace
}  // namespace tent::testing
