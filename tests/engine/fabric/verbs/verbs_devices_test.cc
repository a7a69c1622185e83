// Which devices the verbs provider opens (fake libibverbs): the default set (ACTIVE
// port, usable GID), the allow- and deny-lists, devices that fail to open, and the
// transports it refuses (EFA, iWARP) with a message naming the alternative.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "fabric/verbs/verbs_provider.h"
#include "tests/support/fake_verbs/fake_verbs.h"

namespace tent::fabric {
namespace {

using testing::fakeOps;
using testing::FakeVerbs;
using Kind = FakeVerbs::Kind;

class VerbsDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_.setGid(0, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7"); }

  std::vector<std::string> opened() {
    auto provider = createVerbsProvider(config_, fakeOps());
    EXPECT_TRUE(provider.ok()) << provider.status().toString();
    std::vector<std::string> names;
    if (!provider.ok()) return names;
    for (size_t i = 0; i < (*provider)->deviceCount(); ++i) {
      names.push_back((*provider)->device(i).info().name);
      EXPECT_EQ((*provider)->device(i).info().index, i);
    }
    return names;
  }

  void portDown(const std::string& name) {
    fake_.port_attr_of[name] = fake_.port_attr;
    fake_.port_attr_of[name].state = IBV_PORT_DOWN;
  }

  bool contains(const Status& s, const std::string& text) {
    return s.message().find(text) != std::string::npos;
  }

  FakeVerbs fake_;
  config::VerbsFabricConfig config_;
};

using Names = std::vector<std::string>;

TEST_F(VerbsDevicesTest, DefaultSetOpensInfinibandAndRoceWithActivePorts) {
  fake_.addDevice("mlx5_0", Kind::kRoce);
  fake_.addDevice("mlx5_1", Kind::kInfiniband);
  fake_.addDevice("mlx5_2", Kind::kRoce);
  portDown("mlx5_2");
  EXPECT_EQ(opened(), (Names{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(fake_.opened, 3);  // mlx5_2 was opened, found down and closed again
  EXPECT_EQ(fake_.closed, fake_.opened);
  EXPECT_EQ(fake_.pds, 0);
}

TEST_F(VerbsDevicesTest, DefaultSetSkipsPortsWithoutAGid) {
  fake_.addDevice("mlx5_0");
  fake_.addDevice("mlx5_1");
  fake_.gids.clear();  // RoCE ports with an empty GID table: nothing to route to
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_FALSE(provider.ok());
  EXPECT_TRUE(contains(provider.status(), "no usable RDMA device")) << provider.status().toString();
  EXPECT_TRUE(contains(provider.status(), "mlx5_0"));
  EXPECT_TRUE(contains(provider.status(), "mlx5_1"));
  EXPECT_TRUE(contains(provider.status(), "fabric.provider: tcp"));
  EXPECT_EQ(fake_.closed, fake_.opened);
  EXPECT_EQ(fake_.pds, 0);
}

TEST_F(VerbsDevicesTest, DenyListRemovesDevicesFromTheDefaultSet) {
  fake_.addDevice("mlx5_0");
  fake_.addDevice("mlx5_bond_0");
  fake_.addDevice("mlx5_1");
  config_.exclude_devices = {"mlx5_bond_0"};
  EXPECT_EQ(opened(), (Names{"mlx5_0", "mlx5_1"}));
  config_.exclude_devices = {"mlx5_0", "mlx5_bond_0", "mlx5_1"};
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_FALSE(provider.ok());
  EXPECT_EQ(provider.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(provider.status(), "exclude_devices"));
}

TEST_F(VerbsDevicesTest, AllowListOpensOnlyNamedDevicesInItsOrder) {
  fake_.addDevice("mlx5_0");
  fake_.addDevice("mlx5_1");
  fake_.addDevice("mlx5_2");
  config_.devices = {"mlx5_2", "mlx5_0"};
  EXPECT_EQ(opened(), (Names{"mlx5_2", "mlx5_0"}));
}

TEST_F(VerbsDevicesTest, UnnamedDeviceThatFailsToOpenIsSkipped) {
  fake_.addDevice("mlx5_0");
  fake_.addDevice("mlx5_1");
  fake_.fail_open_of["mlx5_0"] = EACCES;
  EXPECT_EQ(opened(), (Names{"mlx5_1"}));
}

TEST_F(VerbsDevicesTest, NamedDeviceThatFailsToOpenIsAnError) {
  fake_.addDevice("mlx5_0");
  fake_.addDevice("mlx5_1");
  fake_.fail_open_of["mlx5_0"] = EACCES;
  config_.devices = {"mlx5_1", "mlx5_0"};
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_FALSE(provider.ok());
  EXPECT_EQ(provider.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(contains(provider.status(), "mlx5_0: open_device failed"))
      << provider.status().toString();
  EXPECT_EQ(fake_.closed, fake_.opened);  // mlx5_1, opened first, released
  EXPECT_EQ(fake_.pds, 0);
}

TEST_F(VerbsDevicesTest, EfaIsRefusedNamingSrdAndTheTcpProvider) {
  fake_.addDevice("efa_0", Kind::kEfa);
  config_.devices = {"efa_0"};
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_FALSE(provider.ok());
  EXPECT_EQ(provider.status().code(), StatusCode::kNotSupported);
  EXPECT_TRUE(contains(provider.status(), "efa_0: an AWS EFA device offers the SRD transport"))
      << provider.status().toString();
  EXPECT_TRUE(contains(provider.status(), "fabric.provider: tcp"));
  EXPECT_EQ(fake_.opened, 0);  // refused before it is opened
}

TEST_F(VerbsDevicesTest, IwarpIsRefusedNamingRdmaCmAndTheTcpProvider) {
  fake_.addDevice("iwp0", Kind::kIwarp);
  config_.devices = {"iwp0"};
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_FALSE(provider.ok());
  EXPECT_EQ(provider.status().code(), StatusCode::kNotSupported);
  EXPECT_TRUE(contains(provider.status(),
                       "iwp0: an iWARP device connects its queue pairs only "
                       "through RDMA-CM"))
      << provider.status().toString();
  EXPECT_TRUE(contains(provider.status(), "fabric.provider: tcp"));
  EXPECT_EQ(fake_.opened, 0);
}

TEST_F(VerbsDevicesTest, DefaultSetSkipsEfaAndIwarpBesideARoceNic) {
  fake_.addDevice("efa_0", Kind::kEfa);
  fake_.addDevice("mlx5_0", Kind::kRoce);
  fake_.addDevice("iwp0", Kind::kIwarp);
  EXPECT_EQ(opened(), (Names{"mlx5_0"}));
  EXPECT_EQ(fake_.opened, 1);
}

TEST_F(VerbsDevicesTest, NamedDeviceWithItsPortDownStillOpens) {
  // Named: the operator asked for it (a cable being plugged in); setupPort warns.
  fake_.addDevice("mlx5_0");
  portDown("mlx5_0");
  config_.devices = {"mlx5_0"};
  EXPECT_EQ(opened(), (Names{"mlx5_0"}));
}

TEST(VerbsDeviceTransport, KindsFromNodeAndTransportType) {
  ibv_device d{};
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;
  EXPECT_EQ(verbs::transportOf(d), verbs::DeviceTransport::kInfinibandOrRoce);
  d.node_type = IBV_NODE_RNIC;
  d.transport_type = IBV_TRANSPORT_IWARP;
  EXPECT_EQ(verbs::transportOf(d), verbs::DeviceTransport::kIwarp);
  d.node_type = IBV_NODE_UNSPECIFIED;
  d.transport_type = IBV_TRANSPORT_UNSPECIFIED;
  EXPECT_EQ(verbs::transportOf(d), verbs::DeviceTransport::kEfa);
  d.node_type = IBV_NODE_USNIC_UDP;
  d.transport_type = IBV_TRANSPORT_USNIC_UDP;
  EXPECT_EQ(verbs::transportOf(d), verbs::DeviceTransport::kOther);
}

}  // namespace
}  // namespace tent::fabric
