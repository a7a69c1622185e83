// fabric_bench: bandwidth and post-to-completion latency of one fabric provider
// (soft or verbs), through the provider-agnostic fabric interface.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "fabric/fabric.h"
#include "tent/status.h"

namespace tent::perf::fabric_bench {

inline constexpr uint32_t kMaxQps = 64;
inline constexpr uint64_t kMaxSize = uint64_t{1} << 30;

struct Options {
  config::FabricProvider provider = config::FabricProvider::kSoft;
  uint32_t qps = 1;
  std::vector<uint64_t> sizes = {4096};
  fabric::WrOpcode opcode = fabric::WrOpcode::kRdmaWrite;
  uint32_t depth = 1;       // WRs in flight per QP
  double link_gbps = 0;     // soft: 0 = unlimited
  uint64_t latency_ns = 0;  // soft: modeled one-way latency
  double duration_s = 2.0;  // per case, when iters == 0
  uint64_t iters = 0;       // WRs per case over all QPs; 0 = run for duration_s
  uint64_t warmup = 200;    // WRs before measuring
  int processes = 1;        // 2: the target lives in a forked process
  std::string device;       // verbs: device name (default: the first)
};

enum class ParseOutcome { kRun, kHelp, kError };
ParseOutcome parseArgs(int argc, char** argv, Options* out, std::string* error);
std::string usage();
config::FabricConfig fabricConfigFor(const Options& options);

// The target side: memory peers write to / read from, and the QPs they connect to.
struct Target {
  void* memory = nullptr;
  size_t length = 0;
  std::unique_ptr<fabric::MemoryRegion> mr;
  std::unique_ptr<fabric::CompletionQueue> cq;
  std::vector<std::unique_ptr<fabric::QueuePair>> qps;
};

// Everything the initiator drives; the target is in-process or a child process.
struct Bench {
  Options options;
  std::unique_ptr<fabric::Provider> provider;
  fabric::Device* device = nullptr;
  size_t slot_bytes = 0;  // largest size: one slot per QP
  void* local = nullptr;  // qps slots to transfer + qps slots to verify with
  size_t local_length = 0;
  std::unique_ptr<fabric::MemoryRegion> local_mr;
  std::unique_ptr<fabric::CompletionQueue> cq;
  std::vector<std::unique_ptr<fabric::QueuePair>> qps;
  uint64_t remote_addr = 0;
  uint32_t remote_rkey = 0;
  std::unique_ptr<Target> local_target;  // processes == 1
  pid_t child = -1;                      // processes == 2
  int to_child = -1;
  int from_child = -1;
  ~Bench();
};

Result<std::unique_ptr<Bench>> setUp(const Options& options);

struct CaseResult {
  uint64_t size = 0;
  uint64_t wrs = 0;
  uint64_t samples = 0;
  double seconds = 0;
  double achieved_gbps = 0;  // Gbit/s, like link_gbps
  double model_gbps = 0;     // 0: no model (unlimited link)
  double p50_us = 0, p99_us = 0, p999_us = 0;
  double memcpy_p50_us = 0;
  double timer_p50_us = 0;  // two back-to-back clock reads
  bool verified = false;
};

// Runs one size: warm-up, measurement, byte verification.
Result<CaseResult> runCase(Bench& bench, uint64_t size);
// p50 of a memcpy of `size` bytes between two warm buffers, in microseconds.
double memcpyP50Us(uint64_t size);
// p50 of two back-to-back clock reads, in microseconds (the timer's share of a latency).
double timerP50Us();
// The closed-loop throughput the link model allows (Gbit/s), 0 when unlimited.
double modelGbps(const Options& options, double link_gbps, uint64_t size);

void printTableHeader();
void printTableRow(const Bench& bench, const CaseResult& r);
std::string jsonLine(const Bench& bench, const CaseResult& r);

// Two processes: runs the target side in the forked child; never returns.
[[noreturn]] void runChildTarget(const Options& options, int from_parent, int to_parent);

}  // namespace tent::perf::fabric_bench
