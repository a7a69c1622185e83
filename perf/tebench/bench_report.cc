#include "perf/tebench/bench_report.h"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>

namespace tent::bench {
namespace {

using nlohmann::json;

std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

json nullIfZero(double v) {
  return v > 0 ? json(v) : json(nullptr);
}

json optionalJson(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json lcoresToJson(const std::vector<LcoreStatsView>& lcores) {
  json out = json::array();
  for (const auto& l : lcores) {
    out.push_back({{"lcore", l.lcore},
                   {"cpu", l.cpu},
                   {"pollers", l.pollers},
                   {"busy_cycles", l.busy_cycles},
                   {"idle_cycles", l.idle_cycles}});
  }
  return out;
}

json workerToJson(const WorkerPathStats& w) {
  return {{"tasks", w.tasks},
          {"slices_posted", w.slices_posted},
          {"slices_completed", w.slices_completed},
          {"slice_errors", w.slice_errors},
          {"slice_retries", w.slice_retries},
          {"foreground_fallback_slices", w.foreground_fallback_slices}};
}

// The class that alone is latency-sensitive under the automatic rule, or -1.
int soleLatencySensitiveClass(const QosReport& report) {
  int found = -1;
  for (size_t i = 0; i < report.classes.size(); ++i) {
    const auto& c = report.classes[i].config;
    if (!isLatencySensitive(c.intent_type, c.deadline_us)) continue;
    if (found >= 0) return -1;
    found = static_cast<int>(i);
  }
  return found;
}

json classJson(const ClassReport& r, const json& direct) {
  const auto& c = r.config;
  return {
      // Mooncake tebench schema_version 1 fields.
      {"name", c.name},
      {"threads", c.threads},
      {"slo_us", c.slo_us},
      {"weight", c.weight},
      {"operations", r.operations},
      {"transferred_bytes", r.transferred_bytes},
      {"throughput_gbps", r.throughput_gbps},
      {"p99_us", r.latency.p99_us},
      {"slo_attainment", r.slo_attainment},
      {"goodput_gbps", r.goodput_gbps},
      {"weighted_goodput_gbps", r.weighted_goodput_gbps},
      {"isolation_leakage", optionalJson(r.isolation_leakage)},
      {"isolated_throughput_gbps", optionalJson(c.isolated_gbps)},
      // tent's additions.
      {"block_size", c.block_size},
      {"batch_size", c.batch_size},
      {"intent_type", std::string(intentName(c.intent_type))},
      {"deadline_us", c.deadline_us},
      {"poll_mode", std::string(pollModeName(c.poll_mode))},
      {"latency_sensitive", isLatencySensitive(c.intent_type, c.deadline_us)},
      {"avg_us", r.latency.avg_us},
      {"p50_us", r.latency.p50_us},
      {"p999_us", r.latency.p999_us},
      {"min_us", r.latency.min_us},
      {"max_us", r.latency.max_us},
      {"avg_inst_gbps", r.avg_inst_gbps},
      {"avg_us_from_inst_gbps", nullIfZero(r.avg_us_from_inst_gbps)},
      {"failed_transfers", r.failed_transfers},
      {"deadline_expired", r.deadline_expired},
      {"elapsed_s", r.elapsed_s},
      {"direct", direct},
  };
}

// The common value of a per-class field, or null when classes differ.
template <typename Get>
json commonValue(const QosReport& report, Get get) {
  if (report.classes.empty()) return nullptr;
  auto first = get(report.classes.front().config);
  for (const auto& r : report.classes) {
    if (get(r.config) != first) return nullptr;
  }
  return first;
}

}  // namespace

std::string formatLcoreLayout(const std::vector<LcoreStatsView>& lcores) {
  std::vector<std::string> parts;
  for (const auto& l : lcores) {
    std::string cpu = l.cpu >= 0 ? "cpu" + std::to_string(l.cpu) : std::string("any");
    parts.push_back(std::to_string(l.lcore) + "@" + cpu + "[" + l.pollers + "]");
  }
  return parts.empty() ? std::string("(none reported)") : joined(parts, "; ");
}

std::string formatEngineHeader(const EngineStats& stats) {
  std::string out;
  out +=
      "# provider: " + stats.provider +
      (stats.provider_choice.empty() ? std::string() : " (" + stats.provider_choice + ")") +
      "  devices: " + (stats.devices.empty() ? std::string("(none)") : joined(stats.devices, ",")) +
      "\n";
  out +=
      "# link model: " + (stats.link_model.empty() ? std::string("(unknown)") : stats.link_model) +
      "\n";
  out += "# lcores: " + formatLcoreLayout(stats.lcores) + "\n";
  if (!stats.paths.empty()) out += "# paths: " + stats.paths + "\n";
  return out;
}

std::string formatCaseHeader() {
  // Units: GB/s is 1e9 bytes/s (not GiB/s, not UCX's 2^20-byte "MB"); us are 1e-6 s.
  std::string out =
      "# units: GB/s = 10^9 bytes/s; us = microseconds. Avg/P99/P999 Tx: "
      "submitTransfer to the status poll that sees completion; Avg Lat: the whole "
      "loop per transfer (window x threads / transfers); BW: bytes / window\n";
  out += format("%-13s %-7s %-13s %-13s %-13s %-13s %-13s %-13s %s\n", "BlkSize (B)", "Batch",
                "BW (GB/s)", "Avg Inst GB/s", "Avg Lat (us)", "Avg Tx (us)", "P99 Tx (us)",
                "P999 Tx (us)", "Threads");
  out += std::string(120, '-') + "\n";
  return out;
}

std::string formatCaseRow(const CaseRow& r) {
  std::string out =
      format("%-13llu %-7u %-13.6f %-13.6f %-13.1f %-13.1f %-13.1f %-13.1f %u",
             static_cast<unsigned long long>(r.block_size), r.batch_size, r.bw_gbps,
             r.avg_inst_gbps, r.avg_lat_us, r.avg_tx_us, r.p99_tx_us, r.p999_tx_us, r.threads);
  if (r.failed_transfers) out += format("  (%llu failed)", (unsigned long long)r.failed_transfers);
  if (r.sampled < r.transfers)
    out += format("  (Tx columns: a uniform sample of %llu of %llu transfers)",
                  (unsigned long long)r.sampled, (unsigned long long)r.transfers);
  return out + "\n";
}

std::string formatQosTable(const QosReport& report) {
  std::string out = format(
      "%-14s %-7s %-9s %-5s %-15s %-9s %-10s %-10s %-13s %-10s %-10s %-10s %-8s "
      "%-8s %-10s %s\n",
      "Class", "Threads", "Block", "Batch", "Intent", "Ops", "GB/s", "Avg (us)", "AvgInst (us)",
      "P50 (us)", "P99 (us)", "P999 (us)", "SLO (us)", "Attain", "Goodput", "Weight");
  for (const auto& r : report.classes) {
    const auto& c = r.config;
    out += format(
        "%-14s %-7u %-9llu %-5u %-15s %-9llu %-10.4f %-10.1f %-13.1f %-10.1f %-10.1f %-10.1f "
        "%-8llu %-8.4f %-10.4f %g\n",
        c.name.c_str(), c.threads, (unsigned long long)c.block_size, c.batch_size,
        std::string(intentName(c.intent_type)).c_str(), (unsigned long long)r.operations,
        r.throughput_gbps, r.latency.avg_us, r.avg_us_from_inst_gbps, r.latency.p50_us,
        r.latency.p99_us, r.latency.p999_us, (unsigned long long)c.slo_us, r.slo_attainment,
        r.goodput_gbps, c.weight);
  }
  out +=
      format("aggregate_throughput_gbps=%.4f weighted_goodput_gbps=%.4f jain_fairness=%.4f",
             report.aggregate_throughput_gbps, report.weighted_goodput_gbps, report.jain_fairness);
  if (report.total_utilization) {
    out += format(" link_capacity_gbps=%.3f total_utilization=%.4f", report.link_capacity_gbps,
                  *report.total_utilization);
  } else {
    out += " total_utilization=N/A";
  }
  return out + "\n";
}

DirectPathStats directDelta(const DirectPathStats& b, const DirectPathStats& a) {
  DirectPathStats d;
  d.attempted = a.attempted - b.attempted;
  d.succeeded = a.succeeded - b.succeeded;
  d.fallback_lane_busy = a.fallback_lane_busy - b.fallback_lane_busy;
  d.fallback_endpoint_not_ready = a.fallback_endpoint_not_ready - b.fallback_endpoint_not_ready;
  d.fallback_unresolvable = a.fallback_unresolvable - b.fallback_unresolvable;
  d.fallback_over_size_cap = a.fallback_over_size_cap - b.fallback_over_size_cap;
  d.fallback_mode_off = a.fallback_mode_off - b.fallback_mode_off;
  d.post_failures = a.post_failures - b.post_failures;
  d.completion_errors = a.completion_errors - b.completion_errors;
  d.timeouts = a.timeouts - b.timeouts;
  d.retries = a.retries - b.retries;
  d.latency_histogram_ns = a.latency_histogram_ns;
  for (size_t i = 0; i < d.latency_histogram_ns.size() && i < b.latency_histogram_ns.size(); ++i) {
    d.latency_histogram_ns[i] -= b.latency_histogram_ns[i];
  }
  return d;
}

WorkerPathStats workerDelta(const WorkerPathStats& b, const WorkerPathStats& a) {
  WorkerPathStats d;
  d.tasks = a.tasks - b.tasks;
  d.slices_posted = a.slices_posted - b.slices_posted;
  d.slices_completed = a.slices_completed - b.slices_completed;
  d.slice_errors = a.slice_errors - b.slice_errors;
  d.slice_retries = a.slice_retries - b.slice_retries;
  d.foreground_fallback_slices = a.foreground_fallback_slices - b.foreground_fallback_slices;
  return d;
}

json directToJson(const DirectPathStats& d) {
  std::vector<uint64_t> histogram = d.latency_histogram_ns;
  while (!histogram.empty() && histogram.back() == 0) histogram.pop_back();
  return {{"attempted", d.attempted},
          {"succeeded", d.succeeded},
          {"fallback_lane_busy", d.fallback_lane_busy},
          {"fallback_endpoint_not_ready", d.fallback_endpoint_not_ready},
          {"fallback_unresolvable", d.fallback_unresolvable},
          {"fallback_over_size_cap", d.fallback_over_size_cap},
          {"fallback_mode_off", d.fallback_mode_off},
          {"post_failures", d.post_failures},
          {"completion_errors", d.completion_errors},
          {"timeouts", d.timeouts},
          {"retries", d.retries},
          {"latency_histogram_ns", histogram}};
}

std::string formatResources(const ResourceStats& r) {
  std::vector<std::string> per_device;
  for (const auto& [device, qps] : r.qps_per_device) {
    per_device.push_back(device + "=" + std::to_string(qps));
  }
  return format(
      "resources: endpoints_live=%llu endpoints_retired=%llu qps_live=%llu {%s} "
      "reconnects=%llu evictions=%llu\n",
      (unsigned long long)r.endpoints_live, (unsigned long long)r.endpoints_retired,
      (unsigned long long)r.qps_live, joined(per_device, ",").c_str(),
      (unsigned long long)r.reconnects, (unsigned long long)r.evictions);
}

json resourcesToJson(const ResourceStats& r) {
  return {{"endpoints_live", r.endpoints_live},
          {"endpoints_retired", r.endpoints_retired},
          {"qps_live", r.qps_live},
          {"qps_per_device", r.qps_per_device},
          {"reconnects", r.reconnects},
          {"evictions", r.evictions}};
}

json qosRecordJson(const QosReport& report, const RunContext& ctx) {
  const int sole = soleLatencySensitiveClass(report);
  json classes = json::array();
  for (size_t i = 0; i < report.classes.size(); ++i) {
    json direct = static_cast<int>(i) == sole ? directToJson(ctx.direct) : json(nullptr);
    classes.push_back(classJson(report.classes[i], direct));
  }
  uint64_t threads = 0;
  for (const auto& r : report.classes) threads += r.config.threads;
  return {
      {"schema_version", 1},
      {"block_size", commonValue(report, [](const WorkloadClass& c) { return c.block_size; })},
      {"batch_size", commonValue(report, [](const WorkloadClass& c) { return c.batch_size; })},
      {"num_threads", threads},
      {"aggregate_throughput_gbps", report.aggregate_throughput_gbps},
      {"weighted_goodput_gbps", report.weighted_goodput_gbps},
      {"jain_fairness", report.jain_fairness},
      {"max_isolation_leakage", optionalJson(report.max_isolation_leakage)},
      {"link_capacity_gbps", nullIfZero(report.link_capacity_gbps)},
      {"total_utilization",
       report.total_utilization ? json(*report.total_utilization) : json(nullptr)},
      {"classes", classes},
      // tent's additions.
      {"tool", "tent-tebench"},
      {"run_label", ctx.run_label},
      {"timestamp", utcNow()},
      {"provider", ctx.provider},
      {"link_model", ctx.link_model},
      {"paths", ctx.paths},
      {"devices", ctx.devices},
      {"lcores", lcoresToJson(ctx.lcores)},
      {"op_type", ctx.op_type},
      {"duration_s", ctx.duration_s},
      {"warmup_s", ctx.warmup_s},
      {"request_interval_us", ctx.request_interval_us},
      {"aggregate_interval_us", ctx.aggregate_interval_us},
      {"tx_resolution", ctx.tx_resolution},
      {"direct", directToJson(ctx.direct)},
      {"worker", workerToJson(ctx.worker)},
      {"resources", resourcesToJson(ctx.resources)},
      {"cmdline", ctx.cmdline},
  };
}

Status appendJsonLine(const std::string& path, const json& record) {
  std::ofstream out(path, std::ios::app);
  if (!out) return Status::IoError("cannot open '" + path + "' for appending");
  out << record.dump() << '\n';
  out.flush();
  if (!out) return Status::IoError("cannot write to '" + path + "'");
  return Status::OK();
}

json latencyDumpJson(const QosReport& report, const std::vector<std::vector<uint64_t>>& sorted_ns,
                     const RunContext& ctx) {
  json classes = json::array();
  for (size_t i = 0; i < report.classes.size() && i < sorted_ns.size(); ++i) {
    const auto& c = report.classes[i].config;
    json cdf = json::array();
    for (const auto& [us, fraction] : cdfPoints(sorted_ns[i])) cdf.push_back({us, fraction});
    classes.push_back({{"name", c.name},
                       {"intent_type", std::string(intentName(c.intent_type))},
                       {"deadline_us", c.deadline_us},
                       {"slo_us", c.slo_us},
                       {"count", sorted_ns[i].size()},
                       {"cdf", cdf}});
  }
  return {{"run_label", ctx.run_label},
          {"provider", ctx.provider},
          {"link_model", ctx.link_model},
          {"cmdline", ctx.cmdline},
          {"classes", classes}};
}

Status writeJsonFile(const std::string& path, const json& doc) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Status::IoError("cannot open '" + path + "' for writing");
  out << doc.dump() << '\n';
  out.flush();
  if (!out) return Status::IoError("cannot write to '" + path + "'");
  return Status::OK();
}

}  // namespace tent::bench
