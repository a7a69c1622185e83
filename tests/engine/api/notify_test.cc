// Notifications between two engines in this process (soft; fake verbs and tcp in their
// suites): a batch's notification arrives only after every byte of the batch landed, a
// failed batch delivers none, a full receive side is back-pressure without loss or
// duplicates, a peer without notifications is refused clearly while transfers work,
// and endpoints with notify QPs come and go without leaking QPs.
// TENT_NOTIFY_ROUNDS sets the rounds of the scattered-writes test (stress: 1000).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>

#include "fabric/soft/soft_faults.h"
#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr size_t kBuf = 4 << 20;
constexpr uint64_t kSecond = 1'000'000'000ull;

struct Node {
  explicit Node(const std::string& yaml) : engine(makeEngine(yaml)) {
    if (!engine) return;
    mem = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
  }
  EngineStats stats() const { return engine->stats(); }
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* mem = nullptr;
};

// Steps the pollers and reads the batch status until it is not PENDING (or an error:
// a notification refused or not supported), bounded by 60 s.
Result<TransferStatus> settle(TransferEngineImpl& e, BatchId b) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    if (e.transport().runtime().manual()) e.transport().stepPollers();
    auto st = e.getBatchTransferStatus(b);
    if (!st.ok() || st->state != TransferState::PENDING) return st;
    if (std::chrono::steady_clock::now() > end) return st;
    std::this_thread::yield();
  }
}

// 64 WRITEs of scattered lengths and offsets: request i writes `len(i)` bytes from
// a's buffer at src_off(i) to b's buffer at dst_off(i); no two targets overlap.
struct Scatter {
  static size_t len(size_t i, uint32_t round) {
    return 512 + ((i * 7919 + round * 104729) % 48) * 1024;
  }
  static size_t slot(size_t i) { return (i * 37) % 64; }  // a permutation of 0..63
  static size_t dstOff(size_t i) { return slot(i) * 64 * 1024 + (i % 5) * 128; }
  static size_t srcOff(size_t i) { return i * 64 * 1024; }
};

void fillRound(uint8_t* src, uint32_t round) {
  for (size_t i = 0; i < 64; ++i)
    fillPattern(src + Scatter::srcOff(i), Scatter::len(i, round), round * 64 + i);
}
bool checkRound(const uint8_t* dst, uint32_t round) {
  for (size_t i = 0; i < 64; ++i)
    if (checkPattern(dst + Scatter::dstOff(i), Scatter::len(i, round), round * 64 + i) != -1)
      return false;
  return true;
}

uint32_t rounds() {
  const char* env = std::getenv("TENT_NOTIFY_ROUNDS");
  return env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 20;
}

TEST(Notify, ScatteredWritesOnTwoRailsThenTheNotificationTargetSeesEveryByteOnReceipt) {
  Node a(simYaml()), b(simYaml());
  ASSERT_TRUE(a.engine && b.engine);
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  const uint32_t n = rounds();
  // The target's thread: waits for each notification and checks every byte of its
  // round right then, before the initiator may start the next one.
  std::atomic<uint32_t> verified{0}, bad{0};
  std::atomic<bool> stop{false};
  std::thread target([&] {
    uint32_t expect = 0;
    while (!stop.load() && expect < n) {
      auto got = b.engine->waitNotifications(kSecond / 10);
      if (!got.ok()) {
        bad.fetch_add(1);
        return;
      }
      for (const auto& note : *got) {
        if (note.name != a.engine->segmentName() ||
            note.message != "round " + std::to_string(expect) || !checkRound(b.mem, expect))
          bad.fetch_add(1);
        verified.store(++expect);
      }
    }
  });
  for (uint32_t round = 0; round < n && bad.load() == 0; ++round) {
    fillRound(a.mem, round);
    std::vector<Request> reqs;
    for (size_t i = 0; i < 64; ++i)
      reqs.push_back({OpCode::WRITE, a.mem + Scatter::srcOff(i), *seg,
                      reinterpret_cast<uint64_t>(b.mem + Scatter::dstOff(i)),
                      Scatter::len(i, round)});
    auto batch = a.engine->allocateBatch(64);
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(a.engine->submitTransfer(*batch, reqs, "round " + std::to_string(round)).ok());
    auto st = settle(*a.engine, *batch);
    ASSERT_TRUE(st.ok()) << st.status().toString();
    ASSERT_EQ(st->state, TransferState::COMPLETED);
    ASSERT_TRUE(a.engine->freeBatch(*batch).ok());
    ASSERT_TRUE(eventually([&] { return verified.load() > round || bad.load() != 0; }, 60))
        << "round " << round << ": no notification";
  }
  stop = true;
  target.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(verified.load(), n);
  const EngineStats as = a.stats(), bs = b.stats();
  EXPECT_EQ(as.notify.sent, n);
  EXPECT_EQ(bs.notify.received, n);
  EXPECT_EQ(as.notify.refused + as.notify.failed + as.notify.dropped_batches, 0u);
  // Both rails carried the batches' bytes.
  ASSERT_EQ(as.devices.size(), 2u);
  for (const auto& d : as.devices) EXPECT_GT(as.bytes_per_device.at(d), 0u) << d;
}

