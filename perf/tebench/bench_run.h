// Runs one set of benchmark threads (a sweep case or a QoS run) and collects
// what they measured, with the engine counters at the start and end of the window.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "perf/tebench/bench_engine.h"
#include "perf/tebench/bench_options.h"
#include "perf/tebench/bench_worker.h"

namespace tent::bench {

struct RunOutcome {
  std::vector<std::unique_ptr<ThreadResult>> results;  // one per plan
  EngineStats before;                                  // at the start barrier
  EngineStats after;                                   // after every thread ended
  std::string first_error;
  bool aborted = false;
};

// Called about once a second by the main thread while a run is measuring.
using ProgressFn = std::function<void(double seconds, const RunOutcome&)>;

RunOutcome executeRun(const BenchOptions& options, BenchEngine& bench,
                      const std::vector<ThreadPlan>& plans, const ProgressFn& progress);

// Per-lcore busy/idle cycles of the window (matched by position).
std::vector<LcoreStatsView> lcoreDelta(const EngineStats& before, const EngineStats& after);

// Prints to stderr why a run went wrong; returns whether it did (failed
// transfers, verification mismatches, or an abort).
bool reportProblems(const RunOutcome& outcome);

}  // namespace tent::bench
