// What the two ends of a connection agree on through the bootstrap (issue 24), on the
// verbs provider over the loopback fake device (suite fake-verbs): the initiator's
// traffic class and SL on the QPs of both sides, and random initial PSNs wired both
// ways (the fake drops packets whose PSN is not the one expected, so a transfer that
// completes with every byte right proves the wiring). Other fabrics: skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr size_t kBuf = 1 << 20;

struct Node {
  explicit Node(const std::string& yaml) : engine(makeEngine(yaml)) {
    if (engine) mem = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
  }
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* mem = nullptr;
};

TransferState one(Node& from, OpCode op, void* local, SegmentId seg, void* remote, size_t len) {
  auto b = *from.engine->allocateBatch(1);
  Request r{op, local, seg, reinterpret_cast<uint64_t>(remote), len};
  Status s = from.engine->submitTransfer(b, {&r, 1});
  TransferState st = s.ok() ? waitTask(*from.engine, b, 0).state : TransferState::INVALID;
  (void)from.engine->freeBatch(b);
  return st;
}

#ifdef TENT_HAVE_VERBS
TEST(LinkTerms, TheInitiatorsClassesAndRandomPsnsReachBothSides) {
  if (testFabric() != TestFabric::kFakeVerbs)
    GTEST_SKIP() << "QP attributes are checked on the fake verbs device; this run uses "
                 << testProviderName();
  // The data and direct classes only (notify QPs: the next test).
  const std::string kNoNotify = "notify: {enabled: false}\n";
  auto& fake = fabric::testing::engineTestVerbs();
  Node a(
      simYaml("qos: {data: {traffic_class: 104, service_level: 3}, "
              "direct: {traffic_class: 184, service_level: 5}}\n" +
              kNoNotify));
  Node b(
      simYaml("qos: {data: {traffic_class: 32, service_level: 1}, "
              "direct: {traffic_class: 64, service_level: 2}}\n" +
              kNoNotify));
  ASSERT_TRUE(a.engine && b.engine);
  const size_t before = fake.transitions().size();
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  fillPattern(a.mem, 64 << 10, 41);
  ASSERT_EQ(one(a, OpCode::WRITE, a.mem, *seg, b.mem, 64 << 10), TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(b.mem, 64 << 10, 41), -1);
  std::memset(a.mem, 0, 64 << 10);
  ASSERT_EQ(one(a, OpCode::READ, a.mem, *seg, b.mem, 64 << 10), TransferState::COMPLETED);
  ASSERT_EQ(checkPattern(a.mem, 64 << 10, 41), -1);

  const auto all = fake.transitions();
  std::map<std::pair<int, int>, int> classes;  // (traffic class, SL) -> RTRs
  std::vector<uint32_t> rq, sq;
  for (size_t i = before; i < all.size(); ++i) {
    const auto& t = all[i];
    if (t.state == IBV_QPS_RTR) {
      ++classes[{t.traffic_class, t.service_level}];
      rq.push_back(t.rq_psn);
    } else {
      sq.push_back(t.sq_psn);
    }
  }
  // Only the initiator's values, on both ends: its data QPs and their passive twins,
  // its direct QP and its twin.
  const std::pair<int, int> target_data{32, 1}, target_direct{64, 2};
  const std::pair<int, int> data{104, 3}, direct{184, 5};
  EXPECT_EQ(classes.count(target_data) + classes.count(target_direct), 0u)
      << "the target's own values";
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_GE(classes[data], 2);
  EXPECT_EQ(classes[data] % 2, 0);
  EXPECT_GE(classes[direct], 2);  // one direct QP pair per endpoint (one per device used)
  EXPECT_EQ(classes[direct] % 2, 0);
  // Every QP receives at the PSN its twin sends with; the PSNs are not all 0.
  std::sort(rq.begin(), rq.end());
  std::sort(sq.begin(), sq.end());
  EXPECT_EQ(rq, sq);
  EXPECT_TRUE(std::any_of(sq.begin(), sq.end(), [](uint32_t p) { return p != 0; }));
}

// The notify QPs carry control traffic: they take the initiator's qos.control, on its
// notify QP and on the target's twin, and a notification goes through them.
TEST(LinkTerms, NotifyQpsTakeTheInitiatorsControlClass) {
  if (testFabric() != TestFabric::kFakeVerbs)
    GTEST_SKIP() << "QP attributes are checked on the fake verbs device; this run uses "
                 << testProviderName();
  auto& fake = fabric::testing::engineTestVerbs();
  Node a(
      simYaml("qos: {data: {traffic_class: 104, service_level: 3}, "
              "control: {traffic_class: 192, service_level: 7}}\n"));
  Node b(
      simYaml("qos: {data: {traffic_class: 32, service_level: 1}, "
              "control: {traffic_class: 96, service_level: 4}}\n"));
  ASSERT_TRUE(a.engine && b.engine);
  const size_t before = fake.transitions().size();
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  ASSERT_TRUE(a.engine->sendNotification(*seg, "on the control class").ok());
  auto got = b.engine->waitNotifications(60'000'000'000ull);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].message, "on the control class");

  const auto all = fake.transitions();
  std::map<std::pair<int, int>, int> classes;  // (traffic class, SL) -> RTRs
  for (size_t i = before; i < all.size(); ++i)
    if (all[i].state == IBV_QPS_RTR) ++classes[{all[i].traffic_class, all[i].service_level}];
  const std::pair<int, int> control{192, 7}, target_control{96, 4};
  EXPECT_EQ(classes.count(target_control), 0u) << "the target's own control class";
  // One notify QP pair per endpoint: the initiator's and its twin at the target.
  EXPECT_GE(classes[control], 2);
  EXPECT_EQ(classes[control] % 2, 0);
  const std::pair<int, int> data{104, 3};
  EXPECT_GE(classes[data], 2);  // the data QPs keep the data class
}
#endif

}  // namespace
}  // namespace tent::testing
