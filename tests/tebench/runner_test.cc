// tebench's runner (threads, warm-up barrier, pacing, verification, failure
// handling, JSONL and dump output) driven by an in-process fake engine.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perf/tebench/bench_engine.h"
#include "perf/tebench/bench_run.h"
#include "perf/tebench/bench_runner.h"
#include "tests/tebench/runner_fixture.h"

namespace tent::bench {
namespace {

using nlohmann::json;
using testing::FakeEngine;
using testing::Fixture;
using testing::kFixtureBuffer;
using testing::makeFixture;
using testing::parse;

constexpr uint64_t kBuffer = kFixtureBuffer;

std::string tempPath(const std::string& name) {
  std::string path = ::testing::TempDir() + name;
  std::remove(path.c_str());
  return path;
}

std::vector<json> readJsonl(const std::string& path) {
  std::vector<json> records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) records.push_back(json::parse(line, nullptr, false));
  return records;
}

const char* kClasses =
    R"(--workload_classes_json=[
      {"name":"foreground","threads":1,"block_size":4096,"intent_type":"foreground_get",
       "slo_us":100000,"weight":4},
      {"name":"migration","threads":2,"block_size":65536,"batch_size":2,
       "intent_type":"migration"}])";

TEST(Runner, QosRunVerifiesBytesAndWritesJsonlAndDump) {
  Fixture f = makeFixture();
  const std::string jsonl = tempPath("runner_qos.jsonl");
  const std::string dump = tempPath("runner_qos_cdf.json");
  BenchOptions o =
      parse({"--target_seg_name=fake:1", "--duration=0.2", "--warmup=0.05", "--check_consistency",
             "--total_buffer_size=1M", kClasses, "--qos_output_jsonl=" + jsonl,
             "--qos_latency_dump=" + dump, "--run_label=direct", "--qos_link_capacity_gbps=10"});
  ::testing::internal::CaptureStdout();
  int rc = runQos(o, *f.bench, f.remote);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("foreground"), std::string::npos) << out;
  EXPECT_NE(out.find("provider: fake"), std::string::npos) << out;

  auto records = readJsonl(jsonl);
  ASSERT_EQ(records.size(), 1u);
  const json& rec = records[0];
  ASSERT_FALSE(rec.is_discarded());
  EXPECT_EQ(rec["schema_version"], 1);
  EXPECT_EQ(rec["run_label"], "direct");
  EXPECT_EQ(rec["provider"], "fake");
  EXPECT_DOUBLE_EQ(rec["link_capacity_gbps"].get<double>(), 10.0);
  ASSERT_EQ(rec["classes"].size(), 2u);
  const json& fg = rec["classes"][0];
  EXPECT_EQ(fg["name"], "foreground");
  EXPECT_GT(fg["operations"].get<uint64_t>(), 0u);
  EXPECT_EQ(fg["transferred_bytes"].get<uint64_t>(), fg["operations"].get<uint64_t>() * 4096);
  EXPECT_EQ(fg["failed_transfers"], 0);
  ASSERT_TRUE(fg["avg_us_from_inst_gbps"].is_number());
  EXPECT_NEAR(fg["avg_us_from_inst_gbps"].get<double>() * fg["avg_inst_gbps"].get<double>(),
              4096 / 1000.0, 1e-9);  // bytes / Avg Inst GB/s, in us
  EXPECT_GT(rec["classes"][1]["operations"].get<uint64_t>(), 0u);
  // The fake counts latency-sensitive requests as direct attempts; only the
  // measured window's delta is reported, and it belongs to the foreground class.
  EXPECT_GT(rec["direct"]["attempted"].get<uint64_t>(), 0u);
  EXPECT_EQ(fg["direct"]["attempted"], rec["direct"]["attempted"]);
  EXPECT_LE(rec["direct"]["attempted"].get<uint64_t>(), f.fake->latency_sensitive.load());
  EXPECT_TRUE(rec["classes"][1]["direct"].is_null());

  std::ifstream in(dump);
  json cdf = json::parse(in, nullptr, false);
  ASSERT_FALSE(cdf.is_discarded());
  ASSERT_EQ(cdf["classes"].size(), 2u);
  EXPECT_EQ(cdf["classes"][0]["count"], fg["operations"]);
  EXPECT_DOUBLE_EQ(cdf["classes"][0]["cdf"].back()[1].get<double>(), 1.0);
}

TEST(Runner, DeadlineIsSubmitTimePlusDeadline) {
  Fixture f = makeFixture();
  f.fake->expected_deadline_ns = 300'000;
  BenchOptions o =
      parse({"--target_seg_name=fake:1", "--duration=0.05", "--warmup=0", "--deadline_us=300",
             "--deadline_tight_threads=1", "--op_type=write", "--max_block_size=4096"});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runSweep(o, *f.bench, f.remote), 0);
  ::testing::internal::GetCapturedStdout();
  EXPECT_GT(f.fake->latency_sensitive.load(), 0u);
  EXPECT_EQ(f.fake->latency_sensitive.load(), f.fake->requests.load());
  EXPECT_EQ(f.fake->bad_deadlines.load(), 0u);
}

