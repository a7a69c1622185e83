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
  return m;
}

TEST(Bootstrap, RoundTripV2KeepsEveryField) {
  auto bytes = encodeBootstrap(sample());
  auto parsed = parseBootstrap(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(*parsed, sample());
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
  auto bad_version = good;
  bad_version[4] = 7;
  EXPECT_NE(parseBootstrap(bad_version).status().message().find("version"), std::string::npos);
  auto zero_version = good;
  zero_version[4] = 0;
  EXPECT_FALSE(parseBootstrap(zero_version).ok());
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
}

}  // namespace
}  // namespace tent::metadata
