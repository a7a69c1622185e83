// The lost openSegment completion: a client whose target is killed and restarted on
// the same port several times, and which after each failed transfer closes the
// segment and opens it again while the peer is down (what tent.mooncake's probe and
// reopen do), must get an answer from every openSegment: the id once the peer is
// back, an error while it is away - never a call that does not return.
//
// The completion that was lost: a segment closed (closeSegment by another thread,
// or the engine's close) while a caller waited to open it by name. The segment's
// record went, and with it the caller's completion, unanswered; the caller held its
// own reference to the promise, so it did not even break: openSegment waited
// forever. CloseFromAnotherThreadAnswersAnOpenInProgress replays that sequence.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "tests/support/bounded_call.h"
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

// Far beyond connect_timeout_ms + io_timeout_ms of the initiator below.
constexpr double kCallBound = 30;

bool writeVerified(TransferEngineImpl& e, SegmentId seg, uint8_t* local, uint64_t remote,
                   size_t len, uint32_t seed) {
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

TEST(LostOpen, CloseAndReopenWhileThePeerRestartsAlwaysAnswers) {
  std::string yaml = simYaml("endpoints: {reconnect_initial_ms: 5, reconnect_max_ms: 100}\n",
                             ", io_timeout_ms: 500");
  const std::string budget = "connect_timeout_ms: 1000";
  ASSERT_NE(yaml.find(budget), std::string::npos);
  yaml.replace(yaml.find(budget), budget.size(), "connect_timeout_ms: 200");
  auto owned = makeEngine(yaml);
  ASSERT_NE(owned, nullptr);
  TransferEngineImpl* engine = owned.get();
  constexpr size_t kLen = 16 << 10;
  auto* local = static_cast<uint8_t*>(*engine->allocateLocalMemory(2 * kLen, "*"));
  auto peer = std::make_unique<PeerProcess>();
  std::string err;
  ASSERT_TRUE(peer->start(peerExe(), 1 << 20, 1, "127.0.0.1:0", kPeerFabric, &err)) << err;
  const std::string name = peer->segment;
  auto first = engine->openSegment(name);
  ASSERT_TRUE(first.ok()) << first.status().toString();
  SegmentId seg = *first;
  ASSERT_TRUE(writeVerified(*engine, seg, local, peer->addr, kLen, 1));
  // A call that never returns holds `engine`: leak it (and the peer) so the failed
  // test ends instead of hanging in the engine's destructor.
  auto hung = [&](const char* what, int round, int attempt) {
    ADD_FAILURE() << what << " did not return within " << kCallBound << " s (round " << round
                  << ", attempt " << attempt << ")";
    (void)owned.release();
    (void)peer.release();
  };
  constexpr int kRestarts = 5, kAttempts = 20;
  int opened_while_down = 0, refused_while_down = 0;
  for (int round = 0; round < kRestarts; ++round) {
    peer->kill();
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      EXPECT_FALSE(writeVerified(*engine, seg, local, peer->addr, kLen, 2));
      auto closed = boundedCall([&] { return engine->closeSegment(seg); }, kCallBound);
      if (!closed) return hung("closeSegment", round, attempt);
      auto reopened = boundedCall([&] { return engine->openSegment(name); }, kCallBound);
      if (!reopened) return hung("openSegment", round, attempt);
      if (reopened->ok()) {
        ++opened_while_down;  // raced a session still closing: must fail transfers
        seg = **reopened;
      } else {
        ++refused_while_down;
        EXPECT_EQ(reopened->status().code(), StatusCode::kUnavailable)
            << reopened->status().toString();
      }
    }
    ASSERT_TRUE(peer->start(peerExe(), 1 << 20, 2 + round, name, kPeerFabric, &err)) << err;
    auto back = boundedCall([&] { return engine->openSegment(name); }, kCallBound);
    if (!back) return hung("openSegment after the restart", round, kAttempts);
    ASSERT_TRUE(back->ok()) << back->status().toString();
    seg = **back;
    ASSERT_TRUE(writeVerified(*engine, seg, local, peer->addr, kLen, 3 + round))
        << "round " << round;
  }
  std::printf("lost open: %d restarts x %d close+open while down: %d refused, %d opened\n",
              kRestarts, kAttempts, refused_while_down, opened_while_down);
  EXPECT_EQ(opened_while_down, 0);
}

// The port of a peer that is restarting: bound, its kernel accepts, nobody answers.
struct RestartingPeerPort {
  explicit RestartingPeerPort(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 16) == 0;
  }
  ~RestartingPeerPort() { ::close(fd); }
  // True once a connection is waiting to be accepted (the kernel completed it).
  bool connectionArrives(int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) == 1;
  }
  int fd = -1;
  bool bound = false;
};

// What the hunt harness (three threads on one name, the peer killed and restarted)
// ended in: thread B reopens the segment while the peer is restarting, thread A's
// transfer fails and A closes the segment. B must hear at once that the segment was
// closed. Only the public API: the same test hangs on the code before the fix.
TEST(LostOpen, CloseFromAnotherThreadAnswersAnOpenInProgress) {
  auto target = makeEngine(simYaml());
  ASSERT_NE(target, nullptr);
  // A connect budget far beyond the bound below: only the close can answer B in time.
  std::string yaml = simYaml("endpoints: {reconnect_initial_ms: 60000, reconnect_max_ms: 60000}\n");
  const std::string budget = "connect_timeout_ms: 1000";
  yaml.replace(yaml.find(budget), budget.size(), "connect_timeout_ms: 120000");
  auto owned = makeEngine(yaml);
  ASSERT_NE(owned, nullptr);
  const std::string name = target->segmentName();
  auto seg = owned->openSegment(name);
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  const auto port = static_cast<uint16_t>(std::stoi(name.substr(name.rfind(':') + 1)));
  target.reset();  // the peer dies; its restart has bound the port but does not answer yet
  RestartingPeerPort restarting(port);
  ASSERT_TRUE(restarting.bound);
  TransferEngineImpl* engine = owned.get();
  // On a thread of its own, detached: a call that never returns must not hold the test.
  auto answer = std::make_shared<std::promise<Result<SegmentId>>>();
  auto reopen = answer->get_future();
  std::thread([engine, name, answer] { answer->set_value(engine->openSegment(name)); }).detach();
  // B's open is in progress once its connection reached the port.
  ASSERT_TRUE(restarting.connectionArrives(30000));
  ASSERT_TRUE(engine->closeSegment(*seg).ok());
  if (reopen.wait_for(std::chrono::duration<double>(kCallBound)) != std::future_status::ready) {
    ADD_FAILURE() << "openSegment in progress was not answered when its segment was closed";
    (void)owned.release();  // the hung call holds the engine
    return;
  }
  auto r = reopen.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCanceled) << r.status().toString();
}

}  // namespace
}  // namespace tent::testing
