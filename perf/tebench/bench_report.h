// tebench output: the sweep table, the QoS class table, the JSONL record
// (Mooncake tebench schema_version 1 plus tent's fields) and the latency dump.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perf/tebench/bench_stats.h"
#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent::bench {

// The header lines stating provider, devices, link model and lcore layout.
std::string formatEngineHeader(const EngineStats& stats);
// "0@cpu1[rail:*,background]; 1@any[background]".
std::string formatLcoreLayout(const std::vector<LcoreStatsView>& lcores);

// Sweep table. The row starts with block size and batch (the same awk works on
// Mooncake's tebench output); a Threads column follows the eight named ones.
std::string formatCaseHeader();
std::string formatCaseRow(const CaseRow& row);

// "resources: endpoints_live=4 endpoints_retired=0 qps_live=16 {soft0=8,soft1=8} reconnects=0
// evictions=0": what the engine holds at the end of a run (issue 9's visibility).
std::string formatResources(const ResourceStats& r);
nlohmann::json resourcesToJson(const ResourceStats& r);

// QoS mode: one row per class and a summary line.
std::string formatQosTable(const QosReport& report);

// What a JSONL record says besides the report.
struct RunContext {
  std::string provider;
  std::string link_model;
  std::string paths;  // EngineStats::paths: direct.mode and the priority lane
  std::vector<std::string> devices;
  std::vector<LcoreStatsView> lcores;
  std::string cmdline;
  std::string run_label;
  std::string op_type;
  double duration_s = 0;
  double warmup_s = 0;
  uint64_t request_interval_us = 0;    // per thread, before each transfer (Mooncake's)
  uint64_t aggregate_interval_us = 0;  // across all threads (tent's)
  std::string tx_resolution = "ns";    // "ns" or "us" (whole microseconds, truncated)
  DirectPathStats direct;              // delta over the measured window
  WorkerPathStats worker;              // delta over the measured window
  ResourceStats resources;             // at the end of the run (gauges and running totals)
};

// Counter deltas (after - before); the histogram subtracts bucket-wise.
DirectPathStats directDelta(const DirectPathStats& before, const DirectPathStats& after);
WorkerPathStats workerDelta(const WorkerPathStats& before, const WorkerPathStats& after);
nlohmann::json directToJson(const DirectPathStats& d);

// One JSONL record. Per-class direct counters are given to the one class the
// automatic rule makes latency-sensitive; with several such classes the
// engine-wide delta cannot be split, and the classes carry null.
nlohmann::json qosRecordJson(const QosReport& report, const RunContext& ctx);

// Appends `record.dump()` and a newline to `path`.
Status appendJsonLine(const std::string& path, const nlohmann::json& record);

// The latency dump: {"run_label", "cmdline", "classes": [{"name", "intent_type",
// "deadline_us", "slo_us", "count", "cdf": [[latency_us, fraction], ...]}]}.
// `sorted_ns[i]` holds class i's ascending samples.
nlohmann::json latencyDumpJson(const QosReport& report,
                               const std::vector<std::vector<uint64_t>>& sorted_ns,
                               const RunContext& ctx);
Status writeJsonFile(const std::string& path, const nlohmann::json& doc);

}  // namespace tent::bench
