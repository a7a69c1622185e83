// Life in a fleet, across processes on real lcores (soft fabric):
//  - a target killed (SIGKILL) and restarted on the same port N times while this
//    initiator keeps submitting: afterwards transfers complete with verified bytes and
//    the initiator holds no more endpoints and QPs than the documented bound;
//  - initiator processes run one after another against one target (some SIGKILL
//    themselves after their transfer): the target's QPs, endpoints, connections, file
//    descriptors and mappings return to where they started.
// Counts come from the command line: engine_churn [restarts] [initiators] (defaults 10
// and 1000; the stress suite runs 100 restarts). TENT_CHURN_INITIATORS overrides the
// initiator count: scripts/sanitize.sh runs 100 (an instrumented process start costs
// about a second; a leak shows after the first few just as after the thousandth).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <fstream>
#include <thread>
#include <vector>

#include "tests/support/engine_test_util.h"
#include "tests/support/peer_process.h"
#include "tests/support/process_resources.h"

namespace tent::testing {

int g_restarts = 10;
int g_initiators = 1000;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

const std::string kFabric = R"(
fabric:
  provider: soft
  soft:
    devices:
      - {name: soft0, numa_node: 0}
      - {name: soft1, numa_node: 0}
    retry_budget_ms: 50
endpoints: {reconnect_initial_ms: 20, reconnect_max_ms: 500}
)";

// One WRITE then READ of `len` bytes at `off` of the peer's buffer, verified.
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

TEST(Churn, TargetKilledAndRestartedWhileTheInitiatorKeepsSubmitting) {
  auto engine = makeEngine("bootstrap: {listen: \"127.0.0.1:0\", connect_timeout_ms: 1000}\n" +
                           kFabric + "workers: {slice_timeout_ms: 60000}\n");
  ASSERT_NE(engine, nullptr);
  constexpr size_t kLen = 64 << 10;
  auto* local = static_cast<uint8_t*>(*engine->allocateLocalMemory(8 * kLen, "*"));
  PeerProcess peer;
  std::string err;
  ASSERT_TRUE(peer.start(peerExe(), 1 << 20, 1, "127.0.0.1:0", kFabric, &err)) << err;
  const std::string name = peer.segment;
  auto seg = engine->openSegment(name);
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  std::atomic<uint64_t> remote{peer.addr};
  ASSERT_TRUE(roundTrip(*engine, *seg, local, remote, kLen, 1));
  // A submitter that never stops: each request completes, fails, or is refused at
  // once while the peer is away - it never hangs.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0}, failed{0};
  std::thread submitter([&] {
    uint32_t seed = 1000;
    while (!stop.load()) {
      if (roundTrip(*engine, *seg, local + 2 * kLen, remote.load() + kLen, kLen, seed++))
        ++done;
      else
        ++failed;
    }
  });
  double worst_restart = 0;
  for (int round = 0; round < g_restarts; ++round) {
    peer.kill();
    ASSERT_TRUE(peer.start(peerExe(), 1 << 20, 2 + round, name, kFabric, &err)) << err;
    const auto restarted = std::chrono::steady_clock::now();
    remote = peer.addr;
    auto again = engine->openSegment(name);
    ASSERT_TRUE(again.ok()) << again.status().toString();
    ASSERT_EQ(*again, *seg);
    ASSERT_TRUE(eventually([&] { return roundTrip(*engine, *seg, local, remote, kLen, round); }))
        << "round " << round;
    worst_restart = std::max(worst_restart, secondsSince(restarted));
  }
  stop = true;
  submitter.join();
  EXPECT_GT(done.load(), 0u);
  ASSERT_TRUE(roundTrip(*engine, *seg, local, remote, kLen, 77));
  std::printf(
      "churn: %d restarts, submitter %lu ok / %lu failed, restart -> first verified "
      "transfer at most %.3f s\n",
      g_restarts, static_cast<unsigned long>(done.load()),
      static_cast<unsigned long>(failed.load()), worst_restart);
  // Within the bound of docs/engine.md: one segment, so at most contexts x peer devices
  // active endpoints (plus their loopback passive sides: none here), and per endpoint
  // qps_per_endpoint + 1 rail + 1 direct QPs (+ 1 notify QP). Retired ones are all freed.
  const size_t contexts = engine->transport().contextCount();
  const uint64_t per_endpoint = engine->config().workers.qps_per_endpoint + 2 +
                                (engine->config().notify.enabled ? 1 : 0);  // its notify QP
  ASSERT_TRUE(eventually([&] { return engine->stats().resources.endpoints_retired == 0; }));
  const ResourceStats r = engine->stats().resources;
  EXPECT_LE(r.endpoints_live, contexts * 2);
  EXPECT_LE(r.qps_live, r.endpoints_live * per_endpoint);
  EXPECT_GE(r.reconnects, static_cast<uint64_t>(g_restarts));
}

