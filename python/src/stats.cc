// EngineStats -> dict, in one place: each struct lists its fields once, in the
// order of transfer_engine.h, so a field added to EngineStats is one line here.
// statsFieldCounts() counts the C++ fields, and the stats test compares them with
// the dict, so a field that was forgotten fails a test rather than going missing.
#include <concepts>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "binding.h"

namespace tent::python {

namespace {

template <std::integral T>
py::object toPy(T v) {
  return py::int_(v);
}
inline py::object toPy(double v) {
  return py::float_(v);
}
py::object toPy(const std::string& v);
py::object toPy(bool v) {
  return py::bool_(v);
}
py::object toPy(const FleetStats& s);
template <typename T>
py::object toPy(const std::vector<T>& v);
template <typename T>
py::object toPy(const std::map<std::string, T>& m);
py::object toPy(const LcoreStatsView& s);
py::object toPy(const WorkerPathStats& s);
py::object toPy(const DirectPathStats& s);
py::object toPy(const DeadlineStats& s);
py::object toPy(const ResourceStats& s);
py::object toPy(const ControlStats& s);
py::object toPy(const NotifyStats& s);
py::object toPy(const TargetStats& s);
py::object toPy(const DeviceEventStats& s);

// Builds one dict: Fields()("name", value)("other", value)...
class Fields {
 public:
  template <typename T>
  Fields& operator()(const char* name, const T& value) {
    dict_[name] = toPy(value);
    return *this;
  }
  py::dict dict() const { return dict_; }

