#include "perf/tebench/bench_worker.h"

#include <cstring>
#include <thread>

namespace tent::bench {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t patternWord(uint64_t seed, uint64_t word_index) noexcept {
  uint64_t x = (seed + 1) * kGolden ^ (word_index * 0xBF58476D1CE4E5B9ull);
  return x ^ (x >> 29);
}

}  // namespace

void Pacer::waitTurn() noexcept {
  if (interval_ns_ <= 0) return;
  int64_t now = nowNs();
  int64_t slot = next_ns_.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t mine = slot > now ? slot : now;
    if (next_ns_.compare_exchange_weak(slot, mine + interval_ns_, std::memory_order_relaxed)) {
      slot = mine;
      break;
    }
    now = nowNs();
  }
  // Sleep while far from the slot, then spin for precision.
  constexpr int64_t kSpinNs = 50'000;
  while ((now = nowNs()) < slot) {
    if (slot - now > kSpinNs) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(slot - now - kSpinNs));
    } else {
      std::this_thread::yield();
    }
  }
}

void delayBeforeTransfer(int64_t delay_ns) noexcept {
  if (delay_ns <= 0) return;
  const int64_t until = nowNs() + delay_ns;
  while (nowNs() < until) std::this_thread::yield();
}

Run::Run(TransferEngine* e, const BenchOptions& options, uint32_t threads)
    : engine(e),
      transfer_timeout_ns(static_cast<int64_t>(options.transfer_timeout_s * 1e9)),
      duration_ns(static_cast<int64_t>(options.duration_s * 1e9)),
      pacer(options.aggregate_interval_us * 1000),
      thread_delay_ns(static_cast<int64_t>(options.request_interval_us * 1000)),
      tx_in_whole_us(options.tx_resolution == TxResolution::kWholeUs),
      start_barrier(threads, StartMark{this}) {
  warmup_end_ns = nowNs() + static_cast<int64_t>(options.warmup_s * 1e9);
}

void Run::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(error_mu);
  if (first_error.empty()) first_error = message;
}

void StartMark::operator()() noexcept {
  run->stats_at_start = run->engine->stats();
  run->measure_end_ns.store(nowNs() + run->duration_ns, std::memory_order_release);
}

void fillPattern(char* data, uint64_t length, uint64_t seed) noexcept {
  const uint64_t words = length / 8;
  for (uint64_t i = 0; i < words; ++i) {
    const uint64_t w = patternWord(seed, i);
    std::memcpy(data + i * 8, &w, 8);
  }
  if (length % 8) {
    const uint64_t w = patternWord(seed, words);
    std::memcpy(data + words * 8, &w, length % 8);
  }
}

int64_t firstPatternMismatch(const char* data, uint64_t length, uint64_t seed) noexcept {
  const uint64_t words = (length + 7) / 8;
  for (uint64_t i = 0; i < words; ++i) {
    const uint64_t w = patternWord(seed, i);
    const uint64_t n = (i + 1) * 8 <= length ? 8 : length % 8;
    if (std::memcmp(data + i * 8, &w, n) == 0) continue;
    for (uint64_t b = 0; b < n; ++b) {
      if (data[i * 8 + b] != reinterpret_cast<const char*>(&w)[b]) {
        return static_cast<int64_t>(i * 8 + b);
      }
    }
  }
  return -1;
}

int64_t firstPatternMismatchIn(const char* region, uint64_t offset, uint64_t length,
                               uint64_t seed) noexcept {
  for (uint64_t b = offset; b < offset + length;) {
    const uint64_t w = patternWord(seed, b / 8);
    const auto* expected = reinterpret_cast<const char*>(&w);
    for (uint64_t k = b % 8; k < 8 && b < offset + length; ++k, ++b) {
      if (region[b] != expected[k]) return static_cast<int64_t>(b);
    }
  }
  return -1;
}

}  // namespace tent::bench
