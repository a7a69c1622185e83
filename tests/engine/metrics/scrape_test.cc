// GET /metrics from an engine in manual lcore mode that moved bytes on both paths:
// after the transfers quiesce, every tent_ series carries the value stats() reports
// at that moment, and nothing else is exported. Also: off by default, a port already
// in use fails engine creation, unknown paths are 404.
#include <civetweb.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "scrape_util.h"
#include "tests/support/engine_test_util.h"

namespace tent::metrics::testing {
namespace {

using tent::testing::checkPattern;
using tent::testing::drainPollers;
using tent::testing::fillPattern;
using tent::testing::makeEngine;
using tent::testing::simYaml;
using tent::testing::testProviderName;
using tent::testing::waitTask;
using Labels = std::map<std::string, std::string>;
using Series = std::map<std::string, double>;  // "name{k=v,...}" -> value

const std::string kListenAnyPort = "metrics: {listen: \"127.0.0.1:0\"}\n";

std::string key(const std::string& name, const Labels& labels = {}) {
  std::string out = name + "{";
  for (const auto& [k, v] : labels) out += k + "=" + v + ",";
  return out + "}";
}

// A bucket bound as "2^k ns", so bounds compare exactly whatever digits the text has.
std::string boundName(double le_seconds) {
  if (std::isinf(le_seconds)) return "+Inf";
  const long k = std::lround(std::log2(le_seconds * 1e9));
  const double power = std::ldexp(1e-9, static_cast<int>(k));
  if (std::fabs(le_seconds - power) > 1e-9 * power) return std::to_string(le_seconds) + "s";
  return "2^" + std::to_string(k) + "ns";
}

// What the exporter must show for `s`, written out here from docs/metrics.md (not from
// the exporter's tables), so a wrong field behind a name fails.
// Every series carries engine="<segment name>"; seconds are cycles over tsc_hz.
Series expectedSeries(const EngineStats& s, const std::string& engine_name) {
  Series out;
  auto putValue = [&out, &engine_name](const std::string& name, double v, Labels labels = {}) {
    labels["engine"] = engine_name;
    out[key(name, labels)] = v;
  };
  auto put = [&putValue](const std::string& name, uint64_t v, const Labels& labels = {}) {
    putValue(name, static_cast<double>(v), labels);
  };
  put("tent_engine_info", 1,
      {{"provider", s.provider},
       {"provider_choice", s.provider_choice},
       {"link_model", s.link_model}});
  put("tent_worker_tasks_total", s.worker.tasks);
  put("tent_worker_slices_posted_total", s.worker.slices_posted);
  put("tent_worker_slices_completed_total", s.worker.slices_completed);
  put("tent_worker_slice_errors_total", s.worker.slice_errors);
  put("tent_worker_slice_retries_total", s.worker.slice_retries);
  put("tent_worker_foreground_fallback_slices_total", s.worker.foreground_fallback_slices);
  put("tent_direct_lanes_in_use", s.direct.lanes_in_use);
  put("tent_direct_attempted_total", s.direct.attempted);
  put("tent_direct_succeeded_total", s.direct.succeeded);
  const std::string fallbacks = "tent_direct_fallbacks_total";
  put(fallbacks, s.direct.fallback_lane_busy, {{"reason", "lane_busy"}});
  put(fallbacks, s.direct.fallback_endpoint_not_ready, {{"reason", "endpoint_not_ready"}});
  put(fallbacks, s.direct.fallback_unresolvable, {{"reason", "unresolvable"}});
  put(fallbacks, s.direct.fallback_over_size_cap, {{"reason", "over_size_cap"}});
  put(fallbacks, s.direct.fallback_mode_off, {{"reason", "mode_off"}});
  put("tent_direct_post_failures_total", s.direct.post_failures);
  put("tent_direct_completion_errors_total", s.direct.completion_errors);
  put("tent_direct_timeouts_total", s.direct.timeouts);
  put("tent_direct_retries_total", s.direct.retries);
  const auto& hist = s.direct.latency_histogram_ns;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < hist.size(); ++i) {
    cumulative += hist[i];
    const bool last = i + 1 == hist.size();  // the engine's last bucket has no upper bound
    put("tent_direct_latency_seconds_bucket", cumulative,
        {{"le", last ? "+Inf" : "2^" + std::to_string(i + 1) + "ns"}});
  }
  put("tent_direct_latency_seconds_count", cumulative);
  putValue("tent_direct_latency_seconds_sum", static_cast<double>(s.direct.latency_sum_ns) / 1e9);
  put("tent_deadline_expired_at_submit_total", s.deadlines.expired_at_submit);
  put("tent_deadline_missed_total", s.deadlines.missed);
  for (const LcoreStatsView& l : s.lcores) {
    const Labels labels = {
        {"lcore", std::to_string(l.lcore)}, {"cpu", std::to_string(l.cpu)}, {"pollers", l.pollers}};
    putValue("tent_lcore_busy_seconds_total", static_cast<double>(l.busy_cycles) / s.tsc_hz,
             labels);
    putValue("tent_lcore_idle_seconds_total", static_cast<double>(l.idle_cycles) / s.tsc_hz,
             labels);
  }
  put("tent_endpoints", s.resources.endpoints_live, {{"state", "live"}});
  put("tent_endpoints", s.resources.endpoints_retired, {{"state", "retired"}});
  put("tent_queue_pairs", s.resources.qps_live);
  for (const auto& [dev, n] : s.resources.qps_per_device)
    put("tent_device_queue_pairs", n, {{"device", dev}});
  put("tent_endpoint_reconnects_total", s.resources.reconnects);
  put("tent_endpoint_evictions_total", s.resources.evictions);
  put("tent_control_connections_open", s.control.connections_open);
  put("tent_control_loopback_connections_open", s.control.loopback_connections_open);
  put("tent_control_bytes_total", s.control.bytes_received, {{"direction", "received"}});
  put("tent_control_bytes_total", s.control.bytes_sent, {{"direction", "sent"}});
  put("tent_control_frames_total", s.control.frames_received, {{"direction", "received"}});
  put("tent_control_frames_total", s.control.frames_sent, {{"direction", "sent"}});
  put("tent_control_connections_refused_total", s.control.connections_refused);
  put("tent_control_auth_failures_total", s.control.auth_failures);
  put("tent_control_frames_rejected_total", s.control.frames_rejected);
  put("tent_control_deadline_closures_total", s.control.deadline_closures);
  put("tent_control_sessions_evicted_total", s.control.sessions_evicted);
  put("tent_control_source_cap_hits_total", s.control.source_cap_hits);
  put("tent_fleet_info", 1, {{"backend", s.fleet.backend}});
  put("tent_fleet_store_up", s.fleet.store_up ? 1 : 0);
  put("tent_fleet_registrations_total", s.fleet.registrations);
  put("tent_fleet_lease_renewals_total", s.fleet.lease_renewals);
  put("tent_fleet_store_errors_total", s.fleet.store_errors);
  put("tent_fleet_lookups_total", s.fleet.lookups);
  put("tent_fleet_lookups_refused_away_total", s.fleet.lookups_refused_away);
  put("tent_fleet_entries_refused_total", s.fleet.entries_refused);
  put("tent_fleet_watch_events_total", s.fleet.watch_events);
  put("tent_fleet_watch_restarts_total", s.fleet.watch_restarts);
  put("tent_fleet_peers_readdressed_total", s.fleet.peers_readdressed);
  put("tent_fleet_peers_expired_total", s.fleet.peers_expired);
  put("tent_fleet_blobs_added_total", s.fleet.blobs_added);
  put("tent_notify_messages_total", s.notify.sent, {{"direction", "sent"}});
  put("tent_notify_messages_total", s.notify.received, {{"direction", "received"}});
  put("tent_notify_bytes_total", s.notify.sent_bytes, {{"direction", "sent"}});
  put("tent_notify_bytes_total", s.notify.received_bytes, {{"direction", "received"}});
  put("tent_notify_refused_total", s.notify.refused);
  put("tent_notify_unsupported_total", s.notify.unsupported);
  put("tent_notify_failed_total", s.notify.failed);
  put("tent_notify_dropped_batches_total", s.notify.dropped_batches);
  put("tent_notify_held", s.notify.held);
  put("tent_target_bytes_total", s.target.write_bytes, {{"direction", "received"}});
  put("tent_target_bytes_total", s.target.read_bytes, {{"direction", "sent"}});
  put("tent_target_operations_total", s.target.writes, {{"direction", "received"}});
  put("tent_target_operations_total", s.target.reads, {{"direction", "sent"}});
  const DeviceEventStats& ev = s.device_events;
  put("tent_device_events_total", ev.fatal, {{"event", "fatal"}});
  put("tent_device_events_total", ev.port_down, {{"event", "port_down"}});
  put("tent_device_events_total", ev.port_up, {{"event", "port_up"}});
  put("tent_device_events_total", ev.address_changes, {{"event", "address_change"}});
  put("tent_devices_down", ev.devices_down);
  put("tent_dead_device_failures_total", ev.failed_slices, {{"path", "worker"}});
  put("tent_dead_device_failures_total", ev.failed_direct, {{"path", "direct"}});
  put("tent_transferred_bytes_total", s.bytes_transferred);
  for (const auto& [dev, n] : s.bytes_per_device)
    put("tent_device_transferred_bytes_total", n, {{"device", dev}});
  for (size_t i = 0; i < s.bytes_per_intent.size(); ++i) {
    put("tent_intent_transferred_bytes_total", s.bytes_per_intent[i],
        {{"intent", std::string(toString(static_cast<IntentType>(i)))}});
  }
  return out;
}

// The tent_ samples of a scrape, bucket bounds as boundName(); tent_build_info (not from
// stats()) is handed back on its own.
Series scrapedSeries(const Exposition& e, std::vector<Sample>* build_info) {
  Series out;
  for (const Sample& s : e.samples) {
    if (s.name.rfind("tent_", 0) != 0) continue;
    if (s.name == "tent_build_info") {
      build_info->push_back(s);
      continue;
    }
    Labels labels = s.labels;
    if (auto le = labels.find("le"); le != labels.end())
      le->second = boundName(std::strtod(le->second.c_str(), nullptr));
    EXPECT_EQ(out.count(key(s.name, labels)), 0u) << "exported twice: " << key(s.name, labels);
    out[key(s.name, labels)] = s.value;
  }
  return out;
}

struct Scrape : ::testing::Test {
  static constexpr size_t kBuf = 1 << 20;
  void SetUp() override {
    engine = makeEngine(simYaml(kListenAnyPort));
    ASSERT_NE(engine, nullptr);
    ASSERT_NE(engine->metricsExporter(), nullptr);
    port = engine->metricsExporter()->port();
    ASSERT_NE(port, 0);
    src = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
    dst = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
  }
  // One request in its own batch, waited for (pollers stepped) and checked.
  void transfer(OpCode op, size_t offset, size_t length, IntentType intent) {
    auto b = engine->allocateBatch(1);
    ASSERT_TRUE(b.ok());
    Request r;
    r.opcode = op;
    r.source = src + offset;
    r.target_offset = reinterpret_cast<uint64_t>(dst + offset);
    r.length = length;
    r.intent_type = intent;
    ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
    const TransferStatus st = waitTask(*engine, *b, 0);
    ASSERT_EQ(st.state, TransferState::COMPLETED);
    EXPECT_EQ(st.transferred_bytes, length);
    EXPECT_TRUE(engine->freeBatch(*b).ok());
  }
  std::unique_ptr<TransferEngineImpl> engine;
  uint16_t port = 0;
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
};

TEST_F(Scrape, SeriesCarryTheValuesStatsReports) {
  fillPattern(src, kBuf, 11);
  transfer(OpCode::WRITE, 0, 256 << 10, IntentType::UNSPEC);  // worker path, 4 slices
  // The first foreground request may find no endpoint yet and fall back; once the
  // endpoints are up one takes the direct lane. Bounded.
  for (int i = 0; i < 100 && engine->stats().direct.succeeded == 0; ++i)
    transfer(OpCode::WRITE, 256 << 10, 4096, IntentType::FOREGROUND_GET);
  ASSERT_GT(engine->stats().direct.succeeded, 0u);
  std::memset(src, 0, 64 << 10);
  transfer(OpCode::READ, 0, 64 << 10, IntentType::MIGRATION);
  EXPECT_EQ(checkPattern(src, 64 << 10, 11), -1);
  EXPECT_EQ(checkPattern(dst, 256 << 10, 11), -1);
  ASSERT_TRUE(drainPollers(*engine));

  // Quiesced: nothing steps the pollers now. Scrape between two snapshots that agree.
  Series expected, scraped;
  std::vector<Sample> build_info;
  bool stable = false;
  const std::string name = engine->segmentName();
  for (int attempt = 0; attempt < 20 && !stable; ++attempt) {
    const EngineStats before = engine->stats();
    const HttpReply reply = httpGet(port, "/metrics");
    ASSERT_EQ(reply.status, 200) << reply.error;
    const Exposition e = parseExposition(reply.body);
    EXPECT_TRUE(e.errors.empty()) << e.errors.front();
    build_info.clear();
    scraped = scrapedSeries(e, &build_info);
    expected = expectedSeries(before, name);
    stable = expected == expectedSeries(engine->stats(), name);
  }
  ASSERT_TRUE(stable) << "stats() kept changing with no transfer running";

  // Something was measured, so equal series are not zeros on both sides.
  const EngineStats s = engine->stats();
  EXPECT_GE(s.worker.tasks, 2u);
  EXPECT_GT(s.bytes_transferred, 0u);
  EXPECT_GT(s.resources.qps_live, 0u);
  ASSERT_EQ(s.lcores.size(), 2u);
  EXPECT_GT(s.lcores[0].busy_cycles + s.lcores[1].busy_cycles, 0u);
  ASSERT_GT(s.tsc_hz, 0.0) << "no TSC rate: lcore seconds cannot be exported";
  const Labels just_engine = {{"engine", name}};
  EXPECT_GE(expected[key("tent_direct_latency_seconds_count", just_engine)], 1.0);
  // A finite, positive sum: the mean latency is sum / count.
  const double sum = scraped[key("tent_direct_latency_seconds_sum", just_engine)];
  EXPECT_TRUE(std::isfinite(sum) && sum > 0) << sum;
  const std::string choice =
      "configured (fabric.provider: " + std::string(testProviderName()) + ")";
  EXPECT_EQ(s.provider_choice, choice);
  EXPECT_EQ(expected.count(key("tent_engine_info", {{"provider", std::string(testProviderName())},
                                                    {"provider_choice", choice},
                                                    {"link_model", s.link_model},
                                                    {"engine", name}})),
            1u);
  ASSERT_EQ(build_info.size(), 1u);
  EXPECT_EQ(build_info[0].value, 1.0);
  EXPECT_FALSE(build_info[0].labels["version"].empty());
  EXPECT_FALSE(build_info[0].labels["compiler"].empty());
  EXPECT_EQ(build_info[0].labels.count("engine"), 0u) << "one per process";

  for (const auto& [series, value] : expected) {
    auto it = scraped.find(series);
    if (it == scraped.end()) {
      ADD_FAILURE() << "not exported: " << series;
    } else {
      // Seconds are quotients: the text form may round the last digit.
      EXPECT_NEAR(it->second, value, 1e-12 * std::fabs(value)) << series;
    }
  }
  for (const auto& [series, value] : scraped)
    EXPECT_EQ(expected.count(series), 1u) << "exported but not in stats(): " << series;
}

TEST_F(Scrape, MetricsAddressNamesTheBoundPort) {
  EXPECT_EQ(engine->metricsAddress(), "127.0.0.1:" + std::to_string(port));
  auto off = makeEngine(simYaml());
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->metricsAddress(), "");
}

