#include <gtest/gtest.h>

#include "wire/bootstrap.h"
#include "wire/wire.h"

namespace tent::metadata {
namespace {

BootstrapMessage sample() {
  BootstrapMessage m;
  m.initiator_segment = "127.0.0.1:4242";
  m.initiator_instance = 0x1234567890abcdefull;
  m.local_device = "mlx5_0";
  m.peer_device = "mlx5_1";
  for (size_t i = 0; i < m.port.gid.size(); ++i) m.port.gid[i] = static_cast<uint8_t>(i * 7);
  m.port.lid = 17;
  m.generation = 3;
  m.data_qp_nums = {11, 12, 13, 14};
  m.direct_qp_num = 99;
  m.setExtension(BootstrapTag::kLink, {1, 2, 3});
  m.setExtension(BootstrapTag::kNotify, {});
  return m;
}

BootstrapMessage withoutExtensions(BootstrapMessage m) {
  m.extensions.clear();
  return m;
}

TEST(Bootstrap, RoundTripV3KeepsEveryField) {
  auto bytes = encodeBootstrap(sample());
  auto parsed = parseBootstrap(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(*parsed, sample());
  ASSERT_NE(parsed->extension(BootstrapTag::kLink), nullptr);
  EXPECT_EQ(*parsed->extension(BootstrapTag::kLink), (std::vector<uint8_t>{1, 2, 3}));
  ASSERT_NE(parsed->extension(BootstrapTag::kNotify), nullptr);
  EXPECT_TRUE(parsed->extension(BootstrapTag::kNotify)->empty());
  EXPECT_EQ(parsed->extension(BootstrapTag::kQos), nullptr);
}

TEST(Bootstrap, V2DropsTheExtensionsAndKeepsDirectQp) {
  auto parsed = parseBootstrap(encodeBootstrap(sample(), kBootstrapVersionV2));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->version, kBootstrapVersionV2);
  auto expected = withoutExtensions(sample());
  expected.version = kBootstrapVersionV2;
  EXPECT_EQ(*parsed, expected);
}

TEST(Bootstrap, SetExtensionReplacesTheTagsBytes) {
  auto m = sample();
  m.setExtension(BootstrapTag::kLink, {9});
  EXPECT_EQ(m.extensions.size(), 2u);
  EXPECT_EQ(*m.extension(BootstrapTag::kLink), std::vector<uint8_t>{9});
}

// A newer peer's message (v4, a tag we do not know) parses: its tags are kept, ours read.
TEST(Bootstrap, ANewerVersionIsReadAndUnknownTagsAreKept) {
  auto m = sample();
  m.extensions.push_back({777, {0xaa, 0xbb}});
  auto bytes = encodeBootstrap(m, 4);
  auto parsed = parseBootstrap(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->version, 4);
  EXPECT_EQ(*parsed->extension(BootstrapTag::kLink), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(parsed->extensions.size(), 3u);
  EXPECT_EQ(bootstrapVersionFor(parsed->version), kBootstrapVersion);  // we answer in ours
  EXPECT_EQ(bootstrapVersionFor(kBootstrapVersionV1), kBootstrapVersionV1);
  EXPECT_EQ(bootstrapVersionFor(kBootstrapVersionV2), kBootstrapVersionV2);
}

TEST(Bootstrap, MalformedExtensionsAreRejected) {
  auto twice = sample();
  twice.extensions.push_back({static_cast<uint16_t>(BootstrapTag::kLink), {4}});
  auto r = parseBootstrap(encodeBootstrap(twice));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("twice"), std::string::npos);
  auto many = sample();
  many.extensions.clear();
  for (uint16_t t = 0; t <= kMaxBootstrapExtensions; ++t) many.extensions.push_back({t, {}});
  EXPECT_FALSE(parseBootstrap(encodeBootstrap(many)).ok());
  many.extensions.pop_back();
  EXPECT_TRUE(parseBootstrap(encodeBootstrap(many)).ok());
  // An extension claiming more bytes than the body holds.
  auto bytes = encodeBootstrap(sample());
  // The body ends: kLink tag(2) len(2) bytes(3) | kNotify tag(2) len(2).
  const size_t link_length_at = bytes.size() - 4 - 3 - 2;
  bytes[link_length_at] = 0xff;
  EXPECT_FALSE(parseBootstrap(bytes).ok());
}

TEST(Bootstrap, V1WithoutDirectQpParsesAsNone) {
  auto bytes = encodeBootstrap(sample(), kBootstrapVersionV1);
  auto parsed = parseBootstrap(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(parsed->direct_qp_num, 0u);
  EXPECT_EQ(parsed->data_qp_nums, sample().data_qp_nums);
  EXPECT_EQ(parsed->generation, 3u);
}

TEST(Bootstrap, EveryTruncationIsRejected) {
  auto bytes = encodeBootstrap(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto parsed = parseBootstrap(std::span<const uint8_t>(bytes.data(), n));
    EXPECT_FALSE(parsed.ok()) << "prefix of " << n << " bytes parsed";
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(Bootstrap, WrongMagicVersionAndLengthAreRejected) {
  auto good = encodeBootstrap(sample());
  auto bad_magic = good;
  bad_magic[0] ^= 0xff;
  EXPECT_FALSE(parseBootstrap(bad_magic).ok());
  auto zero_version = good;
  zero_version[4] = 0;
  EXPECT_NE(parseBootstrap(zero_version).status().message().find("version"), std::string::npos);
  auto long_length = good;
  long_length[6] = 0xff;
  long_length[7] = 0xff;
  EXPECT_FALSE(parseBootstrap(long_length).ok());
  auto trailing = good;
  trailing.push_back(0);
  EXPECT_FALSE(parseBootstrap(trailing).ok());
}

TEST(Bootstrap, QpCountOutOfRangeIsRejected) {
  auto m = sample();
  m.data_qp_nums.assign(kMaxBootstrapQps + 1, 5);
  EXPECT_FALSE(parseBootstrap(encodeBootstrap(m)).ok());
  m.data_qp_nums.clear();
  EXPECT_FALSE(parseBootstrap(encodeBootstrap(m)).ok());
  m.data_qp_nums.assign(kMaxBootstrapQps, 5);
  EXPECT_TRUE(parseBootstrap(encodeBootstrap(m)).ok());
}

TEST(Bootstrap, OverlongNameIsRejected) {
  auto m = sample();
  m.local_device.assign(kMaxNameBytes + 1, 'x');
  EXPECT_FALSE(parseBootstrap(encodeBootstrap(m)).ok());
}

TEST(Bootstrap, RandomGarbageNeverCrashes) {
  uint32_t seed = 12345;
  auto bytes = encodeBootstrap(sample());
  for (int iter = 0; iter < 5000; ++iter) {
    auto mutated = bytes;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 1103515245 + 12345;
      mutated[(seed >> 8) % mutated.size()] = static_cast<uint8_t>(seed >> 16);
    }
    (void)parseBootstrap(mutated);  // must not crash or read out of bounds
  }
}

TEST(Bootstrap, DuplicateDetectionComparesDirectQp) {
  auto a = sample();
  auto b = sample();
  EXPECT_TRUE(sameQpWiring(a, b));
  b.direct_qp_num = 100;
  EXPECT_FALSE(sameQpWiring(a, b));
  b = sample();
  b.data_qp_nums[2] = 77;
  EXPECT_FALSE(sameQpWiring(a, b));
  b = sample();
  b.generation = 4;
  EXPECT_FALSE(sameQpWiring(a, b));
  b = sample();
  b.setExtension(BootstrapTag::kPsn, {1, 0, 0, 0});
  EXPECT_FALSE(sameQpWiring(a, b));
}

}  // namespace
}  // namespace tent::metadata
