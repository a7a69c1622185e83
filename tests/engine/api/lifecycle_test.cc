// Endpoint lifecycle within one process, on manual lcores: engines talk to each
// other over the fabric (soft, or the fake verbs device in suite fake-verbs).
// Every resource returns to its baseline: endpoints and QPs after resets, evictions,
// lost and closed segments, forged bootstraps; caps hold; a peer that is gone fails
// requests at once and costs no QP.
#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "base/ebr.h"
#include "tests/support/engine_test_util.h"
#include "tests/support/process_resources.h"
#include "tests/support/raw_control.h"
#include "wire/bootstrap.h"
#include "wire/segment_descriptor.h"

namespace tent::testing {
namespace {

constexpr size_t kBuf = 1 << 20;

// An engine with one registered buffer.
struct Node {
  explicit Node(const std::string& yaml) : engine(makeEngine(yaml)) {
    if (!engine) return;
    mem = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
  }
  ResourceStats resources() const { return engine->stats().resources; }
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* mem = nullptr;
};

struct Lifecycle : ::testing::Test {
  // WRITE `len` bytes of a pattern from `from` to `to`'s buffer at `off`, READ them back
  // into another place, verify both. Returns the first non-COMPLETED state.
  TransferState roundTrip(Node& from, SegmentId seg, Node& to, size_t off, size_t len,
                          uint32_t seed) {
    fillPattern(from.mem, len, seed);
    TransferState w = one(from, OpCode::WRITE, from.mem, seg, to.mem + off, len);
    if (w != TransferState::COMPLETED) return w;
    if (checkPattern(to.mem + off, len, seed) != -1) return TransferState::INVALID;
    std::memset(from.mem + kBuf / 2, 0, len);
    TransferState r = one(from, OpCode::READ, from.mem + kBuf / 2, seg, to.mem + off, len);
    if (r != TransferState::COMPLETED) return r;
    return checkPattern(from.mem + kBuf / 2, len, seed) == -1 ? r : TransferState::INVALID;
  }
  TransferState one(Node& from, OpCode op, void* local, SegmentId seg, void* remote, size_t len) {
    auto b = *from.engine->allocateBatch(1);
    Request r{op, local, seg, reinterpret_cast<uint64_t>(remote), len};
    Status s = from.engine->submitTransfer(b, {&r, 1});
    TransferState st = s.ok() ? waitTask(*from.engine, b, 0).state : TransferState::INVALID;
    (void)from.engine->freeBatch(b);
    return st;
  }
  // Waits until `n` holds no retired endpoint (freed after their drain and grace).
  static bool settled(Node& n) {
    return eventually([&] {
      n.engine->transport().stepPollers();
      return n.resources().endpoints_retired == 0;
    });
  }
};

TEST_F(Lifecycle, DefaultSizingAcceptsABootstrap) {
  // Nothing but the fabric and manual lcores: every size at its default (derived CQs).
  Node a("eal: {mode: manual}\n" + fabricYaml());
  ASSERT_NE(a.engine, nullptr);
  EXPECT_EQ(roundTrip(a, LOCAL_SEGMENT_ID, a, kBuf / 4, 4096, 3), TransferState::COMPLETED);
}

TEST_F(Lifecycle, ResetGenerationsFreeTheirQpsAndNeverExhaustACq) {
  Node a(simYaml());
  ASSERT_NE(a.engine, nullptr);
  ASSERT_EQ(roundTrip(a, LOCAL_SEGMENT_ID, a, kBuf / 4, 4096, 1), TransferState::COMPLETED);
  ASSERT_TRUE(settled(a));
  const ResourceStats base = a.resources();
  for (int gen = 0; gen < 100; ++gen) {
    for (uint32_t c = 0; c < a.engine->transport().contextCount(); ++c) {
      ebr::ReadSection section;
      if (auto* ep = a.engine->transport().getEndpointForContextIndex(c, LOCAL_SEGMENT_ID, c))
        a.engine->transport().datapath().requestReset(ep);
    }
    ASSERT_EQ(roundTrip(a, LOCAL_SEGMENT_ID, a, kBuf / 4, 64 << 10, 100 + gen),
              TransferState::COMPLETED)
        << "generation " << gen;
  }
  ASSERT_TRUE(settled(a));
  const ResourceStats end = a.resources();
  EXPECT_EQ(end.endpoints_live, base.endpoints_live);
  EXPECT_EQ(end.qps_live, base.qps_live);
  EXPECT_EQ(end.qps_per_device, base.qps_per_device);
  EXPECT_GE(end.reconnects, base.reconnects + 100);
}

TEST_F(Lifecycle, IdleEndpointsAreEvictedToStayWithinTheCap) {
  Node a(simYaml("endpoints: {max_per_context: 1}\n"));
  Node b1(simYaml()), b2(simYaml());
  ASSERT_TRUE(a.engine && b1.engine && b2.engine);
  auto s1 = a.engine->openSegment(b1.engine->segmentName());
  auto s2 = a.engine->openSegment(b2.engine->segmentName());
  ASSERT_TRUE(s1.ok() && s2.ok());
  for (int i = 0; i < 6; ++i) {
    Node& to = i % 2 ? b2 : b1;
    ASSERT_EQ(roundTrip(a, i % 2 ? *s2 : *s1, to, 4096 * i, 4096, 10 + i), TransferState::COMPLETED)
        << "round " << i;
    // Active endpoints never exceed one per context.
    ASSERT_LE(a.resources().endpoints_live, a.engine->transport().contextCount());
  }
  EXPECT_GE(a.resources().evictions, 4u);
  // The peers' passive sides of evicted endpoints are released.
  EXPECT_TRUE(eventually([&] {
    return b1.resources().endpoints_live + b2.resources().endpoints_live <=
           a.engine->transport().contextCount();
  }));
}

TEST_F(Lifecycle, ClosingASegmentFreesBothSidesAndReopeningStartsAfresh) {
  Node a(simYaml()), b(simYaml());
  ASSERT_TRUE(a.engine && b.engine);
  const ResourceStats a0 = a.resources(), b0 = b.resources();
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok());
  ASSERT_EQ(roundTrip(a, *seg, b, 0, 256 << 10, 5), TransferState::COMPLETED);
  EXPECT_GT(a.resources().qps_live, a0.qps_live);
  EXPECT_GT(b.resources().qps_live, b0.qps_live);
  ASSERT_TRUE(a.engine->closeSegment(*seg).ok());
  ASSERT_TRUE(settled(a));
  EXPECT_TRUE(eventually([&] { return b.resources().qps_live == b0.qps_live; }));
  EXPECT_EQ(a.resources().qps_live, a0.qps_live);
  EXPECT_EQ(a.resources().endpoints_live, a0.endpoints_live);
  auto again = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, *seg);  // a new id: the old one never finds the new record
  Request stale{OpCode::WRITE, a.mem, *seg, reinterpret_cast<uint64_t>(b.mem), 64};
  auto batch = *a.engine->allocateBatch(1);
  EXPECT_EQ(a.engine->submitTransfer(batch, {&stale, 1}).code(), StatusCode::kNotFound);
  (void)a.engine->freeBatch(batch);
  EXPECT_EQ(roundTrip(a, *again, b, 4096, 4096, 6), TransferState::COMPLETED);
}

