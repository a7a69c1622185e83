// Loading the CUDA driver: the table comes from libcuda.so.1 at run time, and every
// way that can fail says what is missing. No CUDA on the build machine: the real
// library is never found here, and a library override gives the same answer on a
// machine that has one.
#include <gtest/gtest.h>

#include "cuda/cuda_driver.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace tent::cuda {
namespace {

constexpr const char* kMissing = "libtent-test-no-such-cuda.so.1";

TEST(CudaDriver, AMissingLibraryIsNotFoundNamingTheLibrary) {
  auto d = loadDriver(kMissing);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find(kMissing), std::string::npos) << d.status().toString();
  EXPECT_NE(d.status().message().find("CUDA driver is not available"), std::string::npos);
}

TEST(CudaDriver, ALibraryWithoutCuGetProcAddressIsRefusedAsTooOld) {
  auto d = loadDriver("libm.so.6");  // loads, but is no CUDA driver
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("cuGetProcAddress"), std::string::npos)
      << d.status().toString();
}

TEST(CudaDriver, TheActiveDriverReportsTheMissingLibraryAndIsNeverLoadedForQueries) {
  setDriverLibraryOverride(kMissing);
  auto d = driver();
  EXPECT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(kMissing), std::string::npos);
  EXPECT_EQ(driverIfLoaded(), nullptr);
  setDriverLibraryOverride("");
}

TEST(CudaDriver, AFakeTableIsTheActiveDriverWhileItLives) {
  {
    testing::FakeCuda fake;
    auto d = driver();
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, &fake.table());
    EXPECT_EQ(driverIfLoaded(), &fake.table());
  }
  setDriverLibraryOverride(kMissing);
  EXPECT_FALSE(driver().ok());
  setDriverLibraryOverride("");
}

TEST(CudaDriver, ErrorTextNamesTheCodeAndItsName) {
  testing::FakeCuda fake;
  const std::string text = errorText(fake.table(), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(text.find("CUDA_ERROR_OUT_OF_MEMORY (2)"), std::string::npos) << text;
  EXPECT_NE(errorText(fake.table(), 12345).find("(12345)"), std::string::npos);
}

}  // namespace
}  // namespace tent::cuda