// A status poll posts the batch's notification and returns: it never waits for the
// target NIC's acknowledgement. The initiator's SENDs are acknowledged an hour late
// (soft: their completions are held; the message itself is placed at the target at
// once), so a poll that waited for the ack could only come back with a timeout.
TEST(Notify, AStatusPollPostsTheNotificationAndReturnsWhileItsAckIsOutstanding) {
  TENT_SKIP_UNLESS_SOFT("holding a SEND's acknowledgement");
  Node a(simYaml("notify: {timeout_ms: 1000}\n")), b(simYaml());
  ASSERT_TRUE(a.engine && b.engine);
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok());
  auto* faults = fabric::soft::faultInjector(a.engine->provider());
  ASSERT_NE(faults, nullptr);
  fabric::soft::FaultRule late;
  late.every_nth = 1;
  late.opcode = fabric::WrOpcode::kSend;  // only notifications: the data are WRITEs
  late.action = fabric::soft::FaultAction::kDelay;
  late.delay_ns = 3600 * kSecond;
  const uint32_t rule = faults->addRule(late).value();
  for (uint32_t round = 0; round < 3; ++round) {
    fillPattern(a.mem, 65536, 70 + round);
    Request r{OpCode::WRITE, a.mem, *seg, reinterpret_cast<uint64_t>(b.mem), 65536};
    auto batch = a.engine->allocateBatch(1);
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(a.engine->submitTransfer(*batch, {&r, 1}, "landed " + std::to_string(round)).ok());
    auto st = settle(*a.engine, *batch);
    ASSERT_TRUE(st.ok()) << st.status().toString();
    EXPECT_EQ(st->state, TransferState::COMPLETED);
    EXPECT_EQ(faults->hits(rule), round + 1u);  // posted, and its ack is an hour away
    ASSERT_TRUE(a.engine->freeBatch(*batch).ok());
    auto got = b.engine->waitNotifications(60 * kSecond);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].message, "landed " + std::to_string(round));
    EXPECT_EQ(checkPattern(b.mem, 65536, 70 + round), -1);
  }
  const EngineStats as = a.stats();
  EXPECT_EQ(as.notify.sent, 3u);
  EXPECT_EQ(as.notify.refused + as.notify.failed + as.notify.dropped_batches, 0u);
}

