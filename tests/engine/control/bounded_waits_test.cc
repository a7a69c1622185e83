// Every API call that waits on the control loop has a bound from the config and
// completes exactly once: openSegment succeeds, fails, times out (a stalled control
// thread), or is canceled (cancelWaits, the first step of close); closeSegment and
// the descriptor refetch time out on a stalled loop and still take effect after it;
// closing a segment answers the callers still waiting to open it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "control/control_plane.h"
#include "control/peer_segments.h"
#include "tests/support/bounded_call.h"
#include "tests/support/closed_port.h"
#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr double kCallBound = 60;  // against a hang only

// A listener that accepts (the kernel does, into its backlog) and never answers.
struct SilentListener {
  explicit SilentListener(uint16_t port = 0) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    socklen_t len = sizeof a;
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 64) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    name = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  ~SilentListener() { ::close(fd); }
  int fd = -1;
  bool bound = false;
  std::string name;
};

std::string withConnectTimeout(std::string yaml, const std::string& ms) {
  const std::string budget = "connect_timeout_ms: 1000";
  yaml.replace(yaml.find(budget), budget.size(), "connect_timeout_ms: " + ms);
  return yaml;
}

control::ControlPlane& controlOf(TransferEngineImpl& e) {
  return e.transport().control();
}

// Blocks `e`'s control loop until the object goes away.
struct LoopStall {
  explicit LoopStall(TransferEngineImpl& e) { controlOf(e).stallForTest(resume); }
  ~LoopStall() { release(); }
  void release() {
    if (!released) go.set_value();
    released = true;
  }
  std::promise<void> go;
  std::shared_future<void> resume = go.get_future().share();
  bool released = false;
};

TEST(BoundedWaits, OpenSucceedsOrFailsAndLeavesNoCallBehind) {
  auto target = makeEngine(simYaml());
  auto me = makeEngine(simYaml());
  ASSERT_NE(target, nullptr);
  ASSERT_NE(me, nullptr);
  auto seg = me->openSegment(target->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  auto refused = me->openSegment(test::closedLoopbackAddress());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().toString();
  EXPECT_TRUE(me->closeSegment(*seg).ok());
  EXPECT_EQ(controlOf(*me).openCalls(), 0u);
}

TEST(BoundedWaits, AStalledControlThreadBoundsEveryCall) {
  auto target = makeEngine(simYaml());
  auto me = makeEngine(simYaml("", ", io_timeout_ms: 200"));
  ASSERT_NE(target, nullptr);
  ASSERT_NE(me, nullptr);
  auto seg = me->openSegment(target->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  auto other = makeEngine(simYaml());
  ASSERT_NE(other, nullptr);
  {
    LoopStall stall(*me);
    auto open = boundedCall([&] { return me->openSegment(other->segmentName()); }, kCallBound);
    ASSERT_TRUE(open.has_value()) << "openSegment did not return";
    ASSERT_FALSE(open->ok());
    EXPECT_EQ(open->status().code(), StatusCode::kTimeout) << open->status().toString();
    EXPECT_NE(open->status().message().find("connect_timeout_ms"), std::string::npos);
    auto close = boundedCall([&] { return me->closeSegment(*seg); }, kCallBound);
    ASSERT_TRUE(close.has_value()) << "closeSegment did not return";
    EXPECT_EQ(close->code(), StatusCode::kTimeout) << close->toString();
    EXPECT_NE(close->message().find("io_timeout_ms"), std::string::npos);
  }
  // Resumed: the close took effect, the open that nobody waits for any more left
  // nothing behind, and every call registered with the loop was answered.
  EXPECT_TRUE(eventually([&] { return controlOf(*me).openCalls() == 0; }));
  EXPECT_EQ(me->closeSegment(*seg).code(), StatusCode::kNotFound);
  EXPECT_EQ(controlOf(*me).peers().openCount(), 1u);  // the local segment only
  auto again = me->openSegment(other->segmentName());
  EXPECT_TRUE(again.ok()) << again.status().toString();
}

TEST(BoundedWaits, CancelWaitsEndsAnOpenInProgress) {
  SilentListener silent;
  ASSERT_TRUE(silent.bound);
  // Without the cancel this open would wait its whole connect budget (a minute).
  auto me = makeEngine(withConnectTimeout(simYaml(), "60000"));
  ASSERT_NE(me, nullptr);
  auto open = std::async(std::launch::async, [&] { return me->openSegment(silent.name); });
  ASSERT_TRUE(eventually([&] { return controlOf(*me).openCalls() == 1; }));
  me->cancelWaits();
  ASSERT_EQ(open.wait_for(std::chrono::duration<double>(kCallBound)), std::future_status::ready);
  auto r = open.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCanceled) << r.status().toString();
  auto later = me->openSegment(silent.name);
  EXPECT_EQ(later.status().code(), StatusCode::kFailedPrecondition) << later.status().toString();
  // Destroying it now frees the session that was still connecting.
  me.reset();
}

TEST(BoundedWaits, ClosingASegmentAnswersItsWaitingOpeners) {
  auto target = makeEngine(simYaml());
  auto me = makeEngine(withConnectTimeout(simYaml(), "60000"));
  ASSERT_NE(target, nullptr);
  ASSERT_NE(me, nullptr);
  const std::string name = target->segmentName();
  auto seg = me->openSegment(name);
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  // The peer goes; something that never answers takes its port: reopening by name
  // waits for a reconnect that will not finish within the test.
  const uint16_t port = static_cast<uint16_t>(std::stoi(name.substr(name.rfind(':') + 1)));
  target.reset();
  SilentListener squatter(port);
  ASSERT_TRUE(squatter.bound);
  auto open = std::async(std::launch::async, [&] { return me->openSegment(name); });
  // Started on the loop, not only registered: a close posted before the open's work
  // would run first, and the open after it would be a new one (1 run in 2 under load).
  ASSERT_TRUE(eventually([&] { return controlOf(*me).startedCalls() == 1; }));
  ASSERT_TRUE(me->closeSegment(*seg).ok());
  ASSERT_EQ(open.wait_for(std::chrono::duration<double>(kCallBound)), std::future_status::ready);
  auto r = open.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCanceled) << r.status().toString();
  EXPECT_EQ(controlOf(*me).openCalls(), 0u);
}

}  // namespace
}  // namespace tent::testing