// Mooncake's rule: in a sweep only threads [0, --deadline_tight_threads) carry
// --deadline_us; each group gets its own line under the row.
TEST(Runner, SweepDeadlineOnlyOnTightThreads) {
  Fixture f = makeFixture();
  BenchOptions o = parse({"--target_seg_name=fake:1", "--duration=0.05", "--warmup=0",
                          "--deadline_us=300", "--deadline_tight_threads=1",
                          "--start_num_threads=2", "--op_type=write", "--max_block_size=4096"});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runSweep(o, *f.bench, f.remote), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_GT(f.fake->latency_sensitive.load(), 0u);
  EXPECT_GT(f.fake->requests.load() - f.fake->latency_sensitive.load(), 0u);
  EXPECT_NE(out.find("[deadline-tight] threads=1 deadline_us=300 operations="), std::string::npos)
      << out;
  EXPECT_NE(out.find("[deadline-loose] threads=1 operations="), std::string::npos) << out;
}

TEST(Runner, SweepDeadlineWithoutTightThreadsTagsNothing) {
  Fixture f = makeFixture();
  BenchOptions o = parse({"--target_seg_name=fake:1", "--duration=0.05", "--warmup=0",
                          "--deadline_us=300", "--op_type=write", "--max_block_size=4096"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(runSweep(o, *f.bench, f.remote), 0);
  ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(f.fake->requests.load(), 0u);
  EXPECT_EQ(f.fake->latency_sensitive.load(), 0u);
  EXPECT_NE(err.find("--deadline_tight_threads=0 no thread carries it"), std::string::npos) << err;
}

TEST(Runner, CorruptedReadBackIsCaught) {
  Fixture f = makeFixture();
  f.fake->corrupt_reads = true;
  BenchOptions o = parse({"--target_seg_name=fake:1", "--duration=0.05", "--warmup=0",
                          "--check_consistency", "--max_block_size=4096"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(runSweep(o, *f.bench, f.remote), 1);
  ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("differs from the pattern"), std::string::npos) << err;
}

TEST(Runner, WithoutCorruptionTheSameCheckPasses) {
  Fixture f = makeFixture();
  BenchOptions o =
      parse({"--target_seg_name=fake:1", "--duration=0.05", "--warmup=0", "--check_consistency",
             "--start_block_size=1000", "--max_block_size=4000", "--max_batch_size=2"});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runSweep(o, *f.bench, f.remote), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  // 3 block sizes (1000, 2000, 4000) x 2 batch sizes.
  int rows = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0]))) ++rows;
  }
  EXPECT_EQ(rows, 6) << out;
}

// A clock that only moves when the fake is called (and one ns per read), so which
// transfer expires is fixed: every third submit takes longer than the deadline.
std::atomic<int64_t> g_expiry_clock_ns{0};
int64_t expiryClock() noexcept {
  return g_expiry_clock_ns.fetch_add(1) + 1;
}

struct ExpiringRun {
  uint64_t completed = 0, expired = 0, failed = 0, mismatches = 0;
  std::string first_error;
};

// --check_consistency alternates WRITE and READ; with --deadline_us every third submit
// (a WRITE, then a READ, ...) returns after its deadline, so the engine moves nothing.
ExpiringRun runWithExpiries(bool corrupt_reads) {
  g_expiry_clock_ns = 1'000'000'000;
  setBenchClockForTesting(&expiryClock);
  Fixture f = makeFixture();
  f.fake->expire_late = true;
  f.fake->corrupt_reads = corrupt_reads;
  uint64_t submits = 0;
  f.fake->on_call = [&submits](FakeEngine::Call c) {
    g_expiry_clock_ns += 1000;
    if (c == FakeEngine::Call::kSubmit && ++submits % 3 == 0) g_expiry_clock_ns += 200'000;
  };
  BenchOptions o = parse({"--target_seg_name=fake:1", "--duration=0.02", "--warmup=0",
                          "--check_consistency", "--deadline_us=100", "--deadline_tight_threads=1",
                          "--max_block_size=4096", "--start_batch_size=2"});
  SweepCase c = runSweepCase(o, *f.bench, f.remote, 1, 4096, 2);
  setBenchClockForTesting(nullptr);
  const ThreadResult& r = *c.outcome.results.at(0);
  return {r.completed.load(), r.deadline_expired, r.failed, r.mismatches, c.outcome.first_error};
}

// The READ after an expired WRITE brings back the pattern of the WRITE before it;
// it was checked against the expired WRITE's pattern and reported as a mismatch.
TEST(Runner, NoFalseMismatchAfterAnExpiredWrite) {
  const ExpiringRun run = runWithExpiries(false);
  EXPECT_GT(run.completed, 20u);
  EXPECT_GT(run.expired, 5u);  // WRITEs and READs
  EXPECT_EQ(run.failed, 0u);
  EXPECT_EQ(run.mismatches, 0u) << run.first_error;
  EXPECT_EQ(run.first_error, "");
}