TEST_F(Lifecycle, APeerThatIsGoneFailsRequestsAtOnceAndCostsNoQp) {
  Node a(simYaml("endpoints: {reconnect_initial_ms: 200, reconnect_max_ms: 400}\n"));
  auto b = std::make_unique<Node>(simYaml());
  ASSERT_TRUE(a.engine && b->engine);
  const std::string name = b->engine->segmentName();
  auto seg = a.engine->openSegment(name);
  ASSERT_TRUE(seg.ok());
  ASSERT_EQ(roundTrip(a, *seg, *b, 0, 4096, 7), TransferState::COMPLETED);
  b.reset();  // the peer goes away: its listener and its QPs with it
  // Once the lost session is noticed, submits fail at once, naming the reconnect.
  Status s;
  ASSERT_TRUE(eventually([&] {
    Request r{OpCode::WRITE, a.mem, *seg, 0, 64};
    auto batch = *a.engine->allocateBatch(1);
    s = a.engine->submitTransfer(batch, {&r, 1});
    if (s.ok()) (void)waitTask(*a.engine, batch, 0);
    (void)a.engine->freeBatch(batch);
    return s.code() == StatusCode::kUnavailable;
  }));
  EXPECT_NE(s.message().find("unreachable"), std::string::npos) << s.toString();
  ASSERT_TRUE(settled(a));
  const uint64_t qps = a.resources().qps_live;
  for (int i = 0; i < 50; ++i) {
    Request r{OpCode::READ, a.mem, *seg, 0, 64};
    auto batch = *a.engine->allocateBatch(1);
    EXPECT_EQ(a.engine->submitTransfer(batch, {&r, 1}).code(), StatusCode::kUnavailable);
    (void)a.engine->freeBatch(batch);
    a.engine->transport().stepPollers();
  }
  EXPECT_EQ(a.resources().qps_live, qps);
  // A new instance on the same address: the next open reconnects without waiting
  // out the backoff, and transfers work again.
  std::string yaml = simYaml();
  const std::string any = "listen: \"127.0.0.1:0\"";
  yaml.replace(yaml.find(any), any.size(), "listen: \"" + name + "\"");
  Node b2(yaml);
  ASSERT_NE(b2.engine, nullptr);
  ASSERT_EQ(b2.engine->segmentName(), name);
  auto again = a.engine->openSegment(name);
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ(*again, *seg);
  EXPECT_EQ(roundTrip(a, *again, b2, 8192, 4096, 8), TransferState::COMPLETED);
}

