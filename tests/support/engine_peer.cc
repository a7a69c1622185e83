// A peer process for the multi-process tests: creates an engine, allocates a
// buffer filled with a pattern, prints one line
//   READY <segment> <buffer address> <buffer size>
// on stdout and serves until stdin closes or it is killed.
//   engine_peer <size> <seed> <listen host:port> [extra yaml] [extra bootstrap keys]
// (the last one is spliced into the bootstrap map, e.g. ", auth: {secret_file: x}").
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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
  char c;
  while (::read(0, &c, 1) > 0) {
  }
  return 0;
}
