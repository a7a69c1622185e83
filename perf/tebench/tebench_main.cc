// tebench: without --target_seg_name it is a target (allocates and registers a
// buffer, prints "tebench target ready: segment=...", serves until SIGINT or
// SIGTERM); with it, an initiator running a sweep or, with
// --workload_classes_json, a QoS run. Exit codes: 0 ok, 1 the run failed,
// 2 bad flags.
#include <csignal>
#include <cstdio>
#include <numeric>

#include "perf/tebench/bench_engine.h"
#include "perf/tebench/bench_limits.h"
#include "perf/tebench/bench_options.h"
#include "perf/tebench/bench_runner.h"

namespace {

using namespace tent::bench;

// The target waits for these with sigwait(); they are blocked before the
// engine starts its threads, which inherit the mask.
void blockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

uint64_t qosBytesNeeded(const BenchOptions& o) {
  uint64_t needed = 0;
  for (const auto& c : o.classes)
    needed = saturatingSum(needed, saturatingProduct({c.threads, c.block_size, c.batch_size}));
  return needed;
}

int runInitiator(const BenchOptions& o, BenchEngine& bench) {
  const uint64_t needed =
      o.isQos() ? qosBytesNeeded(o) : saturatingProduct({o.start_block_size, o.start_batch_size});
  auto remote = openRemoteBuffer(*bench.engine, o.target_seg_name, needed);
  if (!remote.ok()) {
    std::fprintf(stderr, "tebench: %s\n", remote.status().toString().c_str());
    return 1;
  }
  if (o.notifi) return runNotifiInitiator(o, bench, *remote);
  return o.isQos() ? runQos(o, bench, *remote) : runSweep(o, bench, *remote);
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parseBenchOptions(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "tebench: %s\n\n%s", parsed.status().message().c_str(),
                 benchUsage(argv[0]).c_str());
    return 2;
  }
  const BenchOptions& options = *parsed;
  if (options.help) {
    std::printf("%s", benchUsage(argv[0]).c_str());
    return 0;
  }
  if (options.isTarget()) blockStopSignals();
  auto engine = tent::TransferEngine::create(options.config_path);
  if (!engine.ok()) {
    std::fprintf(stderr, "tebench: create engine: %s\n", engine.status().toString().c_str());
    return 1;
  }
  auto bench = prepareBenchEngine(std::move(engine).value(), options.total_buffer_size);
  if (!bench.ok()) {
    std::fprintf(stderr, "tebench: %s\n", bench.status().toString().c_str());
    return 1;
  }
  int rc = options.isTarget()
               ? (options.notifi ? runNotifiTarget(options, **bench) : runTarget(options, **bench))
               : runInitiator(options, **bench);
  std::fflush(stdout);
  return rc;
}
