// QoS mode: every workload class runs at once (its own threads, block size,
// batch size, intent, deadline), measured over one common window.
#include <cstdio>

#include "perf/tebench/bench_report.h"
#include "perf/tebench/bench_run.h"
#include "perf/tebench/bench_runner.h"

namespace tent::bench {
namespace {

// Threads of class 0 first, then class 1, ...; each thread owns a region of
// block_size * batch_size bytes at the same offset locally and remotely.
std::vector<ThreadPlan> qosPlans(const BenchOptions& o, BenchEngine& bench,
                                 const RemoteBuffer& remote) {
  std::vector<ThreadPlan> plans;
  uint64_t offset = 0;
  uint32_t index = 0;
  for (uint32_t c = 0; c < o.classes.size(); ++c) {
    const WorkloadClass& wc = o.classes[c];
    for (uint32_t t = 0; t < wc.threads; ++t) {
      ThreadPlan p;
      p.index = index++;
      p.group = c;
      p.block_size = wc.block_size;
      p.batch_size = wc.batch_size;
      p.local = bench.buffer + offset;
      p.segment = remote.segment;
      p.remote_addr = remote.addr + offset;
      p.op = o.op_type;
      p.check = o.check_consistency;
      p.intent = wc.intent_type;
      p.deadline_us = wc.deadline_us;
      p.poll_mode = wc.poll_mode;
      plans.push_back(p);
      offset += wc.block_size * wc.batch_size;
    }
  }
  return plans;
}

void printProgress(const BenchOptions& o, const std::vector<ThreadPlan>& plans, double seconds,
                   const RunOutcome& outcome) {
  std::vector<uint64_t> per_class(o.classes.size(), 0);
  for (size_t i = 0; i < plans.size(); ++i) {
    per_class[plans[i].group] += outcome.results[i]->completed.load(std::memory_order_relaxed);
  }
  std::string line;
  for (size_t c = 0; c < per_class.size(); ++c) {
    line += " " + o.classes[c].name + "=" + std::to_string(per_class[c]);
  }
  std::fprintf(stderr, "tebench: %4.0f s / %g s, transfers:%s\n", seconds, o.duration_s,
               line.c_str());
}

RunContext makeContext(const BenchOptions& o, const RunOutcome& outcome) {
  RunContext ctx;
  ctx.provider = outcome.after.provider;
  ctx.link_model = outcome.after.link_model;
  ctx.paths = outcome.after.paths;
  ctx.devices = outcome.after.devices;
  ctx.lcores = lcoreDelta(outcome.before, outcome.after);
  ctx.cmdline = o.cmdline;
  ctx.run_label = o.run_label;
  ctx.op_type = std::string(opTypeName(o.op_type));
  ctx.duration_s = o.duration_s;
  ctx.warmup_s = o.warmup_s;
  ctx.request_interval_us = o.request_interval_us;
  ctx.aggregate_interval_us = o.aggregate_interval_us;
  ctx.tx_resolution = o.tx_resolution == TxResolution::kWholeUs ? "us" : "ns";
  ctx.direct = directDelta(outcome.before.direct, outcome.after.direct);
  ctx.worker = workerDelta(outcome.before.worker, outcome.after.worker);
  ctx.resources = outcome.after.resources;
  return ctx;
}

// The direct-path line under the class table: what the window's requests did.
void printDirectSummary(const DirectPathStats& d) {
  std::printf(
      "direct path: attempted=%llu succeeded=%llu fallback{lane_busy=%llu "
      "endpoint_not_ready=%llu unresolvable=%llu over_size_cap=%llu mode_off=%llu} "
      "post_failures=%llu completion_errors=%llu timeouts=%llu retries=%llu\n",
      (unsigned long long)d.attempted, (unsigned long long)d.succeeded,
      (unsigned long long)d.fallback_lane_busy, (unsigned long long)d.fallback_endpoint_not_ready,
      (unsigned long long)d.fallback_unresolvable, (unsigned long long)d.fallback_over_size_cap,
      (unsigned long long)d.fallback_mode_off, (unsigned long long)d.post_failures,
      (unsigned long long)d.completion_errors, (unsigned long long)d.timeouts,
      (unsigned long long)d.retries);
}

}  // namespace

int runQos(const BenchOptions& o, BenchEngine& bench, const RemoteBuffer& remote) {
  const std::vector<ThreadPlan> plans = qosPlans(o, bench, remote);
  RunOutcome outcome = executeRun(
      o, bench, plans, [&](double s, const RunOutcome& out) { printProgress(o, plans, s, out); });

  std::vector<ClassMeasurement> measurements(o.classes.size());
  std::vector<std::vector<const LatencyLog*>> logs(o.classes.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    ClassMeasurement& m = measurements[plans[i].group];
    m.thread_elapsed_s.push_back(outcome.results[i]->elapsed_s);
    logs[plans[i].group].push_back(&outcome.results[i]->samples);
    m.failed_transfers += outcome.results[i]->failed;
    m.deadline_expired += outcome.results[i]->deadline_expired;
  }
  for (size_t c = 0; c < measurements.size(); ++c)
    mergeSamples(logs[c], &measurements[c].transfer_ns, &measurements[c].transfers);
  QosReport report = computeQosReport(o.classes, &measurements, o.qos_link_capacity_gbps);
  RunContext ctx = makeContext(o, outcome);

  std::printf("%s", formatEngineHeader(outcome.after).c_str());
  std::printf(
      "# QoS run%s%s: op %s, %g s measured after %g s warm-up, interval %llu us per thread, "
      "%llu us aggregate; units: GB/s = 10^9 bytes/s, us = microseconds; AvgInst = bytes / "
      "Avg Inst GB/s\n",
      o.run_label.empty() ? "" : " ", o.run_label.c_str(),
      std::string(opTypeName(o.op_type)).c_str(), o.duration_s, o.warmup_s,
      (unsigned long long)o.request_interval_us, (unsigned long long)o.aggregate_interval_us);
  std::printf("%s", formatQosTable(report).c_str());
  printDirectSummary(ctx.direct);
  for (const auto& r : report.classes) {
    if (r.deadline_expired == 0) continue;
    std::printf(
        "deadline: class %s: %llu requests not started, their deadline had passed at "
        "submit (TIMEOUT; counted as SLO misses, not failures)\n",
        r.config.name.c_str(), (unsigned long long)r.deadline_expired);
  }
  std::printf("%s", formatResources(ctx.resources).c_str());
  std::fflush(stdout);

  int rc = reportProblems(outcome) ? 1 : 0;
  if (!o.qos_output_jsonl.empty()) {
    Status s = appendJsonLine(o.qos_output_jsonl, qosRecordJson(report, ctx));
    if (!s.ok()) {
      std::fprintf(stderr, "tebench: --qos_output_jsonl: %s\n", s.toString().c_str());
      rc = 1;
    }
  }
  if (!o.qos_latency_dump.empty()) {
    std::vector<std::vector<uint64_t>> sorted;
    for (auto& m : measurements) sorted.push_back(std::move(m.transfer_ns));  // already sorted
    Status s = writeJsonFile(o.qos_latency_dump, latencyDumpJson(report, sorted, ctx));
    if (!s.ok()) {
      std::fprintf(stderr, "tebench: --qos_latency_dump: %s\n", s.toString().c_str());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace tent::bench
