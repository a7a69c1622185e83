// tebench's three roles: target, sweep initiator and QoS initiator. Each
// returns the process exit code (0 ok, 1 the run failed).
#pragma once

#include "perf/tebench/bench_engine.h"
#include "perf/tebench/bench_options.h"
#include "perf/tebench/bench_run.h"
#include "perf/tebench/bench_stats.h"

namespace tent::bench {

// Serves until SIGINT or SIGTERM (which the caller has blocked in every thread
// before the engine started its own).
int runTarget(const BenchOptions& options, BenchEngine& bench);

// Threads x block size x batch size, doubling; one table row per case.
int runSweep(const BenchOptions& options, BenchEngine& bench, const RemoteBuffer& remote);

// One sweep case, measured and not printed: its table row and what the run saw.
struct SweepCase {
  CaseRow row;
  RunOutcome outcome;
};
SweepCase runSweepCase(const BenchOptions& options, BenchEngine& bench, const RemoteBuffer& remote,
                       uint32_t threads, uint64_t block, uint32_t batch);

// Workload classes run together; class table, JSONL record, latency dump.
int runQos(const BenchOptions& options, BenchEngine& bench, const RemoteBuffer& remote);

// --notifi (bench_notifi.cc): the target takes notifications and reports completion ->
// receipt latency and rate; the initiator sends one after each completed batch.
int runNotifiTarget(const BenchOptions& options, BenchEngine& bench);
int runNotifiInitiator(const BenchOptions& options, BenchEngine& bench, const RemoteBuffer& remote);

}  // namespace tent::bench
