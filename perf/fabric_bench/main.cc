// fabric_bench: see `fabric_bench --help` and docs/perf/fabric.md. Flags are read by
// the one flag library of tent's tools (base/cli, gflags); their values are checked
// by bench_flags.cc's parseArgs, as before.
#include <gflags/gflags.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/cli/cli_flags.h"
#include "perf/fabric_bench/bench.h"

DEFINE_string(provider, "soft", "fabric provider: soft or verbs");
DEFINE_string(qps, "1", "queue pairs, 1..64");
DEFINE_string(size, "4096",
              "message sizes S[,S...], one case each; sizes as in the config (64k, 1MiB)");
DEFINE_string(opcode, "write", "RDMA write or read");
DEFINE_string(depth, "1", "WRs in flight per QP, 1..4096");
DEFINE_string(link_gbps, "0", "soft: modeled link in Gbit/s, 0 = unlimited");
DEFINE_string(latency_ns, "0", "soft: modeled one-way latency in ns");
DEFINE_string(duration, "2", "measuring time per case, seconds (excludes --iters)");
DEFINE_string(iters, "", "measure N WRs per case instead of a duration");
DEFINE_string(warmup, "200", "WRs before measuring");
DEFINE_string(processes, "1", "1, or 2: the target is a forked process");
DEFINE_string(device, "", "verbs: the device to use (empty: the first)");

using namespace tent::perf::fabric_bench;

namespace {

constexpr const char* kUsage =
    "usage: fabric_bench [flags]\n"
    "Prints a table and one JSON line per case (achieved_gbps and link_gbps in Gbit/s).";

// The flags given (not left at their defaults), as --name=value for parseArgs.
std::vector<std::string> givenFlags() {
  std::vector<std::string> out = {"fabric_bench"};
  for (const char* name : {"provider", "qps", "size", "opcode", "depth", "link_gbps",
                           "latency_ns", "duration", "iters", "warmup", "processes", "device"}) {
    const auto info = gflags::GetCommandLineFlagInfoOrDie(name);
    if (!info.is_default) out.push_back(std::string("--") + name + "=" + info.current_value);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = tent::cli::parseFlags(&argc, &argv, kUsage); rc != tent::cli::kContinue) return rc;
  if (argc > 1) {
    std::fprintf(stderr, "fabric_bench: unexpected argument '%s' (--help)\n", argv[1]);
    return 2;
  }
  std::vector<std::string> given = givenFlags();
  std::vector<char*> args;
  for (std::string& a : given) args.push_back(a.data());
  Options options;
  std::string error;
  switch (parseArgs(static_cast<int>(args.size()), args.data(), &options, &error)) {
    case ParseOutcome::kHelp:
      std::fputs(usage().c_str(), stdout);
      return 0;
    case ParseOutcome::kError:
      std::fprintf(stderr, "fabric_bench: %s (--help lists every flag)\n", error.c_str());
      return 2;
    case ParseOutcome::kRun:
      break;
  }
  auto bench = setUp(options);
  if (!bench.ok()) {
    std::fprintf(stderr, "%s\n", bench.status().toString().c_str());
    return 1;
  }
  std::printf("# %s\n", (*bench)->provider->linkModel().c_str());
  std::vector<std::string> json;
  printTableHeader();
  for (uint64_t size : options.sizes) {
    auto result = runCase(**bench, size);
    if (!result.ok()) {
      std::fprintf(stderr, "%s\n", result.status().toString().c_str());
      return 1;
    }
    printTableRow(**bench, *result);
    std::fflush(stdout);
    json.push_back(jsonLine(**bench, *result));
    if (!result->verified) {
      std::fprintf(stderr, "fabric_bench: bytes at the target differ from the source\n");
      return 1;
    }
  }
  for (const std::string& line : json) std::printf("%s\n", line.c_str());
  return 0;
}
