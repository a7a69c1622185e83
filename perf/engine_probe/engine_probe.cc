// A small measurement program (not a test): 4 KiB WRITE latency through the worker
// path and the direct path, and 4 MiB WRITE throughput, against an engine_peer
// process over the soft fabric (unlimited link unless the YAML says otherwise).
//   engine_probe PEER_EXE [iterations] [extra yaml]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "tests/support/engine_test_util.h"
#include "tests/support/peer_process.h"

using namespace tent;
using Clock = std::chrono::steady_clock;

namespace {

double pct(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

std::vector<double> latency(TransferEngine& e, void* src, SegmentId seg, uint64_t remote,
                            IntentType intent, int n) {
  std::vector<double> us;
  auto b = *e.allocateBatch(static_cast<size_t>(n) + 1000);
  for (int i = -1000; i < n; ++i) {  // 1000 warm-up transfers
    Request r{OpCode::WRITE, src, seg, remote, 4096, 0, 0, intent};
    auto t0 = Clock::now();
    (void)e.submitTransfer(b, {&r, 1});
    size_t id = static_cast<size_t>(i + 1000);
    while (e.getTransferStatus(b, id)->state == TransferState::PENDING) {
    }
    if (i >= 0) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  (void)e.freeBatch(b);
  return us;
}

double throughput(TransferEngine& e, uint8_t* src, SegmentId seg, uint64_t remote, int rounds) {
  constexpr size_t kBlock = 4 << 20, kBatch = 8;
  auto t0 = Clock::now();
  for (int round = 0; round < rounds; ++round) {
    auto b = *e.allocateBatch(kBatch);
    std::vector<Request> reqs;
    for (size_t i = 0; i < kBatch; ++i)
      reqs.push_back({OpCode::WRITE, src + i * kBlock, seg, remote + i * kBlock, kBlock});
    (void)e.submitTransfer(b, reqs);
    // waitTransfer backs off: on a 2-core machine a spinning caller starves the lcore.
    for (size_t i = 0; i < kBatch; ++i) (void)e.waitTransfer(b, i, 10'000'000'000ull);
    (void)e.freeBatch(b);
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return rounds * kBatch * kBlock / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: engine_probe PEER_EXE [iterations] [yaml]\n");
    return 2;
  }
  int n = argc > 2 ? std::atoi(argv[2]) : 20000;
  std::string yaml = argc > 3 ? argv[3] : "";
  tent::testing::PeerProcess peer;
  std::string err;
  if (!peer.start(argv[1], 32 << 20, 1, "127.0.0.1:0", yaml, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  auto engine = TransferEngine::createFromYaml("bootstrap: {listen: \"127.0.0.1:0\"}\n" + yaml);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().toString().c_str());
    return 1;
  }
  auto& e = **engine;
  auto* src = static_cast<uint8_t*>(*e.allocateLocalMemory(32 << 20, "*"));
  auto seg = *e.openSegment(peer.segment);
  auto stats = e.stats();
  std::printf("provider %s | %s | lcores:", stats.provider.c_str(), stats.link_model.c_str());
  for (auto& l : stats.lcores) std::printf(" [%u cpu=%d %s]", l.lcore, l.cpu, l.pollers.c_str());
  std::printf("\n");
  auto worker = latency(e, src, seg, peer.addr, IntentType::UNSPEC, n);
  auto direct = latency(e, src, seg, peer.addr, IntentType::FOREGROUND_GET, n);
  std::printf("4 KiB WRITE worker path: p50 %.2f us  p99 %.2f us  p999 %.2f us\n", pct(worker, 0.5),
              pct(worker, 0.99), pct(worker, 0.999));
  std::printf("4 KiB WRITE direct path: p50 %.2f us  p99 %.2f us  p999 %.2f us\n", pct(direct, 0.5),
              pct(direct, 0.99), pct(direct, 0.999));
  std::printf("4 MiB WRITE, batch 8, 1 thread: %.2f GB/s\n",
              throughput(e, src, seg, peer.addr, 100));
  auto d = e.stats().direct;
  std::printf("direct: attempted %lu succeeded %lu fallback(lane busy %lu, not ready %lu)\n",
              (unsigned long)d.attempted, (unsigned long)d.succeeded,
              (unsigned long)d.fallback_lane_busy, (unsigned long)d.fallback_endpoint_not_ready);
  peer.stop();
  return 0;
}
