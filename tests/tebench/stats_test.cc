// tebench statistics on inputs whose answers are known by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "perf/tebench/bench_report.h"
#include "perf/tebench/bench_stats.h"

namespace tent::bench {
namespace {

std::vector<uint64_t> oneToHundred() {
  std::vector<uint64_t> v(100);
  std::iota(v.begin(), v.end(), 1);
  return v;
}

TEST(Percentile, LinearInterpolationBetweenRanks) {
  const auto v = oneToHundred();
  EXPECT_DOUBLE_EQ(percentileSorted(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentileSorted(v, 100), 100);
  EXPECT_NEAR(percentileSorted(v, 50), 50.5, 1e-9);
  EXPECT_NEAR(percentileSorted(v, 99), 99.01, 1e-9);
  EXPECT_NEAR(percentileSorted(v, 99.9), 99.901, 1e-9);
  EXPECT_DOUBLE_EQ(percentileSorted(std::vector<uint64_t>{}, 50), 0);
  EXPECT_DOUBLE_EQ(percentileSorted(std::vector<uint64_t>{7}, 99.9), 7);
}

TEST(Percentile, SummaryInMicroseconds) {
  std::vector<uint64_t> v = {5000, 1000, 3000, 2000, 4000};  // unsorted on purpose
  auto s = summarizeLatency(&v);
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.avg_us, 3.0);
  EXPECT_DOUBLE_EQ(s.p50_us, 3.0);
  EXPECT_DOUBLE_EQ(s.min_us, 1.0);
  EXPECT_DOUBLE_EQ(s.max_us, 5.0);
  EXPECT_NEAR(s.p99_us, 4.96, 1e-9);
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
}

TEST(Stats, FractionWithin) {
  const auto v = oneToHundred();
  EXPECT_DOUBLE_EQ(fractionWithin(v, 90), 0.90);
  EXPECT_DOUBLE_EQ(fractionWithin(v, 0), 0.0);
  EXPECT_DOUBLE_EQ(fractionWithin(v, 1000), 1.0);
  EXPECT_DOUBLE_EQ(fractionWithin(std::vector<uint64_t>{}, 5), 1.0);
}

TEST(Stats, AvgInstIsMeanOfPerTransferBandwidth) {
  // 4000 bytes in 1, 2 and 4 us: 4, 2 and 1 GB/s; the mean is 7/3, not 12000/7000.
  std::vector<uint64_t> d = {1000, 2000, 4000};
  EXPECT_NEAR(avgInstGbps(d, 4000), 7.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(avgInstGbps(std::vector<uint64_t>{}, 4000), 0);
  // A zero duration counts as 0 GB/s, as Mooncake's gbPerSecond() makes it.
  EXPECT_DOUBLE_EQ(avgInstGbps(std::vector<uint64_t>{0, 1000}, 1000), 0.5);
}

TEST(Stats, AvgLatencyFromInstIsBytesOverAvgInst) {
  // 4000 bytes in 1, 2 and 4 us: Avg Inst 7/3 GB/s, so 4000 / (7/3) ns = 12/7 us,
  // the harmonic mean of the durations (the arithmetic mean is 7/3 us).
  std::vector<uint64_t> d = {1000, 2000, 4000};
  const double inst = avgInstGbps(d, 4000);
  EXPECT_NEAR(avgLatencyFromInstUs(4000, inst), 12.0 / 7.0, 1e-12);
  EXPECT_DOUBLE_EQ(avgLatencyFromInstUs(4000, 0), 0);
}

TEST(Stats, JainIndex) {
  EXPECT_DOUBLE_EQ(jainIndex(std::vector<double>{1, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jainIndex(std::vector<double>{1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(jainIndex(std::vector<double>{3, 1}), 0.8);
  EXPECT_DOUBLE_EQ(jainIndex(std::vector<double>{}), 0.0);
  EXPECT_DOUBLE_EQ(jainIndex(std::vector<double>{0, 0}), 0.0);
}

TEST(Stats, CaseRowColumns) {
  CaseMeasurement m;
  m.block_size = 4096;
  m.batch_size = 2;
  m.threads = 2;
  m.thread_elapsed_s = {0.5, 1.5};  // mean 1 s
  m.transfer_ns.assign(10, 1000);   // ten transfers of 1 us
  CaseRow row = computeCaseRow(&m);
  EXPECT_EQ(row.transfers, 10u);
  EXPECT_NEAR(row.bw_gbps, 81920 / 1e9, 1e-15);     // 10 x 8192 B in 1 s
  EXPECT_NEAR(row.avg_inst_gbps, 8.192, 1e-12);     // 8192 B / 1 us
  EXPECT_NEAR(row.avg_lat_us, 1e6 * 2 / 10, 1e-6);  // window x threads / transfers
  EXPECT_NEAR(row.avg_tx_us, 1.0, 1e-12);
  EXPECT_NEAR(row.p99_tx_us, 1.0, 1e-12);
  EXPECT_NEAR(row.p999_tx_us, 1.0, 1e-12);
}

std::vector<WorkloadClass> twoClasses() {
  WorkloadClass fg;
  fg.name = "foreground";
  fg.threads = 2;
  fg.block_size = 4096;
  fg.batch_size = 1;
  fg.slo_us = 300;
  fg.weight = 4;
  WorkloadClass bg;
  bg.name = "migration";
  bg.threads = 1;
  bg.block_size = 1 << 20;
  bg.batch_size = 2;
  bg.slo_us = 0;
  bg.weight = 1;
  return {fg, bg};
}

TEST(Qos, SloAttainmentGoodputAndAggregates) {
  auto classes = twoClasses();
  std::vector<ClassMeasurement> m(2);
  m[0].thread_elapsed_s = {2.0, 2.0};
  m[0].transfer_ns.assign(90, 100'000);                          // 100 us: within 300 us
  m[0].transfer_ns.insert(m[0].transfer_ns.end(), 10, 500'000);  // 500 us: late
  m[1].thread_elapsed_s = {2.0};
  m[1].transfer_ns.assign(10, 1'000'000);
  QosReport r = computeQosReport(classes, &m, 1.0);
  ASSERT_EQ(r.classes.size(), 2u);

  const auto& fg = r.classes[0];
  EXPECT_EQ(fg.operations, 100u);
  EXPECT_EQ(fg.transferred_bytes, 409600u);
  EXPECT_NEAR(fg.throughput_gbps, 409600 / 1e9 / 2, 1e-15);
  EXPECT_DOUBLE_EQ(fg.slo_attainment, 0.9);
  EXPECT_NEAR(fg.goodput_gbps, 90 * 4096 / 1e9 / 2, 1e-15);
  EXPECT_NEAR(fg.weighted_goodput_gbps, 4 * 90 * 4096 / 1e9 / 2, 1e-15);
  EXPECT_NEAR(fg.latency.p50_us, 100, 1e-9);
  EXPECT_NEAR(fg.latency.avg_us, 140, 1e-9);

  const auto& bg = r.classes[1];
  const double bg_gbps = 10.0 * 2 * (1 << 20) / 1e9 / 2;
  EXPECT_DOUBLE_EQ(bg.slo_attainment, 1.0);  // no SLO
  EXPECT_NEAR(bg.throughput_gbps, bg_gbps, 1e-15);
  EXPECT_NEAR(bg.goodput_gbps, bg_gbps, 1e-15);

  EXPECT_NEAR(r.aggregate_throughput_gbps, fg.throughput_gbps + bg_gbps, 1e-15);
  EXPECT_NEAR(r.weighted_goodput_gbps, fg.weighted_goodput_gbps + bg_gbps, 1e-15);
  const double x[] = {fg.throughput_gbps / 4, bg_gbps / 1};
  EXPECT_NEAR(r.jain_fairness, (x[0] + x[1]) * (x[0] + x[1]) / (2 * (x[0] * x[0] + x[1] * x[1])),
              1e-12);
  ASSERT_TRUE(r.total_utilization.has_value());
  EXPECT_NEAR(*r.total_utilization, r.aggregate_throughput_gbps, 1e-15);
}

TEST(Qos, FailedTransfersCountAgainstAttainmentNotBytes) {
  auto classes = twoClasses();
  std::vector<ClassMeasurement> m(2);
  m[0].thread_elapsed_s = {1.0};
  m[0].transfer_ns.assign(9, 1000);
  m[0].failed_transfers = 1;
  QosReport r = computeQosReport(classes, &m, 0);
  EXPECT_DOUBLE_EQ(r.classes[0].slo_attainment, 0.9);
  EXPECT_EQ(r.classes[0].transferred_bytes, 9u * 4096);
  EXPECT_FALSE(r.total_utilization.has_value());
  EXPECT_EQ(r.classes[1].operations, 0u);
  EXPECT_DOUBLE_EQ(r.classes[1].throughput_gbps, 0);
}

// A request the engine did not start (its deadline had passed at submit) is an SLO
// miss, like a failure, but moves no bytes and is reported on its own.
TEST(Qos, ExpiredDeadlinesCountAgainstAttainmentAndAreReported) {
  auto classes = twoClasses();
  std::vector<ClassMeasurement> m(2);
  m[0].thread_elapsed_s = {1.0};
  m[0].transfer_ns.assign(8, 1000);
  m[0].deadline_expired = 2;
  QosReport r = computeQosReport(classes, &m, 0);
  EXPECT_DOUBLE_EQ(r.classes[0].slo_attainment, 0.8);
  EXPECT_EQ(r.classes[0].deadline_expired, 2u);
  EXPECT_EQ(r.classes[0].failed_transfers, 0u);
  EXPECT_EQ(r.classes[0].transferred_bytes, 8u * 4096);
}

TEST(Qos, DerivedAverageAndIsolationLeakage) {
  auto classes = twoClasses();
  classes[1].isolated_gbps = 20.0;
  std::vector<ClassMeasurement> m(2);
  m[0].thread_elapsed_s = {1.0};
  m[0].transfer_ns = {1000, 2000, 4000};
  m[1].thread_elapsed_s = {1.0};
  m[1].transfer_ns.assign(5000, 1'000'000);  // 5000 x 2 MiB in 1 s: 10.49 GB/s
  QosReport r = computeQosReport(classes, &m, 0);
  EXPECT_NEAR(r.classes[0].avg_us_from_inst_gbps, 12.0 / 7.0, 1e-12);  // harmonic mean
  EXPECT_NEAR(r.classes[0].latency.avg_us, 7.0 / 3.0, 1e-12);          // the measured mean
  EXPECT_FALSE(r.classes[0].isolation_leakage.has_value());
  ASSERT_TRUE(r.classes[1].isolation_leakage.has_value());
  const double bg_gbps = 5000.0 * 2 * (1 << 20) / 1e9;
  EXPECT_NEAR(*r.classes[1].isolation_leakage, 1 - bg_gbps / 20.0, 1e-12);
  ASSERT_TRUE(r.max_isolation_leakage.has_value());
  EXPECT_DOUBLE_EQ(*r.max_isolation_leakage, *r.classes[1].isolation_leakage);
  classes[1].isolated_gbps = 5.0;  // faster than alone: no leakage, not negative
  m[1].thread_elapsed_s = {1.0};
  EXPECT_DOUBLE_EQ(*computeQosReport(classes, &m, 0).classes[1].isolation_leakage, 0.0);
}

TEST(Qos, SloBoundaryIsInclusive) {
  auto classes = twoClasses();
  std::vector<ClassMeasurement> m(2);
  m[0].thread_elapsed_s = {1.0};
  m[0].transfer_ns = {300'000, 300'001};
  QosReport r = computeQosReport(classes, &m, 0);
  EXPECT_DOUBLE_EQ(r.classes[0].slo_attainment, 0.5);
}

TEST(LatencyLog, KeepsEverySampleAcrossChunks) {
  LatencyLog log;
  const size_t n = LatencyLog::kChunkSamples * 2 + 17;
  for (size_t i = 0; i < n; ++i) log.record(i);
  EXPECT_EQ(log.size(), n);
  EXPECT_EQ(log.dropped(), 0u);
  std::vector<uint64_t> out = {42};
  log.appendTo(&out);
  ASSERT_EQ(out.size(), n + 1);
  EXPECT_EQ(out[0], 42u);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i + 1], i);
  log.clear();
  EXPECT_EQ(log.size(), 0u);
  log.record(5);
  out.clear();
  log.appendTo(&out);
  EXPECT_EQ(out, std::vector<uint64_t>{5});
}

// Past its capacity the log keeps a uniform sample of every transfer, not the first
// ones: a run faster than the log is long (4M transfers per thread by default) would
// otherwise report the percentiles of its first seconds and the rate of those alone.
TEST(LatencyLog, PastItsCapacityKeepsAUniformSampleOfTheWholeRun) {
  LatencyLog log(1);  // one chunk
  const uint64_t n = LatencyLog::kChunkSamples * 10;
  for (uint64_t i = 0; i < n; ++i) log.record(i);
  EXPECT_EQ(log.size(), LatencyLog::kChunkSamples);
  EXPECT_EQ(log.transfers(), n);
  EXPECT_EQ(log.dropped(), 0u);
  std::vector<uint64_t> out;
  log.appendTo(&out);
  ASSERT_EQ(out.size(), LatencyLog::kChunkSamples);
  std::sort(out.begin(), out.end());
  EXPECT_TRUE(std::adjacent_find(out.begin(), out.end()) == out.end());  // each kept once
  // Uniform over [0, n): each tenth of the run holds about a tenth of the sample.
  for (uint64_t d = 0; d < 10; ++d) {
    const auto lo = std::lower_bound(out.begin(), out.end(), d * n / 10);
    const auto hi = std::lower_bound(out.begin(), out.end(), (d + 1) * n / 10);
    const double share = static_cast<double>(hi - lo) / static_cast<double>(out.size());
    EXPECT_NEAR(share, 0.1, 0.01) << "tenth " << d;
  }
  log.clear();
  EXPECT_EQ(log.size(), 0u);
  EXPECT_EQ(log.transfers(), 0u);
}

// Threads' samples merge in proportion to their transfers: a thread whose log holds a
// quarter of its transfers does not count a quarter as much as one that holds all of them.
TEST(LatencyLog, MergedSamplesWeighEveryThreadByItsTransfers) {
  LatencyLog fast(1), slow;
  const uint64_t fast_n = LatencyLog::kChunkSamples * 4, slow_n = LatencyLog::kChunkSamples / 4;
  for (uint64_t i = 0; i < fast_n; ++i) fast.record(1);
  for (uint64_t i = 0; i < slow_n; ++i) slow.record(1000 + i);
  const LatencyLog* logs[] = {&fast, &slow};
  std::vector<uint64_t> out;
  uint64_t transfers = 0;
  mergeSamples(logs, &out, &transfers);
  EXPECT_EQ(transfers, fast_n + slow_n);
  const auto slow_kept =
      std::count_if(out.begin(), out.end(), [](uint64_t v) { return v >= 1000; });
  EXPECT_EQ(static_cast<uint64_t>(slow_kept), slow_n / 4);
  EXPECT_EQ(out.size(), LatencyLog::kChunkSamples + slow_n / 4);
  // Spread over the slow thread's whole run, not its first quarter.
  EXPECT_GE(*std::max_element(out.begin(), out.end()), 1000 + slow_n * 3 / 4);
  // Without sampling, every sample of every log, in order.
  LatencyLog a, b;
  a.record(7);
  b.record(8);
  b.record(9);
  const LatencyLog* both[] = {&a, &b};
  out.clear();
  transfers = 0;
  mergeSamples(both, &out, &transfers);
  EXPECT_EQ(out, (std::vector<uint64_t>{7, 8, 9}));
  EXPECT_EQ(transfers, 3u);
}

// A case row counts every transfer, and takes its percentiles from the sample.
TEST(CaseRow, CountsEveryTransferWhenTheLatenciesAreASample) {
  CaseMeasurement m;
  m.block_size = 4096;
  m.batch_size = 1;
  m.threads = 1;
  m.thread_elapsed_s = {1.0};
  m.transfer_ns = oneToHundred();
  m.transfers = 1000;
  CaseRow row = computeCaseRow(&m);
  EXPECT_EQ(row.transfers, 1000u);
  EXPECT_EQ(row.sampled, 100u);
  EXPECT_DOUBLE_EQ(row.bw_gbps, 4096.0 * 1000 / 1e9);
  EXPECT_DOUBLE_EQ(row.avg_lat_us, 1000.0);
  EXPECT_NE(formatCaseRow(row).find("100 of 1000"), std::string::npos);
}

TEST(Cdf, MonotoneAndEndsAtMax) {
  auto v = oneToHundred();
  for (auto& x : v) x *= 1000;  // 1..100 us
  auto points = cdfPoints(v);
  ASSERT_GT(points.size(), 1000u);
  EXPECT_DOUBLE_EQ(points.front().first, 1.0);
  EXPECT_DOUBLE_EQ(points.front().second, 0.0);
  EXPECT_DOUBLE_EQ(points.back().first, 100.0);
  EXPECT_DOUBLE_EQ(points.back().second, 1.0);
  for (size_t i = 1; i < points.size(); ++i) {
    ASSERT_GE(points[i].first, points[i - 1].first);
    ASSERT_GT(points[i].second, points[i - 1].second);
  }
  EXPECT_TRUE(cdfPoints(std::vector<uint64_t>{}).empty());
}

}  // namespace
}  // namespace tent::bench
