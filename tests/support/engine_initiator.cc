// A short-lived initiator for the churn tests: opens a target segment, WRITEs a
// pattern into the target's buffer and READs it back, verifies it, and exits -
// cleanly (closing its engine) or, with "crash", by SIGKILLing itself after the
// transfer, as a process that dies without cleaning up, or with "close", by closing
// its engine while a WRITE and a READ it just submitted are still in flight.
//   engine_initiator <target host:port> <target buffer address> <offset> <seed>
//                    [crash|close]
// Exit code 0 when the bytes came back, 1 otherwise (2: bad arguments).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine_test_util.h"

namespace {

constexpr size_t kLength = 64 << 10;

int run(const std::string& target, uint64_t addr, uint64_t offset, uint32_t seed, bool crash,
        bool close_in_flight) {
  using namespace tent;  // NOLINT
  auto engine = tent::testing::makeEngine(tent::testing::simYaml());
  if (!engine) return 1;
  auto mem = engine->allocateLocalMemory(2 * kLength, "cpu:0");
  auto seg = engine->openSegment(target);
  if (!mem.ok() || !seg.ok()) {
    std::fprintf(stderr, "engine_initiator: %s\n",
                 (mem.ok() ? seg.status() : mem.status()).toString().c_str());
    return 1;
  }
  auto* buf = static_cast<uint8_t*>(*mem);
  tent::testing::fillPattern(buf, kLength, seed);
  auto b = *engine->allocateBatch(2);
  Request w{OpCode::WRITE, buf, *seg, addr + offset, kLength};
  if (!engine->submitTransfer(b, {&w, 1}).ok()) return 1;
  if (tent::testing::waitTask(*engine, b, 0).state != TransferState::COMPLETED) return 1;
  std::memset(buf + kLength, 0, kLength);
  Request r{OpCode::READ, buf + kLength, *seg, addr + offset, kLength};
  if (!engine->submitTransfer(b, {&r, 1}).ok()) return 1;
  if (tent::testing::waitTask(*engine, b, 1).state != TransferState::COMPLETED) return 1;
  const bool same = tent::testing::checkPattern(buf + kLength, kLength, seed) == -1;
  if (crash) ::raise(SIGKILL);  // no close, no destructor: the target must notice
  if (close_in_flight && same) {
    auto again = *engine->allocateBatch(2);
    if (!engine->submitTransfer(again, {&w, 1}).ok() ||
        !engine->submitTransfer(again, {&r, 1}).ok())
      return 1;
    engine.reset();  // with both in flight: it must return, and the target keep no leftovers
  }
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: engine_initiator TARGET ADDR OFFSET SEED [crash|close]\n");
    return 2;
  }
  return run(argv[1], std::strtoull(argv[2], nullptr, 0), std::strtoull(argv[3], nullptr, 0),
             static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 0)),
             argc > 5 && std::string(argv[5]) == "crash",
             argc > 5 && std::string(argv[5]) == "close");
}
