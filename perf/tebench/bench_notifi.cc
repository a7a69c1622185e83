// tebench --notifi (as upstream's flag): how soon a target learns that a batch landed.
// The initiator runs batches of WRITEs (--start_block_size x --start_batch_size, one
// thread), waits for each to complete, then sends a notification stamped with that
// moment (steady clock, the same on both processes of one host); the target takes
// notifications in a spinning loop (getNotifications, so the figure is the channel's,
// not a sleeping waiter's) and records receipt - stamp. Both print p50/p99/p999 and the
// rate; the target on SIGINT / SIGTERM, the initiator after --duration.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "perf/tebench/bench_clock.h"
#include "perf/tebench/bench_report.h"
#include "perf/tebench/bench_runner.h"
#include "perf/tebench/bench_stats.h"

namespace tent::bench {

namespace {

std::string stamp(int64_t ns) {
  return std::string(reinterpret_cast<const char*>(&ns), sizeof ns);
}

void printSummary(const char* who, std::vector<uint64_t>* ns, double seconds, uint64_t failed) {
  const LatencySummary s = summarizeLatency(ns);
  std::printf(
      "%s: %llu notifications in %.3f s = %.0f/s; %s p50 %.2f us p99 %.2f us p999 %.2f us "
      "max %.2f us; failed %llu\n",
      who, (unsigned long long)s.count, seconds, seconds > 0 ? s.count / seconds : 0.0,
      std::strcmp(who, "target") == 0 ? "completion -> receipt"
                                      : "completion -> send acknowledged by the peer's NIC",
      s.p50_us, s.p99_us, s.p999_us, s.max_us, (unsigned long long)failed);
}

}  // namespace

int runNotifiTarget(const BenchOptions& options, BenchEngine& bench) {
  (void)options;
  const EngineStats stats = bench.engine->stats();
  std::printf("tebench target ready (--notifi): segment=%s provider=%s buffer=%p length=%llu\n",
              bench.engine->segmentName().c_str(), stats.provider.c_str(),
              static_cast<void*>(bench.buffer), (unsigned long long)bench.buffer_size);
  std::printf("%s", formatEngineHeader(stats).c_str());
  std::fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  const timespec zero{0, 0};
  std::vector<uint64_t> latency;
  int64_t first = 0, last = 0;
  uint64_t bad = 0;
  for (uint64_t spins = 0;; ++spins) {
    if ((spins & 1023) == 0 && sigtimedwait(&set, nullptr, &zero) > 0) break;
    auto got = bench.engine->getNotifications();
    if (!got.ok()) {
      std::fprintf(stderr, "tebench target: %s\n", got.status().toString().c_str());
      return 1;
    }
    const int64_t now = nowNs();
    for (const auto& n : *got) {
      int64_t sent = 0;
      if (n.message.size() != sizeof sent) {
        ++bad;
        continue;
      }
      std::memcpy(&sent, n.message.data(), sizeof sent);
      latency.push_back(static_cast<uint64_t>(now > sent ? now - sent : 0));
      if (first == 0) first = now;
      last = now;
    }
  }
  printSummary("target", &latency, (last - first) / 1e9, bad);
  return 0;
}

int runNotifiInitiator(const BenchOptions& o, BenchEngine& bench, const RemoteBuffer& remote) {
  TransferEngine& e = *bench.engine;
  std::printf("%s", formatEngineHeader(e.stats()).c_str());
  std::printf("# notifi: batches of %u WRITEs x %llu B, then a notification; %g s; target %s\n",
              o.start_batch_size, (unsigned long long)o.start_block_size, o.duration_s,
              o.target_seg_name.c_str());
  std::vector<Request> reqs(o.start_batch_size);
  for (uint32_t i = 0; i < o.start_batch_size; ++i)
    reqs[i] = {OpCode::WRITE, bench.buffer + i * o.start_block_size, remote.segment,
               remote.addr + i * o.start_block_size, o.start_block_size};
  std::vector<uint64_t> send_ns;
  uint64_t failed = 0, refused = 0;
  const int64_t start = nowNs(), end = start + static_cast<int64_t>(o.duration_s * 1e9);
  while (nowNs() < end) {
    auto batch = e.allocateBatch(reqs.size());
    if (!batch.ok() || !e.submitTransfer(*batch, reqs).ok()) return 1;
    for (;;) {
      auto st = e.getBatchTransferStatus(*batch);
      if (!st.ok() || st->state != TransferState::PENDING) {
        if (!st.ok() || st->state != TransferState::COMPLETED) return 1;
        break;
      }
    }
    const int64_t done = nowNs();  // the initiator has seen the batch's last completion
    // Back-pressure (the target has not taken its notifications yet) is retried, and
    // counted: the target's figure then includes the wait, as a caller's would.
    Status s;
    while ((s = e.sendNotification(remote.segment, stamp(done))).code() ==
               StatusCode::kResourceExhausted &&
           nowNs() - done < static_cast<int64_t>(o.transfer_timeout_s * 1e9))
      ++refused;
    if (s.ok()) {
      send_ns.push_back(static_cast<uint64_t>(nowNs() - done));
    } else {
      ++failed;
      if (failed == 1) std::fprintf(stderr, "tebench: notification: %s\n", s.toString().c_str());
    }
    (void)e.freeBatch(*batch);
  }
  printSummary("initiator", &send_ns, (nowNs() - start) / 1e9, failed);
  std::printf("initiator: sends refused by back-pressure and retried: %llu\n",
              (unsigned long long)refused);
  return failed == 0 ? 0 : 1;
}

}  // namespace tent::bench
