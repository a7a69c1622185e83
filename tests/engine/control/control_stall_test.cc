// Liveness from the data path (soft provider, across processes): a peer whose
// control thread stalls but whose data path answers keeps its ready endpoints -
// transfers go on with verified bytes, no endpoint is retired - and only a stall
// beyond bootstrap.peer_timeout_ms declares it down. The other direction too: while
// our own control thread stalls, the peer keeps the passive halves of our endpoints.
// The stalled control loop is engine_peer's "stall" hook (or ours, in process).
#include <gtest/gtest.h>

#include <future>

#include "control/control_plane.h"
#include "tests/support/engine_test_util.h"
#include "tests/support/peer_process.h"

namespace tent::testing {
namespace {

const std::string kPeerFabric = R"(
fabric:
  provider: soft
  soft:
    devices: [{name: soft0, numa_node: 0}]
    retry_budget_ms: 50
)";

// Short probes, so a stall is noticed soon: slow after io_timeout_ms.
const std::string kLiveness = ", keepalive_ms: 100, io_timeout_ms: 300";

// One local and one peer device: one endpoint, made before the stall (a new one
// would need the stalled control loop to bootstrap it).
std::string initiatorYaml(const std::string& peer_timeout_ms) {
  return R"(
eal: {mode: manual}
fabric:
  provider: soft
  soft:
    devices: [{name: soft0, numa_node: 0}]
    retry_budget_ms: 50
lcores:
  - pollers: ["rail:*"]
  - pollers: [background]
workers: {slice_timeout_ms: 5000, block_size: 65536}
bootstrap: {listen: "127.0.0.1:0", connect_timeout_ms: 1000)" +
         kLiveness + ", peer_timeout_ms: " + peer_timeout_ms + "}\n";
}

bool roundTrip(TransferEngineImpl& e, SegmentId seg, uint8_t* local, uint64_t remote, size_t len,
               uint32_t seed) {
  fillPattern(local, len, seed);
  auto b = e.allocateBatch(2);
  if (!b.ok()) return false;
  Request w{OpCode::WRITE, local, seg, remote, len};
  Request r{OpCode::READ, local + len, seg, remote, len};
  bool ok = e.submitTransfer(*b, {&w, 1}).ok() &&
            waitTask(e, *b, 0, 10).state == TransferState::COMPLETED;
  std::memset(local + len, 0, len);
  ok = ok && e.submitTransfer(*b, {&r, 1}).ok() &&
       waitTask(e, *b, 1, 10).state == TransferState::COMPLETED &&
       checkPattern(local + len, len, seed) == -1;
  (void)e.freeBatch(*b);
  return ok;
}

uint64_t slowSessions(TransferEngineImpl& e) {
  return e.transport().control().counters().sessions_slow.load();
}

struct PeerAndInitiator {
  explicit PeerAndInitiator(const std::string& peer_timeout_ms) {
    std::string err;
    started = peer.start(peerExe(), 1 << 20, 1, "127.0.0.1:0", kPeerFabric, &err,
                         kLiveness + ", peer_timeout_ms: " + peer_timeout_ms);
    EXPECT_TRUE(started) << err;
    engine = makeEngine(initiatorYaml(peer_timeout_ms));
    if (!started || !engine) return;
    local = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLen * 2, "*"));
    auto s = engine->openSegment(peer.segment);
    EXPECT_TRUE(s.ok()) << s.status().toString();
    if (s.ok()) seg = *s;
  }
  bool ready() const { return started && engine && seg != 0; }
  bool roundTrip(uint32_t seed) {
    return testing::roundTrip(*engine, seg, local, peer.addr, kLen, seed);
  }
  static constexpr size_t kLen = 16 << 10;
  PeerProcess peer;
  bool started = false;
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* local = nullptr;
  SegmentId seg = 0;
};

