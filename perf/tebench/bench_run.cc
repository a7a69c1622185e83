#include "perf/tebench/bench_run.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace tent::bench {
namespace {

uint64_t totalFailed(const RunOutcome& o, uint64_t* mismatches) {
  uint64_t failed = 0;
  *mismatches = 0;
  for (const auto& r : o.results) {
    failed += r->failed;
    *mismatches += r->mismatches;
  }
  return failed;
}

}  // namespace

RunOutcome executeRun(const BenchOptions& options, BenchEngine& bench,
                      const std::vector<ThreadPlan>& plans, const ProgressFn& progress) {
  RunOutcome outcome;
  for (size_t i = 0; i < plans.size(); ++i)
    outcome.results.push_back(std::make_unique<ThreadResult>());
  Run run(bench.engine.get(), options, static_cast<uint32_t>(plans.size()));
  // The benchmark threads tell this one when they end, and it wakes for nothing else
  // while they measure: once per progress report (a second). On a host with no idle
  // core a wake-up of this thread preempts a measured one (a worker-path transfer
  // spans the caller's core and the lcore's), so polling every 50 ms put 20 stalls a
  // second into the tail it measures.
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < plans.size(); ++i) {
    threads.emplace_back([&, i] {
      runBenchThread(plans[i], &run, outcome.results[i].get());
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      cv.notify_one();
    });
  }
  int64_t next_report = 0;
  std::unique_lock<std::mutex> lock(mu);
  if (!progress) cv.wait(lock, [&] { return finished == plans.size(); });
  while (finished < plans.size()) {
    const int64_t end = run.measure_end_ns.load(std::memory_order_acquire);
    // Warming up (the window's end is not set yet): look again in 50 ms.
    int64_t wake = nowNs() + 50'000'000;
    if (end != 0) wake = end - run.duration_ns + next_report;
    const int64_t wait_ns = std::max<int64_t>(wake - nowNs(), 0);
    cv.wait_for(lock, std::chrono::nanoseconds(wait_ns), [&] { return finished == plans.size(); });
    if (finished == plans.size() || end == 0) continue;
    const int64_t now = nowNs();
    const int64_t start = end - run.duration_ns;
    if (now >= start + next_report && now < end) {
      lock.unlock();
      progress(static_cast<double>(now - start) / 1e9, outcome);
      lock.lock();
    }
    if (now >= start + next_report) next_report += 1'000'000'000;
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  outcome.before = run.stats_at_start;
  outcome.after = bench.engine->stats();
  outcome.first_error = run.first_error;
  outcome.aborted = run.abort.load();
  return outcome;
}

std::vector<LcoreStatsView> lcoreDelta(const EngineStats& before, const EngineStats& after) {
  std::vector<LcoreStatsView> out = after.lcores;
  for (size_t i = 0; i < out.size() && i < before.lcores.size(); ++i) {
    out[i].busy_cycles -= before.lcores[i].busy_cycles;
    out[i].idle_cycles -= before.lcores[i].idle_cycles;
  }
  return out;
}

bool reportProblems(const RunOutcome& o) {
  uint64_t mismatches = 0;
  const uint64_t failed = totalFailed(o, &mismatches);
  const bool bad = failed || mismatches || o.aborted;
  if (!o.first_error.empty()) {
    std::fprintf(stderr, "tebench: %s: %s\n", bad ? "error" : "warning (during warm-up)",
                 o.first_error.c_str());
  }
  if (bad) {
    std::fprintf(stderr, "tebench: %llu transfers failed, %llu verification mismatches%s\n",
                 (unsigned long long)failed, (unsigned long long)mismatches,
                 o.aborted ? ", run aborted" : "");
  }
  return bad;
}

}  // namespace tent::bench