// Two engines of one process with the same metrics.listen share one server; each
// series carries its engine's name, and the server goes with the last engine.
TEST(MetricsEndpoint, EnginesOfAProcessShareOneExporter) {
  auto a = makeEngine(simYaml(kListenAnyPort));
  ASSERT_NE(a, nullptr);
  auto b = makeEngine(simYaml(kListenAnyPort));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->metricsAddress(), b->metricsAddress());
  EXPECT_EQ(attachedEngines("127.0.0.1:0"), 2u);
  const HttpReply reply = httpGet(a->metricsExporter()->port(), "/metrics");
  ASSERT_EQ(reply.status, 200) << reply.error;
  std::set<std::string> engines;
  size_t build_infos = 0;
  for (const Sample& s : parseExposition(reply.body).samples) {
    if (s.name == "tent_build_info") ++build_infos;
    if (s.name == "tent_transferred_bytes_total") engines.insert(s.labels.at("engine"));
  }
  EXPECT_EQ(engines, (std::set<std::string>{a->segmentName(), b->segmentName()}));
  EXPECT_EQ(build_infos, 1u);
  const uint16_t port = a->metricsExporter()->port();
  a.reset();
  EXPECT_EQ(attachedEngines("127.0.0.1:0"), 1u);
  EXPECT_EQ(httpGet(port, "/metrics").status, 200) << "b still serves";
  b.reset();
  EXPECT_EQ(attachedEngines("127.0.0.1:0"), 0u);
}

