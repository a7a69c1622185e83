// The machine's floor under tebench's Avg Tx and its percentiles: the same clock
// (std::chrono::steady_clock) around a busy wait of `window_ns`, then `gap_ns` of
// busy waiting outside the window (tebench's batch allocate/free), back to back
// for `duration_s`. Whatever stretches these windows - timer ticks, VM exits,
// other threads - stretches a transfer's window the same way, so a transfer's P999
// cannot be told apart from this floor's P999 for the same window.
//   timer_floor WINDOW_NS [GAP_NS] [DURATION_S]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

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
  double window = 0, gap = 0, duration = 3;
  if (argc < 2 || argc > 4 || !parse(argv[1], 1, 1e9, &window) ||
      (argc > 2 && !parse(argv[2], 0, 1e9, &gap)) ||
      (argc > 3 && !parse(argv[3], 0.1, 3600, &duration))) {
    std::fprintf(stderr,
                 "usage: timer_floor WINDOW_NS [GAP_NS] [DURATION_S]\n"
                 "  WINDOW_NS in [1, 1e9], GAP_NS in [0, 1e9], DURATION_S in [0.1, 3600]\n");
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
