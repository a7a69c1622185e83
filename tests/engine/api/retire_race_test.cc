// An endpoint retired while a poller is inside postSend() on one of its QPs (found
// by the chaos suite: a WRITE pending forever, its segment without an endpoint).
// The poller looked the endpoint up while it was ready; the control plane then
// unpublished it, moved its QPs to ERR and found no WR outstanding - the poller's WR
// was not counted yet, it was still being copied - so it freed the endpoint after
// one grace period, destroying the QP with that WR on it: its completion never came
// and the task stayed PENDING with nothing left to time it out. A kHoldPost fault
// holds the poster inside the post, so the order does not depend on scheduling.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "control/endpoint_manager.h"
#include "fabric/soft/soft_faults.h"
#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr size_t kBuf = 1 << 20;

struct Node {
  explicit Node(const std::string& yaml) : engine(makeEngine(yaml)) {
    if (!engine) return;
    mem = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
  }
  ResourceStats resources() const { return engine->stats().resources; }
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* mem = nullptr;
};

TransferState writeAndWait(Node& from, SegmentId seg, Node& to, size_t len) {
  auto b = *from.engine->allocateBatch(1);
  Request r{OpCode::WRITE, from.mem, seg, reinterpret_cast<uint64_t>(to.mem), len};
  Status s = from.engine->submitTransfer(b, {&r, 1});
  TransferState st = s.ok() ? waitTask(*from.engine, b, 0).state : TransferState::INVALID;
  (void)from.engine->freeBatch(b);
  return st;
}

TEST(RetireRace, AWrPostedWhileItsEndpointIsRetiredCompletesAndKeepsTheEndpointUntilThen) {
  if (testFabric() != TestFabric::kSoft) GTEST_SKIP() << "needs the soft provider's kHoldPost";
  Node a(simYaml()), b(simYaml());
  ASSERT_TRUE(a.engine && b.engine);
  const ResourceStats a0 = a.resources();
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  fillPattern(a.mem, 4096, 1);
  ASSERT_EQ(writeAndWait(a, *seg, b, 4096), TransferState::COMPLETED);  // endpoints ready

  auto* faults = fabric::soft::faultInjector(a.engine->provider());
  ASSERT_NE(faults, nullptr);
  fabric::soft::FaultRule hold;
  hold.every_nth = 1;
  hold.max_hits = 1;
  hold.opcode = fabric::WrOpcode::kRdmaWrite;
  hold.action = fabric::soft::FaultAction::kHoldPost;
  hold.delay_ns = 600'000'000'000;  // until released
  const uint32_t rule = faults->addRule(hold).value();

  auto batch = *a.engine->allocateBatch(1);
  Request w{OpCode::WRITE, a.mem, *seg, reinterpret_cast<uint64_t>(b.mem), 4096};
  ASSERT_TRUE(a.engine->submitTransfer(batch, {&w, 1}).ok());
  // A poller pass posts the WRITE (once its endpoint is connected) and is held inside
  // postSend(), in its read section.
  std::thread poster([&] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (faults->hits(rule) == 0 && std::chrono::steady_clock::now() < end)
      a.engine->transport().stepPollers();
  });
  const bool held = eventually([&] { return faults->hits(rule) == 1; }, 60);
  bool closed = false, stepped = false;
  if (held) {
    // The endpoint is retired meanwhile (here by closing its segment), and the control
    // plane takes two reclaim passes: the first after the close looks at its drain.
    closed = a.engine->closeSegment(*seg).ok();
    auto& endpoints = a.engine->transport().control().endpoints();
    const uint64_t steps = endpoints.steps();
    stepped = eventually([&] { return endpoints.steps() >= steps + 2; }, 60);
  }
  faults->releaseHeldPosts();
  poster.join();
  ASSERT_TRUE(held) << "the WRITE was never posted";
  ASSERT_TRUE(closed);
  ASSERT_TRUE(stepped);

  // The held WR was posted on a QP in ERR: it is flushed, the task ends (FAILED: its
  // segment is closed), and only then is the endpoint freed.
  const TransferStatus st = waitTask(*a.engine, batch, 0, 60);
  EXPECT_NE(st.state, TransferState::PENDING) << "the WRITE never completed";
  EXPECT_NE(st.state, TransferState::COMPLETED);
  if (st.state != TransferState::PENDING) (void)a.engine->freeBatch(batch);
  EXPECT_TRUE(eventually([&] {
    a.engine->transport().stepPollers();
    return a.resources().endpoints_retired == 0;
  }));
  EXPECT_EQ(a.resources().endpoints_live, a0.endpoints_live);
  EXPECT_EQ(a.resources().qps_live, a0.qps_live);
}

}  // namespace
}  // namespace tent::testing
