// Suite etcd: etcd's own security passed through (issue 25). etcd serves https with a
// certificate signed by a CA made here (openssl, in the cluster's temp directory) and
// has auth enabled (a root user, and a user whose role may read and write only the
// engines' prefix). Engines reach it through metadata.etcd.tls.ca_file, user and
// password_file, find each other and transfer (bytes verified); a wrong password and a
// wrong CA fail with a message naming the key to fix. Skips where etcd or openssl is
// not installed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "fleet/etcd_json.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/etcd_nodes.h"

namespace tent::testing {
namespace {

constexpr char kUser[] = "tent-user";

std::string writeSecretFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

// Users, roles and `auth enable` through the gateway; false (with the step) on failure.
bool enableAuth(const std::string& member, const std::string& ca, const std::string& password,
                std::string* failed) {
  const std::string key = fleet::base64Encode("/t/"), end = fleet::base64Encode("/t0");
  // The built-in root role may already exist: its "add" is allowed to fail.
  etcdPost(member, "/v3/auth/role/add", R"({"name":"root"})", ca);
  const std::pair<const char*, std::string> steps[] = {
      {"/v3/auth/user/add", R"({"name":"root","password":"root-pw"})"},
      {"/v3/auth/user/grant", R"({"user":"root","role":"root"})"},
      {"/v3/auth/role/add", R"({"name":"tent"})"},
      {"/v3/auth/role/grant", R"({"name":"tent","perm":{"permType":"READWRITE","key":")" + key +
                                  R"(","range_end":")" + end + R"("}})"},
      {"/v3/auth/user/add",
       std::string(R"({"name":")") + kUser + R"(","password":")" + password + R"("})"},
      {"/v3/auth/user/grant", std::string(R"({"user":")") + kUser + R"(","role":"tent"})"},
      {"/v3/auth/enable", "{}"}};
  for (const auto& [path, body] : steps) {
    std::string answer;
    if (etcdPost(member, path, body, ca, "", &answer) != 200) {
      *failed = std::string(path) + " " + body + " -> " + answer;
      return false;
    }
  }
  return true;
}

struct EtcdSecure : ::testing::Test {
  void SetUp() override {
    if (etcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
    if (!EtcdTls::opensslInstalled()) GTEST_SKIP() << "openssl is not installed";
    cluster = std::make_unique<EtcdCluster>(1);
    ASSERT_TRUE(tls.make(cluster->root())) << "openssl could not make the test CA";
    cluster->useTls(tls);
    ASSERT_TRUE(cluster->start()) << "etcd did not start with https";
    std::string failed;
    ASSERT_TRUE(enableAuth(cluster->endpoints()[0], tls.ca, "s3cret-pw", &failed)) << failed;
    // Auth is really on: an unauthenticated read of the prefix is refused.
    std::string answer;
    EXPECT_NE(etcdPost(cluster->endpoints()[0], "/v3/kv/range",
                       R"({"key":")" + fleet::base64Encode("/t/") + R"("})", tls.ca, "", &answer),
              200)
        << answer;
    password = writeSecretFile(cluster->root() + "/password", "s3cret-pw");
  }
  // metadata.etcd keys: the CA to check etcd against, the user and its password file.
  std::string secure(const std::string& ca, const std::string& password_file) const {
    return ", tls: {ca_file: \"" + ca + "\"}, user: \"" + kUser + "\", password_file: \"" +
           password_file + "\"";
  }
  // An engine that cannot reach etcd: the status a lookup gets once it has tried.
  Status lookupStatus(const std::string& etcd_keys) {
    auto e = makeEngine(etcdYaml(*cluster, "node-x", "", etcd_keys));
    if (!e) return Status::Internal("engine not created");
    EXPECT_TRUE(eventually([&] { return e->stats().fleet.store_errors > 0; }))
        << "no registration attempt failed";
    EXPECT_FALSE(e->stats().fleet.store_up);
    return e->openSegment("node-a").status();
  }
  std::unique_ptr<EtcdCluster> cluster;
  EtcdTls tls;
  std::string password;
};

TEST_F(EtcdSecure, EnginesConnectOverTlsWithAUserAndTransfer) {
  Node a = startNode(*cluster, "node-a", 11, "", secure(tls.ca, password));
  Node b = startNode(*cluster, "node-b", 12, "", secure(tls.ca, password));
  ASSERT_TRUE(a.engine && b.engine);
  auto id = a.engine->openSegment("node-b");
  ASSERT_TRUE(id.ok()) << id.status().toString();
  EXPECT_TRUE(readFrom(a, *id, 12));
  // And back (a's buffer now holds what it read: give it a pattern of its own again).
  fillPattern(a.buf, kBuf, 13);
  auto back = b.engine->openSegment("node-a");
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_TRUE(readFrom(b, *back, 13));
  EXPECT_EQ(a.engine->stats().fleet.entries_refused, 0u);
}

TEST_F(EtcdSecure, WrongPasswordNamesTheKeys) {
  Node a = startNode(*cluster, "node-a", 1, "", secure(tls.ca, password));
  ASSERT_TRUE(a.engine);
  const std::string wrong = writeSecretFile(cluster->root() + "/wrong", "not-the-password");
  const Status s = lookupStatus(secure(tls.ca, wrong));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.toString();
  EXPECT_NE(s.message().find("metadata.etcd.password_file"), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find(kUser), std::string::npos) << s.toString();
}

TEST_F(EtcdSecure, WrongCaNamesTheKey) {
  Node a = startNode(*cluster, "node-a", 1, "", secure(tls.ca, password));
  ASSERT_TRUE(a.engine);
  const Status s = lookupStatus(secure(tls.other_ca, password));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.toString();
  EXPECT_NE(s.message().find("metadata.etcd.tls.ca_file"), std::string::npos) << s.toString();
  EXPECT_EQ(s.message().find("password_file"), std::string::npos) << s.toString();
}

}  // namespace
}  // namespace tent::testing
