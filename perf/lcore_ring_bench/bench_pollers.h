// The pollers lcore_ring_bench places on its two lcores. Objects are sequence
// numbers (1, 2, ...) carried as pointers; every receiver checks the order.
#pragma once

#include <rte_cycles.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "bench_ring.h"
#include "lcore/poller.h"

namespace tent::bench {

inline void* asObject(uint64_t seq) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(seq));
}
inline uint64_t asSeq(void* obj) {
  return reinterpret_cast<uintptr_t>(obj);
}

// Base: completion flag and error count read by the main thread.
class BenchPoller : public lcore::Poller {
 public:
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  uint64_t errors() const noexcept { return errors_.load(std::memory_order_relaxed); }

 protected:
  void finish() noexcept { done_.store(true, std::memory_order_release); }
  void fail() noexcept { errors_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> errors_{0};
};

// Sends one number, waits for its echo, records the round trip in TSC cycles.
// The first `warmup` rounds are not recorded.
class PingPoller final : public BenchPoller {
 public:
  PingPoller(BenchRing& out, BenchRing& in, uint64_t rounds, uint64_t warmup)
      : out_(out), in_(in), rounds_(rounds), warmup_(warmup) {
    rtt_cycles_.reserve(rounds);  // no allocation on the lcore
  }
  lcore::PollResult poll_lc() noexcept override {
    if (done()) return lcore::PollResult::kIdle;
    if (!in_flight_) {
      sent_at_ = rte_rdtsc();
      in_flight_ = out_.enqueue(asObject(seq_));
      return in_flight_ ? lcore::PollResult::kBusy : lcore::PollResult::kIdle;
    }
    void* echo;
    if (in_.dequeueBurst_sc(&echo, 1) == 0) return lcore::PollResult::kIdle;
    const uint64_t rtt = rte_rdtsc() - sent_at_;
    if (asSeq(echo) != seq_) fail();
    if (seq_ > warmup_) rtt_cycles_.push_back(rtt);
    in_flight_ = false;
    if (seq_++ == warmup_ + rounds_) finish();
    return lcore::PollResult::kBusy;
  }
  std::string_view name() const noexcept override { return "bench-ping"; }
  // Read after done().
  std::vector<uint64_t>& rttCycles() noexcept { return rtt_cycles_; }

 private:
  BenchRing& out_;
  BenchRing& in_;
  const uint64_t rounds_;
  const uint64_t warmup_;
  uint64_t seq_ = 1;
  uint64_t sent_at_ = 0;
  bool in_flight_ = false;
  std::vector<uint64_t> rtt_cycles_;
};

// Echoes every number it receives, checking they arrive in order.
class PongPoller final : public BenchPoller {
 public:
  PongPoller(BenchRing& in, BenchRing& out) : in_(in), out_(out) {}
  lcore::PollResult poll_lc() noexcept override {
    void* obj;
    if (in_.dequeueBurst_sc(&obj, 1) == 0) return lcore::PollResult::kIdle;
    if (asSeq(obj) != expected_++) fail();
    // The pinger has one number in flight, so the echo ring always has room.
    if (!out_.enqueue(obj)) fail();
    return lcore::PollResult::kBusy;
  }
  std::string_view name() const noexcept override { return "bench-pong"; }

 private:
  BenchRing& in_;
  BenchRing& out_;
  uint64_t expected_ = 1;
};

// Streams `total` numbers into the ring, one per call or `burst` at a time.
class ProducerPoller final : public BenchPoller {
 public:
  ProducerPoller(BenchRing& ring, uint64_t total, unsigned burst)
      : ring_(ring),
        total_(total),
        burst_(burst < 1           ? 1
               : burst > kMaxBurst ? kMaxBurst
                                   : burst) {}
  lcore::PollResult poll_lc() noexcept override {
    if (next_ > total_) return lcore::PollResult::kIdle;
    if (next_ == 1) started_at_.store(rte_rdtsc(), std::memory_order_relaxed);
    if (burst_ == 1) {
      if (!ring_.enqueue(asObject(next_))) return lcore::PollResult::kIdle;
      if (++next_ > total_) finish();
      return lcore::PollResult::kBusy;
    }
    void* objs[kMaxBurst];
    const uint64_t left = total_ - next_ + 1;
    const unsigned n = left < burst_ ? static_cast<unsigned>(left) : burst_;
    for (unsigned i = 0; i < n; ++i) objs[i] = asObject(next_ + i);
    const unsigned sent = ring_.enqueueBurst(objs, n);
    next_ += sent;
    if (next_ > total_) finish();
    return sent > 0 ? lcore::PollResult::kBusy : lcore::PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "bench-producer"; }
  uint64_t startedAt() const noexcept { return started_at_.load(std::memory_order_relaxed); }
  static constexpr unsigned kMaxBurst = 256;

 private:
  BenchRing& ring_;
  const uint64_t total_;
  const unsigned burst_;
  uint64_t next_ = 1;
  std::atomic<uint64_t> started_at_{0};
};

// Drains the ring `burst` at a time (1 = single dequeue), checking the order;
// stamps the TSC when the last number arrives.
class ConsumerPoller final : public BenchPoller {
 public:
  ConsumerPoller(BenchRing& ring, uint64_t total, unsigned burst)
      : ring_(ring),
        total_(total),
        burst_(burst < 1                           ? 1
               : burst > ProducerPoller::kMaxBurst ? ProducerPoller::kMaxBurst
                                                   : burst) {}
  lcore::PollResult poll_lc() noexcept override {
    if (done()) return lcore::PollResult::kIdle;
    void* objs[ProducerPoller::kMaxBurst];
    const unsigned n = ring_.dequeueBurst_sc(objs, burst_);
    for (unsigned i = 0; i < n; ++i) {
      if (asSeq(objs[i]) != expected_++) fail();
    }
    if (expected_ > total_) {
      finished_at_.store(rte_rdtsc(), std::memory_order_relaxed);
      finish();
    }
    return n > 0 ? lcore::PollResult::kBusy : lcore::PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "bench-consumer"; }
  uint64_t finishedAt() const noexcept { return finished_at_.load(std::memory_order_relaxed); }

 private:
  BenchRing& ring_;
  const uint64_t total_;
  const unsigned burst_;
  uint64_t expected_ = 1;
  std::atomic<uint64_t> finished_at_{0};
};

}  // namespace tent::bench
