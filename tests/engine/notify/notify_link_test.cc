// The notify channel on its own: an active and a passive NotifyLink wired over two soft
// devices in this process, the passive one attached to an inbox. Credits keep every
// SEND within the posted receive buffers; a full inbox turns into back-pressure at the
// sender, never a lost or duplicated message.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "base/clock.h"
#include "notify/notify_inbox.h"
#include "notify/notify_link.h"
#include "tests/engine/fabric/soft/soft_test_util.h"

namespace tent::notify {
namespace {

using fabric::soft::testing::makeProvider;
using fabric::soft::testing::softDevice;

uint64_t soon() {
  return clock::engineNowNs() + 60'000'000'000ull;
}

// Posts one notification and waits for the peer NIC's acknowledgement, as the
// transport's standalone send does (bounded by 60 s).
Status sendWaiting(NotifyLink& link, std::string_view message) {
  const uint64_t end = soon();
  uint64_t ticket = 0;
  PostResult r;
  while ((r = link.post(message, &ticket)) == PostResult::kRetry) {
    if (clock::engineNowNs() > end) return Status::Timeout("no send buffer came free");
    std::this_thread::yield();
  }
  if (r != PostResult::kPosted) return link.explain(r);
  for (;;) {
    const SendState s = link.sendState(ticket);
    if (s == SendState::kAcked) return Status::OK();
    if (s == SendState::kFailed) return link.explain(PostResult::kBroken);
    if (clock::engineNowNs() > end) return Status::Timeout("not acknowledged");
    std::this_thread::yield();
  }
}

struct Pair {
  // `latency_ns` with a manual `clock`: a SEND's acknowledgement shows only once the
  // test moves the clock past it (the message itself is placed at once).
  explicit Pair(Limits sender_limits, Limits receiver_limits, uint64_t inbox_count = 1000,
                uint64_t inbox_bytes = 1 << 20, fabric::soft::Clock clock = {},
                uint64_t latency_ns = 0)
      : inbox(inbox_count, inbox_bytes, counters) {
    provider =
        makeProvider({softDevice("na0", 0, latency_ns), softDevice("nb0", 0, latency_ns)}, clock);
    auto a = NotifyLink::create(provider->device(0), sender_limits, Role::kActive, &counters);
    auto b = NotifyLink::create(provider->device(1), receiver_limits, Role::kPassive, &counters,
                                "peer-a");
    EXPECT_TRUE(a.ok() && b.ok());
    active = std::move(a).value();
    passive = std::move(b).value();
    EXPECT_TRUE(active->connect(passive->offer(), provider->device(1).portIdentity()).ok());
    EXPECT_TRUE(passive->connect(active->offer(), provider->device(0).portIdentity()).ok());
    passive->attachTo(inbox);
  }
  ~Pair() {
    passive.reset();  // detaches from the inbox first
    active.reset();
  }
  std::unique_ptr<fabric::Provider> provider;
  Counters counters;
  Inbox inbox;
  std::unique_ptr<NotifyLink> active;
  std::unique_ptr<NotifyLink> passive;
};

TEST(NotifyLink, MessagesArriveInOrderWithEveryByteAcrossManyCreditRounds) {
  Pair p({4096, 16}, {4096, 4});
  size_t next = 0;
  for (int i = 0; i < 200; ++i) {
    std::string msg(static_cast<size_t>(i * 17 % 4096), static_cast<char>('a' + i % 26));
    msg += std::to_string(i);
    if (msg.size() > 4096) msg.resize(4096);
    Status s = sendWaiting(*p.active, msg);
    if (s.code() == StatusCode::kResourceExhausted) {  // the receiver has not taken them yet
      for (auto& n : p.inbox.take()) {
        EXPECT_EQ(n.sender, "peer-a");
        EXPECT_EQ(n.message.substr(n.message.size() - std::to_string(next).size()),
                  std::to_string(next));
        ++next;
      }
      s = sendWaiting(*p.active, msg);
    }
    ASSERT_TRUE(s.ok()) << s.toString();
  }
  for (auto& n : p.inbox.take()) {
    EXPECT_EQ(n.message.substr(n.message.size() - std::to_string(next).size()),
              std::to_string(next));
    ++next;
  }
  EXPECT_EQ(next, 200u);
  EXPECT_EQ(p.counters.received.load(), 200u);
}

TEST(NotifyLink, AFullInboxIsBackPressureAtTheSenderNothingLostNothingDuplicated) {
  // Inbox of 3, receive buffers 4. Nobody takes: the four buffers fill and the fifth
  // send is refused. A take() moves three into the inbox (one waits in its buffer)
  // and returns their credits; the next take() brings the fourth.
  Pair q({64, 16}, {64, 4}, 3);
  int sent = 0;
  Status s;
  while ((s = sendWaiting(*q.active, "n" + std::to_string(sent))).ok()) {
    ++sent;
    ASSERT_LT(sent, 100);
  }
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.toString();
  EXPECT_EQ(sent, 4);         // the receive buffers; nobody moved them into the inbox
  auto got = q.inbox.take();  // moves 3 in, 1 waits in its buffer, credits go back
  ASSERT_EQ(got.size(), 3u);
  auto rest = q.inbox.take();
  ASSERT_EQ(rest.size(), 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i].message, "n" + std::to_string(i));
  EXPECT_EQ(rest[0].message, "n3");
  ASSERT_TRUE(sendWaiting(*q.active, "after").ok());
  auto last = q.inbox.take();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].message, "after");
  EXPECT_EQ(q.counters.received.load(), 5u);
}

