// EngineStats -> Prometheus families. Only public EngineStats fields are read, so
// engine internals can change under this file. Counters stay counters (monotonic
// engine counts), gauges what is held right now.
#include "metrics/collect.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "base/tsc_rate.h"

#ifndef TENT_VERSION
#define TENT_VERSION "unknown"
#endif

namespace tent::metrics {
namespace {

namespace pm = prometheus;
using Labels = std::vector<pm::ClientMetric::Label>;
using Getter = uint64_t (*)(const EngineStats&);

constexpr auto kCounter = pm::MetricType::Counter;
constexpr auto kGauge = pm::MetricType::Gauge;

// One sample of a fixed family: its label value ("" for an unlabelled family).
struct FixedSample {
  const char* label_value;
  Getter get;
};

// A family whose samples are known up front (scalars, or a fixed label set).
struct FixedFamily {
  const char* name;
  const char* help;
  pm::MetricType type;
  const char* label;  // nullptr: one unlabelled sample
  std::vector<FixedSample> samples;
};

// Captureless lambdas become Getter function pointers.
#define TENT_FIELD(expr) [](const EngineStats& s) -> uint64_t { return s.expr; }

const std::vector<FixedFamily>& fixedFamilies() {
  static const std::vector<FixedFamily> kFamilies = {
      // ---- worker path ----
      {"tent_worker_tasks_total",
       "Tasks that took the worker path",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(worker.tasks)}}},
      {"tent_worker_slices_posted_total",
       "Worker slices posted to data QPs",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(worker.slices_posted)}}},
      {"tent_worker_slices_completed_total",
       "Worker slices completed",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(worker.slices_completed)}}},
      {"tent_worker_slice_errors_total",
       "Worker slices that completed with an error",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(worker.slice_errors)}}},
      {"tent_worker_slice_retries_total",
       "Worker slices retried on another device pair",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(worker.slice_retries)}}},
      {"tent_worker_foreground_fallback_slices_total",
       "Latency-sensitive slices served by rail pollers after a direct-path fallback",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(worker.foreground_fallback_slices)}}},
      // ---- direct path ----
      {"tent_direct_lanes_in_use",
       "Direct lane slots held right now, all contexts",
       kGauge,
       nullptr,
       {{"", TENT_FIELD(direct.lanes_in_use)}}},
      {"tent_direct_attempted_total",
       "Requests that tried the direct path",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(direct.attempted)}}},
      {"tent_direct_succeeded_total",
       "Requests posted on the direct path",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(direct.succeeded)}}},
      {"tent_direct_fallbacks_total",
       "Direct-path attempts that fell back to the worker path",
       kCounter,
       "reason",
       {{"lane_busy", TENT_FIELD(direct.fallback_lane_busy)},
        {"endpoint_not_ready", TENT_FIELD(direct.fallback_endpoint_not_ready)},
        {"unresolvable", TENT_FIELD(direct.fallback_unresolvable)},
        {"over_size_cap", TENT_FIELD(direct.fallback_over_size_cap)},
        {"mode_off", TENT_FIELD(direct.fallback_mode_off)}}},
      {"tent_direct_post_failures_total",
       "Direct posts the provider refused",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(direct.post_failures)}}},
      {"tent_direct_completion_errors_total",
       "Direct slices that completed with an error",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(direct.completion_errors)}}},
      {"tent_direct_retries_total",
       "Failed direct slices sent again on the worker path",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(direct.retries)}}},
      {"tent_direct_timeouts_total",
       "Direct slices that hit direct.timeout_ms",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(direct.timeouts)}}},
      // ---- deadlines ----
      {"tent_deadline_expired_at_submit_total",
       "Requests whose deadline had passed at submit (not started, TIMEOUT)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(deadlines.expired_at_submit)}}},
      {"tent_deadline_missed_total",
       "Requests that completed after their deadline",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(deadlines.missed)}}},
      // ---- resources ----
      {"tent_endpoints",
       "Endpoints by state: live (in use) or retired (not yet freed)",
       kGauge,
       "state",
       {{"live", TENT_FIELD(resources.endpoints_live)},
        {"retired", TENT_FIELD(resources.endpoints_retired)}}},
      {"tent_queue_pairs",
       "QPs that exist, all devices",
       kGauge,
       nullptr,
       {{"", TENT_FIELD(resources.qps_live)}}},
      {"tent_endpoint_reconnects_total",
       "Endpoints connected again to a peer device after the first time",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(resources.reconnects)}}},
      {"tent_endpoint_evictions_total",
       "Idle endpoints retired to stay within endpoints.max_per_context",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(resources.evictions)}}},
      // ---- control plane ----
      {"tent_control_connections_open",
       "Control connections with peers open right now (both directions; not the loopback "
       "session)",
       kGauge,
       nullptr,
       {{"", TENT_FIELD(control.connections_open)}}},
      {"tent_control_loopback_connections_open",
       "Ends of the engine's own loopback control session open right now (2 once up)",
       kGauge,
       nullptr,
       {{"", TENT_FIELD(control.loopback_connections_open)}}},
      {"tent_control_bytes_total",
       "Control traffic bytes received and sent, every connection, framing included",
       kCounter,
       "direction",
       {{"received", TENT_FIELD(control.bytes_received)},
        {"sent", TENT_FIELD(control.bytes_sent)}}},
      {"tent_control_frames_total",
       "Control frames received and sent, every connection",
       kCounter,
       "direction",
       {{"received", TENT_FIELD(control.frames_received)},
        {"sent", TENT_FIELD(control.frames_sent)}}},
      {"tent_control_connections_refused_total",
       "Control connections closed at once, or in their handshake, for want of room",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(control.connections_refused)}}},
      {"tent_control_auth_failures_total",
       "Peers that failed or skipped authentication",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(control.auth_failures)}}},
      {"tent_control_frames_rejected_total",
       "Malformed, oversized or out-of-order control frames",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(control.frames_rejected)}}},
      {"tent_control_deadline_closures_total",
       "Control connections closed for missing a read or write deadline",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(control.deadline_closures)}}},
      {"tent_control_sessions_evicted_total",
       "Idle control sessions (holding no endpoint) closed to make room for a new connection",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(control.sessions_evicted)}}},
      {"tent_control_source_cap_hits_total",
       "New control connections from an address at bootstrap.max_connections_per_source",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(control.source_cap_hits)}}},
      // ---- fleet metadata (metadata.backend; all 0 with p2p) ----
      {"tent_fleet_store_up",
       "1 while this engine's entry is registered in etcd under a live lease and etcd answers",
       kGauge,
       nullptr,
       {{"", TENT_FIELD(fleet.store_up)}}},
      {"tent_fleet_registrations_total",
       "Entries this engine put in etcd (first, and again after the store came back)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.registrations)}}},
      {"tent_fleet_lease_renewals_total",
       "Keepalives of this engine's etcd lease that etcd answered",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.lease_renewals)}}},
      {"tent_fleet_store_errors_total",
       "Requests to etcd that failed on every member",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.store_errors)}}},
      {"tent_fleet_lookups_total",
       "Segment entries read from etcd for openSegment",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.lookups)}}},
      {"tent_fleet_lookups_refused_away_total",
       "openSegment lookups failed at once because etcd was unreachable",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.lookups_refused_away)}}},
      {"tent_fleet_entries_refused_total",
       "Entries and metadata blobs that did not verify (forged, altered)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.entries_refused)}}},
      {"tent_fleet_watch_events_total",
       "Peers' entries changed or removed, seen by the watch",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.watch_events)}}},
      {"tent_fleet_watch_restarts_total",
       "Watches on the prefix started again (ended by etcd or the network)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.watch_restarts)}}},
      {"tent_fleet_peers_readdressed_total",
       "Open segments re-resolved by a watch event (the peer restarted)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.peers_readdressed)}}},
      {"tent_fleet_peers_expired_total",
       "Open segments marked down by a watch event (lease gone)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.peers_expired)}}},
      {"tent_fleet_blobs_added_total",
       "Segments opened from a metadata blob (addRemoteMetadata)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(fleet.blobs_added)}}},
      // ---- notifications ----
      {"tent_notify_messages_total",
       "Notifications sent (acknowledged by the peer's NIC) and received (moved into the inbox)",
       kCounter,
       "direction",
       {{"sent", TENT_FIELD(notify.sent)}, {"received", TENT_FIELD(notify.received)}}},
      {"tent_notify_bytes_total",
       "Message bytes of the notifications sent and received",
       kCounter,
       "direction",
       {{"sent", TENT_FIELD(notify.sent_bytes)}, {"received", TENT_FIELD(notify.received_bytes)}}},
      // ---- the target side: what peers did to our memory ----
      {"tent_target_bytes_total",
       "Payload bytes of peers' WRITEs placed in this engine's memory (received) and of their "
       "READs served from it (sent); counted where the provider serves them (tcp)",
       kCounter,
       "direction",
       {{"received", TENT_FIELD(target.write_bytes)}, {"sent", TENT_FIELD(target.read_bytes)}}},
      {"tent_target_operations_total",
       "Peers' WRITEs placed in this engine's memory (received) and READs served from it "
       "(sent); counted where the provider serves them (tcp)",
       kCounter,
       "direction",
       {{"received", TENT_FIELD(target.writes)}, {"sent", TENT_FIELD(target.reads)}}},
      {"tent_notify_refused_total",
       "Notification sends refused by back-pressure: the peer's receive side was full",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(notify.refused)}}},
      {"tent_notify_unsupported_total",
       "Notification sends to a peer whose bootstrap offers no notifications",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(notify.unsupported)}}},
      {"tent_notify_failed_total",
       "Notification sends that failed otherwise (notify QP error, timeout)",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(notify.failed)}}},
      {"tent_notify_dropped_batches_total",
       "Batch notifications not sent because their batch failed or was freed before completing",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(notify.dropped_batches)}}},
      {"tent_notify_held",
       "Notifications received and not yet taken by getNotifications",
       kGauge,
       nullptr,
       {{"", TENT_FIELD(notify.held)}}},
      // ---- device events ----
      {"tent_device_events_total",
       "Events the devices reported: fatal errors, port down, port up, address changes",
       kCounter,
       "event",
       {{"fatal", TENT_FIELD(device_events.fatal)},
        {"port_down", TENT_FIELD(device_events.port_down)},
        {"port_up", TENT_FIELD(device_events.port_up)},
        {"address_change", TENT_FIELD(device_events.address_changes)}}},
      {"tent_devices_down",
       "Devices nothing is routed to right now: port down, or dead after a fatal error",
       kGauge,
       nullptr,
       {{"", TENT_FIELD(device_events.devices_down)}}},
      {"tent_dead_device_failures_total",
       "Transfers' WRs the engine failed itself because their device died (no completion comes)",
       kCounter,
       "path",
       {{"worker", TENT_FIELD(device_events.failed_slices)},
        {"direct", TENT_FIELD(device_events.failed_direct)}}},
      // ---- bytes ----
      {"tent_transferred_bytes_total",
       "Payload bytes moved, both paths",
       kCounter,
       nullptr,
       {{"", TENT_FIELD(bytes_transferred)}}},
  };
  return kFamilies;
}