// 1,000 forged or garbage bootstraps: garbage frames, malformed bootstraps, and
// well-formed ones with made-up or borrowed identities, one-shot and in sessions.
// The target keeps serving a real initiator, and afterwards holds exactly what it
// held before (one-shot endpoints of initiators that do not answer as themselves are
// freed by the probe; session ones with their session).
TEST_F(Lifecycle, ForgedAndGarbageBootstrapsLeaveTheTargetAsItWas) {
  Node a(simYaml()), b(simYaml("", ", keepalive_ms: 50"));
  ASSERT_TRUE(a.engine && b.engine);
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok());
  ASSERT_EQ(roundTrip(a, *seg, b, 0, 4096, 20), TransferState::COMPLETED);
  ASSERT_TRUE(settled(b));
  const ResourceStats base = b.resources();
  const uint64_t connections = b.engine->stats().control.connections_open;
  const size_t fds = countEntries("/proc/self/fd"), maps = countDataMappings();
  auto desc = test::oneShot(b.engine->segmentName(), metadata::FrameType::kGetDescriptor, {});
  ASSERT_TRUE(desc.ok());
  auto d = metadata::parseDescriptor(desc->payload);
  ASSERT_TRUE(d.ok());
  auto a_desc = metadata::parseDescriptor(
      test::oneShot(a.engine->segmentName(), metadata::FrameType::kGetDescriptor, {})->payload);
  ASSERT_TRUE(a_desc.ok());
  std::mt19937_64 rng(7);
  auto forged = [&](int i) {
    metadata::BootstrapMessage m;
    m.initiator_segment =
        i % 3 == 0 ? a.engine->segmentName() : "127.0.0.1:" + std::to_string(1 + i);
    m.initiator_instance = rng();
    m.local_device = "soft" + std::to_string(i % 2);
    m.peer_device = d->devices[i % d->devices.size()].name;
    if (i % 3 == 0) {
      m.port = a_desc->devices[0].port;  // a live initiator's identity, borrowed
    } else {
      for (auto& g : m.port.gid) g = static_cast<uint8_t>(rng());
    }
    m.generation = rng();
    m.data_qp_nums = {static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng())};
    m.direct_qp_num = static_cast<uint32_t>(rng());
    return metadata::encodeBootstrap(m);
  };
  for (int i = 0; i < 1000; ++i) {
    const std::string& to = b.engine->segmentName();
    switch (i % 4) {
      case 0: {  // garbage bytes
        test::RawControl c;
        ASSERT_TRUE(c.connect(to));
        std::vector<uint8_t> junk(1 + rng() % 64);
        for (auto& x : junk) x = static_cast<uint8_t>(rng());
        c.sendBytes(junk.data(), junk.size());
        break;
      }
      case 1: {  // a malformed bootstrap
        std::vector<uint8_t> bad = forged(i);
        bad.resize(rng() % bad.size());
        (void)test::oneShot(to, metadata::FrameType::kBootstrap, bad);
        break;
      }
      case 2:  // a well-formed one-shot bootstrap
        (void)test::oneShot(to, metadata::FrameType::kBootstrap, forged(i));
        break;
      case 3: {  // well-formed, in a session of its own
        test::RawControl c;
        ASSERT_TRUE(c.connect(to));
        ASSERT_TRUE(c.handshake(control::Secret()).ok());
        (void)c.request(metadata::FrameType::kBootstrap, forged(i));
        break;
      }
    }
    if (i % 100 == 0) {  // the real initiator is served throughout
      ASSERT_EQ(roundTrip(a, *seg, b, 8192, 4096, 30 + i), TransferState::COMPLETED) << i;
    }
  }
  EXPECT_EQ(roundTrip(a, *seg, b, 8192, 64 << 10, 99), TransferState::COMPLETED);
  EXPECT_TRUE(eventually([&] {
    const ResourceStats now = b.resources();
    return now.endpoints_live == base.endpoints_live && now.qps_live == base.qps_live &&
           b.engine->stats().control.connections_open == connections;
  })) << "live "
      << b.resources().endpoints_live << " vs " << base.endpoints_live << ", QPs "
      << b.resources().qps_live << " vs " << base.qps_live;
  // The control loop closes a session's socket after it stops counting it: the fds come
  // back with a bound, not at the instant the count does (ASan widened that window).
  EXPECT_TRUE(eventually([&] { return countEntries("/proc/self/fd") == fds; }))
      << countEntries("/proc/self/fd") << " fds vs " << fds;
  EXPECT_EQ(countDataMappings(), maps);
  EXPECT_GT(b.engine->stats().control.frames_rejected, 0u);
}

}  // namespace
}  // namespace tent::testing
