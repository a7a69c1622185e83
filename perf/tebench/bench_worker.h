// One benchmark thread: a closed loop of transfers (optionally paced), warm-up,
// then a barrier so every thread starts measuring together. Completion is
// driven by polling getTransferStatus(), as latency-sensitive callers do.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "perf/tebench/bench_clock.h"
#include "perf/tebench/bench_options.h"
#include "perf/tebench/bench_stats.h"
#include "tent/transfer_engine.h"

namespace tent::bench {

// Aggregate pacing (tent's --aggregate_interval_us): at most one transfer per
// interval across every thread that shares the pacer. A thread that finds its
// slot in the past issues at once and moves the next slot to now + interval
// (no catch-up bursts).
class Pacer {
 public:
  explicit Pacer(uint64_t interval_ns = 0) noexcept : interval_ns_(interval_ns) {}
  void waitTurn() noexcept;

 private:
  const int64_t interval_ns_;
  std::atomic<int64_t> next_ns_{0};
};

// What one thread does; fixed for the whole run.
struct ThreadPlan {
  uint32_t index = 0;       // global thread index (pattern seed)
  uint32_t group = 0;       // class index (QoS) or 0
  uint64_t block_size = 0;  // bytes per request
  uint32_t batch_size = 1;  // requests per transfer
  char* local = nullptr;    // this thread's region: block_size * batch_size bytes
  SegmentId segment = 0;
  uint64_t remote_addr = 0;  // the same-sized region in the target's buffer
  OpType op = OpType::kRead;
  bool check = false;
  IntentType intent = IntentType::UNSPEC;
  uint64_t deadline_us = 0;
  PollMode poll_mode = PollMode::kSpin;
};

// Called once, by the last thread to reach the start barrier, before any
// thread measures: records the engine counters and fixes the end of the window.
struct StartMark {
  struct Run* run;
  void operator()() noexcept;
};

// State shared by the threads of one run (one sweep case, or one QoS run).
struct Run {
  Run(TransferEngine* engine, const BenchOptions& options, uint32_t threads);

  TransferEngine* engine;
  int64_t transfer_timeout_ns;
  int64_t duration_ns;
  int64_t warmup_end_ns = 0;
  std::atomic<int64_t> measure_end_ns{0};
  std::atomic<bool> abort{false};
  Pacer pacer;
  // Mooncake's --request_interval_us: every thread waits this long (yielding)
  // before each transfer; 0 = none.
  int64_t thread_delay_ns = 0;
  // Mooncake's timer keeps whole microseconds (truncated): --tx_resolution=us.
  bool tx_in_whole_us = false;
  std::barrier<StartMark> start_barrier;
  EngineStats stats_at_start;  // written by StartMark

  std::mutex error_mu;  // slow path: first error only
  std::string first_error;
  void fail(const std::string& message);
};

struct ThreadResult {
  LatencyLog samples;  // transfer durations (ns; whole us x 1000 with --tx_resolution=us)
  uint64_t failed = 0;
  // Requests whose deadline_ns had passed when they were submitted: the engine did not
  // start them (TIMEOUT). An expected outcome under load, an SLO miss, not a failure.
  uint64_t deadline_expired = 0;
  uint64_t mismatches = 0;
  double elapsed_s = 0;
  std::atomic<uint64_t> completed{0};  // read by the progress printer
};

// Waits `delay_ns` from now, yielding (Mooncake's per-thread request pacing).
void delayBeforeTransfer(int64_t delay_ns) noexcept;

// The whole life of one benchmark thread.
void runBenchThread(const ThreadPlan& plan, Run* run, ThreadResult* out);

// Verification pattern helpers (exposed for tests).
void fillPattern(char* data, uint64_t length, uint64_t seed) noexcept;
// Index of the first byte that differs from the pattern, or -1.
int64_t firstPatternMismatch(const char* data, uint64_t length, uint64_t seed) noexcept;
// The same for bytes [offset, offset + length) of a region whose pattern is `seed`;
// the index returned is the region's.
int64_t firstPatternMismatchIn(const char* region, uint64_t offset, uint64_t length,
                               uint64_t seed) noexcept;

}  // namespace tent::bench
