#include <gtest/gtest.h>

#include "wire/segment_descriptor.h"

namespace tent::metadata {
namespace {

SegmentDescriptor sample() {
  SegmentDescriptor d;
  d.name = "127.0.0.1:5000";
  d.instance = 77;
  d.version = 5;
  d.devices.push_back({"soft0", {}, 0});
  d.devices.push_back({"soft1", {}, 1});
  d.devices[1].port.gid[3] = 9;
  d.devices[1].port.lid = 2;
  BufferDescriptor b1{0x10000, 0x2000, {}, {101, 201}};
  b1.regions.push_back({0x10000, 0x1000, "cpu:0", {0}});
  b1.regions.push_back({0x11000, 0x1000, "cpu:1", {1}});
  BufferDescriptor b2{0x40000, 0x100, {}, {102, 202}};
  b2.regions.push_back({0x40000, 0x100, "*", {0, 1}});
  d.buffers = {b1, b2};
  d.max_bootstrap_version = 3;
  d.buffers[0].name = "kv-cache";
  d.buffers[0].access = kBufferRemoteRead | kBufferRemoteWrite;
  d.buffers[0].seq = 2;
  d.buffers[1].access = kBufferRemoteRead;
  d.buffers[1].seq = 1;
  return d;
}

// What a reader of an older version sees of sample(): no v3 fields.
SegmentDescriptor asOlderVersion(SegmentDescriptor d) {
  d.max_bootstrap_version = kUnadvertisedBootstrapVersion;
  for (auto& b : d.buffers) {
    b.name.clear();
    b.access = 0;
    b.seq = 0;
  }
  return d;
}

TEST(Descriptor, RoundTrip) {
  auto parsed = parseDescriptor(encodeDescriptor(sample()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_EQ(*parsed, sample());
}

TEST(Descriptor, EmptySegmentRoundTrips) {
  SegmentDescriptor d;
  d.name = "h:1";
  auto parsed = parseDescriptor(encodeDescriptor(d));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, d);
}

TEST(Descriptor, FindBufferChecksWholeRange) {
  auto d = sample();
  EXPECT_EQ(d.findBuffer(0x10000, 0x2000), &d.buffers[0]);
  EXPECT_EQ(d.findBuffer(0x11fff, 1), &d.buffers[0]);
  EXPECT_EQ(d.findBuffer(0x11fff, 2), nullptr);  // straddles the end
  EXPECT_EQ(d.findBuffer(0xffff, 1), nullptr);
  EXPECT_EQ(d.findBuffer(0x40000, 0x100), &d.buffers[1]);
  EXPECT_EQ(d.findBuffer(0x40000, ~0ull), nullptr);  // no overflow
  EXPECT_EQ(d.deviceIndex("soft1"), 1);
  EXPECT_EQ(d.deviceIndex("nope"), -1);
}

TEST(Descriptor, TruncationsAreRejected) {
  auto bytes = encodeDescriptor(sample());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(parseDescriptor(std::span<const uint8_t>(bytes.data(), n)).ok()) << n;
}

TEST(Descriptor, InconsistentContentIsRejected) {
  auto d = sample();
  d.buffers[0].regions[1].addr += 1;  // regions no longer tile the buffer
  EXPECT_FALSE(parseDescriptor(encodeDescriptor(d)).ok());
  d = sample();
  d.buffers[0].rkeys.pop_back();  // rkey count != device count
  EXPECT_FALSE(parseDescriptor(encodeDescriptor(d)).ok());
  d = sample();
  d.buffers[0].regions[0].rank0 = {5};  // device index out of range
  EXPECT_FALSE(parseDescriptor(encodeDescriptor(d)).ok());
  d = sample();
  std::swap(d.buffers[0], d.buffers[1]);  // unsorted
  EXPECT_FALSE(parseDescriptor(encodeDescriptor(d)).ok());
  auto bytes = encodeDescriptor(sample());
  bytes[0] ^= 1;
  EXPECT_FALSE(parseDescriptor(bytes).ok());
}

}  // namespace
}  // namespace tent::metadata

namespace tent::metadata {
namespace {

// The versioning rule: a v1 reader gets v1; v2 records are length-prefixed so a
// later version can append fields to them, which a v2 reader skips; within a version
// we know, a record must hold exactly its fields.
std::vector<uint8_t> withExtraHeaderField(std::vector<uint8_t> v2, uint16_t version) {  // any v2+
  v2[4] = static_cast<uint8_t>(version);
  v2[5] = static_cast<uint8_t>(version >> 8);
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= uint32_t{v2[6 + i]} << (8 * i);
  const size_t end = 10 + len;
  const uint8_t extra[4] = {0xde, 0xad, 0xbe, 0xef};
  v2.insert(v2.begin() + static_cast<long>(end), extra, extra + 4);
  len += 4;
  for (int i = 0; i < 4; ++i) v2[6 + i] = static_cast<uint8_t>(len >> (8 * i));
  return v2;
}

TEST(DescriptorVersions, EachVersionRoundTripsAndTheNextVersionIsReadByACurrentReader) {
  const SegmentDescriptor d = sample();
  auto v1 = encodeDescriptor(d, kDescriptorVersionV1);
  auto v2 = encodeDescriptor(d, kDescriptorVersionV2);
  auto v3 = encodeDescriptor(d);
  EXPECT_EQ(v1[4], 1);
  EXPECT_EQ(v2[4], 2);
  EXPECT_EQ(v3[4], 3);
  EXPECT_EQ(*parseDescriptor(v1), asOlderVersion(d));
  EXPECT_EQ(*parseDescriptor(v2), asOlderVersion(d));
  EXPECT_EQ(*parseDescriptor(v3), d);
  auto v4 = parseDescriptor(withExtraHeaderField(v3, 4));
  ASSERT_TRUE(v4.ok()) << v4.status().toString();
  EXPECT_EQ(*v4, d);  // the unknown field is skipped
  EXPECT_FALSE(parseDescriptor(withExtraHeaderField(v3, 3)).ok());  // v3 has no such field
  // A v2 body read as v3 misses v3's fields: refused, not guessed.
  EXPECT_FALSE(parseDescriptor(withExtraHeaderField(v2, 2)).ok());
}

TEST(DescriptorVersions, V3BufferFieldsAreChecked) {
  SegmentDescriptor d = sample();
  d.buffers[0].access = 4;  // no such access bit in v3
  EXPECT_FALSE(parseDescriptor(encodeDescriptor(d)).ok());
  d = sample();
  d.buffers[0].name = std::string(kMaxBufferNameBytes + 1, 'n');
  EXPECT_FALSE(parseDescriptor(encodeDescriptor(d)).ok());
  d = sample();
  d.max_bootstrap_version = 0;
  EXPECT_FALSE(parseDescriptor(encodeDescriptor(d)).ok());
}

}  // namespace
}  // namespace tent::metadata
