// SlotRing (the pollers' MPSC work ring): capacity, order, full, wrap-around, and
// many producers with one consumer across many laps of a small ring.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "lcore/slot_ring.h"

namespace tent::lcore {
namespace {

// Objects are pointers; tests encode sequence numbers (never 0: null is an empty slot).
void* token(uintptr_t n) {
  return reinterpret_cast<void*>(n);
}
uintptr_t number(void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

std::unique_ptr<RawSlotRing> makeRing(uint32_t capacity) {
  auto ring = RawSlotRing::create("test_slot_ring", capacity);
  EXPECT_TRUE(ring.ok()) << ring.status().toString();
  return ring.ok() ? std::move(ring).value() : nullptr;
}

TEST(SlotRing, CapacityRoundsUpToPowerOfTwoEverySlotUsable) {
  EXPECT_EQ(makeRing(8)->capacity(), 8u);
  EXPECT_EQ(makeRing(100)->capacity(), 128u);
  EXPECT_EQ(makeRing(1)->capacity(), 2u);
  auto ring = makeRing(4);
  for (uintptr_t i = 1; i <= 4; ++i) ASSERT_TRUE(ring->enqueue(token(i)));
  EXPECT_FALSE(ring->enqueue(token(5)));
  EXPECT_EQ(ring->count(), 4u);
}

TEST(SlotRing, RejectsBadArguments) {
  EXPECT_EQ(RawSlotRing::create("r", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RawSlotRing::create("", 8).status().code(), StatusCode::kInvalidArgument);
  const auto huge = RawSlotRing::create("r", 0x80000000u);
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("exceeds"), std::string::npos);
}

TEST(SlotRing, SingleEnqueueDequeueIsFifo) {
  auto ring = makeRing(16);
  for (uintptr_t i = 1; i <= 5; ++i) ASSERT_TRUE(ring->enqueue(token(i)));
  EXPECT_EQ(ring->count(), 5u);
  void* out[8];
  ASSERT_EQ(ring->dequeueBurst_sc(out, 8), 5u);
  for (uintptr_t i = 0; i < 5; ++i) EXPECT_EQ(number(out[i]), i + 1);
  EXPECT_EQ(ring->count(), 0u);
  EXPECT_EQ(ring->dequeueBurst_sc(out, 8), 0u);
}

TEST(SlotRing, FullRingRefusesUntilTheConsumerFreesASlot) {
  auto ring = makeRing(8);
  for (uintptr_t i = 1; i <= 8; ++i) ASSERT_TRUE(ring->enqueue(token(i)));
  EXPECT_FALSE(ring->enqueue(token(9)));
  void* out[1];
  ASSERT_EQ(ring->dequeueBurst_sc(out, 1), 1u);
  EXPECT_EQ(number(out[0]), 1u);
  EXPECT_TRUE(ring->enqueue(token(9)));
  EXPECT_FALSE(ring->enqueue(token(10)));
}

TEST(SlotRing, BurstTakesWhatFitsAcrossTheWrap) {
  auto ring = makeRing(8);
  void* objs[10];
  for (uintptr_t i = 0; i < 10; ++i) objs[i] = token(i + 1);
  EXPECT_EQ(ring->enqueueBurst(objs, 10), 8u);
  EXPECT_EQ(ring->enqueueBurst(objs, 1), 0u);
  EXPECT_EQ(ring->enqueueBurst(objs, 0), 0u);
  void* out[16];
  ASSERT_EQ(ring->dequeueBurst_sc(out, 5), 5u);
  EXPECT_EQ(number(out[0]), 1u);
  // Positions 8..12 land in slots 0..4: the wrap.
  EXPECT_EQ(ring->enqueueBurst(objs + 8, 2), 2u);
  void* more[3] = {token(11), token(12), token(13)};
  EXPECT_EQ(ring->enqueueBurst(more, 3), 3u);
  ASSERT_EQ(ring->dequeueBurst_sc(out, 16), 8u);
  for (uintptr_t i = 0; i < 8; ++i) EXPECT_EQ(number(out[i]), i + 6);
}

TEST(SlotRing, BulkIsAllOrNothing) {
  auto ring = makeRing(8);
  void* objs[9];
  for (uintptr_t i = 0; i < 9; ++i) objs[i] = token(i + 1);
  EXPECT_EQ(ring->enqueueBulk(objs, 9), 0u);  // more than the ring holds
  ASSERT_EQ(ring->enqueueBulk(objs, 6), 6u);
  EXPECT_EQ(ring->enqueueBulk(objs, 3), 0u);  // 2 free slots: nothing goes in
  EXPECT_EQ(ring->count(), 6u);
  EXPECT_EQ(ring->enqueueBulk(objs + 6, 2), 2u);
  void* out[8];
  ASSERT_EQ(ring->dequeueBurst_sc(out, 8), 8u);
  for (uintptr_t i = 0; i < 8; ++i) EXPECT_EQ(number(out[i]), i + 1);
}

// Many laps one object at a time: positions keep growing, slots are reused.
TEST(SlotRing, ManyLapsKeepOrder) {
  auto ring = makeRing(4);
  void* out[4];
  for (uintptr_t i = 1; i <= 1000; ++i) {
    ASSERT_TRUE(ring->enqueue(token(i)));
    if (i % 3 == 0) {
      const unsigned n = ring->dequeueBurst_sc(out, 4);
      ASSERT_EQ(n, 3u);
      for (unsigned k = 0; k < n; ++k) EXPECT_EQ(number(out[k]), i - 2 + k);
    }
  }
}

struct Item {
  int value;
};

TEST(SlotRing, TypedWrapperCarriesPointers) {
  auto ring = SlotRing<Item>::create("typed", 4);
  ASSERT_TRUE(ring.ok());
  Item a{1}, b{2};
  Item* in[2] = {&a, &b};
  EXPECT_EQ((*ring)->enqueueBurst(in, 2), 2u);
  Item* out[2];
  ASSERT_EQ((*ring)->dequeueBurst_sc(out, 2), 2u);
  EXPECT_EQ(out[0]->value, 1);
  EXPECT_EQ(out[1], &b);
  EXPECT_EQ((*ring)->capacity(), 4u);
}

// Producers fill plain (non-atomic) objects and enqueue them (single, bulk and burst calls) into
// a ring far smaller than the traffic (hundreds of laps, producers racing for room);
// one consumer checks every object arrives exactly once, each producer's in order,
// with the contents its producer wrote (under ThreadSanitizer: published by the ring).
TEST(SlotRing, ManyProducersOneConsumerEveryObjectOnceWithItsContents) {
  constexpr int kProducers = 3;
  constexpr uint32_t kPerProducer = 20000;
  struct Msg {
    uint32_t producer;
    uint32_t seq;
    uint64_t check;
  };
  std::vector<Msg> msgs(kProducers * kPerProducer);
  auto ring = makeRing(64);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      uint32_t next = 0;
      while (next < kPerProducer) {
        void* objs[4];
        unsigned n = 0;
        while (n < 4 && next + n < kPerProducer) {
          Msg& m = msgs[p * kPerProducer + next + n];
          m = Msg{static_cast<uint32_t>(p), next + n, (uint64_t{next + n} << 8) ^ p};
          objs[n++] = &m;
        }
        unsigned sent = 0;
        switch (next % 3) {
          case 0:
            sent = ring->enqueue(objs[0]) ? 1 : 0;
            break;
          case 1:
            sent = ring->enqueueBulk(objs, n);
            break;
          default:
            sent = ring->enqueueBurst(objs, n);
            break;
        }
        next += sent;
        if (sent == 0) std::this_thread::yield();
      }
    });
  }
  std::vector<uint8_t> seen(kProducers * kPerProducer, 0);
  std::vector<int64_t> last(kProducers, -1);
  uint64_t received = 0;
  void* out[32];
  while (received < uint64_t{kProducers} * kPerProducer) {
    const unsigned n = ring->dequeueBurst_sc(out, 32);
    if (n == 0) std::this_thread::yield();
    for (unsigned i = 0; i < n; ++i) {
      const Msg* m = static_cast<const Msg*>(out[i]);
      ASSERT_LT(m->producer, static_cast<uint32_t>(kProducers));
      ASSERT_EQ(m->check, (uint64_t{m->seq} << 8) ^ m->producer);
      const size_t index = m->producer * kPerProducer + m->seq;
      ASSERT_EQ(seen[index], 0) << "object " << index << " dequeued twice";
      seen[index] = 1;
      ASSERT_GT(int64_t{m->seq}, last[m->producer]) << "producer " << m->producer << " reordered";
      last[m->producer] = m->seq;
    }
    received += n;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(ring->count(), 0u);
  void* none[1];
  EXPECT_EQ(ring->dequeueBurst_sc(none, 1), 0u);
}

}  // namespace
}  // namespace tent::lcore
