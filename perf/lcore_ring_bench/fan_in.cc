// The fan-in phase: producer threads, a draining poller, enqueue-time statistics.
#include "fan_in.h"

#include <rte_cycles.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace tent::bench {
namespace {

constexpr unsigned kBulk = 8;
constexpr unsigned kMaxProducers = 64;
constexpr unsigned kSeqBits = 40;  // object = producer << 40 | sequence (from 1)

void* encode(uint64_t producer, uint64_t seq) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(producer << kSeqBits | seq));
}

// Drains the ring; checks that each producer's objects arrive in its order.
class FanInConsumer final : public lcore::Poller {
 public:
  FanInConsumer(BenchRing& ring, uint64_t total) : ring_(ring), total_(total) {}
  lcore::PollResult poll_lc() noexcept override {
    if (received_ == total_) return lcore::PollResult::kIdle;
    void* objs[32];
    const unsigned n = ring_.dequeueBurst_sc(objs, 32);
    for (unsigned i = 0; i < n; ++i) {
      const auto v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(objs[i]));
      const uint64_t producer = v >> kSeqBits;
      const uint64_t seq = v & ((uint64_t{1} << kSeqBits) - 1);
      if (producer >= kMaxProducers || seq != ++expected_[producer]) errors_.fetch_add(1);
    }
    received_ += n;
    if (received_ == total_) {
      finished_at_.store(rte_rdtsc(), std::memory_order_relaxed);
      done_.store(true, std::memory_order_release);
    }
    return n > 0 ? lcore::PollResult::kBusy : lcore::PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "bench-fan-in"; }
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  uint64_t errors() const noexcept { return errors_.load(std::memory_order_relaxed); }
  uint64_t finishedAt() const noexcept { return finished_at_.load(std::memory_order_relaxed); }

 private:
  BenchRing& ring_;
  const uint64_t total_;
  uint64_t received_ = 0;
  uint64_t expected_[kMaxProducers] = {};
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> finished_at_{0};
};

// One producer thread: `bulks` enqueueBulk calls of kBulk objects, timing each
// successful call; yields when the ring is full.
void produce(BenchRing& ring, unsigned producer, uint64_t bulks, std::vector<uint64_t>* times) {
  uint64_t seq = 1;
  void* objs[kBulk];
  for (uint64_t b = 0; b < bulks;) {
    for (unsigned i = 0; i < kBulk; ++i) objs[i] = encode(producer, seq + i);
    const uint64_t start = rte_rdtsc();
    if (ring.enqueueBulk(objs, kBulk) == kBulk) {
      times->push_back(rte_rdtsc() - start);
      seq += kBulk;
      ++b;
    } else {
      std::this_thread::yield();
    }
  }
}

void fillEnqueueStats(std::vector<uint64_t>& all, double tsc_hz, FanInResult* r) {
  if (all.empty()) return;
  std::sort(all.begin(), all.end());
  const double ns = 1e9 / tsc_hz;
  auto at = [&](double q) { return all[std::min(all.size() - 1, size_t(q * all.size()))] * ns; };
  r->enqueue_p50_ns = at(0.5);
  r->enqueue_p99_ns = at(0.99);
  r->enqueue_p999_ns = at(0.999);
  r->enqueue_max_ns = all.back() * ns;
}

}  // namespace

FanInResult runFanIn(lcore::Runtime& rt, size_t lcore, unsigned producers, uint64_t objects,
                     RingKind producer_kind, double tsc_hz, unsigned limit_s) {
  FanInResult result;
  producers = std::clamp(producers, 1u, kMaxProducers);
  const uint64_t bulks = std::max<uint64_t>(1, objects / kBulk / producers);
  auto ring = makeBenchRing("bench-fan-in", 4096, producer_kind);
  if (!ring.ok()) return result;
  // On the heap: after a timeout the lcore may still run it, so it is leaked then.
  auto consumer_owner = std::make_unique<FanInConsumer>(**ring, bulks * kBulk * producers);
  FanInConsumer& consumer = *consumer_owner;
  if (!rt.attach(lcore, &consumer).ok()) return result;

  std::vector<std::vector<uint64_t>> times(producers);
  for (auto& t : times) t.reserve(bulks);
  std::vector<std::thread> threads;
  const uint64_t started_at = rte_rdtsc();
  for (unsigned p = 0; p < producers; ++p) {
    threads.emplace_back(produce, std::ref(**ring), p, bulks, &times[p]);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  while (!consumer.done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!consumer.done()) {
    // Stuck producers and a consumer still attached: leak them; the caller ends the process.
    for (auto& t : threads) t.detach();
    (void)consumer_owner.release();
    (void)ring->release();
    return result;
  }
  for (auto& t : threads) t.join();
  (void)rt.detach(lcore, &consumer);
  result.finished = true;
  result.errors = consumer.errors();
  const uint64_t cycles = consumer.finishedAt() - started_at;
  result.obj_per_s = cycles == 0 ? 0 : bulks * kBulk * producers * tsc_hz / cycles;
  std::vector<uint64_t> all;
  for (auto& t : times) all.insert(all.end(), t.begin(), t.end());
  fillEnqueueStats(all, tsc_hz, &result);
  return result;
}

}  // namespace tent::bench
