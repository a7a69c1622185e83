// tebench output: table layout and the JSONL record's field names (Mooncake
// tebench schema_version 1 plus tent's fields).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "perf/tebench/bench_report.h"

namespace tent::bench {
namespace {

using nlohmann::json;

QosReport sampleReport(std::vector<std::vector<uint64_t>>* sorted) {
  WorkloadClass fg;
  fg.name = "foreground";
  fg.threads = 2;
  fg.block_size = 4096;
  fg.intent_type = IntentType::FOREGROUND_GET;
  fg.slo_us = 300;
  fg.weight = 4;
  WorkloadClass bg;
  bg.name = "migration";
  bg.threads = 6;
  bg.block_size = 4 << 20;
  bg.batch_size = 2;
  bg.intent_type = IntentType::MIGRATION;
  std::vector<ClassMeasurement> m(2);
  m[0].thread_elapsed_s = {1.0, 1.0};
  m[0].transfer_ns = {3000, 1000, 2000};
  m[1].thread_elapsed_s = {1.0};
  m[1].transfer_ns = {900'000};
  QosReport r = computeQosReport({fg, bg}, &m, 25.0);
  for (auto& x : m) sorted->push_back(x.transfer_ns);
  return r;
}

RunContext sampleContext() {
  RunContext ctx;
  ctx.provider = "soft";
  ctx.link_model = "2 ports x 100 Gb/s, 2000 ns";
  ctx.devices = {"soft0", "soft1"};
  ctx.lcores = {{0, 1, "rail:*,background", 10, 20}};
  ctx.cmdline = "tebench --x";
  ctx.run_label = "direct";
  ctx.direct.attempted = 10;
  ctx.direct.succeeded = 8;
  ctx.direct.fallback_lane_busy = 2;
  ctx.direct.latency_histogram_ns = {0, 3, 5, 0, 0};
  ctx.resources.endpoints_live = 4;
  ctx.resources.endpoints_retired = 1;
  ctx.resources.qps_live = 16;
  ctx.resources.qps_per_device = {{"soft0", 9}, {"soft1", 7}};
  ctx.resources.reconnects = 2;
  ctx.resources.evictions = 3;
  return ctx;
}

TEST(Report, CaseTableRowStartsWithBlockAndBatch) {
  const std::string header = formatCaseHeader();
  const char* columns[] = {"BlkSize (B)",  "Batch",       "BW (GB/s)",   "Avg Inst GB/s",
                           "Avg Lat (us)", "Avg Tx (us)", "P99 Tx (us)", "P999 Tx (us)"};
  size_t at = 0;
  for (const char* col : columns) {  // in this order
    size_t found = header.find(col, at);
    ASSERT_NE(found, std::string::npos) << col;
    at = found + 1;
  }
  CaseRow row;
  row.block_size = 65536;
  row.batch_size = 4;
  row.threads = 2;
  row.bw_gbps = 1.5;
  row.avg_inst_gbps = 2.25;
  row.avg_lat_us = 10;
  row.avg_tx_us = 9;
  row.p99_tx_us = 12;
  row.p999_tx_us = 15;
  std::istringstream fields(formatCaseRow(row));
  std::string block, batch;
  double bw, inst, lat, tx, p99, p999;
  unsigned threads;
  fields >> block >> batch >> bw >> inst >> lat >> tx >> p99 >> p999 >> threads;
  EXPECT_EQ(block, "65536");
  EXPECT_EQ(batch, "4");
  EXPECT_DOUBLE_EQ(bw, 1.5);
  EXPECT_DOUBLE_EQ(inst, 2.25);
  EXPECT_DOUBLE_EQ(p999, 15);
  EXPECT_EQ(threads, 2u);
}

TEST(Report, ResourcesLineNamesEveryCountAndDevice) {
  const std::string line = formatResources(sampleContext().resources);
  for (const char* part : {"endpoints_live=4", "endpoints_retired=1", "qps_live=16",
                           "{soft0=9,soft1=7}", "reconnects=2", "evictions=3"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << "\n" << line;
  }
}

TEST(Report, EngineHeaderStatesProviderDevicesLinkAndLcores) {
  EngineStats s;
  s.provider = "soft";
  s.provider_choice = "configured (fabric.provider: soft)";
  s.link_model = "soft0: 100 Gb/s";
  s.devices = {"soft0", "soft1"};
  s.lcores = {{0, 1, "rail:*,background", 0, 0}, {1, -1, "background", 0, 0}};
  s.paths = "direct.mode=off workers.priority_lane=on";
  const std::string h = formatEngineHeader(s);
  for (const char* part :
       {"provider: soft (configured (fabric.provider: soft))", "soft0,soft1",
        "link model: soft0: 100 Gb/s", "0@cpu1[rail:*,background]", "1@any[background]",
        "# paths: direct.mode=off workers.priority_lane=on"}) {
    EXPECT_NE(h.find(part), std::string::npos) << part << "\n" << h;
  }
}

TEST(Report, JsonlKeepsMooncakeSchemaV1Fields) {
  std::vector<std::vector<uint64_t>> sorted;
  QosReport report = sampleReport(&sorted);
  json rec = qosRecordJson(report, sampleContext());
  EXPECT_EQ(rec["schema_version"], 1);
  for (const char* key : {"aggregate_throughput_gbps", "weighted_goodput_gbps", "jain_fairness",
                          "link_capacity_gbps", "total_utilization", "classes"}) {
    EXPECT_TRUE(rec.contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(rec["link_capacity_gbps"].get<double>(), 25.0);
  ASSERT_EQ(rec["classes"].size(), 2u);
  for (const auto& c : rec["classes"]) {
    for (const char* key :
         {"name", "threads", "operations", "transferred_bytes", "throughput_gbps", "p99_us",
          "slo_us", "slo_attainment", "goodput_gbps", "weight", "weighted_goodput_gbps"}) {
      EXPECT_TRUE(c.contains(key)) << key;
    }
  }
}

TEST(Report, JsonlAddsTentFields) {
  std::vector<std::vector<uint64_t>> sorted;
  QosReport report = sampleReport(&sorted);
  json rec = qosRecordJson(report, sampleContext());
  for (const char* key : {"provider", "link_model", "lcores", "cmdline", "direct", "worker",
                          "run_label", "devices"}) {
    EXPECT_TRUE(rec.contains(key)) << key;
  }
  EXPECT_EQ(rec["provider"], "soft");
  EXPECT_EQ(rec["lcores"][0]["pollers"], "rail:*,background");
  EXPECT_EQ(rec["direct"]["attempted"], 10);
  EXPECT_EQ(rec["direct"]["fallback_lane_busy"], 2);
  EXPECT_EQ(rec["direct"]["latency_histogram_ns"], json({0, 3, 5}));  // trailing zeros trimmed
  EXPECT_EQ(rec["resources"]["endpoints_live"], 4);
  EXPECT_EQ(rec["resources"]["endpoints_retired"], 1);
  EXPECT_EQ(rec["resources"]["qps_live"], 16);
  EXPECT_EQ(rec["resources"]["qps_per_device"]["soft0"], 9);
  EXPECT_EQ(rec["resources"]["qps_per_device"]["soft1"], 7);
  EXPECT_EQ(rec["resources"]["reconnects"], 2);
  EXPECT_EQ(rec["resources"]["evictions"], 3);
  const auto& fg = rec["classes"][0];
  for (const char* key : {"avg_us", "p50_us", "p999_us", "intent_type", "deadline_us",
                          "avg_inst_gbps", "failed_transfers", "direct"}) {
    EXPECT_TRUE(fg.contains(key)) << key;
  }
  EXPECT_EQ(fg["intent_type"], "foreground_get");
  EXPECT_DOUBLE_EQ(fg["p50_us"].get<double>(), 2.0);
  // The RFC's average derived from instantaneous bandwidth, beside the measured
  // one: 1, 2 and 3 us give 3 / (1 + 1/2 + 1/3) = 18/11 us; avg_us stays 2.
  ASSERT_TRUE(fg.contains("avg_us_from_inst_gbps"));
  EXPECT_NEAR(fg["avg_us_from_inst_gbps"].get<double>(), 18.0 / 11.0, 1e-12);
  EXPECT_DOUBLE_EQ(fg["avg_us"].get<double>(), 2.0);
  // Without isolated_gbps, Mooncake's isolation fields stay null.
  EXPECT_TRUE(fg["isolation_leakage"].is_null());
  EXPECT_TRUE(fg["isolated_throughput_gbps"].is_null());
  EXPECT_TRUE(rec["max_isolation_leakage"].is_null());
  // The one latency-sensitive class gets the direct counters; the other null.
  EXPECT_EQ(fg["direct"]["succeeded"], 8);
  EXPECT_TRUE(rec["classes"][1]["direct"].is_null());
  // Classes differ in block size: the top-level block_size is null.
  EXPECT_TRUE(rec["block_size"].is_null());
  EXPECT_EQ(rec["num_threads"], 8);
}

TEST(Report, IsolationLeakageAndNoInstantaneousBandwidth) {
  WorkloadClass c;
  c.name = "a";
  c.threads = 1;
  c.block_size = 1000;
  c.isolated_gbps = 4.0;
  std::vector<ClassMeasurement> m(1);
  m[0].thread_elapsed_s = {1.0};
  m[0].transfer_ns.assign(1'000'000, 1000);  // 1 GB/s of a 4 GB/s isolated figure
  json rec = qosRecordJson(computeQosReport({c}, &m, 0), RunContext{});
  EXPECT_DOUBLE_EQ(rec["classes"][0]["isolated_throughput_gbps"].get<double>(), 4.0);
  EXPECT_NEAR(rec["classes"][0]["isolation_leakage"].get<double>(), 0.75, 1e-12);
  EXPECT_NEAR(rec["max_isolation_leakage"].get<double>(), 0.75, 1e-12);
  std::vector<ClassMeasurement> none(1);  // no transfers: nothing to derive from
  json empty = qosRecordJson(computeQosReport({c}, &none, 0), RunContext{});
  EXPECT_TRUE(empty["classes"][0]["avg_us_from_inst_gbps"].is_null());
}

TEST(Report, CaseHeaderStatesUnits) {
  const std::string header = formatCaseHeader();
  EXPECT_NE(header.find("GB/s = 10^9 bytes/s"), std::string::npos) << header;
  EXPECT_NE(header.find("submitTransfer to the status poll"), std::string::npos) << header;
}

TEST(Report, UnknownCapacityIsNull) {
  WorkloadClass c;
  c.name = "a";
  c.threads = 1;
  c.block_size = 8;
  std::vector<ClassMeasurement> m(1);
  QosReport r = computeQosReport({c}, &m, 0);
  json rec = qosRecordJson(r, RunContext{});
  EXPECT_TRUE(rec["link_capacity_gbps"].is_null());
  EXPECT_TRUE(rec["total_utilization"].is_null());
  EXPECT_EQ(rec["block_size"], 8);
}

TEST(Report, AppendJsonLineAppendsParsableLines) {
  const std::string path = ::testing::TempDir() + "tebench_report_test.jsonl";
  std::remove(path.c_str());
  std::vector<std::vector<uint64_t>> sorted;
  QosReport report = sampleReport(&sorted);
  ASSERT_TRUE(appendJsonLine(path, qosRecordJson(report, sampleContext())).ok());
  ASSERT_TRUE(appendJsonLine(path, qosRecordJson(report, sampleContext())).ok());
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    json rec = json::parse(line, nullptr, false);
    ASSERT_FALSE(rec.is_discarded()) << line;
    EXPECT_EQ(rec["schema_version"], 1);
    ++lines;
  }
  EXPECT_EQ(lines, 2);
  std::remove(path.c_str());
  EXPECT_FALSE(appendJsonLine("/nonexistent-dir/x.jsonl", json::object()).ok());
}

TEST(Report, LatencyDumpHasCdfPerClass) {
  std::vector<std::vector<uint64_t>> sorted;
  QosReport report = sampleReport(&sorted);
  json dump = latencyDumpJson(report, sorted, sampleContext());
  EXPECT_EQ(dump["run_label"], "direct");
  ASSERT_EQ(dump["classes"].size(), 2u);
  const auto& fg = dump["classes"][0];
  EXPECT_EQ(fg["name"], "foreground");
  EXPECT_EQ(fg["count"], 3);
  const auto& cdf = fg["cdf"];
  ASSERT_GT(cdf.size(), 100u);
  EXPECT_DOUBLE_EQ(cdf.back()[0].get<double>(), 3.0);  // max 3 us
  EXPECT_DOUBLE_EQ(cdf.back()[1].get<double>(), 1.0);
}

TEST(Report, QosTableListsClassesAndSummary) {
  std::vector<std::vector<uint64_t>> sorted;
  const std::string t = formatQosTable(sampleReport(&sorted));
  for (const char* part : {"foreground", "migration", "foreground_get", "Attain", "Goodput",
                           "weighted_goodput_gbps=", "jain_fairness=", "total_utilization="}) {
    EXPECT_NE(t.find(part), std::string::npos) << part << "\n" << t;
  }
}

}  // namespace
}  // namespace tent::bench
