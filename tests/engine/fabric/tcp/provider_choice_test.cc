// fabric.provider: which provider serves and why, and that a named device that does
// not exist is an error on every provider (issue 22: a choice that never lies).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "config/config.h"
#include "fabric/select/select_provider.h"
#include "topology/topology.h"

namespace tent::fabric {
namespace {

bool hostHasRdmaDevices() {
  struct stat st;
  return ::stat("/sys/class/infiniband", &st) == 0;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ProviderChoice, AutoWithoutAnRdmaDeviceTakesTcpAndSaysWhy) {
  if (hostHasRdmaDevices()) GTEST_SKIP() << "this host has RDMA devices: auto takes verbs";
  config::FabricConfig cfg;  // provider auto
  auto r = chooseProvider(cfg, topology::Topology{});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->provider->name(), "tcp");
  EXPECT_EQ(r->reason, "auto: rdma-core lists no RDMA device");
  ASSERT_EQ(r->provider->deviceCount(), 1u);
  EXPECT_EQ(r->provider->device(0).info().name, "tcp0");
}

TEST(ProviderChoice, ConfiguredProvidersSaySo) {
  config::FabricConfig cfg;
  cfg.provider = config::FabricProvider::kSoft;
  auto soft = chooseProvider(cfg, topology::Topology{});
  ASSERT_TRUE(soft.ok()) << soft.status().toString();
  EXPECT_EQ(soft->provider->name(), "soft");
  EXPECT_EQ(soft->reason, "configured (fabric.provider: soft)");
  cfg.provider = config::FabricProvider::kTcp;
  auto tcp = chooseProvider(cfg, topology::Topology{});
  ASSERT_TRUE(tcp.ok()) << tcp.status().toString();
  EXPECT_EQ(tcp->reason, "configured (fabric.provider: tcp)");
}

TEST(ProviderChoice, AMissingNamedRdmaDeviceFailsNamingItAndTcp) {
  if (hostHasRdmaDevices()) GTEST_SKIP() << "this host has RDMA devices";
  config::FabricConfig cfg;
  cfg.verbs.devices = {"mlx5_0"};
  for (auto provider : {config::FabricProvider::kVerbs, config::FabricProvider::kAuto}) {
    cfg.provider = provider;
    auto r = chooseProvider(cfg, topology::Topology{});
    ASSERT_FALSE(r.ok()) << "provider " << config::toString(provider);
    const std::string m = r.status().toString();
    EXPECT_TRUE(contains(m, "mlx5_0")) << m;
    EXPECT_TRUE(contains(m, "fabric.provider: tcp")) << m;
  }
}

}  // namespace
}  // namespace tent::fabric
