// tebench: without --target_seg_name it is a target (allocates and registers a
// buffer, prints "tebench target ready: segment=...", serves until SIGINT or
// SIGTERM); with it, an initiator running a sweep or, with
// --workload_classes_json, a QoS run. Exit codes: 0 ok, 1 the run failed,
// 2 bad flags. Flags are read by the one flag library of tent's tools (base/cli,
// gflags, as Mooncake's tebench): --help lists each with its default, --flagfile=FILE.
#include <gflags/gflags.h>

#include <csignal>
#include <cstdio>
#include <deque>
#include <numeric>
#include <string>
#include <vector>

#include "base/cli/cli_flags.h"
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

constexpr const char* kUsage =
    "usage:\n"
    "  target:    tebench --backend=tent --xport_type=rdma --seg_type=DRAM [--config=FILE] "
    "[--total_buffer_size=N]\n"
    "  initiator: tebench --target_seg_name=HOST:PORT [flags]\n"
    "sizes: bytes, optionally with a binary unit k, m, g, t (either case, optionally iB)";

// Registers every flag of bench_options (one list: names, help, defaults) with gflags.
// gflags keeps pointers to the values: they live as long as the process.
void registerFlags() {
  static std::deque<std::string> strings;
  static std::deque<bool> bools;
  for (const BenchFlag& f : benchFlags()) {
    if (f.is_bool) {
      bools.push_back(*f.default_text == "true");
      bools.push_back(bools.back());
      gflags::FlagRegisterer(f.name->c_str(), f.help->c_str(), __FILE__, &bools[bools.size() - 2],
                             &bools.back());
    } else {
      strings.push_back(*f.default_text);
      strings.push_back(*f.default_text);
      gflags::FlagRegisterer(f.name->c_str(), f.help->c_str(), __FILE__,
                             &strings[strings.size() - 2], &strings.back());
    }
  }
}

// The flags given (not left at their defaults) as "--name=value" for parseBenchOptions,
// which checks and types them as before.
std::vector<std::string> givenFlags() {
  std::vector<std::string> out = {"tebench"};
  for (const BenchFlag& f : benchFlags()) {
    const auto info = gflags::GetCommandLineFlagInfoOrDie(f.name->c_str());
    if (!info.is_default) out.push_back("--" + *f.name + "=" + info.current_value);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  registerFlags();
  if (int rc = tent::cli::parseFlags(&argc, &argv, kUsage); rc != tent::cli::kContinue) return rc;
  if (argc > 1) {
    std::fprintf(stderr, "tebench: unexpected argument '%s' (flags look like --name=value)\n",
                 argv[1]);
    return 2;
  }
  const std::vector<std::string> given = givenFlags();
  std::vector<const char*> args;
  for (const std::string& a : given) args.push_back(a.c_str());
  auto parsed = parseBenchOptions(static_cast<int>(args.size()), args.data());
  if (!parsed.ok()) {
    std::fprintf(stderr, "tebench: %s\n\n%s\n(--help lists every flag with its default)\n",
                 parsed.status().message().c_str(), kUsage);
    return 2;
  }
  const BenchOptions& options = *parsed;
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