TEST(Churn, InitiatorsOneAfterAnotherLeaveTheTargetAsItStarted) {
  // Without notify QPs: a soft device keeps the shared receive area of every QP slot that
  // ever had a receive queue until the device closes (a NIC's QP context memory, reused by
  // the slot's next QP), so with them the file mappings counted below would not come back
  // to the baseline; they are bounded by the slots used at once, not by the initiators.
  // engine_notify churns endpoints with notify QPs and checks their counts.
  auto target = makeEngine(simYaml("notify: {enabled: false}\n", ", keepalive_ms: 100"));
  ASSERT_NE(target, nullptr);
  constexpr size_t kBuf = 4 << 20;
  auto* mem = static_cast<uint8_t*>(*target->allocateLocalMemory(kBuf, "*"));
  const ResourceStats base = target->stats().resources;
  const uint64_t connections = target->stats().control.connections_open;
  const size_t fds = countEntries("/proc/self/fd"), maps = countDataMappings();
  const char* exe = std::getenv("TENT_ENGINE_INITIATOR");
  ASSERT_NE(exe, nullptr);
  const std::string addr = std::to_string(reinterpret_cast<uintptr_t>(mem));
  int bad = 0;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < g_initiators; ++i) {
    const std::string off = std::to_string((i % 32) * (64 << 10)), seed = std::to_string(i);
    const bool crash = i % 10 == 9;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl(exe, exe, target->segmentName().c_str(), addr.c_str(), off.c_str(), seed.c_str(),
            crash ? "crash" : "clean", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    const bool ok = crash ? (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                          : (WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!ok) ++bad;
    if (i % 100 == 99)
      std::printf("initiators: %d done, %.1f s, target QPs %lu\n", i + 1, secondsSince(started),
                  static_cast<unsigned long>(target->stats().resources.qps_live));
  }
  EXPECT_EQ(bad, 0);
  // Every initiator's passive endpoints go with its session (crashed ones too).
  EXPECT_TRUE(eventually([&] {
    const EngineStats s = target->stats();
    return s.resources.qps_live == base.qps_live &&
           s.resources.endpoints_live == base.endpoints_live &&
           s.control.connections_open == connections;
  })) << "QPs "
      << target->stats().resources.qps_live << " vs " << base.qps_live;
  EXPECT_EQ(countEntries("/proc/self/fd"), fds);
  EXPECT_EQ(countDataMappings(), maps);
}

}  // namespace
}  // namespace tent::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) tent::testing::g_restarts = std::atoi(argv[1]);
  if (argc > 2) tent::testing::g_initiators = std::atoi(argv[2]);
  if (const char* n = std::getenv("TENT_CHURN_INITIATORS"))
    tent::testing::g_initiators = std::atoi(n);
  if (tent::testing::g_initiators < 1) {
    std::fprintf(stderr, "engine_churn: the initiator count must be at least 1\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
