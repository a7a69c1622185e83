// checkPeerLink: mismatched link layers and GID types are refused before any QP is
// wired, with a message naming both devices; unknown (soft, tcp, older peers) passes.
#include <gtest/gtest.h>

#include <set>

#include "model/endpoint_link.h"

namespace tent::rdma {
namespace {

using fabric::GidType;
using fabric::LinkLayer;
using fabric::PortLink;

TEST(EndpointLink, MismatchedGidTypesAreRefused) {
  PortLink v2{LinkLayer::kEthernet, GidType::kRoceV2, 4096};
  PortLink v1{LinkLayer::kEthernet, GidType::kRoceV1, 4096};
  Status s = checkPeerLink(v2, v1, "mlx5_0", "mlx5_3");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("mlx5_0 uses a RoCE v2 GID"), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("mlx5_3 a RoCE v1 GID"), std::string::npos) << s.toString();
}

TEST(EndpointLink, MismatchedLinkLayersAreRefused) {
  PortLink roce{LinkLayer::kEthernet, GidType::kRoceV2, 4096};
  PortLink ib{LinkLayer::kInfiniband, GidType::kIb, 4096};
  Status s = checkPeerLink(ib, roce, "mlx5_0", "mlx5_1");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("InfiniBand"), std::string::npos) << s.toString();
}

TEST(EndpointLink, SameLinkOrUnknownPasses) {
  PortLink roce{LinkLayer::kEthernet, GidType::kRoceV2, 1024};
  PortLink other_mtu{LinkLayer::kEthernet, GidType::kRoceV2, 4096};
  EXPECT_TRUE(checkPeerLink(roce, other_mtu, "a", "b").ok());  // MTU: both take the min
  EXPECT_TRUE(checkPeerLink(roce, PortLink{}, "a", "b").ok());
  EXPECT_TRUE(checkPeerLink(PortLink{}, roce, "a", "b").ok());
}

TEST(EndpointLink, RandomPsnsAre24BitsAndVary) {
  std::set<uint32_t> seen;
  for (int i = 0; i < 64; ++i) {
    const uint32_t psn = randomPsn();
    EXPECT_LE(psn, fabric::kMaxPsn);
    seen.insert(psn);
  }
  EXPECT_GT(seen.size(), 1u);  // 64 draws of 2^24 values: all equal has odds 2^-1512
}

}  // namespace
}  // namespace tent::rdma
