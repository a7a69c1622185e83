// fabric_bench: see `fabric_bench --help` and docs/perf/fabric.md.
#include <cstdio>

#include "perf/fabric_bench/bench.h"

using namespace tent::perf::fabric_bench;

int main(int argc, char** argv) {
  Options options;
  std::string error;
  switch (parseArgs(argc, argv, &options, &error)) {
    case ParseOutcome::kHelp:
      std::fputs(usage().c_str(), stdout);
      return 0;
    case ParseOutcome::kError:
      std::fprintf(stderr, "fabric_bench: %s\n%s", error.c_str(), usage().c_str());
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
