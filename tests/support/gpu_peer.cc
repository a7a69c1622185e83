// The peer process of engine_gpu_multiprocess: the fake CUDA driver, an engine with
// device memory of both kinds registered, and a command loop for the test.
//   gpu_peer <listen host:port>
// prints READY <segment> <VMM address> <cuMemAlloc address> <size> and then serves,
// one line each: FILL <addr> <len> <seed> -> 0, CHECK <addr> <len> <seed> -> index of
// the first wrong byte or -1, REREG 0 0 0 -> 0 after registering the cuMemAlloc buffer
// again (a new registration in the MR slot the old one freed).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine_test_util.h"
#include "tests/support/fake_cuda/fake_cuda.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gpu_peer LISTEN\n");
    return 2;
  }
  tent::cuda::testing::FakeCuda fake;
  const size_t size = 4 << 20;
  const std::string yaml = std::string("eal: {mode: manual}\n") + tent::testing::fabricYaml() +
                           "bootstrap: {listen: \"" + argv[1] + "\"}\n";
  auto engine = tent::TransferEngine::createFromYaml(yaml);
  if (!engine.ok()) {
    std::fprintf(stderr, "gpu_peer: %s\n", engine.status().toString().c_str());
    return 1;
  }
  auto vmm = (*engine)->allocateLocalMemory(size, "cuda:0");
  void* legacy = fake.appMalloc(0, size);
  tent::Status s = (*engine)->registerLocalMemory(legacy, size);
  if (!vmm.ok() || !s.ok()) {
    std::fprintf(stderr, "gpu_peer: %s %s\n", vmm.status().toString().c_str(),
                 s.toString().c_str());
    return 1;
  }
  std::printf("READY %s %" PRIu64 " %" PRIu64 " %zu\n", (*engine)->segmentName().c_str(),
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*vmm)),
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(legacy)), size);
  std::fflush(stdout);
  char cmd[16];
  uint64_t addr = 0, len = 0;
  unsigned seed = 0;
  while (std::scanf("%15s %" SCNu64 " %" SCNu64 " %u", cmd, &addr, &len, &seed) == 4) {
    if (std::strcmp(cmd, "FILL") == 0) {
      tent::testing::fillPattern(reinterpret_cast<void*>(addr), len, seed);
      std::printf("0\n");
    } else if (std::strcmp(cmd, "CHECK") == 0) {
      std::printf("%ld\n", tent::testing::checkPattern(reinterpret_cast<void*>(addr), len, seed));
    } else if (std::strcmp(cmd, "REREG") == 0) {
      const bool ok = (*engine)->unregisterLocalMemory(legacy).ok() &&
                      (*engine)->registerLocalMemory(legacy, size).ok();
      std::printf("%d\n", ok ? 0 : 1);
    } else {
      break;
    }
    std::fflush(stdout);
  }
  (void)(*engine)->unregisterLocalMemory(legacy);
  return 0;
}
