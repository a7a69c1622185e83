// GID choice against the fake libibverbs: GID types, netdevs and their state, the
// default route. Issue 24: a link-local or RoCE v1 GID picked by accident connects to
// nothing (endless retry-exceeded), so the choice is checked entry by entry here.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "fabric/verbs/verbs_provider.h"
#include "tests/support/fake_verbs/fake_verbs.h"

namespace tent::fabric {
namespace {

using testing::fakeOps;
using testing::FakeVerbs;

std::array<uint8_t, 16> gidOf(const std::string& text) {
  std::array<uint8_t, 16> gid{};
  inet_pton(AF_INET6, text.c_str(), gid.data());
  return gid;
}

class VerbsGidTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_.addDevice("mlx5_0"); }

  Result<std::unique_ptr<Provider>> create() { return createVerbsProvider(config_, fakeOps()); }

  // The GID the opened device advertises; a zero GID when it failed to open.
  std::array<uint8_t, 16> chosen() {
    auto provider = create();
    EXPECT_TRUE(provider.ok()) << provider.status().toString();
    if (!provider.ok()) return {};
    return (*provider)->device(0).portIdentity().gid;
  }

  FakeVerbs fake_;
  config::VerbsFabricConfig config_;
};

TEST_F(VerbsGidTest, LinkLocalIsNeverChosenWhenARoutableV2GidExists) {
  // mlx5's layout: v1 and v2 link-local first, then the routable ones.
  fake_.setGid(0, IBV_GID_TYPE_ROCE_V1, "fe80::1");
  fake_.setGid(1, IBV_GID_TYPE_ROCE_V2, "fe80::1");
  fake_.setGid(2, IBV_GID_TYPE_ROCE_V1, "fd00::7");
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "fd00::7");
  EXPECT_EQ(chosen(), gidOf("fd00::7"));
  // Even when the link-local one sits on the default route's netdev.
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "fd00::7", "eth1");
  fake_.default_route = "eth0";
  EXPECT_EQ(chosen(), gidOf("fd00::7"));
}

TEST_F(VerbsGidTest, RoceV1IsNeverChosenAutomatically) {
  fake_.setGid(0, IBV_GID_TYPE_ROCE_V1, "::ffff:10.0.0.7");
  fake_.setGid(1, IBV_GID_TYPE_ROCE_V2, "fd00::7");
  EXPECT_EQ(chosen(), gidOf("fd00::7"));
}

TEST_F(VerbsGidTest, Ipv4MappedIsPreferredOverIpv6) {
  fake_.setGid(2, IBV_GID_TYPE_ROCE_V2, "fd00::7");
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
  EXPECT_EQ(chosen(), gidOf("::ffff:10.0.0.7"));
}

TEST_F(VerbsGidTest, OnlyLinkLocalV2IsUsedWhenNothingElseQualifies) {
  fake_.setGid(0, IBV_GID_TYPE_ROCE_V1, "fe80::1");
  fake_.setGid(1, IBV_GID_TYPE_ROCE_V2, "fe80::1");
  auto provider = create();
  ASSERT_TRUE(provider.ok()) << provider.status().toString();
  EXPECT_NE((*provider)->linkModel().find("gid_index 1 (RoCEv2 fe80::1 on eth0)"),
            std::string::npos)
      << (*provider)->linkModel();
}

TEST_F(VerbsGidTest, GidsOnADownNetdevAreSkipped) {
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7", "eth0");
  fake_.setGid(5, IBV_GID_TYPE_ROCE_V2, "::ffff:10.1.0.7", "eth1");
  fake_.netdevs[fake_.netdevIndex("eth0")].up = false;
  EXPECT_EQ(chosen(), gidOf("::ffff:10.1.0.7"));
}

TEST_F(VerbsGidTest, TheDefaultRouteInterfaceIsPreferred) {
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7", "eth0");
  fake_.setGid(5, IBV_GID_TYPE_ROCE_V2, "::ffff:10.1.0.7", "eth1");
  EXPECT_EQ(chosen(), gidOf("::ffff:10.0.0.7"));  // no default route: lowest index
  fake_.default_route = "eth1";
  EXPECT_EQ(chosen(), gidOf("::ffff:10.1.0.7"));
}

TEST_F(VerbsGidTest, TheConfiguredInterfaceIsTheOnlyOneThatQualifies) {
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7", "eth0");
  fake_.setGid(5, IBV_GID_TYPE_ROCE_V2, "fd00::9", "vlan100");
  fake_.default_route = "eth0";
  config_.gid_interface = "vlan100";
  EXPECT_EQ(chosen(), gidOf("fd00::9"));
  config_.gid_interface = "eth9";
  auto bad = create();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("'eth9'"), std::string::npos) << bad.status().toString();
}

TEST_F(VerbsGidTest, NoUsableGidIsAnErrorNamingDeviceAndPort) {
  fake_.setGid(0, IBV_GID_TYPE_ROCE_V1, "fe80::1");
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7", "eth1");
  fake_.netdevs[fake_.netdevIndex("eth1")].up = false;
  auto bad = create();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  const std::string& why = bad.status().message();
  EXPECT_NE(why.find("mlx5_0 port 1"), std::string::npos) << why;
  EXPECT_NE(why.find("[3] RoCEv2 ::ffff:10.0.0.7 on eth1 (down)"), std::string::npos) << why;
  EXPECT_NE(why.find("gid_index"), std::string::npos) << why;
  EXPECT_EQ(fake_.closed, fake_.opened);  // nothing left open
}

TEST_F(VerbsGidTest, GidTypesTheKernelCannotGiveAreAnError) {
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
  fake_.query_gid_ex_rc = EOPNOTSUPP;
  auto bad = create();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("set fabric.verbs.gid_index"), std::string::npos);
  config_.gid_index = 3;  // the way out works
  EXPECT_EQ(chosen(), gidOf("::ffff:10.0.0.7"));
}

TEST_F(VerbsGidTest, AConfiguredIndexIsHonouredEvenLinkLocal) {
  fake_.setGid(0, IBV_GID_TYPE_ROCE_V1, "fe80::1");
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
  config_.gid_index = 0;
  auto provider = create();
  ASSERT_TRUE(provider.ok()) << provider.status().toString();
  EXPECT_EQ((*provider)->device(0).portIdentity().gid, gidOf("fe80::1"));
  EXPECT_NE((*provider)->linkModel().find("gid_index 0 (RoCEv1"), std::string::npos);
}

TEST_F(VerbsGidTest, AConfiguredEmptyEntryIsRefused) {
  fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
  config_.gid_index = 4;
  auto bad = create();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("gid_index 4 is an empty"), std::string::npos);
}

TEST_F(VerbsGidTest, InfinibandUsesThePortGid) {
  fake_.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
  fake_.setGid(0, IBV_GID_TYPE_IB, "fe80::2:c903:0:1", "");
  fake_.setGid(1, IBV_GID_TYPE_IB, "fd00::2:c903:0:1", "");
  EXPECT_EQ(chosen(), gidOf("fe80::2:c903:0:1"));
}

}  // namespace
}  // namespace tent::fabric