TEST(NotifyLink, ALongerMessageThanThePeerTakesIsRefusedAndNothingIsSent) {
  Pair p({4096, 4}, {100, 4});
  EXPECT_EQ(sendWaiting(*p.active, std::string(101, 'x')).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(sendWaiting(*p.active, std::string(100, 'y')).ok());
  auto got = p.inbox.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message, std::string(100, 'y'));
}

TEST(NotifyLink, APeerThatOffersNothingIsNotSupportedAndHoldsNoQp) {
  auto provider = makeProvider({softDevice("nc0")});
  auto a = NotifyLink::create(provider->device(0), {64, 4}, Role::kActive, nullptr);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->qpCount(), 1u);
  ASSERT_TRUE((*a)->connect(metadata::NotifyExtension{}, provider->device(0).portIdentity()).ok());
  EXPECT_FALSE((*a)->supported());
  EXPECT_EQ((*a)->qpCount(), 0u);
  EXPECT_EQ((*a)->post("x"), PostResult::kNotSupported);
}

TEST(NotifyLink, ASendThatFailsAfterItWasPostedIsCountedOnceAndBreaksTheLink) {
  Pair p({64, 4}, {64, 4});
  p.passive->quiesce();  // the receiver's QP is in ERR: no SEND to it can succeed
  uint64_t ticket = 0;
  const PostResult r = p.active->post("x", &ticket);
  if (r == PostResult::kPosted) {
    SendState s;
    const uint64_t end = soon();
    while ((s = p.active->sendState(ticket)) == SendState::kInFlight && clock::engineNowNs() < end)
      std::this_thread::yield();
    EXPECT_EQ(s, SendState::kFailed);
    EXPECT_EQ(p.counters.failed.load(), 1u);  // counted by whoever reaped it, once
    EXPECT_EQ(p.active->sendState(ticket), SendState::kFailed);
    EXPECT_EQ(p.counters.failed.load(), 1u);
  } else {
    EXPECT_EQ(r, PostResult::kBroken);
  }
  EXPECT_EQ(p.active->post("y"), PostResult::kBroken);  // nothing more on a failed QP
  EXPECT_EQ(p.active->explain(PostResult::kBroken).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(p.inbox.take().empty());
}

// post() never waits for an acknowledgement: it returns with the SEND in flight, and
// the ring of send buffers (one per credit) bounds how many are. With every buffer
// awaiting its ack, post() says kRetry and sends nothing; once the acks show, the next
// post() reaps them and goes out. No message is lost or sent twice.
TEST(NotifyLink, PostReturnsBeforeTheAckAndTheSendBuffersBoundWhatIsInFlight) {
  fabric::soft::ManualClock time;
  Pair p({64, 2}, {64, 4}, 1000, 1 << 20, time.clock(), /*latency_ns=*/1000);
  uint64_t t0 = 99, t1 = 99, t2 = 99;
  ASSERT_EQ(p.active->post("a", &t0), PostResult::kPosted);
  EXPECT_EQ(p.active->sendState(t0), SendState::kInFlight);  // the clock stands: no ack
  auto got = p.inbox.take();  // the message is in the receiver's buffer all the same
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message, "a");
  ASSERT_EQ(p.active->post("b", &t1), PostResult::kPosted);  // the second buffer
  got = p.inbox.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message, "b");
  // Credits are back (the receiver took both), but both send buffers await their acks.
  EXPECT_EQ(p.active->post("c", &t2), PostResult::kRetry);
  EXPECT_EQ(p.active->post("c", &t2), PostResult::kRetry);
  EXPECT_TRUE(p.inbox.take().empty());
  time.advance(1'000'000);  // the acks arrive
  ASSERT_EQ(p.active->post("c", &t2), PostResult::kPosted);
  EXPECT_EQ(p.active->sendState(t0), SendState::kAcked);
  EXPECT_EQ(p.active->sendState(t1), SendState::kAcked);
  EXPECT_EQ(t2, t1 + 1);
  got = p.inbox.take();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message, "c");
  time.advance(1'000'000);
  EXPECT_EQ(p.active->sendState(t2), SendState::kAcked);
  EXPECT_EQ(p.counters.received.load(), 3u);
  EXPECT_EQ(p.counters.failed.load(), 0u);
}

TEST(NotifyExtension, RoundTripsAndRejectsMalformedBytes) {
  metadata::NotifyExtension n{metadata::kNotifyCapable, 77, 16, 4096};
  auto bytes = metadata::encodeNotifyExtension(n);
  auto back = metadata::parseNotifyExtension(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, n);
  bytes.pop_back();
  EXPECT_FALSE(metadata::parseNotifyExtension(bytes).ok());
  n.qp_num = 0;
  EXPECT_FALSE(metadata::parseNotifyExtension(metadata::encodeNotifyExtension(n)).ok());
  n.qp_num = 1;
  n.credits = 5000;
  EXPECT_FALSE(metadata::parseNotifyExtension(metadata::encodeNotifyExtension(n)).ok());
  EXPECT_FALSE(
      metadata::parseNotifyExtension(metadata::encodeNotifyExtension({})).value().capable());
}

}  // namespace
}  // namespace tent::notify
