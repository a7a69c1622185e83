#include "perf/tebench/bench_runner.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "perf/tebench/bench_limits.h"
#include "perf/tebench/bench_report.h"
#include "perf/tebench/bench_run.h"
#include "perf/tebench/bench_worker.h"

namespace tent::bench {
namespace {

ThreadPlan basePlan(const BenchOptions& o, const RemoteBuffer& remote) {
  ThreadPlan p;
  p.segment = remote.segment;
  p.op = o.op_type;
  p.check = o.check_consistency;
  p.intent = o.intent_type;
  p.poll_mode = o.poll_mode;
  return p;
}

// The measurement of the threads in [first, last) of a case.
CaseMeasurement measureThreads(const RunOutcome& outcome, uint64_t block, uint32_t batch,
                               uint32_t first, uint32_t last) {
  CaseMeasurement m;
  m.block_size = block;
  m.batch_size = batch;
  m.threads = last - first;
  std::vector<const LatencyLog*> logs;
  for (uint32_t i = first; i < last; ++i) {
    const auto& r = outcome.results[i];
    m.thread_elapsed_s.push_back(r->elapsed_s);
    logs.push_back(&r->samples);
    m.failed_transfers += r->failed;
  }
  mergeSamples(logs, &m.transfer_ns, &m.transfers);
  return m;
}

// Mooncake's [deadline-tight] / [deadline-loose] lines under a sweep row.
void printDeadlineGroups(const BenchOptions& o, const RunOutcome& outcome, uint64_t block,
                         uint32_t batch, uint32_t threads) {
  const uint32_t tight = std::min(threads, o.deadline_tight_threads);
  struct Group {
    const char* name;
    uint32_t first, last;
    uint64_t deadline_us;
  };
  for (const Group& g :
       {Group{"tight", 0, tight, o.deadline_us}, Group{"loose", tight, threads, 0}}) {
    if (g.first == g.last) continue;
    CaseMeasurement m = measureThreads(outcome, block, batch, g.first, g.last);
    const CaseRow row = computeCaseRow(&m);
    if (row.transfers == 0) continue;
    std::printf("  [deadline-%s] threads=%u", g.name, g.last - g.first);
    if (g.deadline_us) std::printf(" deadline_us=%llu", (unsigned long long)g.deadline_us);
    std::printf(" operations=%llu throughput=%.6f GB/s\n", (unsigned long long)row.transfers,
                row.bw_gbps);
  }
}

int runCase(const BenchOptions& o, BenchEngine& bench, const RemoteBuffer& remote, uint32_t threads,
            uint64_t block, uint32_t batch) {
  SweepCase c = runSweepCase(o, bench, remote, threads, block, batch);
  std::printf("%s", formatCaseRow(c.row).c_str());
  if (o.deadline_us > 0) printDeadlineGroups(o, c.outcome, block, batch, threads);
  std::fflush(stdout);
  return reportProblems(c.outcome) ? 1 : 0;
}

}  // namespace

SweepCase runSweepCase(const BenchOptions& o, BenchEngine& bench, const RemoteBuffer& remote,
                       uint32_t threads, uint64_t block, uint32_t batch) {
  std::vector<ThreadPlan> plans;
  const uint64_t region = block * batch;
  for (uint32_t i = 0; i < threads; ++i) {
    ThreadPlan p = basePlan(o, remote);
    p.index = i;
    p.deadline_us = i < o.deadline_tight_threads ? o.deadline_us : 0;  // Mooncake's rule
    p.block_size = block;
    p.batch_size = batch;
    p.local = bench.buffer + i * region;
    p.remote_addr = remote.addr + i * region;
    plans.push_back(p);
  }
  SweepCase c;
  c.outcome = executeRun(o, bench, plans, nullptr);
  CaseMeasurement m = measureThreads(c.outcome, block, batch, 0, threads);
  c.row = computeCaseRow(&m);
  return c;
}

int runTarget(const BenchOptions& options, BenchEngine& bench) {
  EngineStats stats = bench.engine->stats();
  std::string devices;
  for (const auto& d : stats.devices) devices += (devices.empty() ? "" : ",") + d;
  std::printf("tebench target ready: segment=%s provider=%s devices=%s buffer=%p length=%llu\n",
              bench.engine->segmentName().c_str(), stats.provider.c_str(), devices.c_str(),
              static_cast<void*>(bench.buffer), (unsigned long long)bench.buffer_size);
  std::printf("%s", formatEngineHeader(stats).c_str());
  std::printf("To start an initiator, run\n  tebench --target_seg_name=%s --backend=tent%s%s\n",
              bench.engine->segmentName().c_str(),
              options.config_path.empty() ? "" : " --config=", options.config_path.c_str());
  std::fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "tebench target: stopping on signal %d\n", sig);
  return 0;
}

int runSweep(const BenchOptions& o, BenchEngine& bench, const RemoteBuffer& remote) {
  std::printf("%s", formatEngineHeader(bench.engine->stats()).c_str());
  std::printf(
      "# op: %s  duration: %g s  warm-up: %g s  interval: %llu us per thread, %llu us "
      "aggregate  intent: %s  deadline: %llu us on %u threads  tx timer: %s  target: %s\n",
      std::string(opTypeName(o.op_type)).c_str(), o.duration_s, o.warmup_s,
      (unsigned long long)o.request_interval_us, (unsigned long long)o.aggregate_interval_us,
      std::string(intentName(o.intent_type)).c_str(), (unsigned long long)o.deadline_us,
      o.deadline_us ? o.deadline_tight_threads : 0u,
      o.tx_resolution == TxResolution::kWholeUs ? "whole us (truncated)" : "ns",
      o.target_seg_name.c_str());
  if (o.deadline_us > 0 && o.deadline_tight_threads == 0) {
    std::fprintf(stderr,
                 "tebench: --deadline_us applies to threads [0, --deadline_tight_threads) as in "
                 "Mooncake's tebench; with --deadline_tight_threads=0 no thread carries it\n");
  }
  std::printf("%s", formatCaseHeader().c_str());
  std::fflush(stdout);
  int rc = 0;
  const uint64_t limit = std::min<uint64_t>(bench.buffer_size, remote.length);
  for (uint32_t t = o.start_num_threads; t <= o.max_num_threads; t *= 2) {
    for (uint64_t b = o.start_block_size; b <= o.max_block_size; b *= 2) {
      for (uint32_t n = o.start_batch_size; n <= o.max_batch_size; n *= 2) {
        const uint64_t needs = saturatingProduct({b, n, t});
        if (needs > limit) {
          std::fprintf(stderr,
                       "tebench: skip threads=%u block=%llu batch=%u: needs %llu bytes, "
                       "buffer has %llu\n",
                       t, (unsigned long long)b, n, (unsigned long long)needs,
                       (unsigned long long)limit);
          continue;
        }
        std::fprintf(stderr, "tebench: case threads=%u block=%llu batch=%u\n", t,
                     (unsigned long long)b, n);
        if (runCase(o, bench, remote, t, b, n) != 0) rc = 1;
      }
    }
  }
  std::printf("%s", formatResources(bench.engine->stats().resources).c_str());
  std::fflush(stdout);
  return rc;
}

}  // namespace tent::bench
