// The fleet floor's pure parts: etcd gateway JSON, base64, entries and blobs (signed,
// forged, copied to another name). No etcd needed (suite unit).
#include <gtest/gtest.h>

#include "fleet/entry.h"
#include "fleet/etcd_json.h"

namespace tent::fleet {
namespace {

control::Secret secretA() {
  return control::Secret::fromBytes(std::string(32, 'a'));
}
control::Secret secretB() {
  return control::Secret::fromBytes(std::string(32, 'b'));
}

Entry sampleEntry() {
  Entry e;
  e.name = "node-a";
  e.instance = 0x1234567890abcdefull;
  e.address = "127.0.0.1:4000";
  e.descriptor = {1, 2, 3, 0, 255};
  return e;
}

TEST(FleetJson, Base64RoundTripsEveryLength) {
  std::string bytes;
  for (int n = 0; n < 70; ++n) {
    auto back = base64Decode(base64Encode(bytes));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, bytes);
    bytes.push_back(static_cast<char>(n * 37));
  }
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_FALSE(base64Decode("Zm9v!").ok());
  EXPECT_FALSE(base64Decode("Z").ok());
}

TEST(FleetJson, PrefixEndIsTheNextKey) {
  EXPECT_EQ(prefixEnd("/tent/"), "/tent0");
  EXPECT_EQ(prefixEnd(std::string("a\xff", 2)), "b");
}

TEST(FleetJson, RangeAnswers) {
  int64_t rev = 0;
  auto none = parseRange(R"({"header":{"revision":"7"}})", &rev);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(rev, 7);
  auto one = parseRange(
      R"({"header":{"revision":"9"},"kvs":[{"key":"Zm9v","value":"YmFy","mod_revision":"8","lease":"42"}],"count":"1"})");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].key, "foo");
  EXPECT_EQ((*one)[0].value, "bar");
  EXPECT_EQ((*one)[0].lease, 42);
  EXPECT_FALSE(parseRange("not json").ok());
  EXPECT_FALSE(parseRange(R"({"kvs":"x"})").ok());
  EXPECT_FALSE(parseRange(R"({"kvs":[{"key":7}]})").ok());
  EXPECT_FALSE(parseRange(R"({"kvs":[{"mod_revision":"99999999999999999999999"}]})").ok());
}

TEST(FleetJson, LeaseAndErrors) {
  EXPECT_EQ(*parseLeaseGrant(R"({"ID":"7587","TTL":"10"})"), 7587);
  EXPECT_FALSE(parseLeaseGrant(R"({"TTL":"10"})").ok());
  EXPECT_EQ(*parseKeepAlive(R"({"result":{"ID":"1","TTL":"9"}})"), 9);
  EXPECT_EQ(*parseKeepAlive(R"({"result":{"ID":"1"}})"), 0);  // etcd no longer knows it
  EXPECT_EQ(parseError(R"({"error":"etcdserver: user name is empty","code":3})").code(),
            StatusCode::kInternal);
  EXPECT_EQ(parseError(R"({"error":"x","code":16})").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(parseError(R"({"result":{}})").ok());
}

TEST(FleetJson, WatchStreamSplitsIntoMessages) {
  std::string buffer =
      R"({"result":{"header":{"revision":"3"},"created":true}})"
      "\n"
      R"({"result":{"header":{"revision":"4"},"events":[{"kv":{"key":"YQ==","value":"Yg=="}},{"type":"DELETE","kv":{"key":"Yw=="}}]}})"
      "\n"
      R"({"result":)";
  auto lines = takeLines(&buffer);
  ASSERT_TRUE(lines.ok());
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ(buffer, R"({"result":)");
  auto created = parseWatchMessage((*lines)[0]);
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(created->created);
  auto m = parseWatchMessage((*lines)[1]);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->revision, 4);
  ASSERT_EQ(m->events.size(), 2u);
  EXPECT_FALSE(m->events[0].deleted);
  EXPECT_EQ(m->events[0].kv.value, "b");
  EXPECT_TRUE(m->events[1].deleted);
  std::string huge(100, 'x');
  EXPECT_FALSE(takeLines(&huge, 10).ok());
}

TEST(FleetEntry, RoundTripsUnsignedAndSigned) {
  const Entry e = sampleEntry();
  auto plain = decodeEntry("node-a", encodeEntry(e, control::Secret()), control::Secret());
  ASSERT_TRUE(plain.ok()) << plain.status().toString();
  EXPECT_EQ(plain->instance, e.instance);
  EXPECT_EQ(plain->address, e.address);
  EXPECT_EQ(plain->descriptor, e.descriptor);
  EXPECT_FALSE(plain->is_signed);
  auto signed_ = decodeEntry("node-a", encodeEntry(e, secretA()), secretA());
  ASSERT_TRUE(signed_.ok()) << signed_.status().toString();
  EXPECT_TRUE(signed_->is_signed);
}

TEST(FleetEntry, ForgedOrMovedEntriesAreRefused) {
  const Entry e = sampleEntry();
  // Written without the secret, or with another cluster's.
  EXPECT_EQ(decodeEntry("node-a", encodeEntry(e, control::Secret()), secretA()).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(decodeEntry("node-a", encodeEntry(e, secretB()), secretA()).status().code(),
            StatusCode::kPermissionDenied);
  // A genuine entry copied under another name.
  EXPECT_EQ(decodeEntry("node-b", encodeEntry(e, secretA()), secretA()).status().code(),
            StatusCode::kPermissionDenied);
  // One byte changed (the address).
  std::string bytes = encodeEntry(e, secretA());
  bytes[8 + 8 + 2] ^= 1;
  EXPECT_EQ(decodeEntry("node-a", bytes, secretA()).status().code(), StatusCode::kPermissionDenied);
  // Malformed: every truncation is refused, never read past the end.
  const std::string whole = encodeEntry(e, secretA());
  for (size_t n = 0; n < whole.size(); ++n)
    EXPECT_FALSE(decodeEntry("node-a", whole.substr(0, n), secretA()).ok()) << n;
}

TEST(FleetEntry, BlobCarriesItsName) {
  const Entry e = sampleEntry();
  auto back = decodeBlob(encodeBlob(e, secretA()), secretA());
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->name, "node-a");
  EXPECT_EQ(back->descriptor, e.descriptor);
  EXPECT_EQ(decodeBlob(encodeBlob(e, secretB()), secretA()).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_FALSE(decodeBlob("", secretA()).ok());
}

}  // namespace
}  // namespace tent::fleet