TEST(Runner, AReadBackCorruptedAfterAnExpiredWriteIsStillCaught) {
  const ExpiringRun run = runWithExpiries(true);
  EXPECT_GT(run.expired, 5u);
  EXPECT_GT(run.mismatches, 0u);
  EXPECT_NE(run.first_error.find("differs from the pattern"), std::string::npos) << run.first_error;
}

TEST(Runner, FailedTransfersAreCountedAndFailTheRun) {
  Fixture f = makeFixture();
  f.fake->fail_every = 3;
  const std::string jsonl = tempPath("runner_fail.jsonl");
  BenchOptions o = parse({"--target_seg_name=fake:1", "--duration=0.05", "--warmup=0", kClasses,
                          "--qos_output_jsonl=" + jsonl});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(runQos(o, *f.bench, f.remote), 1);
  ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("transfer ended FAILED"), std::string::npos) << err;
  auto records = readJsonl(jsonl);
  ASSERT_EQ(records.size(), 1u);
  uint64_t failed = 0;
  for (const auto& c : records[0]["classes"]) failed += c["failed_transfers"].get<uint64_t>();
  EXPECT_GT(failed, 0u);
}

TEST(Runner, StuckTransferTimesOutAndAborts) {
  Fixture f = makeFixture();
  f.fake->never_complete = true;
  BenchOptions o = parse({"--target_seg_name=fake:1", "--duration=30", "--warmup=0",
                          "--transfer_timeout=0.1", "--max_block_size=4096"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(runSweep(o, *f.bench, f.remote), 1);  // returns long before 30 s
  ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--transfer_timeout"), std::string::npos) << err;
  EXPECT_NE(err.find("run aborted"), std::string::npos) << err;
  EXPECT_GT(f.fake->canceled.load(), 0u);
}

TEST(Runner, AggregatePacingBoundsTheIssueRate) {
  Fixture f = makeFixture();
  // 2 threads share one 2 ms interval: over the window at most one transfer
  // per interval (plus the one each thread may hold when the window opens).
  BenchOptions o = parse({"--target_seg_name=fake:1", "--duration=0.1", "--warmup=0",
                          "--aggregate_interval_us=2000", "--max_num_threads=2",
                          "--start_num_threads=2", "--max_block_size=4096"});
  std::vector<ThreadPlan> plans(2);
  for (uint32_t i = 0; i < 2; ++i) {
    plans[i].index = i;
    plans[i].block_size = 4096;
    plans[i].local = f.bench->buffer + i * 4096;
    plans[i].segment = f.remote.segment;
    plans[i].remote_addr = f.remote.addr + i * 4096;
  }
  RunOutcome out = executeRun(o, *f.bench, plans, nullptr);
  double longest = 0;
  uint64_t transfers = 0;
  for (const auto& r : out.results) {
    longest = std::max(longest, r->elapsed_s);
    transfers += r->samples.size();
  }
  EXPECT_GT(transfers, 0u);
  EXPECT_LE(transfers, static_cast<uint64_t>(longest / 0.002) + 1 + plans.size());
}

TEST(Runner, MissingSegmentAndSmallBufferAreErrors) {
  Fixture f = makeFixture();
  auto missing = openRemoteBuffer(*f.bench->engine, "fake:9", 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("fake:9"), std::string::npos);
  auto small = openRemoteBuffer(*f.bench->engine, "fake:1", kBuffer + 1);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("--total_buffer_size"), std::string::npos);
}

TEST(Pattern, ChecksAPartOfARegionAgainstTheRegionsPattern) {
  std::vector<char> buf(1003);
  fillPattern(buf.data(), buf.size(), 42);
  EXPECT_EQ(firstPatternMismatchIn(buf.data(), 13, 990, 42), -1);
  EXPECT_EQ(firstPatternMismatchIn(buf.data(), 0, 1003, 42), -1);
  EXPECT_EQ(firstPatternMismatchIn(buf.data(), 500, 503, 43), 500);  // another seed
  buf[700] ^= 1;
  EXPECT_EQ(firstPatternMismatchIn(buf.data(), 13, 990, 42), 700);
  EXPECT_EQ(firstPatternMismatchIn(buf.data(), 0, 700, 42), -1);  // before the change
}

TEST(Pattern, DetectsTheFirstDifferingByte) {
  std::vector<char> buf(1003);
  fillPattern(buf.data(), buf.size(), 42);
  EXPECT_EQ(firstPatternMismatch(buf.data(), buf.size(), 42), -1);
  EXPECT_NE(firstPatternMismatch(buf.data(), buf.size(), 43), -1);  // another seed differs
  buf[1001] ^= 1;                                                   // in the tail word
  EXPECT_EQ(firstPatternMismatch(buf.data(), buf.size(), 42), 1001);
  buf[17] ^= 1;
  EXPECT_EQ(firstPatternMismatch(buf.data(), buf.size(), 42), 17);
}

}  // namespace
}  // namespace tent::bench
