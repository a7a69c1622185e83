// The link owner's bootstrap v3 extensions (kLink, kQos, kPsn): round trips, and
// every malformed body refused with a message naming the extension.
#include <gtest/gtest.h>

#include "wire/bootstrap_link.h"

namespace tent::metadata {
namespace {

TEST(BootstrapLinkTag, RoundTrip) {
  fabric::PortLink link{fabric::LinkLayer::kEthernet, fabric::GidType::kRoceV2, 1024};
  auto parsed = decodeLinkTag(encodeLinkTag(link));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(*parsed, link);
  auto unknown = decodeLinkTag(encodeLinkTag(fabric::PortLink{}));
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(*unknown, fabric::PortLink{});
}

TEST(BootstrapLinkTag, MalformedIsRefused) {
  auto bytes = encodeLinkTag({fabric::LinkLayer::kInfiniband, fabric::GidType::kIb, 4096});
  EXPECT_FALSE(decodeLinkTag(std::span(bytes).first(5)).ok());  // truncated
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decodeLinkTag(longer).ok());
  auto layer = bytes;
  layer[0] = 7;
  EXPECT_FALSE(decodeLinkTag(layer).ok());
  auto type = bytes;
  type[1] = 9;
  EXPECT_FALSE(decodeLinkTag(type).ok());
  auto mtu = encodeLinkTag({fabric::LinkLayer::kEthernet, fabric::GidType::kRoceV2, 1500});
  auto s = decodeLinkTag(mtu);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("link extension"), std::string::npos);
}

TEST(BootstrapQosTag, RoundTripAndUnknownClassesSkipped) {
  QosTag qos;
  qos.data = {104, 3};
  qos.direct = {184, 5};
  qos.control = {0, 1};
  auto parsed = decodeQosTag(encodeQosTag(qos));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(*parsed, qos);
  // A later engine's fourth class is skipped.
  auto bytes = encodeQosTag(qos);
  bytes[0] = 4;
  for (uint8_t b : {uint8_t{9}, uint8_t{8}, uint8_t{2}}) bytes.push_back(b);
  auto later = decodeQosTag(bytes);
  ASSERT_TRUE(later.ok()) << later.status().toString();
  EXPECT_EQ(*later, qos);
}

TEST(BootstrapQosTag, MalformedIsRefused) {
  auto bytes = encodeQosTag({});
  bytes.pop_back();
  EXPECT_FALSE(decodeQosTag(bytes).ok());
  auto sl = encodeQosTag({{0, 16}, {}, {}});
  EXPECT_FALSE(decodeQosTag(sl).ok());
  EXPECT_FALSE(decodeQosTag({}).ok());
}

TEST(BootstrapPsnTag, RoundTripAndRange) {
  std::vector<uint32_t> psns = {0, 1, 0xabcdef, fabric::kMaxPsn};
  auto parsed = decodePsnTag(encodePsnTag(psns));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(*parsed, psns);
  std::vector<uint32_t> wide = {fabric::kMaxPsn + 1};
  EXPECT_FALSE(decodePsnTag(encodePsnTag(wide)).ok());
  auto bytes = encodePsnTag(psns);
  bytes.pop_back();
  EXPECT_FALSE(decodePsnTag(bytes).ok());
}

}  // namespace
}  // namespace tent::metadata
