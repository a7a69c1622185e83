// tebench's command line: gflags-style flags ("--name=value", "--name value",
// a bare "--bool_flag"), parsed into one validated struct. A bad flag is an
// InvalidArgument naming it; main prints it with the usage and exits 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perf/tebench/workload_classes.h"
#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent::bench {

enum class OpType : uint8_t { kRead, kWrite, kMix };
std::string_view opTypeName(OpType op) noexcept;

// How a transfer's duration is kept: nanoseconds, or whole microseconds
// truncated as Mooncake's tebench keeps them (XferBenchTimer::lap_us).
enum class TxResolution : uint8_t { kNs, kWholeUs };

struct BenchOptions {
  // Role and engine.
  std::string backend = "tent";
  std::string xport_type = "rdma";
  std::string seg_type = "DRAM";
  std::string metadata_type = "p2p";  // accepted for Mooncake's command lines; only p2p
  std::string config_path;            // engine YAML; empty: TENT_CONFIG or defaults
  std::string target_seg_name;        // empty: run as the target
  uint64_t total_buffer_size = uint64_t{256} << 20;

  // Sweep (initiator).
  OpType op_type = OpType::kRead;
  bool check_consistency = false;  // WRITE a pattern, READ it back, verify every byte
  bool notifi = false;             // notification latency and rate (bench_notifi.cc), both roles
  uint64_t start_block_size = 4096;
  uint64_t max_block_size = uint64_t{64} << 20;  // Mooncake's default
  uint32_t start_batch_size = 1;
  uint32_t max_batch_size = 1;
  uint32_t start_num_threads = 1;
  uint32_t max_num_threads = 1;
  double duration_s = 5.0;             // measured time per case (Mooncake's default)
  double warmup_s = 1.0;               // unmeasured time before the barrier
  uint64_t request_interval_us = 0;    // Mooncake's: each thread waits this before each transfer
  uint64_t aggregate_interval_us = 0;  // tent's: one transfer per interval across all threads
  IntentType intent_type = IntentType::UNSPEC;
  uint64_t deadline_us = 0;
  // Sweep mode, as Mooncake's: threads [0, N) carry --deadline_us, the others none.
  uint32_t deadline_tight_threads = 0;
  TxResolution tx_resolution = TxResolution::kNs;
  PollMode poll_mode = PollMode::kSpin;
  double transfer_timeout_s = 30.0;  // a transfer pending longer fails the run

  // QoS mode.
  std::vector<WorkloadClass> classes;  // non-empty: QoS mode
  double qos_link_capacity_gbps = 0;   // GB/s (1e9 bytes/s), as Mooncake's tebench; 0 = unknown
  std::string qos_output_jsonl;
  std::string qos_latency_dump;
  std::string run_label;  // stored in the JSONL record ("baseline", "direct", ...)

  std::string cmdline;  // the command line as given, for the JSONL record
  bool help = false;

  bool isTarget() const noexcept { return target_seg_name.empty(); }
  bool isQos() const noexcept { return !classes.empty(); }
};

// Parses argv (argv[0] is the program). Returns InvalidArgument naming the flag.
Result<BenchOptions> parseBenchOptions(int argc, const char* const* argv);

// The usage text (every flag, its default and meaning).
std::string benchUsage(const char* program);

// A size by the one rule of flags and config (base/byte_size.h): "4096", "64k", "64K",
// "64KiB", "4M", "1G" (binary multiples). Exposed for tests.
Result<uint64_t> parseSize(std::string_view text);

// Every flag: its name, whether it is a boolean, its default and its help, as the
// flag library registers them (tebench_main.cc hands them to gflags).
struct BenchFlag {
  const std::string* name;
  bool is_bool;
  const std::string* default_text;
  const std::string* help;
};
std::vector<BenchFlag> benchFlags();

}  // namespace tent::bench