TEST(ControlStall, ASlowPeerKeepsItsEndpointsWhileItsDataPathAnswers) {
  PeerAndInitiator s("600000");
  ASSERT_TRUE(s.ready());
  ASSERT_TRUE(s.roundTrip(1));
  const ResourceStats before = s.engine->stats().resources;
  ASSERT_EQ(before.endpoints_live, 1u);
  const uint64_t slow0 = slowSessions(*s.engine);
  ASSERT_EQ(s.peer.command("stall"), "STALLED");
  // Transfers go on while the stall is noticed (a keepalive misses io_timeout_ms),
  // and for as many again after it.
  int done = 0, failed = 0;
  uint32_t seed = 100;
  while (slowSessions(*s.engine) == slow0 && done + failed < 100'000)
    s.roundTrip(seed++) ? ++done : ++failed;
  ASSERT_GT(slowSessions(*s.engine), slow0) << "the stall was never noticed";
  for (int i = 0; i < 50; ++i) s.roundTrip(seed++) ? ++done : ++failed;
  ASSERT_EQ(s.peer.command("resume"), "RESUMED");
  EXPECT_EQ(failed, 0) << done << " round trips completed during the stall";
  const ResourceStats after = s.engine->stats().resources;
  EXPECT_EQ(after.reconnects, before.reconnects);  // the endpoint was never replaced
  EXPECT_EQ(after.endpoints_retired, 0u);
  EXPECT_EQ(after.endpoints_live, 1u);
  EXPECT_TRUE(s.roundTrip(seed++));
  std::printf("control stall: %d verified round trips while the peer's control loop stalled\n",
              done);
}

TEST(ControlStall, AStallBeyondThePeerTimeoutRetiresItsEndpoints) {
  PeerAndInitiator s("1000");
  ASSERT_TRUE(s.ready());
  ASSERT_TRUE(s.roundTrip(1));
  const ResourceStats before = s.engine->stats().resources;
  const uint64_t slow0 = slowSessions(*s.engine);
  ASSERT_EQ(s.peer.command("stall"), "STALLED");
  // Slow first, then down: requests fail at once with Unavailable.
  Status refused;
  ASSERT_TRUE(eventually([&] {
    auto b = s.engine->allocateBatch(1);
    Request w{OpCode::WRITE, s.local, s.seg, s.peer.addr, 4096};
    refused = s.engine->submitTransfer(*b, {&w, 1});
    if (refused.ok()) (void)waitTask(*s.engine, *b, 0, 10);
    (void)s.engine->freeBatch(*b);
    return refused.code() == StatusCode::kUnavailable;
  })) << refused.toString();
  EXPECT_GT(slowSessions(*s.engine), slow0);
  EXPECT_TRUE(eventually([&] { return s.engine->stats().resources.endpoints_live == 0; }));
  ASSERT_EQ(s.peer.command("resume"), "RESUMED");
  // Back: a new session and a new endpoint.
  uint32_t seed = 200;
  EXPECT_TRUE(eventually([&] { return s.roundTrip(seed++); }));
  EXPECT_GT(s.engine->stats().resources.reconnects, before.reconnects);
}

// The other direction: our control thread stalls (our lcores - here the stepping
// test thread - run on). The peer must not take our silence for a dead initiator
// and free the passive halves of our endpoints before peer_timeout_ms.
TEST(ControlStall, OurStalledControlThreadKeepsThePeersPassiveEndpoints) {
  PeerAndInitiator s("600000");
  ASSERT_TRUE(s.ready());
  ASSERT_TRUE(s.roundTrip(1));
  const ResourceStats before = s.engine->stats().resources;
  std::promise<void> resume;
  std::promise<void> held;
  s.engine->transport().control().stallForTest(resume.get_future().share(),
                                               [&] { held.set_value(); });
  held.get_future().wait();
  // Long enough for the peer's former rule (closed after 4 x keepalive_ms +
  // io_timeout_ms of silence: 0.7 s here) to have struck three times over.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2100);
  int done = 0, failed = 0;
  uint32_t seed = 300;
  while (std::chrono::steady_clock::now() < until) s.roundTrip(seed++) ? ++done : ++failed;
  resume.set_value();
  EXPECT_EQ(failed, 0) << done << " round trips completed during our stall";
  EXPECT_GT(done, 0);
  EXPECT_TRUE(s.roundTrip(seed++));
  const ResourceStats after = s.engine->stats().resources;
  EXPECT_EQ(after.reconnects, before.reconnects);
  EXPECT_EQ(after.endpoints_retired, 0u);
}

}  // namespace
}  // namespace tent::testing
