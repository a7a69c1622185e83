// tebench flag parsing: good flags land in the struct, bad ones name the flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/tebench/bench_options.h"
#include "tests/support/byte_size_table.h"

namespace tent::bench {
namespace {

Result<BenchOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tebench");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parseBenchOptions(static_cast<int>(argv.size()), argv.data());
}

std::string errorOf(std::vector<std::string> args) {
  auto r = parse(std::move(args));
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.status().message();
}

// The size table every size parser runs (tests/config/config_sizes_test.cc runs it
// through the config): a size flag accepts exactly the same spellings.
TEST(BenchOptions, SizesFollowTheConfigsRule) {
  for (const auto& c : tent::testing::kByteSizeCases) {
    auto r = parse({std::string("--total_buffer_size=") + c.text});
    EXPECT_EQ(r.ok(), c.valid && c.bytes > 0) << "'" << c.text << "'";
    if (r.ok()) {
      EXPECT_EQ(r->total_buffer_size, c.bytes) << c.text;
    }
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("--total_buffer_size"), std::string::npos);
    }
  }
}

TEST(BenchOptions, TargetDefaults) {
  auto r = parse({"--backend=tent", "--xport_type=rdma", "--seg_type=DRAM"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_TRUE(r->isTarget());
  EXPECT_FALSE(r->isQos());
  EXPECT_EQ(r->total_buffer_size, uint64_t{256} << 20);
}

TEST(BenchOptions, InitiatorSweepFlags) {
  auto r =
      parse({"--target_seg_name=127.0.0.1:1234", "--op_type=write", "--start_block_size=4K",
             "--max_block_size", "1M", "--start_batch_size=2", "--max_batch_size=8",
             "--start_num_threads=1", "--max_num_threads=4", "--duration=0.5", "--warmup=0",
             "--request_interval_us=10", "--tent_intent_type=foreground_get", "--deadline_us=300",
             "--total_buffer_size=64M", "--config=/tmp/x.yaml", "--poll_mode=yield"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_FALSE(r->isTarget());
  EXPECT_EQ(r->target_seg_name, "127.0.0.1:1234");
  EXPECT_EQ(r->op_type, OpType::kWrite);
  EXPECT_EQ(r->start_block_size, 4096u);
  EXPECT_EQ(r->max_block_size, uint64_t{1} << 20);
  EXPECT_EQ(r->start_batch_size, 2u);
  EXPECT_EQ(r->max_batch_size, 8u);
  EXPECT_EQ(r->max_num_threads, 4u);
  EXPECT_DOUBLE_EQ(r->duration_s, 0.5);
  EXPECT_DOUBLE_EQ(r->warmup_s, 0.0);
  EXPECT_EQ(r->request_interval_us, 10u);
  EXPECT_EQ(r->intent_type, IntentType::FOREGROUND_GET);
  EXPECT_EQ(r->deadline_us, 300u);
  EXPECT_EQ(r->total_buffer_size, uint64_t{64} << 20);
  EXPECT_EQ(r->config_path, "/tmp/x.yaml");
  EXPECT_EQ(r->poll_mode, PollMode::kYield);
}

// Issue 14's side-by-side: the flags Mooncake TENT's tebench is run with mean
// the same here (benchmark/utils.cpp, main.cpp), defaults included.
TEST(BenchOptions, MooncakeCommandLineMeansTheSame) {
  auto r = parse({"--backend=tent", "--metadata_type=p2p", "--xport_type=", "--seg_type=dram",
                  "--target_seg_name=127.0.0.1:1", "--op_type=write", "--start_block_size=4096",
                  "--max_block_size=4096", "--start_batch_size=1", "--max_batch_size=1",
                  "--start_num_threads=1", "--max_num_threads=1", "--duration=3",
                  "--tent_intent_type=FOREGROUND_GET", "--request_interval_us=7"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->xport_type, "rdma");  // Mooncake's empty default: the engine's transport
  EXPECT_EQ(r->seg_type, "DRAM");
  EXPECT_EQ(r->intent_type, IntentType::FOREGROUND_GET);  // Mooncake lowercases it
  EXPECT_EQ(r->request_interval_us, 7u);                  // per thread, as Mooncake's
  EXPECT_EQ(r->aggregate_interval_us, 0u);
  EXPECT_EQ(r->tx_resolution, TxResolution::kNs);
  auto alias = parse({"--target_seg_name=h:1", "--tent_intent_type=intent_unspec"});
  ASSERT_TRUE(alias.ok()) << alias.status().toString();
  EXPECT_EQ(alias->intent_type, IntentType::UNSPEC);
  auto defaults = parse({"--target_seg_name=h:1"});
  ASSERT_TRUE(defaults.ok());
  EXPECT_DOUBLE_EQ(defaults->duration_s, 5.0);              // Mooncake's --duration
  EXPECT_EQ(defaults->max_block_size, uint64_t{64} << 20);  // and --max_block_size
  EXPECT_EQ(defaults->deadline_tight_threads, 0u);
}

TEST(BenchOptions, TentAdditionsAndUnsupportedMooncakeForms) {
  auto r = parse({"--target_seg_name=h:1", "--aggregate_interval_us=20", "--tx_resolution=us",
                  "--deadline_us=300", "--deadline_tight_threads=2", "--max_num_threads=2"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->aggregate_interval_us, 20u);
  EXPECT_EQ(r->tx_resolution, TxResolution::kWholeUs);
  EXPECT_EQ(r->deadline_tight_threads, 2u);
  EXPECT_NE(errorOf({"--target_seg_name=h:1", "--tx_resolution=ms"}).find("--tx_resolution"),
            std::string::npos);
  EXPECT_NE(errorOf({"--target_seg_name=h:1", "--deadline_tight_threads=3"}).find("larger than"),
            std::string::npos);
  EXPECT_NE(errorOf({"--target_seg_name=a:1,b:2"}).find("one target only"), std::string::npos);
  EXPECT_NE(errorOf({"--metadata_type=etcd"}).find("--metadata_type"), std::string::npos);
  EXPECT_NE(errorOf({"--target_seg_name=h:1", "--deadline_tight_threads=1",
                     R"(--workload_classes_json=[{"name":"a","threads":1,"block_size":8}])"})
                .find("sweep mode"),
            std::string::npos);
}

TEST(BenchOptions, BareBoolAndConsistencyImpliesMix) {
  auto r = parse({"--target_seg_name=h:1", "--op_type=read", "--check_consistency"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_TRUE(r->check_consistency);
  EXPECT_EQ(r->op_type, OpType::kMix);
  auto off = parse({"--target_seg_name=h:1", "--check_consistency=false"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->check_consistency);
  EXPECT_EQ(off->op_type, OpType::kRead);
}

TEST(BenchOptions, MissingBoundFollowsTheGivenOne) {
  auto r = parse({"--target_seg_name=h:1", "--start_num_threads=8"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->start_num_threads, 8u);
  EXPECT_EQ(r->max_num_threads, 8u);
  auto b = parse({"--target_seg_name=h:1", "--max_block_size=1024"});
  ASSERT_TRUE(b.ok()) << b.status().toString();
  EXPECT_EQ(b->start_block_size, 1024u);
}

TEST(BenchOptions, BadFlagsNameTheFlag) {
  EXPECT_NE(errorOf({"--no_such_flag=1"}).find("unknown flag --no_such_flag"), std::string::npos);
  EXPECT_NE(errorOf({"--op_type=delete"}).find("--op_type"), std::string::npos);
  EXPECT_NE(errorOf({"--duration=0"}).find("--duration"), std::string::npos);
  EXPECT_NE(errorOf({"--duration=abc"}).find("--duration"), std::string::npos);
  EXPECT_NE(errorOf({"--max_batch_size=0"}).find("--max_batch_size"), std::string::npos);
  EXPECT_NE(errorOf({"--start_block_size=-4"}).find("--start_block_size"), std::string::npos);
  EXPECT_NE(errorOf({"--total_buffer_size=12Q"}).find("--total_buffer_size"), std::string::npos);
  EXPECT_NE(errorOf({"--backend=classic"}).find("--backend"), std::string::npos);
  EXPECT_NE(errorOf({"--xport_type=tcp"}).find("--xport_type"), std::string::npos);
  EXPECT_NE(errorOf({"--seg_type=VRAM"}).find("--seg_type"), std::string::npos);
  EXPECT_NE(errorOf({"--tent_intent_type=urgent"}).find("--tent_intent_type"), std::string::npos);
  EXPECT_NE(errorOf({"--check_consistency=maybe"}).find("--check_consistency"), std::string::npos);
  EXPECT_NE(errorOf({"positional"}).find("unexpected argument"), std::string::npos);
  EXPECT_NE(errorOf({"--duration"}).find("needs a value"), std::string::npos);
  EXPECT_NE(errorOf({"--start_batch_size=8", "--max_batch_size=2"}).find("larger than"),
            std::string::npos);
}

// Times and sizes past what converts to 64-bit nanoseconds or bytes wrapped silently:
// --duration=1e308 ran 0 transfers and exited 0, a huge --deadline_us put the deadline
// in the past. Each is refused naming the flag and its range.
TEST(BenchOptions, OutOfRangeFlagsAreRefusedNamingTheRange) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--duration=1e308", "--duration: expected seconds in (0, 86400], got '1e308'"},
      {"--duration=86401", "--duration: expected seconds in (0, 86400]"},
      {"--warmup=1e20", "--warmup: expected seconds in [0, 86400]"},
      {"--transfer_timeout=1e10", "--transfer_timeout: expected seconds in (0, 86400]"},
      {"--deadline_us=18446744073709551615",
       "--deadline_us: expected an integer in [0, 86400000000] (microseconds)"},
      {"--deadline_us=86400000001", "--deadline_us: expected an integer in [0, 86400000000]"},
      {"--request_interval_us=99999999999999", "--request_interval_us: expected an integer in"},
      {"--aggregate_interval_us=99999999999999", "--aggregate_interval_us: expected an integer"},
      {"--start_block_size=2048G", "--start_block_size: expected a size in [1, 1099511627776]"},
      {"--max_block_size=1048577M", "--max_block_size: expected a size in [1, 1099511627776]"},
      {"--total_buffer_size=1048577G",
       "--total_buffer_size: expected a size in [1, 1125899906842624]"},
      {"--qos_link_capacity_gbps=1e300", "--qos_link_capacity_gbps: expected GB/s in [0, 1e+06]"},
  };
  for (const auto& [flag, message] : cases)
    EXPECT_NE(errorOf({"--target_seg_name=h:1", flag}).find(message), std::string::npos) << flag;
  // The bounds themselves are accepted.
  auto r = parse({"--target_seg_name=h:1", "--duration=86400", "--deadline_us=86400000000",
                  "--max_block_size=1024G", "--start_block_size=1024G", "--warmup=0"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_DOUBLE_EQ(r->duration_s, 86400.0);
  EXPECT_EQ(r->deadline_us, 86'400'000'000u);
  // A class list whose threads x block x batch overflows 64 bits does not fit any buffer.
  EXPECT_NE(
      errorOf({"--target_seg_name=h:1", R"(--workload_classes_json=[{"name":"a","threads":1024,)"
                                        R"("block_size":1099511627776,"batch_size":65536}])"})
          .find("more than --total_buffer_size"),
      std::string::npos);
}

TEST(BenchOptions, QosFlagsNeedClasses) {
  EXPECT_NE(errorOf({"--target_seg_name=h:1", "--qos_output_jsonl=x.jsonl"})
                .find("needs --workload_classes_json"),
            std::string::npos);
}

constexpr const char* kRfcClasses = R"([
  {"name":"foreground","threads":2,"block_size":4096,"batch_size":1,
   "intent_type":"foreground_get","slo_us":300,"weight":4},
  {"name":"migration","threads":6,"block_size":4194304,"batch_size":2,
   "intent_type":"migration","slo_us":0,"weight":1}])";

TEST(BenchOptions, RfcQosCommandParses) {
  auto r = parse({"--target_seg_name=h:1", "--backend=tent", "--xport_type=rdma", "--duration=30",
                  "--start_num_threads=8", "--max_num_threads=8", "--request_interval_us=0",
                  std::string("--workload_classes_json=") + kRfcClasses,
                  "--qos_link_capacity_gbps=25", "--qos_output_jsonl=out.jsonl"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_TRUE(r->isQos());
  ASSERT_EQ(r->classes.size(), 2u);
  EXPECT_EQ(r->classes[0].intent_type, IntentType::FOREGROUND_GET);
  EXPECT_EQ(r->classes[1].block_size, 4194304u);
  EXPECT_DOUBLE_EQ(r->qos_link_capacity_gbps, 25.0);
  EXPECT_EQ(r->start_num_threads, 8u);
}

TEST(BenchOptions, QosThreadCountMustMatchClasses) {
  auto msg = errorOf({"--target_seg_name=h:1", "--start_num_threads=4",
                      std::string("--workload_classes_json=") + kRfcClasses});
  EXPECT_NE(msg.find("--start_num_threads=4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8 threads"), std::string::npos) << msg;
}

TEST(BenchOptions, QosBufferMustHoldEveryThreadRegion) {
  auto msg = errorOf({"--target_seg_name=h:1", "--total_buffer_size=16M",
                      std::string("--workload_classes_json=") + kRfcClasses});
  EXPECT_NE(msg.find("--total_buffer_size"), std::string::npos) << msg;
}

TEST(BenchOptions, GlobalIntentAndDeadlineAreClassDefaults) {
  auto r = parse({"--target_seg_name=h:1", "--tent_intent_type=checkpoint", "--deadline_us=50",
                  "--poll_mode=yield",
                  R"(--workload_classes_json=[{"name":"a","threads":1,"block_size":4096},
                     {"name":"b","threads":1,"block_size":4096,"intent_type":"unspec",
                      "deadline_us":0, "poll_mode":"spin"}])"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->classes[0].intent_type, IntentType::CHECKPOINT);
  EXPECT_EQ(r->classes[0].deadline_us, 50u);
  EXPECT_EQ(r->classes[1].intent_type, IntentType::UNSPEC);
  EXPECT_EQ(r->classes[1].deadline_us, 0u);
  EXPECT_EQ(r->classes[0].poll_mode, PollMode::kYield);
  EXPECT_EQ(r->classes[1].poll_mode, PollMode::kSpin);
}

TEST(BenchOptions, HelpAndUsage) {
  auto r = parse({"--help"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->help);
  const std::string usage = benchUsage("tebench");
  for (const char* flag : {"--target_seg_name", "--workload_classes_json", "--qos_output_jsonl",
                           "--request_interval_us", "--check_consistency"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

TEST(BenchOptions, CmdlineIsQuotedForTheRecord) {
  auto r = parse({"--target_seg_name=h:1", R"(--workload_classes_json=[{"name":"a","threads":1,
      "block_size":4096}])"});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->cmdline.rfind("tebench --target_seg_name=h:1 '--workload_classes_json=", 0), 0u)
      << r->cmdline;
}

TEST(ParseSize, Suffixes) {
  EXPECT_EQ(*parseSize("4096"), 4096u);
  EXPECT_EQ(*parseSize("4K"), 4096u);
  EXPECT_EQ(*parseSize("2m"), uint64_t{2} << 20);
  EXPECT_EQ(*parseSize("1G"), uint64_t{1} << 30);
  EXPECT_FALSE(parseSize("").ok());
  EXPECT_FALSE(parseSize("K").ok());
  EXPECT_FALSE(parseSize("1.5M").ok());
}

}  // namespace
}  // namespace tent::bench
