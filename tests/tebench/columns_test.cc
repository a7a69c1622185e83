// What each sweep column times, checked on virtual time: tebench's clock is
// replaced by one that moves only when read (1 ns per read) and when the fake
// engine is called (a known cost per call), so every figure is known in
// advance and nothing depends on how fast or loaded the machine is.
//
// The definitions are Mooncake TENT's tebench's (benchmark/tent_backend.cpp,
// main.cpp, utils.cpp): Avg Tx and its percentiles from submitTransfer to the
// status poll that sees completion (allocateBatch before, freeBatch after);
// Avg Lat the whole loop (window x threads / transfers); BW bytes / window.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "perf/tebench/bench_clock.h"
#include "perf/tebench/bench_runner.h"
#include "tests/tebench/runner_fixture.h"

namespace tent::bench {
namespace {

using testing::FakeEngine;

// Costs of the fake's calls, far apart so that a window holding the wrong
// calls is off by whole microseconds, not by the clock's own reads.
constexpr int64_t kAllocNs = 50'000;
constexpr int64_t kSubmitNs = 2'000;
constexpr int64_t kPollNs = 300;
constexpr int64_t kFreeNs = 70'000;
constexpr uint32_t kPendingPolls = 2;  // two PENDING polls, the third sees COMPLETED
constexpr int64_t kTxNs = kSubmitNs + (kPendingPolls + 1) * kPollNs;  // 2.9 us
constexpr int64_t kLoopNs = kAllocNs + kTxNs + kFreeNs;               // 122.9 us
// What the clock's own reads may add to a window (a handful per transfer).
constexpr double kReadsSlackUs = 0.05;

std::atomic<int64_t> g_virtual_ns{0};

int64_t virtualNow() noexcept {
  return g_virtual_ns.fetch_add(1, std::memory_order_relaxed) + 1;
}

int64_t costOf(FakeEngine::Call call) {
  switch (call) {
    case FakeEngine::Call::kAllocateBatch:
      return kAllocNs;
    case FakeEngine::Call::kSubmit:
      return kSubmitNs;
    case FakeEngine::Call::kStatus:
      return kPollNs;
    case FakeEngine::Call::kFreeBatch:
      return kFreeNs;
  }
  return 0;
}

// One thread, 4 KiB WRITE, batch 1, on virtual time; `extra` adds flags.
class VirtualTimeCase : public ::testing::Test {
 protected:
  void SetUp() override {
    g_virtual_ns.store(1'000'000'000);
    setBenchClockForTesting(&virtualNow);
  }
  void TearDown() override { setBenchClockForTesting(nullptr); }

  CaseRow run(std::vector<std::string> extra = {}, const char* duration = "--duration=0.01") {
    testing::Fixture f = testing::makeFixture();
    f.fake->pending_polls = kPendingPolls;
    f.fake->on_call = [](FakeEngine::Call c) { g_virtual_ns.fetch_add(costOf(c)); };
    std::vector<std::string> flags = {"--target_seg_name=fake:1", "--warmup=0", duration,
                                      "--op_type=write"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    SweepCase c = runSweepCase(testing::parse(flags), *f.bench, f.remote, 1, 4096, 1);
    EXPECT_TRUE(c.outcome.first_error.empty()) << c.outcome.first_error;
    return c.row;
  }
};

TEST_F(VirtualTimeCase, AvgTxIsSubmitToTheCompletingPoll) {
  const CaseRow row = run();
  ASSERT_GT(row.transfers, 10u);
  // Submit and three polls; neither allocateBatch (50 us) nor freeBatch (70 us).
  EXPECT_GE(row.avg_tx_us, kTxNs / 1e3);
  EXPECT_LT(row.avg_tx_us, kTxNs / 1e3 + kReadsSlackUs);
  EXPECT_GE(row.p99_tx_us, kTxNs / 1e3);
  EXPECT_LT(row.p999_tx_us, kTxNs / 1e3 + kReadsSlackUs);
}

TEST_F(VirtualTimeCase, AvgLatIsTheWholeLoopAndBwItsBytes) {
  const CaseRow row = run();
  ASSERT_GT(row.transfers, 10u);
  // Allocation and free included: the loop per transfer.
  EXPECT_GE(row.avg_lat_us, kLoopNs / 1e3);
  EXPECT_LT(row.avg_lat_us, kLoopNs / 1e3 + kReadsSlackUs);
  // One thread: BW = bytes per transfer / Avg Lat (GB/s = bytes per ns).
  EXPECT_NEAR(row.bw_gbps, 4096 / (row.avg_lat_us * 1e3), 1e-9);
  // Avg Inst: bytes over each transfer's own duration.
  EXPECT_NEAR(row.avg_inst_gbps, 4096.0 / (row.avg_tx_us * 1e3), 1e-3);
}

TEST_F(VirtualTimeCase, RequestIntervalDelaysEachTransferOutsideAvgTx) {
  // Mooncake's --request_interval_us: each thread waits before each transfer
  // (yielding once per clock read, so a short virtual window keeps it quick).
  const CaseRow row = run({"--request_interval_us=1"}, "--duration=0.003");
  ASSERT_GT(row.transfers, 10u);
  EXPECT_LT(row.avg_tx_us, kTxNs / 1e3 + kReadsSlackUs);
  EXPECT_GE(row.avg_lat_us, kLoopNs / 1e3 + 1);
  EXPECT_LT(row.avg_lat_us, kLoopNs / 1e3 + 1 + kReadsSlackUs);
}

TEST_F(VirtualTimeCase, WholeMicrosecondResolutionTruncatesLikeMooncake) {
  // 2.9 us kept as 2 us, as Mooncake's XferBenchTimer::lap_us() keeps it.
  const CaseRow row = run({"--tx_resolution=us"});
  ASSERT_GT(row.transfers, 10u);
  EXPECT_DOUBLE_EQ(row.avg_tx_us, 2.0);
  EXPECT_DOUBLE_EQ(row.p999_tx_us, 2.0);
  EXPECT_DOUBLE_EQ(row.avg_inst_gbps, 4096 / 2000.0);
  EXPECT_GE(row.avg_lat_us, kLoopNs / 1e3);  // the loop is not truncated per transfer
}

}  // namespace
}  // namespace tent::bench
