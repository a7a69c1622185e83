// The machine's floor under tebench's Avg Tx and its percentiles: the same clock
// (std::chrono::steady_clock) around a busy wait of `window_ns`, then `gap_ns` of
// busy waiting outside the window (tebench's batch allocate/free), back to back
// for `duration_s`. Whatever stretches these windows - timer ticks, VM exits,
// other threads - stretches a transfer's window the same way, so a transfer's P999
// cannot be told apart from this floor's P999 for the same window.
//
// --threads=2 times a window that spans two CPUs, as a transfer handed to an lcore
// does: the timing thread busy-waits half the window, hands a token to a partner
// thread, which busy-waits the other half and hands it back; the window ends when the
// token is back (window_ns 0: the bare round trip). Such a window is stretched by a
// stall of either CPU, and by one the partner's CPU is already in when the token comes,
// which no one-thread window catches: its floor is the worker path's, where the
// one-thread floor is that of a transfer done by its caller (tent's direct path,
// Mooncake's shm memcpy).
//   timer_floor --window_ns=N [--gap_ns=N] [--duration_s=S] [--threads=1|2]
//   timer_floor WINDOW_NS [GAP_NS] [DURATION_S]     (the same, positional)
#include <gflags/gflags.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "base/cli/cli_flags.h"

DEFINE_double(window_ns, -1,
              "the busy wait timed as one window, ns, in [1, 1e9] (required; with --threads=2, "
              "[0, 1e9]: 0 times the bare round trip)");
DEFINE_double(gap_ns, 0, "busy waiting between windows, ns, in [0, 1e9]");
DEFINE_double(duration_s, 3, "how long to run, seconds, in [0.1, 3600]");
DEFINE_int32(threads, 1,
             "1: one thread busy-waits the window; 2: the window is a round trip between two "
             "threads, each busy-waiting half of it");

namespace {

constexpr const char* kUsage =
    "usage: timer_floor --window_ns=N [--gap_ns=N] [--duration_s=S] [--threads=1|2]\n"
    "       timer_floor WINDOW_NS [GAP_NS] [DURATION_S]   (positional, the same)";

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void spinFor(int64_t ns) {
  const int64_t start = nowNs();
  while (nowNs() - start < ns) {
  }
}

bool parse(const char* text, double min, double max, double* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= min && v <= max)) return false;
  *out = v;
  return true;
}

// The partner of a two-thread window: waits for each token, busy-waits its half of
// the window, hands the token back. Tokens and answers sit on lines of their own, as
// a ring slot and a task's status line do.
class Partner {
 public:
  explicit Partner(int64_t half_ns) : half_ns_(half_ns), thread_([this] { run(); }) {}
  ~Partner() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
  }
  // The timing thread's round trip for token `n` (1, 2, ...).
  void roundTrip(uint64_t n) {
    spinFor(half_ns_);
    token_.store(n, std::memory_order_release);
    while (answer_.load(std::memory_order_acquire) != n) {
    }
  }

 private:
  void run() {
    uint64_t seen = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      const uint64_t n = token_.load(std::memory_order_acquire);
      if (n == seen) continue;
      seen = n;
      spinFor(half_ns_);
      answer_.store(n, std::memory_order_release);
    }
  }

  const int64_t half_ns_;
  alignas(64) std::atomic<uint64_t> token_{0};
  alignas(64) std::atomic<uint64_t> answer_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once the rest is built
};

// Window lengths, counted per nanosecond up to 100 us and per microsecond up to
// 100 ms; longer ones (at most one per 100 ms of the run) are kept exactly. A run of
// any length in --duration_s's range holds about 1.6 MB, where keeping every sample
// would not fit in memory for an hour of 0.3 us windows.
class Histogram {
 public:
  void add(int64_t ns) {
    ns = std::max<int64_t>(ns, 0);
    max_ = std::max(max_, ns);
    ++count_;
    if (ns < kFineNs)
      ++fine_[static_cast<size_t>(ns)];
    else if (ns < kCoarseNs)
      ++coarse_[static_cast<size_t>(ns / 1000)];
    else
      long_.push_back(ns);
  }
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  // The value at rank floor(q * (count - 1)) of the sorted samples, ns (to the us
  // between 100 us and 100 ms). Sorts the long windows: call after the run.
  int64_t at(double q) {
    uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_ - 1));
    for (size_t i = 0; i < fine_.size(); ++i) {
      if (rank < fine_[i]) return static_cast<int64_t>(i);
      rank -= fine_[i];
    }
    for (size_t i = kFineNs / 1000; i < coarse_.size(); ++i) {
      if (rank < coarse_[i]) return static_cast<int64_t>(i) * 1000;
      rank -= coarse_[i];
    }
    std::sort(long_.begin(), long_.end());
    return long_[std::min<size_t>(rank, long_.size() - 1)];
  }

 private:
  static constexpr int64_t kFineNs = 100'000;
  static constexpr int64_t kCoarseNs = 100'000'000;
  std::vector<uint64_t> fine_ = std::vector<uint64_t>(kFineNs);
  std::vector<uint64_t> coarse_ = std::vector<uint64_t>(kCoarseNs / 1000);
  std::vector<int64_t> long_;
  uint64_t count_ = 0;
  int64_t max_ = 0;
};

Histogram measure(double window, double gap, double duration, int threads) {
  Histogram h;
  std::unique_ptr<Partner> partner;
  if (threads == 2) partner = std::make_unique<Partner>(static_cast<int64_t>(window / 2));
  const int64_t end = nowNs() + static_cast<int64_t>(duration * 1e9);
  for (uint64_t n = 1; nowNs() < end; ++n) {
    const int64_t t0 = nowNs();
    if (partner)
      partner->roundTrip(n);
    else
      spinFor(static_cast<int64_t>(window));
    h.add(nowNs() - t0);
    spinFor(static_cast<int64_t>(gap));
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = tent::cli::parseFlags(&argc, &argv, kUsage); rc != tent::cli::kContinue) return rc;
  double window = FLAGS_window_ns, gap = FLAGS_gap_ns, duration = FLAGS_duration_s;
  const int threads = FLAGS_threads;
  const double min_window = threads == 2 ? 0 : 1;
  if (argc > 4 || (argc > 1 && !parse(argv[1], min_window, 1e9, &window)) ||
      (argc > 2 && !parse(argv[2], 0, 1e9, &gap)) ||
      (argc > 3 && !parse(argv[3], 0.1, 3600, &duration)) || (threads != 1 && threads != 2) ||
      !(window >= min_window && window <= 1e9) || !(gap >= 0 && gap <= 1e9) ||
      !(duration >= 0.1 && duration <= 3600)) {
    std::fprintf(stderr,
                 "timer_floor: --window_ns in [1, 1e9] (required; [0, 1e9] with --threads=2), "
                 "--gap_ns in [0, 1e9], --duration_s in [0.1, 3600], --threads 1 or 2 (--help)\n");
    return 2;
  }
  Histogram h = measure(window, gap, duration, threads);
  auto pct = [&](double q) { return static_cast<double>(h.at(q)) / 1e3; };
  std::printf(
      "timer floor: window_ns=%.0f gap_ns=%.0f duration_s=%g threads=%d n=%llu p50_us=%.2f "
      "p99_us=%.2f p999_us=%.2f max_us=%.1f\n",
      window, gap, duration, threads, static_cast<unsigned long long>(h.count()), pct(0.5),
      pct(0.99), pct(0.999), static_cast<double>(h.max()) / 1e3);
  return 0;
}