TEST(Notify, ABatchThatFailsDeliversNoNotification) {
  Node a(simYaml()), b(simYaml());
  ASSERT_TRUE(a.engine && b.engine);
  // A buffer peers may only read: a WRITE into it is refused at submit (remote access).
  auto ro = b.engine->allocateLocalMemory(1 << 20, "cpu:0", MemoryAccess::kRemoteRead);
  ASSERT_TRUE(ro.ok());
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok());
  std::vector<Request> reqs;
  for (size_t i = 0; i < 8; ++i)
    reqs.push_back({OpCode::WRITE, a.mem + i * 4096, *seg,
                    reinterpret_cast<uint64_t>(b.mem + i * 4096), 4096});
  // Eight tasks run; the ninth ends without running (its deadline passed before the
  // submit), so the batch does not complete.
  reqs.push_back({OpCode::WRITE, a.mem, *seg, reinterpret_cast<uint64_t>(b.mem), 4096});
  reqs.back().deadline_ns = 1;
  auto batch = a.engine->allocateBatch(reqs.size());
  ASSERT_TRUE(a.engine->submitTransfer(*batch, reqs, "must not arrive").ok());
  auto st = settle(*a.engine, *batch);
  ASSERT_TRUE(st.ok()) << st.status().toString();
  EXPECT_NE(st->state, TransferState::COMPLETED);
  EXPECT_NE(st->state, TransferState::PENDING);
  ASSERT_TRUE(a.engine->freeBatch(*batch).ok());
  // A refused submit takes its notification with it.
  Request denied{OpCode::WRITE, a.mem, *seg, reinterpret_cast<uint64_t>(*ro), 4096};
  auto refused = a.engine->allocateBatch(1);
  EXPECT_EQ(a.engine->submitTransfer(*refused, {&denied, 1}, "must not arrive either").code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(a.engine->freeBatch(*refused).ok());
  auto got = b.engine->waitNotifications(kSecond / 5);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_EQ(a.stats().notify.dropped_batches, 2u);
  EXPECT_EQ(a.stats().notify.sent, 0u);
  // The channel still works for the next batch.
  auto ok = a.engine->allocateBatch(1);
  ASSERT_TRUE(a.engine->submitTransfer(*ok, {&reqs[0], 1}, "next").ok());
  ASSERT_EQ(settle(*a.engine, *ok)->state, TransferState::COMPLETED);
  ASSERT_TRUE(a.engine->freeBatch(*ok).ok());
  got = b.engine->waitNotifications(60 * kSecond);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].message, "next");
}

TEST(Notify, AFullReceiveSideIsBackPressureNothingLostNothingDuplicated) {
  Node a(simYaml()), b(simYaml("notify: {credits: 2, inbox_count: 3}\n"));
  ASSERT_TRUE(a.engine && b.engine);
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok());
  std::vector<std::string> received;
  uint64_t sent = 0, refused = 0;
  // Send 40; whenever refused, let the target take what arrived, then go on.
  while (sent < 40) {
    Status s = a.engine->sendNotification(*seg, "n" + std::to_string(sent));
    if (s.ok()) {
      ++sent;
      continue;
    }
    ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.toString();
    ++refused;
    auto got = b.engine->getNotifications();
    ASSERT_TRUE(got.ok());
    for (auto& g : *got) received.push_back(g.message);
  }
  for (int i = 0; i < 3; ++i) {
    auto got = b.engine->getNotifications();
    ASSERT_TRUE(got.ok());
    for (auto& g : *got) received.push_back(g.message);
  }
  EXPECT_GT(refused, 0u);
  ASSERT_EQ(received.size(), 40u);
  for (size_t i = 0; i < received.size(); ++i) EXPECT_EQ(received[i], "n" + std::to_string(i));
  // A batch notification meets the same back-pressure: the status call says so and
  // delivers it once the target took its messages. Credits come back asynchronously
  // (a credit message on the QP pair), so a send may be refused until they arrive.
  auto sendRetrying = [&](const std::string& m) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    Status s;
    while ((s = a.engine->sendNotification(*seg, m)).code() == StatusCode::kResourceExhausted &&
           std::chrono::steady_clock::now() < end) {
      ++refused;
      std::this_thread::yield();
    }
    return s;
  };
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(sendRetrying("fill").ok());
  // Now both of the target's buffers hold a message nobody took: no credit can come.
  Request r{OpCode::WRITE, a.mem, *seg, reinterpret_cast<uint64_t>(b.mem), 4096};
  auto batch = a.engine->allocateBatch(1);
  ASSERT_TRUE(a.engine->submitTransfer(*batch, {&r, 1}, "after the fill").ok());
  auto st = settle(*a.engine, *batch);
  EXPECT_EQ(st.status().code(), StatusCode::kResourceExhausted) << st.status().toString();
  ++refused;
  auto fills = b.engine->getNotifications();  // "fill" x2; their credits go back
  ASSERT_TRUE(fills.ok());
  ASSERT_EQ(fills->size(), 2u);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((st = settle(*a.engine, *batch)).status().code() == StatusCode::kResourceExhausted &&
         std::chrono::steady_clock::now() < end) {
    ++refused;
    std::this_thread::yield();
  }
  ASSERT_TRUE(st.ok()) << st.status().toString();
  EXPECT_EQ(st->state, TransferState::COMPLETED);
  ASSERT_TRUE(a.engine->freeBatch(*batch).ok());
  auto last = b.engine->waitNotifications(60 * kSecond);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].message, "after the fill");
  const EngineStats as = a.stats(), bs = b.stats();
  EXPECT_EQ(as.notify.sent, 43u);
  EXPECT_EQ(bs.notify.received, 43u);
  EXPECT_EQ(as.notify.refused, refused);  // every refusal counted, nothing else
  EXPECT_EQ(bs.notify.held, 0u);
}

