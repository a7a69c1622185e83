// The engine clock: the TSC exactly where the kernel keeps CLOCK_MONOTONIC with it,
// and then a clock that agrees with CLOCK_MONOTONIC (bracketed reads, so the checks
// hold however the test is scheduled) and never runs backwards in a thread.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "base/clock.h"

namespace tent::clock {
namespace {

bool kernelUsesTsc() {
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  return static_cast<bool>(f >> name) && name == "tsc";
}

// The TSC rate is measured to a few ppm; 100 us covers that drift over a test run's
// seconds with two orders of magnitude to spare, and is no speed requirement.
constexpr uint64_t kAgreementNs = 100'000;

TEST(EngineClock, TakesTheTscExactlyWhereTheKernelKeepsTimeWithIt) {
  calibrate();
#if defined(__x86_64__)
  EXPECT_EQ(std::string(source()), kernelUsesTsc() ? "tsc" : "clock_gettime");
#else
  EXPECT_EQ(std::string(source()), "clock_gettime");
#endif
  calibrate();  // idempotent: the source stays
  EXPECT_EQ(std::string(source()), kernelUsesTsc() ? "tsc" : "clock_gettime");
}

TEST(EngineClock, AgreesWithClockMonotonicWhereverItIsRead) {
  calibrate();
  for (int i = 0; i < 1000; ++i) {
    const uint64_t before = engineNowNs();
    const uint64_t mono = monotonicNs();
    const uint64_t after = engineNowNs();
    ASSERT_LE(before, mono + kAgreementNs) << "reading " << i;
    ASSERT_LE(mono, after + kAgreementNs) << "reading " << i;
  }
}

TEST(EngineClock, NeverRunsBackwardsInAThread) {
  calibrate();
  uint64_t last = engineNowNs();
  for (int i = 0; i < 1'000'000; ++i) {
    const uint64_t now = engineNowNs();
    ASSERT_GE(now, last) << "reading " << i;
    last = now;
  }
}

TEST(EngineClock, AnIntervalLastsOnItAsLongAsOnClockMonotonic) {
  calibrate();
  // 5 ms of CLOCK_MONOTONIC, spun (no sleep). Each bound compares an engine-clock
  // interval with a monotonic one it contains or that contains it, so a preemption
  // anywhere only widens both sides.
  const uint64_t m_outer0 = monotonicNs();
  const uint64_t e0 = engineNowNs();
  const uint64_t m_inner0 = monotonicNs();
  uint64_t m_inner1 = m_inner0;
  while (m_inner1 - m_inner0 < 5'000'000) m_inner1 = monotonicNs();
  const uint64_t e1 = engineNowNs();
  const uint64_t m_outer1 = monotonicNs();
  EXPECT_GE(e1 - e0 + kAgreementNs, m_inner1 - m_inner0);
  EXPECT_LE(e1 - e0, m_outer1 - m_outer0 + kAgreementNs);
}

}  // namespace
}  // namespace tent::clock
