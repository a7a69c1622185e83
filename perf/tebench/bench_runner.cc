#include "perf/tebench/bench_runner.h"

#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

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
  p.deadline_us = o.deadline_us;
  p.poll_mode = o.poll_mode;
  return p;
}

int runCase(const BenchOptions& o, BenchEngine& bench, const RemoteBuffer& remote, uint32_t threads,
            uint64_t block, uint32_t batch) {
  std::vector<ThreadPlan> plans;
  const uint64_t region = block * batch;
  for (uint32_t i = 0; i < threads; ++i) {
    ThreadPlan p = basePlan(o, remote);
    p.index = i;
    p.block_size = block;
    p.batch_size = batch;
    p.local = bench.buffer + i * region;
    p.remote_addr = remote.addr + i * region;
    plans.push_back(p);
  }
  RunOutcome outcome = executeRun(o, bench, plans, nullptr);
  CaseMeasurement m;
  m.block_size = block;
  m.batch_size = batch;
  m.threads = threads;
  for (const auto& r : outcome.results) {
    m.thread_elapsed_s.push_back(r->elapsed_s);
    r->samples.appendTo(&m.transfer_ns);
    m.failed_transfers += r->failed;
  }
  std::printf("%s", formatCaseRow(computeCaseRow(&m)).c_str());
  std::fflush(stdout);
  return reportProblems(outcome) ? 1 : 0;
}

}  // namespace

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
      "# op: %s  duration: %g s  warm-up: %g s  interval: %llu us  intent: %s  "
      "deadline: %llu us  target: %s\n",
      std::string(opTypeName(o.op_type)).c_str(), o.duration_s, o.warmup_s,
      (unsigned long long)o.request_interval_us, std::string(intentName(o.intent_type)).c_str(),
      (unsigned long long)o.deadline_us, o.target_seg_name.c_str());
  std::printf("%s", formatCaseHeader().c_str());
  std::fflush(stdout);
  int rc = 0;
  const uint64_t limit = std::min<uint64_t>(bench.buffer_size, remote.length);
  for (uint32_t t = o.start_num_threads; t <= o.max_num_threads; t *= 2) {
    for (uint64_t b = o.start_block_size; b <= o.max_block_size; b *= 2) {
      for (uint32_t n = o.start_batch_size; n <= o.max_batch_size; n *= 2) {
        if (b * n * t > limit) {
          std::fprintf(stderr,
                       "tebench: skip threads=%u block=%llu batch=%u: needs %llu bytes, "
                       "buffer has %llu\n",
                       t, (unsigned long long)b, n, (unsigned long long)(b * n * t),
                       (unsigned long long)limit);
          continue;
        }
        std::fprintf(stderr, "tebench: case threads=%u block=%llu batch=%u\n", t,
                     (unsigned long long)b, n);
        if (runCase(o, bench, remote, t, b, n) != 0) rc = 1;
      }
    }
  }
  return rc;
}

}  // namespace tent::bench
