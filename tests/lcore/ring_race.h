// The lost wake-up race against a real lcore: producers hand items one at a time
// to a ring poller whose lcore sleeps until woken whenever it is idle, and each
// waits (bounded) for its item to be taken. A lost wake-up leaves an item in the
// ring while the lcore sleeps for block_max_us (a minute), so the producer's
// bounded wait fails: no timing threshold is involved.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "config/config.h"
#include "lcore/poller.h"
#include "lcore/ring.h"

namespace tent::lcore::testing {

// Takes items (producer index << 32 | sequence) from an MPSC ring and records, per
// producer, the last sequence seen. Holds nothing between passes, so its lcore may
// sleep until woken.
class RingPoller final : public Poller {
 public:
  static constexpr int kMaxProducers = 8;
  explicit RingPoller(RawRing& ring, bool needs_polling = false)
      : ring_(ring), needs_polling_(needs_polling) {}
  PollResult poll_lc() noexcept override {
    void* items[16];
    const unsigned n = ring_.dequeueBurst_sc(items, 16);
    for (unsigned i = 0; i < n; ++i) {
      const auto v = reinterpret_cast<uintptr_t>(items[i]);
      const auto producer = static_cast<size_t>(v >> 32);
      const uint64_t seq = v & 0xffffffffu;
      if (producer >= kMaxProducers || seq != seen_[producer].load() + 1) errors_.fetch_add(1);
      if (producer < kMaxProducers) seen_[producer].store(seq, std::memory_order_release);
    }
    return n > 0 ? PollResult::kBusy : PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "ring-poller"; }
  bool needsPolling_lc() const noexcept override { return needs_polling_; }
  uint64_t seen(size_t producer) const noexcept {
    return seen_[producer].load(std::memory_order_acquire);
  }
  uint64_t errors() const noexcept { return errors_.load(); }

 private:
  RawRing& ring_;
  const bool needs_polling_;
  std::atomic<uint64_t> seen_[kMaxProducers] = {};
  std::atomic<uint64_t> errors_{0};
};

// An idle policy that arms the doorbell after the first idle pass and blocks for
// up to a minute: every hand-over races the lcore going to sleep.
inline config::IdlePolicy sleepAtOncePolicy() {
  config::IdlePolicy p;
  p.spin_polls = 0;
  p.pause_polls = 0;
  p.sleep_min_us = 1;
  p.sleep_max_us = 1;
  p.block_max_us = 60'000'000;
  return p;
}

struct RaceResult {
  int stuck = 0;  // producers whose bounded wait ran out
  uint64_t rounds_done = 0;
};

// `producers` threads, `rounds` items each, through `ring` to the attached `poller`.
inline RaceResult runRingRace(RawRing& ring, RingPoller& poller, int producers, uint64_t rounds) {
  std::atomic<int> stuck{0};
  std::atomic<uint64_t> done{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (uint64_t seq = 1; seq <= rounds && stuck.load() == 0; ++seq) {
        auto* item = reinterpret_cast<void*>((uintptr_t(p) << 32) | seq);
        while (!ring.enqueue(item)) std::this_thread::yield();
        poller.wakeLcore();  // what SlicePoller::enqueue does after its ring write
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (poller.seen(p) < seq) {
          if (std::chrono::steady_clock::now() > deadline) {
            stuck.fetch_add(1);
            return;
          }
          std::this_thread::yield();
        }
        done.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  return {stuck.load(), done.load()};
}

}  // namespace tent::lcore::testing