 private:
  py::dict dict_;
};

py::object toPy(const std::string& v) {
  return py::str(v);
}

template <typename T>
py::object toPy(const std::vector<T>& v) {
  py::list out;
  for (const T& item : v) out.append(toPy(item));
  return out;
}

template <typename T>
py::object toPy(const std::map<std::string, T>& m) {
  py::dict out;
  for (const auto& [key, value] : m) out[py::str(key)] = toPy(value);
  return out;
}

py::object toPy(const LcoreStatsView& s) {
  return Fields()("lcore", s.lcore)("cpu", s.cpu)("pollers", s.pollers)(
             "busy_cycles", s.busy_cycles)("idle_cycles", s.idle_cycles)
      .dict();
}

py::object toPy(const WorkerPathStats& s) {
  return Fields()("tasks", s.tasks)("slices_posted", s.slices_posted)(
             "slices_completed", s.slices_completed)("slice_errors", s.slice_errors)(
             "slice_retries", s.slice_retries)("foreground_fallback_slices",
                                               s.foreground_fallback_slices)
      .dict();
}

py::object toPy(const DirectPathStats& s) {
  return Fields()("lanes_in_use", s.lanes_in_use)("attempted", s.attempted)(
             "succeeded", s.succeeded)("fallback_lane_busy", s.fallback_lane_busy)(
             "fallback_endpoint_not_ready", s.fallback_endpoint_not_ready)(
             "fallback_unresolvable", s.fallback_unresolvable)("fallback_over_size_cap",
                                                               s.fallback_over_size_cap)(
             "fallback_mode_off", s.fallback_mode_off)("post_failures", s.post_failures)(
             "completion_errors", s.completion_errors)("timeouts", s.timeouts)(
             "retries", s.retries)("latency_histogram_ns", s.latency_histogram_ns)("latency_sum_ns",
                                                                                   s.latency_sum_ns)
      .dict();
}

py::object toPy(const DeadlineStats& s) {
  return Fields()("expired_at_submit", s.expired_at_submit)("missed", s.missed).dict();
}

py::object toPy(const ResourceStats& s) {
  return Fields()("endpoints_live", s.endpoints_live)("endpoints_retired", s.endpoints_retired)(
             "qps_live", s.qps_live)("qps_per_device", s.qps_per_device)(
             "reconnects", s.reconnects)("evictions", s.evictions)
      .dict();
}

py::object toPy(const ControlStats& s) {
  return Fields()("connections_open", s.connections_open)("loopback_connections_open",
                                                          s.loopback_connections_open)(
             "bytes_received", s.bytes_received)("bytes_sent", s.bytes_sent)(
             "frames_received", s.frames_received)("frames_sent", s.frames_sent)(
             "connections_refused", s.connections_refused)("auth_failures", s.auth_failures)(
             "frames_rejected", s.frames_rejected)("deadline_closures", s.deadline_closures)(
             "sessions_evicted", s.sessions_evicted)("source_cap_hits", s.source_cap_hits)(
             "descriptor_fetches", s.descriptor_fetches)
      .dict();
}

py::object toPy(const FleetStats& s) {
  return Fields()("backend", s.backend)("store_up", s.store_up)("registrations", s.registrations)(
             "lease_renewals", s.lease_renewals)("store_errors", s.store_errors)(
             "lookups", s.lookups)("lookups_refused_away", s.lookups_refused_away)(
             "entries_refused", s.entries_refused)("watch_events", s.watch_events)(
             "watch_restarts", s.watch_restarts)("peers_readdressed", s.peers_readdressed)(
             "peers_expired", s.peers_expired)("blobs_added", s.blobs_added)
      .dict();
}

py::object toPy(const TargetStats& s) {
  return Fields()("write_bytes", s.write_bytes)("writes", s.writes)("read_bytes", s.read_bytes)(
             "reads", s.reads)
      .dict();
}

py::object toPy(const NotifyStats& s) {
  return Fields()("sent", s.sent)("sent_bytes", s.sent_bytes)("received", s.received)(
             "received_bytes", s.received_bytes)("refused", s.refused)(
             "unsupported", s.unsupported)("failed", s.failed)("dropped_batches",
                                                               s.dropped_batches)("held", s.held)
      .dict();
}

py::object toPy(const DeviceEventStats& s) {
  return Fields()("fatal", s.fatal)("port_down", s.port_down)("port_up", s.port_up)(
             "address_changes", s.address_changes)("devices_down", s.devices_down)(
             "failed_slices", s.failed_slices)("failed_direct", s.failed_direct)
      .dict();
}

// Counts an aggregate's direct members: the most initialisers T{...} accepts.
// Converting to T& (not T) keeps std::string members from being ambiguous.
struct AnyField {
  template <typename T>
  operator T&() const;  // NOLINT(google-explicit-constructor): unevaluated only
};

template <typename T, typename... Fs>
constexpr size_t fieldCount() {
  if constexpr (requires { T{std::declval<Fs>()..., AnyField{}}; })
    return fieldCount<T, Fs..., AnyField>();
  else
    return sizeof...(Fs);
}

}  // namespace

py::dict statsToDict(const EngineStats& s) {
  return Fields()("provider", s.provider)("provider_choice", s.provider_choice)(
             "link_model", s.link_model)("paths", s.paths)("devices", s.devices)(
             "lcores", s.lcores)("worker", s.worker)("direct", s.direct)("deadlines", s.deadlines)(
             "resources", s.resources)("control", s.control)("fleet", s.fleet)("notify", s.notify)(
             "target", s.target)("device_events", s.device_events)(
             "bytes_transferred", s.bytes_transferred)("bytes_per_device", s.bytes_per_device)(
             "bytes_per_intent", s.bytes_per_intent)("tsc_hz", s.tsc_hz)
      .dict();
}

py::dict statsFieldCounts() {
  py::dict d;
  d["EngineStats"] = fieldCount<EngineStats>();
  d["lcores"] = fieldCount<LcoreStatsView>();
  d["worker"] = fieldCount<WorkerPathStats>();
  d["direct"] = fieldCount<DirectPathStats>();
  d["deadlines"] = fieldCount<DeadlineStats>();
  d["resources"] = fieldCount<ResourceStats>();
  d["control"] = fieldCount<ControlStats>();
  d["fleet"] = fieldCount<FleetStats>();
  d["notify"] = fieldCount<NotifyStats>();
  d["target"] = fieldCount<TargetStats>();
  d["device_events"] = fieldCount<DeviceEventStats>();
  return d;
}

}  // namespace tent::python