#undef TENT_FIELD

pm::MetricFamily family(std::string name, std::string help, pm::MetricType type) {
  pm::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

// Sets the value where the family's type reads it.
void add(pm::MetricFamily* f, double value, Labels labels = {}) {
  pm::ClientMetric m;
  m.label = std::move(labels);
  if (f->type == kCounter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

pm::MetricFamily fixed(const FixedFamily& spec, const EngineStats& s) {
  pm::MetricFamily f = family(spec.name, spec.help, spec.type);
  for (const FixedSample& sample : spec.samples) {
    Labels labels;
    if (spec.label != nullptr) labels.push_back({spec.label, sample.label_value});
    add(&f, static_cast<double>(sample.get(s)), std::move(labels));
  }
  return f;
}

// One sample per entry of a name -> value map, labelled `label`.
pm::MetricFamily perName(std::string name, std::string help, pm::MetricType type, const char* label,
                         const std::map<std::string, uint64_t>& values) {
  pm::MetricFamily f = family(std::move(name), std::move(help), type);
  for (const auto& [key, value] : values) add(&f, static_cast<double>(value), {{label, key}});
  return f;
}

// Indexed by IntentType's value; labelled with tent's own spelling ("foreground_get").
pm::MetricFamily perIntent(const std::vector<uint64_t>& bytes) {
  pm::MetricFamily f = family("tent_intent_transferred_bytes_total",
                              "Payload bytes moved, by Request::intent_type", kCounter);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string intent(toString(static_cast<IntentType>(i)));
    if (intent == "unknown") intent += "_" + std::to_string(i);  // keeps labels unique
    add(&f, static_cast<double>(bytes[i]), {{"intent", std::move(intent)}});
  }
  return f;
}

// Seconds: cycles over the TSC rate the engine measured. With no rate (0: no TSC) the
// families have no samples rather than a figure in another unit.
std::vector<pm::MetricFamily> perLcore(const std::vector<LcoreStatsView>& lcores, double tsc_hz) {
  pm::MetricFamily busy = family("tent_lcore_busy_seconds_total",
                                 "Seconds of lcore passes in which some poller was busy", kCounter);
  pm::MetricFamily idle = family("tent_lcore_idle_seconds_total",
                                 "Seconds of idle lcore passes, sleeping included", kCounter);
  if (tsc_hz <= 0) return {std::move(busy), std::move(idle)};
  for (const LcoreStatsView& l : lcores) {
    const Labels labels = {
        {"lcore", std::to_string(l.lcore)}, {"cpu", std::to_string(l.cpu)}, {"pollers", l.pollers}};
    add(&busy, static_cast<double>(l.busy_cycles) / tsc_hz, labels);
    add(&idle, static_cast<double>(l.idle_cycles) / tsc_hz, labels);
  }
  return {std::move(busy), std::move(idle)};
}

// The engine's bucket i holds [2^i, 2^(i+1)) ns and its last bucket everything above, so
// bucket i's upper bound is 2^(i+1) ns and the last one is +Inf.
pm::MetricFamily directLatency(const std::vector<uint64_t>& buckets, uint64_t sum_ns) {
  pm::MetricFamily f =
      family("tent_direct_latency_seconds", "Post-to-completion latency of direct slices",
             pm::MetricType::Histogram);
  pm::ClientMetric m;
  uint64_t cumulative = 0;
  for (size_t i = 0; i + 1 < buckets.size(); ++i) {
    cumulative += buckets[i];
    // Divided, not multiplied by 1e-9: the quotient is the double nearest 2^(i+1) ns, so
    // the text reads "8.192e-06", not "8.192000000000001e-06".
    const double bound = std::ldexp(1.0, static_cast<int>(i + 1)) / 1e9;
    m.histogram.bucket.push_back({cumulative, bound});
  }
  if (!buckets.empty()) cumulative += buckets.back();
  m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = static_cast<double>(sum_ns) / 1e9;
  f.metric.push_back(std::move(m));
  return f;
}

pm::MetricFamily info(const EngineStats& s) {
  pm::MetricFamily f =
      family("tent_engine_info",
             "The fabric provider, why it serves and its link model (value always 1)", kGauge);
  add(&f, 1,
      {{"provider", s.provider},
       {"provider_choice", s.provider_choice},
       {"link_model", s.link_model}});
  return f;
}

pm::MetricFamily fleetInfo(const EngineStats& s) {
  pm::MetricFamily f =
      family("tent_fleet_info",
             "Where this engine finds its peers: metadata.backend (value always 1)", kGauge);
  add(&f, 1, {{"backend", s.fleet.backend}});
  return f;
}

// One engine's families, unlabelled.
std::vector<pm::MetricFamily> engineFamilies(const EngineStats& s) {
  std::vector<pm::MetricFamily> out;
  out.push_back(info(s));
  out.push_back(fleetInfo(s));
  for (const FixedFamily& spec : fixedFamilies()) out.push_back(fixed(spec, s));
  out.push_back(directLatency(s.direct.latency_histogram_ns, s.direct.latency_sum_ns));
  for (pm::MetricFamily& f : perLcore(s.lcores, s.tsc_hz)) out.push_back(std::move(f));
  out.push_back(perName("tent_device_queue_pairs", "QPs that exist, per device", kGauge, "device",
                        s.resources.qps_per_device));
  out.push_back(perName("tent_device_transferred_bytes_total", "Payload bytes moved, per device",
                        kCounter, "device", s.bytes_per_device));
  out.push_back(perIntent(s.bytes_per_intent));
  return out;
}

// What built this process's tent: one sample, value 1, no engine label.
pm::MetricFamily buildInfo() {
  pm::MetricFamily f = family(
      "tent_build_info", "The tent version and compiler of this process (value always 1)", kGauge);
#if defined(__clang__)
  const std::string compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = "gcc " __VERSION__;
#else
  const std::string compiler = "unknown";
#endif
  add(&f, 1, {{"version", TENT_VERSION}, {"compiler", compiler}});
  return f;
}

}  // namespace

std::vector<prometheus::MetricFamily> toFamilies(const std::vector<EngineSnapshot>& engines) {
  std::vector<pm::MetricFamily> out = engineFamilies(EngineStats{});
  for (pm::MetricFamily& f : out) f.metric.clear();  // the names and types, no samples
  for (const EngineSnapshot& e : engines) {
    std::vector<pm::MetricFamily> mine = engineFamilies(e.stats);
    for (size_t i = 0; i < mine.size() && i < out.size(); ++i) {
      for (pm::ClientMetric& m : mine[i].metric) {
        m.label.insert(m.label.begin(), {"engine", e.name});
        out[i].metric.push_back(std::move(m));
      }
    }
  }
  out.push_back(buildInfo());
  return out;
}

}  // namespace tent::metrics
