// Engines registered in a test etcd (tests/support/etcd_cluster.h) for the `etcd`
// suite's files: their config, a node with one patterned buffer, a verified READ.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "tests/support/engine_test_util.h"
#include "tests/support/etcd_cluster.h"

namespace tent::testing {

inline constexpr size_t kBuf = 1 << 20;

// `etcd_extra`: more keys of metadata.etcd (", tls: {...}, user: ...").
inline std::string etcdYaml(const EtcdCluster& c, const std::string& name,
                            const std::string& auth = "", const std::string& etcd_extra = "") {
  return simYaml(R"(metadata:
  backend: etcd
  name: ")" + name + R"("
  etcd: {endpoints: )" +
                     c.endpointsYaml() +
                     R"(, prefix: "/t/", lease_ttl_s: 2, request_timeout_ms: 1000,
         retry_initial_ms: 50, retry_max_ms: 400)" +
                     etcd_extra + R"(}
)",
                 auth);
}

struct Node {
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* buf = nullptr;
  uint64_t registrations() const { return engine->stats().fleet.registrations; }
};

// An engine registered in etcd with one buffer filled with `seed`'s pattern, its
// entry holding that buffer.
inline Node startNode(const EtcdCluster& c, const std::string& name, uint32_t seed,
                      const std::string& auth = "", const std::string& etcd_extra = "") {
  Node n;
  n.engine = makeEngine(etcdYaml(c, name, auth, etcd_extra));
  if (!n.engine) return n;
  EXPECT_TRUE(eventually([&] { return n.engine->stats().fleet.store_up; }))
      << name << " never registered";
  const uint64_t before = n.registrations();
  auto m = n.engine->allocateLocalMemory(kBuf, "cpu:0");
  EXPECT_TRUE(m.ok());
  n.buf = static_cast<uint8_t*>(*m);
  fillPattern(n.buf, kBuf, seed);
  EXPECT_TRUE(eventually([&] { return n.registrations() > before; }))
      << name << ": the entry with the buffer was never put";
  return n;
}

// READs the peer's buffer (found through the cached descriptor) into ours; true when
// it completed with the pattern of `seed`.
inline bool readFrom(Node& self, SegmentId peer, uint32_t seed) {
  auto bufs = self.engine->segmentBuffers(peer);
  if (!bufs.ok() || bufs->empty()) return false;
  std::memset(self.buf, 0, kBuf);
  Request r;
  r.opcode = OpCode::READ;
  r.source = self.buf;
  r.target_id = peer;
  r.target_offset = (*bufs)[0].addr;
  r.length = kBuf;
  auto b = self.engine->allocateBatch(1);
  if (!b.ok()) return false;
  const bool submitted = self.engine->submitTransfer(*b, {&r, 1}).ok();
  const TransferStatus st =
      submitted ? waitTask(*self.engine, *b, 0) : TransferStatus{TransferState::FAILED, 0};
  (void)self.engine->freeBatch(*b);
  const long bad = checkPattern(self.buf, kBuf, seed);
  if (st.state != TransferState::COMPLETED || bad != -1)
    std::printf("readFrom segment %lu: %s, first wrong byte %ld\n",
                static_cast<unsigned long>(peer), std::string(toString(st.state)).c_str(), bad);
  return st.state == TransferState::COMPLETED && bad == -1;
}

struct Etcd : ::testing::Test {
  void SetUp() override {
    if (etcdBinary().empty()) GTEST_SKIP() << "etcd is not installed (apt-get install etcd-server)";
  }
  std::unique_ptr<EtcdCluster> cluster(int members) {
    auto c = std::make_unique<EtcdCluster>(members);
    EXPECT_TRUE(c->start()) << "etcd did not start";
    return c;
  }
};

}  // namespace tent::testing
