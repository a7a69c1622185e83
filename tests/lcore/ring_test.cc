// rte_ring wrappers without EAL: single, bulk, burst, full, empty, many producers.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "lcore/ring.h"

namespace tent::lcore {
namespace {

// Ring objects are pointers; tests encode sequence numbers (never 0) in them.
void* token(uintptr_t n) {
  return reinterpret_cast<void*>(n);
}
uintptr_t number(void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

std::unique_ptr<RawRing> makeRing(uint32_t capacity, bool single_consumer = true) {
  auto ring = RawRing::create("test_ring", capacity, single_consumer);
  EXPECT_TRUE(ring.ok()) << ring.status().toString();
  return ring.ok() ? std::move(ring).value() : nullptr;
}

TEST(RawRing, CapacityRoundsUpToPowerOfTwoMinusOne) {
  EXPECT_EQ(makeRing(8)->capacity(), 7u);
  EXPECT_EQ(makeRing(100)->capacity(), 127u);
  EXPECT_EQ(makeRing(1)->capacity(), 1u);
}

TEST(RawRing, RejectsBadArguments) {
  EXPECT_EQ(RawRing::create("r", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RawRing::create("", 8).status().code(), StatusCode::kInvalidArgument);
  const auto too_long = RawRing::create(std::string(64, 'x'), 8);
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("characters"), std::string::npos);
  EXPECT_EQ(RawRing::create("r", 0x80000000u).status().code(), StatusCode::kInvalidArgument);
}

TEST(RawRing, SingleEnqueueDequeueIsFifo) {
  auto ring = makeRing(16);
  for (uintptr_t i = 1; i <= 5; ++i) ASSERT_TRUE(ring->enqueue(token(i)));
  EXPECT_EQ(ring->count(), 5u);
  void* out[8];
  ASSERT_EQ(ring->dequeueBurst_sc(out, 8), 5u);
  for (uintptr_t i = 0; i < 5; ++i) EXPECT_EQ(number(out[i]), i + 1);
  EXPECT_EQ(ring->count(), 0u);
}

TEST(RawRing, EmptyDequeueReturnsZero) {
  auto ring = makeRing(16);
  void* out[4];
  EXPECT_EQ(ring->dequeueBurst_sc(out, 4), 0u);
}

TEST(RawRing, FullRingRefusesEnqueue) {
  auto ring = makeRing(8);  // 7 usable slots
  for (uintptr_t i = 1; i <= 7; ++i) ASSERT_TRUE(ring->enqueue(token(i)));
  EXPECT_FALSE(ring->enqueue(token(8)));
  EXPECT_EQ(ring->count(), 7u);
  void* out[1];
  ASSERT_EQ(ring->dequeueBurst_sc(out, 1), 1u);
  EXPECT_EQ(number(out[0]), 1u);
  EXPECT_TRUE(ring->enqueue(token(8)));
}

TEST(RawRing, BulkIsAllOrNothing) {
  auto ring = makeRing(8);
  void* objs[6] = {token(1), token(2), token(3), token(4), token(5), token(6)};
  ASSERT_EQ(ring->enqueueBulk(objs, 5), 5u);
  EXPECT_EQ(ring->enqueueBulk(objs, 3), 0u);  // 2 free slots: nothing goes in
  EXPECT_EQ(ring->count(), 5u);
  EXPECT_EQ(ring->enqueueBulk(objs, 2), 2u);
  EXPECT_EQ(ring->count(), 7u);
}

TEST(RawRing, BurstTakesWhatFits) {
  auto ring = makeRing(8);
  void* objs[10];
  for (uintptr_t i = 0; i < 10; ++i) objs[i] = token(i + 1);
  EXPECT_EQ(ring->enqueueBurst(objs, 10), 7u);
  EXPECT_EQ(ring->enqueueBurst(objs, 1), 0u);
  void* out[10];
  ASSERT_EQ(ring->dequeueBurst_sc(out, 3), 3u);
  EXPECT_EQ(number(out[0]), 1u);
  EXPECT_EQ(ring->enqueueBurst(objs + 7, 3), 3u);
  ASSERT_EQ(ring->dequeueBurst_sc(out, 10), 7u);
  for (uintptr_t i = 0; i < 7; ++i) EXPECT_EQ(number(out[i]), i + 4);
}

TEST(RawRing, DefaultsAreRtsProducersAndSingleConsumer) {
  auto sc = makeRing(8);
  EXPECT_EQ(sc->options().producers, RingSync::kRts);
  EXPECT_EQ(sc->options().consumers, RingSync::kSingle);
  auto mc = makeRing(8, /*single_consumer=*/false);
  EXPECT_EQ(mc->options().consumers, RingSync::kRts);
}

// Every producer/consumer mode combination moves objects in order (one thread).
TEST(RawRing, EverySyncModeWorks) {
  const RingSync modes[] = {RingSync::kRts, RingSync::kClassic, RingSync::kSingle};
  for (RingSync producers : modes) {
    for (RingSync consumers : modes) {
      auto ring = RawRing::create("modes", 8, RingOptions{producers, consumers});
      ASSERT_TRUE(ring.ok()) << ring.status().toString();
      EXPECT_EQ((*ring)->options().producers, producers);
      EXPECT_EQ((*ring)->options().consumers, consumers);
      void* in[7];
      for (uintptr_t i = 0; i < 7; ++i) in[i] = token(i + 1);
      ASSERT_EQ((*ring)->enqueueBulk(in, 7), 7u);
      EXPECT_FALSE((*ring)->enqueue(token(8)));
      void* out[8];
      ASSERT_EQ((*ring)->dequeueBurst_sc(out, 8), 7u);
      for (uintptr_t i = 0; i < 7; ++i) EXPECT_EQ(number(out[i]), i + 1);
    }
  }
}

struct Item {
  int value;
};

TEST(Ring, TypedWrapperCarriesPointers) {
  auto ring = Ring<Item>::create("typed", 4);
  ASSERT_TRUE(ring.ok());
  Item a{1}, b{2};
  Item* in[2] = {&a, &b};
  EXPECT_EQ((*ring)->enqueueBulk(in, 2), 2u);
  Item* out[2];
  ASSERT_EQ((*ring)->dequeueBurst_sc(out, 2), 2u);
  EXPECT_EQ(out[0]->value, 1);
  EXPECT_EQ(out[1], &b);
  EXPECT_EQ((*ring)->capacity(), 3u);
}

// Producers enqueue disjoint ranges with single, bulk and burst calls while one
// consumer drains; every object must come out exactly once, each producer's in order.
TEST(RawRing, ManyProducersOneConsumerEveryObjectOnce) {
  constexpr int kProducers = 3;
  constexpr uintptr_t kPerProducer = 20000;
  auto ring = makeRing(256);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&ring, p] {
      const uintptr_t base = p * kPerProducer + 1;
      uintptr_t next = 0;
      while (next < kPerProducer) {
        void* objs[4];
        unsigned n = 0;
        while (n < 4 && next + n < kPerProducer) {
          objs[n] = token(base + next + n);
          ++n;
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
  std::vector<uint8_t> seen(kProducers * kPerProducer + 1, 0);
  std::vector<uintptr_t> last(kProducers, 0);
  uintptr_t received = 0;
  void* out[32];
  while (received < kProducers * kPerProducer) {
    const unsigned n = ring->dequeueBurst_sc(out, 32);
    if (n == 0) std::this_thread::yield();
    for (unsigned i = 0; i < n; ++i) {
      const uintptr_t v = number(out[i]);
      ASSERT_GE(v, 1u);
      ASSERT_LE(v, kProducers * kPerProducer);
      ASSERT_EQ(seen[v], 0) << "object " << v << " dequeued twice";
      seen[v] = 1;
      const size_t producer = (v - 1) / kPerProducer;
      ASSERT_GT(v, last[producer]) << "producer " << producer << " reordered";
      last[producer] = v;
    }
    received += n;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(ring->count(), 0u);
}

// A multi-consumer ring: two consumers together take every object exactly once.
TEST(RawRing, MultiConsumerRingSplitsWithoutDuplicates) {
  constexpr uintptr_t kObjects = 50000;
  auto ring = makeRing(512, /*single_consumer=*/false);
  std::vector<std::atomic<uint8_t>> seen(kObjects + 1);
  std::atomic<uintptr_t> taken{0};
  auto consume = [&] {
    void* out[16];
    while (taken.load() < kObjects) {
      const unsigned n = ring->dequeueBurst_sc(out, 16);
      if (n == 0) std::this_thread::yield();
      for (unsigned i = 0; i < n; ++i) seen[number(out[i])].fetch_add(1);
      taken.fetch_add(n);
    }
  };
  std::thread c1(consume), c2(consume);
  for (uintptr_t i = 1; i <= kObjects;) {
    if (ring->enqueue(token(i))) {
      ++i;
    } else {
      std::this_thread::yield();
    }
  }
  c1.join();
  c2.join();
  for (uintptr_t i = 1; i <= kObjects; ++i) ASSERT_EQ(seen[i].load(), 1) << "object " << i;
}

}  // namespace
}  // namespace tent::lcore
