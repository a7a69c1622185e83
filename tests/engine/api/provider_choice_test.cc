// The provider choice as the engine reports it, and rails naming a device the
// provider does not have (an error, never a warning: issue 22).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>

#include "tent/transfer_engine.h"

namespace tent {
namespace {

bool hostHasRdmaDevices() {
  struct stat st;
  return ::stat("/sys/class/infiniband", &st) == 0;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(EngineProviderChoice, ARailNamingNoDeviceIsAnErrorUnderAuto) {
  if (hostHasRdmaDevices()) GTEST_SKIP() << "this host has RDMA devices";
  auto e = TransferEngine::createFromYaml(R"(
eal: {mode: manual}
lcores:
  - pollers: ["rail:mlx5_0", background]
bootstrap: {listen: "127.0.0.1:0"}
)");
  ASSERT_FALSE(e.ok());
  const std::string m = e.status().toString();
  EXPECT_TRUE(contains(m, "rail:mlx5_0 names no device of the tcp provider (devices: tcp0)")) << m;
}

TEST(EngineProviderChoice, StatsSayWhichProviderAndWhy) {
  auto e = TransferEngine::createFromYaml(R"(
eal: {mode: manual}
fabric: {provider: tcp}
bootstrap: {listen: "127.0.0.1:0"}
)");
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const EngineStats s = (*e)->stats();
  EXPECT_EQ(s.provider, "tcp");
  EXPECT_EQ(s.provider_choice, "configured (fabric.provider: tcp)");
}

}  // namespace
}  // namespace tent
