// Control-protocol frames and messages: round trips, and every malformed input refused.
#include <gtest/gtest.h>

#include "wire/control_frames.h"

namespace tent::metadata {
namespace {

TEST(ControlFrames, HeaderRoundTripAndLimits) {
  uint8_t h[kFrameHeaderBytes];
  encodeFrameHeader(FrameType::kBootstrap, 1234, h);
  FrameHeader out;
  ASSERT_TRUE(
      parseFrameHeader(std::span<const uint8_t, kFrameHeaderBytes>(h, sizeof h), 4096, &out).ok());
  EXPECT_EQ(out.type, FrameType::kBootstrap);
  EXPECT_EQ(out.length, 1234u);
  EXPECT_EQ(
      parseFrameHeader(std::span<const uint8_t, kFrameHeaderBytes>(h, sizeof h), 1000, &out).code(),
      StatusCode::kInvalidArgument);  // over the limit in force
  h[0] ^= 1;
  EXPECT_FALSE(
      parseFrameHeader(std::span<const uint8_t, kFrameHeaderBytes>(h, sizeof h), 4096, &out).ok());
  encodeFrameHeader(static_cast<FrameType>(0x7777), 0, h);
  EXPECT_FALSE(
      parseFrameHeader(std::span<const uint8_t, kFrameHeaderBytes>(h, sizeof h), 4096, &out).ok());
}

TEST(ControlFrames, HandshakeMessagesRoundTrip) {
  Hello hello;
  hello.client_nonce[3] = 9;
  auto h = parseHello(encodeHello(hello));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->client_nonce, hello.client_nonce);
  Challenge c;
  c.auth_required = true;
  c.server_nonce[0] = 1;
  c.server_proof[31] = 2;
  auto cc = parseChallenge(encodeChallenge(c));
  ASSERT_TRUE(cc.ok());
  EXPECT_TRUE(cc->auth_required);
  EXPECT_EQ(cc->server_proof, c.server_proof);
  AuthMessage a;
  a.has_proof = true;
  a.client_proof[5] = 7;
  auto aa = parseAuth(encodeAuth(a));
  ASSERT_TRUE(aa.ok());
  EXPECT_EQ(aa->client_proof, a.client_proof);
  EXPECT_FALSE(parseAuth(encodeAuth(AuthMessage{})).value().has_proof);
  ReleaseMessage r{"mlx5_0", "mlx5_1", 42};
  auto rr = parseRelease(encodeRelease(r));
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ(rr->target_device, "mlx5_1");
  EXPECT_EQ(rr->generation, 42u);
}

// Every strict prefix and one trailing byte too many: refused by the message's parser.
template <typename Parse>
void expectStrict(std::vector<uint8_t> bytes, Parse parse) {
  ASSERT_TRUE(parse(bytes).ok());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(parse(std::span<const uint8_t>(bytes.data(), n)).ok()) << "prefix " << n;
  bytes.push_back(0);
  EXPECT_FALSE(parse(bytes).ok()) << "trailing byte";
}

TEST(ControlFrames, EveryTruncationAndTrailingByteIsRefused) {
  expectStrict(encodeHello(Hello{}), [](auto b) { return parseHello(b); });
  expectStrict(encodeChallenge(Challenge{}), [](auto b) { return parseChallenge(b); });
  expectStrict(encodeAuth(AuthMessage{true, {}}), [](auto b) { return parseAuth(b); });
  expectStrict(encodeRelease(ReleaseMessage{"a", "b", 1}), [](auto b) { return parseRelease(b); });
  std::vector<uint8_t> bad_flag = encodeChallenge(Challenge{});
  bad_flag[2] = 7;
  EXPECT_FALSE(parseChallenge(bad_flag).ok());
}

TEST(ControlFrames, DescriptorRequestNegotiatesTheVersion) {
  EXPECT_EQ(parseDescriptorRequest({}).value(), 1u);  // a v1 asker
  EXPECT_EQ(parseDescriptorRequest(encodeDescriptorRequest(2)).value(), 2u);
  EXPECT_FALSE(parseDescriptorRequest(encodeDescriptorRequest(0)).ok());
  EXPECT_FALSE(parseDescriptorRequest(std::vector<uint8_t>{1, 0, 0}).ok());
}

TEST(ControlFrames, ErrorsKeepTheirCodeAcrossTheWire) {
  Status s = parseError(encodeError(Status::PermissionDenied("authentication failed")));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "authentication failed");
  std::string v1 = "no such device";  // a v1 peer's plain text
  Status t = parseError(std::vector<uint8_t>(v1.begin(), v1.end()));
  EXPECT_EQ(t.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.message(), v1);
}

}  // namespace
}  // namespace tent::metadata
