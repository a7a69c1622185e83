// A peer process for the multi-process tests: creates an engine, allocates a
// buffer filled with a pattern, prints one line
//   READY <segment> <buffer address> <buffer size>
// on stdout and serves until stdin closes or it is killed.
//   engine_peer <size> <seed> <listen host:port> [extra yaml] [extra bootstrap keys]
// (the last one is spliced into the bootstrap map, e.g. ", auth: {secret_file: x}").
// Test hooks, one command per line on stdin:
//   stall   - its control loop runs nothing else until "resume" (or stdin closes);
//             prints STALLED once the loop is held (its lcores and NIC run on)
//   resume  - prints RESUMED once the loop was released
//   metadata - prints its localMetadata() blob in hex (the metadata blob tests carry
//             it over this pipe, a stand-in for a serving stack's own side channel)
//   notifications MS - waits up to MS ms for notifications; prints
//             "NOTES <count> <message>|<message>..." (every one that arrived)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <string>

#include "control/control_plane.h"
#include "engine_test_util.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: engine_peer SIZE SEED LISTEN [YAML]\n");
    return 2;
  }
  size_t size = std::strtoull(argv[1], nullptr, 0);
  uint32_t seed = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 0));
  std::string yaml = std::string("bootstrap: {listen: \"") + argv[3] + "\"" +
                     (argc > 5 ? argv[5] : "") + "}\n" + (argc > 4 ? argv[4] : "");
  auto engine = tent::TransferEngine::createFromYaml(yaml);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine_peer: %s\n", engine.status().toString().c_str());
    return 1;
  }
  auto mem = (*engine)->allocateLocalMemory(size, "*");
  if (!mem.ok()) {
    std::fprintf(stderr, "engine_peer: %s\n", mem.status().toString().c_str());
    return 1;
  }
  tent::testing::fillPattern(*mem, size, seed);
  std::printf("READY %s %lu %zu\n", (*engine)->segmentName().c_str(),
              static_cast<unsigned long>(reinterpret_cast<uintptr_t>(*mem)), size);
  std::fflush(stdout);
  auto& control = static_cast<tent::TransferEngineImpl&>(**engine).transport().control();
  std::unique_ptr<std::promise<void>> stall;
  for (std::string line; std::getline(std::cin, line);) {
    if (line == "stall" && !stall) {
      stall = std::make_unique<std::promise<void>>();
      auto held = std::make_shared<std::promise<void>>();
      control.stallForTest(stall->get_future().share(), [held] { held->set_value(); });
      held->get_future().wait();
      std::printf("STALLED\n");
    } else if (line == "metadata") {
      auto blob = (*engine)->localMetadata();
      std::string hex;
      static const char kDigits[] = "0123456789abcdef";
      for (unsigned char c : blob.ok() ? *blob : std::string())
        hex += {kDigits[c >> 4], kDigits[c & 15]};
      std::printf("%s\n", blob.ok() ? hex.c_str() : blob.status().toString().c_str());
    } else if (line.rfind("notifications ", 0) == 0) {
      const uint64_t ms = std::strtoull(line.c_str() + 14, nullptr, 10);
      auto got = (*engine)->waitNotifications(ms * 1000000);
      std::string out = "NOTES " + std::to_string(got.ok() ? got->size() : 0) + " ";
      for (size_t i = 0; got.ok() && i < got->size(); ++i)
        out += (i ? "|" : "") + (*got)[i].message;
      std::printf("%s\n", got.ok() ? out.c_str() : got.status().toString().c_str());
    } else if (line == "resume" && stall) {
      stall->set_value();
      stall.reset();
      std::printf("RESUMED\n");
    }
    std::fflush(stdout);
  }
  if (stall) stall->set_value();
  return 0;
}