// One sample of a scrape of `port`: the family `name` with these labels (engine
// included), or -1 when absent.
double scrapeOne(uint16_t port, const std::string& name, const Labels& labels) {
  const HttpReply reply = httpGet(port, "/metrics");
  EXPECT_EQ(reply.status, 200) << reply.error;
  for (const Sample& s : parseExposition(reply.body).samples)
    if (s.name == name && s.labels == labels) return s.value;
  return -1;
}

// The tcp provider serves peers' WRITEs and READs on its receive path, so the target
// sees them: an engine that only receives shows its bytes under tent_target_*, while
// its own initiator figures stay 0; the initiator's target figures stay 0.
TEST(MetricsTargetSide, ATcpTargetCountsThePeersWritesAndReads) {
  auto tcp = [](const std::string& extra) {
    std::string yaml = simYaml(extra);
    const std::string fabric = tent::testing::fabricYaml();
    yaml.replace(yaml.find(fabric), fabric.size(), R"(fabric:
  provider: tcp
  tcp:
    devices:
      - {name: soft0, listen: '127.0.0.1:0'}
      - {name: soft1, listen: '127.0.0.1:0'}
    retry_budget_ms: 2000
)");
    return yaml;
  };
  auto initiator = makeEngine(tcp(""));
  auto target = makeEngine(tcp(kListenAnyPort));
  ASSERT_TRUE(initiator && target);
  constexpr size_t kWrite = 256 << 10, kRead = 64 << 10;
  auto* src = static_cast<uint8_t*>(*initiator->allocateLocalMemory(kWrite, "cpu:0"));
  auto* dst = static_cast<uint8_t*>(*target->allocateLocalMemory(kWrite, "cpu:0"));
  auto seg = initiator->openSegment(target->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  auto run = [&](OpCode op, size_t length) {
    auto b = initiator->allocateBatch(1);
    ASSERT_TRUE(b.ok());
    Request r{op, src, *seg, reinterpret_cast<uint64_t>(dst), length};
    ASSERT_TRUE(initiator->submitTransfer(*b, {&r, 1}).ok());
    ASSERT_EQ(waitTask(*initiator, *b, 0).state, TransferState::COMPLETED);
    EXPECT_TRUE(initiator->freeBatch(*b).ok());
  };
  fillPattern(src, kWrite, 21);
  run(OpCode::WRITE, kWrite);
  EXPECT_EQ(checkPattern(dst, kWrite, 21), -1);
  std::memset(src, 0, kRead);
  run(OpCode::READ, kRead);
  EXPECT_EQ(checkPattern(src, kRead, 21), -1);
  ASSERT_TRUE(drainPollers(*initiator));

  const EngineStats t = target->stats();
  EXPECT_EQ(t.target.write_bytes, kWrite);
  EXPECT_EQ(t.target.read_bytes, kRead);
  EXPECT_GE(t.target.writes, 1u);
  EXPECT_GE(t.target.reads, 1u);
  EXPECT_EQ(t.bytes_transferred, 0u);  // it initiated nothing
  const EngineStats i = initiator->stats();
  EXPECT_EQ(i.bytes_transferred, kWrite + kRead);
  EXPECT_EQ(i.target.write_bytes + i.target.read_bytes, 0u);
  // The scrape shows the same, under direction labels.
  const uint16_t port = target->metricsExporter()->port();
  const std::string name = target->segmentName();
  EXPECT_EQ(
      scrapeOne(port, "tent_target_bytes_total", {{"direction", "received"}, {"engine", name}}),
      static_cast<double>(kWrite));
  EXPECT_EQ(scrapeOne(port, "tent_target_bytes_total", {{"direction", "sent"}, {"engine", name}}),
            static_cast<double>(kRead));
  EXPECT_GE(scrapeOne(port, "tent_target_operations_total",
                      {{"direction", "received"}, {"engine", name}}),
            1.0);
  EXPECT_GT(
      scrapeOne(port, "tent_control_bytes_total", {{"direction", "received"}, {"engine", name}}),
      0.0);
}

// The gauge of open control connections counts peers only: a fresh engine shows 0 and
// its loopback session apart (2 ends); a peer's session adds one end on each side.
TEST(MetricsControl, OpenConnectionsCountPeersNotTheLoopbackSession) {
  auto a = makeEngine(simYaml(kListenAnyPort));
  auto b = makeEngine(simYaml());
  ASSERT_TRUE(a && b);
  const uint16_t port = a->metricsExporter()->port();
  const Labels just_a = {{"engine", a->segmentName()}};
  EXPECT_EQ(scrapeOne(port, "tent_control_connections_open", just_a), 0.0);
  EXPECT_EQ(scrapeOne(port, "tent_control_loopback_connections_open", just_a), 2.0);
  EXPECT_EQ(a->stats().control.connections_open, 0u);
  EXPECT_EQ(b->stats().control.connections_open, 0u);
  EXPECT_EQ(b->stats().control.loopback_connections_open, 2u);
  // b's session to a: up once openSegment returns, so a has accepted its end.
  auto seg = b->openSegment(a->segmentName());
  ASSERT_TRUE(seg.ok()) << seg.status().toString();
  EXPECT_EQ(b->stats().control.connections_open, 1u);
  EXPECT_EQ(a->stats().control.connections_open, 1u);
  EXPECT_EQ(scrapeOne(port, "tent_control_connections_open", just_a), 1.0);
  EXPECT_EQ(scrapeOne(port, "tent_control_loopback_connections_open", just_a), 2.0);
  // Closing it ends both ends (a's when it sees the socket close: polled, bounded).
  ASSERT_TRUE(b->closeSegment(*seg).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((a->stats().control.connections_open != 0 || b->stats().control.connections_open != 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(b->stats().control.connections_open, 0u);
  EXPECT_EQ(a->stats().control.connections_open, 0u);
  EXPECT_EQ(a->stats().control.loopback_connections_open, 2u);
}

TEST_F(Scrape, OnlyMetricsIsServed) {
  EXPECT_EQ(httpGet(port, "/metrics").status, 200);
  EXPECT_EQ(httpGet(port, "/").status, 404);
  EXPECT_EQ(httpGet(port, "/other").status, 404);
}

TEST(MetricsEndpoint, OffByDefault) {
  auto engine = makeEngine(simYaml());
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->metricsExporter(), nullptr);
  EXPECT_EQ(engine->config().metrics.listen, "");
}

// A port that another socket listens on: engine creation fails, naming the key and
// the address, instead of running without the endpoint the config asked for.
TEST(MetricsEndpoint, PortInUseFailsEngineCreation) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string listen = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  auto e = TransferEngine::createFromYaml(simYaml("metrics: {listen: \"" + listen + "\"}\n"));
  ::close(fd);
  ASSERT_FALSE(e.ok());
  const std::string& m = e.status().message();
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable) << m;
  EXPECT_NE(m.find("metrics.listen"), std::string::npos) << m;
  EXPECT_NE(m.find("cannot serve metrics on " + listen), std::string::npos) << m;
  EXPECT_NE(m.find("in use"), std::string::npos) << m;
}

// Debian 12's civetweb has no IPv6: an IPv6 address (valid in the config) then fails
// engine creation saying so; with an IPv6 civetweb the endpoint comes up.
TEST(MetricsEndpoint, Ipv6NeedsCivetwebWithIpv6) {
  auto e = TransferEngine::createFromYaml(simYaml("metrics: {listen: \"[::1]:0\"}\n"));
  if (mg_check_feature(8) == 0) {
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), StatusCode::kNotSupported);
    EXPECT_NE(e.status().message().find("metrics.listen"), std::string::npos);
    EXPECT_NE(e.status().message().find("without IPv6"), std::string::npos);
  } else {
    EXPECT_TRUE(e.ok()) << e.status().toString();
  }
}

}  // namespace
}  // namespace tent::metrics::testing