TEST(Notify, APeerWithoutNotificationsIsRefusedClearlyAndTransfersWork) {
  Node a(simYaml()), b(simYaml("notify: {enabled: false}\n"));
  ASSERT_TRUE(a.engine && b.engine);
  auto seg = a.engine->openSegment(b.engine->segmentName());
  ASSERT_TRUE(seg.ok());
  fillPattern(a.mem, 65536, 9);
  Request r{OpCode::WRITE, a.mem, *seg, reinterpret_cast<uint64_t>(b.mem), 65536};
  auto batch = a.engine->allocateBatch(1);
  ASSERT_TRUE(a.engine->submitTransfer(*batch, {&r, 1}, "hello").ok());
  auto st = settle(*a.engine, *batch);
  EXPECT_EQ(st.status().code(), StatusCode::kNotSupported) << st.status().toString();
  EXPECT_EQ(checkPattern(b.mem, 65536, 9), -1);  // the bytes landed all the same
  st = a.engine->getBatchTransferStatus(*batch);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, TransferState::COMPLETED);
  ASSERT_TRUE(a.engine->freeBatch(*batch).ok());
  EXPECT_EQ(a.engine->sendNotification(*seg, "x").code(), StatusCode::kNotSupported);
  EXPECT_EQ(a.stats().notify.unsupported, 2u);
  EXPECT_EQ(b.engine->sendNotification(*b.engine->openSegment(a.engine->segmentName()), "y").code(),
            StatusCode::kNotSupported);
}

TEST(Notify, EndpointsWithNotifyQpsComeAndGoAndEveryCountReturns) {
  Node a(simYaml()), b(simYaml());
  ASSERT_TRUE(a.engine && b.engine);
  const ResourceStats a0 = a.stats().resources, b0 = b.stats().resources;
  for (int i = 0; i < 5; ++i) {
    auto seg = a.engine->openSegment(b.engine->segmentName());
    ASSERT_TRUE(seg.ok());
    ASSERT_TRUE(a.engine->sendNotification(*seg, "churn " + std::to_string(i)).ok());
    auto got = b.engine->waitNotifications(60 * kSecond);
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].message, "churn " + std::to_string(i));
    EXPECT_EQ(b.engine->transport().inbox().attached(), 1u);
    ASSERT_TRUE(a.engine->closeSegment(*seg).ok());
    ASSERT_TRUE(eventually([&] {
      a.engine->transport().stepPollers();
      return a.stats().resources.endpoints_retired == 0 &&
             b.stats().resources.qps_live == b0.qps_live;
    }));
  }
  EXPECT_EQ(a.stats().resources.qps_live, a0.qps_live);
  EXPECT_EQ(b.stats().resources.qps_live, b0.qps_live);
  EXPECT_EQ(b.engine->transport().inbox().attached(), 0u);
}

}  // namespace
}  // namespace tent::testing
