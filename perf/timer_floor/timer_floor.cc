// The machine's floor under tebench's Avg Tx and its percentiles: the same clock
// (std::chrono::steady_clock) around a busy wait of `window_ns`, then `gap_ns` of
// busy waiting outside the window (tebench's batch allocate/free), back to back
// for `duration_s`. Whatever stretches these windows - timer ticks, VM exits,
// other threads - stretches a transfer's window the same way, so a transfer's P999
// cannot be told apart from this floor's P999 for the same window.
//   timer_floor --window_ns=N [--gap_ns=N] [--duration_s=S]
//   timer_floor WINDOW_NS [GAP_NS] [DURATION_S]     (the same, positional)
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/cli/cli_flags.h"

DEFINE_double(window_ns, 0, "the busy wait timed as one window, ns, in [1, 1e9] (required)");
DEFINE_double(gap_ns, 0, "busy waiting between windows, ns, in [0, 1e9]");
DEFINE_double(duration_s, 3, "how long to run, seconds, in [0.1, 3600]");

namespace {

constexpr const char* kUsage =
    "usage: timer_floor --window_ns=N [--gap_ns=N] [--duration_s=S]\n"
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

}  // namespace

int main(int argc, char** argv) {
  if (int rc = tent::cli::parseFlags(&argc, &argv, kUsage); rc != tent::cli::kContinue) return rc;
  double window = FLAGS_window_ns, gap = FLAGS_gap_ns, duration = FLAGS_duration_s;
  if (argc > 4 || (argc > 1 && !parse(argv[1], 1, 1e9, &window)) ||
      (argc > 2 && !parse(argv[2], 0, 1e9, &gap)) ||
      (argc > 3 && !parse(argv[3], 0.1, 3600, &duration)) ||
      !(window >= 1 && window <= 1e9) || !(gap >= 0 && gap <= 1e9) ||
      !(duration >= 0.1 && duration <= 3600)) {
    std::fprintf(stderr,
                 "timer_floor: --window_ns in [1, 1e9] (required), --gap_ns in [0, 1e9], "
                 "--duration_s in [0.1, 3600] (--help)\n");
    return 2;
  }
  std::vector<int64_t> samples;
  samples.reserve(static_cast<size_t>(duration * 1e9 / (window + gap + 50)) + 1024);
  const int64_t end = nowNs() + static_cast<int64_t>(duration * 1e9);
  while (nowNs() < end) {
    const int64_t t0 = nowNs();
    spinFor(static_cast<int64_t>(window));
    samples.push_back(nowNs() - t0);
    spinFor(static_cast<int64_t>(gap));
  }
  std::sort(samples.begin(), samples.end());
  auto pct = [&](double q) {
    return static_cast<double>(samples[static_cast<size_t>(q * (samples.size() - 1))]) / 1e3;
  };
  std::printf(
      "timer floor: window_ns=%.0f gap_ns=%.0f duration_s=%g n=%zu p50_us=%.2f p99_us=%.2f "
      "p999_us=%.2f max_us=%.1f\n",
      window, gap, duration, samples.size(), pct(0.5), pct(0.99), pct(0.999),
      static_cast<double>(samples.back()) / 1e3);
  return 0;
}
