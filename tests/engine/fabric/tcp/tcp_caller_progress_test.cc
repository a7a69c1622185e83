// tcp provider: caller-side progress (fabric.tcp.caller_progress: true). A poller that
// finds its CQ empty reads its QPs' sockets itself (docs/fabric.md, "Caller-side
// progress"), so:
//  - with the initiator's service thread frozen (stopped in a signal handler while it
//    sleeps in epoll_wait, holding nothing), a WRITE and a READ still complete through
//    the poller alone, bytes verified - the outcome does not depend on scheduling: no
//    other thread of that provider runs;
//  - a "direct" QP polled by two threads at once beside bulk "worker" QPs of the same
//    two devices (both directions, a worker thread polling their CQ) completes every
//    WR, in order, every byte verified, while the service threads and the pollers
//    contend for each QP's receive side (the ownership flag; TSan checks it).
#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>

#include "tcp_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

std::set<int> threadIds() {
  std::set<int> out;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.insert(std::atoi(e->d_name));
    }
    closedir(d);
  }
  return out;
}

// The syscall a thread is blocked in (/proc/self/task/TID/syscall), -1 when running.
long blockedIn(int tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  if (!(f >> first) || first == "running") return -1;
  return std::strtol(first.c_str(), nullptr, 10);
}

bool inEpollWait(int tid) {
  const long nr = blockedIn(tid);
#ifdef SYS_epoll_wait
  if (nr == SYS_epoll_wait) return true;
#endif
#ifdef SYS_epoll_pwait2
  if (nr == SYS_epoll_pwait2) return true;
#endif
  return nr == SYS_epoll_pwait;
}

std::atomic<bool> g_thaw{false};
std::atomic<int> g_frozen{0};

void freezeHandler(int) {
  g_frozen.fetch_add(1);
  while (!g_thaw.load()) {
    timespec ts{0, 1'000'000};
    nanosleep(&ts, nullptr);
  }
  g_frozen.fetch_sub(1);
}

class TcpCallerProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = testConfig();
    cfg.caller_progress = true;  // off by default
    const std::set<int> before = threadIds();
    pa_ = makeProvider(cfg);
    ASSERT_NE(pa_, nullptr);
    for (int tid : threadIds()) {
      if (!before.count(tid)) a_threads_.push_back(tid);
    }
    pb_ = makeProvider(cfg);
    ASSERT_NE(pb_, nullptr);
    a_ = &pa_->device(0);
    b_ = &pb_->device(0);
  }
  std::unique_ptr<Provider> pa_, pb_;
  Device* a_ = nullptr;
  Device* b_ = nullptr;
  std::vector<int> a_threads_;  // the threads provider A started: its service thread
};

TEST_F(TcpCallerProgressTest, APollerCompletesItsWrsWhileTheServiceThreadIsFrozen) {
  ASSERT_EQ(a_threads_.size(), 1u) << "one device, one service thread";
  const int service = a_threads_[0];
  auto p = QpPair::make(*a_, *b_, 16, 1);
  GuardedBuffer src(*a_, 1 << 20, kAllAccess), dst(*b_, 1 << 20, kAllAccess);
  GuardedBuffer back(*a_, 1 << 20, kAllAccess);
  src.fill(31);
  dst.clear();
  back.clear();
  // A first WRITE brings the connection up (the service thread sets it up).
  ASSERT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 64).status,
            WcStatus::kSuccess);

  // Freeze A's service thread where it holds nothing: asleep in epoll_wait.
  struct sigaction sa {};
  sa.sa_handler = freezeHandler;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  g_thaw.store(false);
  // Thawed on every way out of the test, so the provider's close can join the thread.
  struct Thaw {
    ~Thaw() {
      g_thaw.store(true);
      while (g_frozen.load() != 0) std::this_thread::yield();
    }
  } thaw_on_exit;
  ASSERT_TRUE(waitFor([&] { return inEpollWait(service); })) << "service thread never slept";
  ASSERT_EQ(syscall(SYS_tgkill, getpid(), service, SIGUSR1), 0);
  ASSERT_TRUE(waitFor([] { return g_frozen.load() == 1; }));

  // Only this thread's polls can complete these: A's service thread does not run.
  for (int round = 0; round < 20; ++round) {
    const size_t len = 4096u << (round % 8);  // 4 KiB .. 512 KiB
    const size_t off = (round * 4099u) % ((1u << 20) - len);
    src.fill(static_cast<uint8_t>(40 + round));
    auto w = transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr() + off, dst.mr->rkey(), len, off);
    ASSERT_EQ(w.status, WcStatus::kSuccess) << toString(w.status) << " round " << round;
    ASSERT_EQ(std::memcmp(dst.data() + off, src.data() + off, len), 0) << "round " << round;
    auto r = transferOne(p, WrOpcode::kRdmaRead, back, dst.addr() + off, dst.mr->rkey(), len, off);
    ASSERT_EQ(r.status, WcStatus::kSuccess) << toString(r.status) << " round " << round;
    ASSERT_EQ(r.byte_len, len);
    ASSERT_EQ(std::memcmp(back.data() + off, src.data() + off, len), 0) << "round " << round;
  }
  EXPECT_EQ(g_frozen.load(), 1) << "the service thread stayed frozen throughout";
  g_thaw.store(true);
  ASSERT_TRUE(waitFor([] { return g_frozen.load() == 0; }));
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_TRUE(dst.canariesIntact());
  EXPECT_TRUE(back.canariesIntact());
  // And the service thread carries on after it thawed.
  src.fill(99);
  auto w = transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 1 << 20);
  EXPECT_EQ(w.status, WcStatus::kSuccess);
  EXPECT_TRUE(dst.holds(99));
}

// The direct QP's WRs: WRITE then READ back of 4 KiB at a per-iteration offset; two
// threads poll its CQ (the poster and a second poller), so their turns contend for the
// direct QP's receive side with each other and with the service thread, beside bulk
// traffic on worker QPs between the same two devices in both directions.
TEST_F(TcpCallerProgressTest, DirectTransfersBesideWorkerTrafficOnTheSamePeerAllVerify) {
  constexpr int kWorkerQps = 3;
  constexpr int kDirectIters = 600;
  constexpr size_t kDirectBytes = 4096;
  constexpr size_t kSlots = 64;
  constexpr size_t kBulkBytes = 1 << 20;

  // Direct: its own CQ on A, as the engine's direct lane has.
  auto direct = QpPair::make(*a_, *b_, 4, 1, 64);
  GuardedBuffer dsrc(*a_, kDirectBytes * kSlots, kAllAccess);
  GuardedBuffer ddst(*b_, kDirectBytes * kSlots, kAllAccess);
  GuardedBuffer dback(*a_, kDirectBytes * kSlots, kAllAccess);

  // Workers: QPs on both sides, each side's CQ polled by a thread of its own.
  auto wcq_a = std::move(a_->createCq(1024)).value();
  auto wcq_b = std::move(b_->createCq(1024)).value();
  std::vector<std::unique_ptr<QueuePair>> wa, wb;
  for (int i = 0; i < kWorkerQps; ++i) {
    wa.push_back(std::move(a_->createQp({wcq_a.get(), 8, 1})).value());
    wb.push_back(std::move(b_->createQp({wcq_b.get(), 8, 1})).value());
  }
  for (int i = 0; i < kWorkerQps; ++i) {
    ASSERT_TRUE(connectQp(*wa[i], remoteOf(*wb[i], *b_)).ok());
    ASSERT_TRUE(connectQp(*wb[i], remoteOf(*wa[i], *a_)).ok());
  }
  const size_t bulk_len = kBulkBytes * kWorkerQps;
  GuardedBuffer from_a(*a_, bulk_len, kAllAccess), from_b(*b_, bulk_len, kAllAccess);
  GuardedBuffer land_on_b(*b_, bulk_len, kAllAccess), land_on_a(*a_, bulk_len, kAllAccess);
  GuardedBuffer back_a(*a_, bulk_len, kAllAccess), back_b(*b_, bulk_len, kAllAccess);
  from_a.fill(7);
  from_b.fill(8);

  std::atomic<bool> stop{false};
  std::atomic<bool> worker_failed{false};
  // One side's bulk loop: every worker QP WRITEs 1 MiB to the peer and READs it back;
  // every round verified.
  auto bulk = [&](std::vector<std::unique_ptr<QueuePair>>& qps, CompletionQueue& cq,
                  GuardedBuffer& from, GuardedBuffer& land, GuardedBuffer& back, uint8_t seed) {
    std::vector<Sge> sges(2 * kWorkerQps);
    while (!stop.load() && !worker_failed.load()) {
      for (int i = 0; i < kWorkerQps; ++i) {
        const uint64_t at = kBulkBytes * static_cast<uint64_t>(i);
        sges[2 * i] = Sge{from.addr() + at, static_cast<uint32_t>(kBulkBytes), from.mr->lkey()};
        sges[2 * i + 1] = Sge{back.addr() + at, static_cast<uint32_t>(kBulkBytes), back.mr->lkey()};
        SendWr w =
            makeWr(2 * i, WrOpcode::kRdmaWrite, &sges[2 * i], 1, land.addr() + at, land.mr->rkey());
        SendWr r = makeWr(2 * i + 1, WrOpcode::kRdmaRead, &sges[2 * i + 1], 1, land.addr() + at,
                          land.mr->rkey());
        w.next = &r;
        const SendWr* bad = nullptr;
        if (qps[i]->postSend(&w, &bad) != 0) worker_failed.store(true);
      }
      auto wcs = pollN(cq, 2 * kWorkerQps);
      bool ok = wcs.size() == 2u * kWorkerQps;
      for (const auto& wc : wcs) ok = ok && wc.status == WcStatus::kSuccess;
      ok = ok && back.holds(seed) && land.holds(seed);
      if (!ok) worker_failed.store(true);
      back.clear();
      land.clear();
    }
  };
  std::thread worker_a([&] { bulk(wa, *wcq_a, from_a, land_on_b, back_a, 7); });
  std::thread worker_b([&] { bulk(wb, *wcq_b, from_b, land_on_a, back_b, 8); });

  // Completions of the direct QP, from either poller: each wr_id exactly once, success.
  std::vector<std::atomic<int>> seen(2 * kDirectIters);
  std::atomic<int> completed{0};
  std::atomic<int> bad{0};
  auto take = [&](const WorkCompletion* wc, int n) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::kSuccess || wc[i].wr_id >= seen.size()) {
        bad.fetch_add(1);
        continue;
      }
      seen[wc[i].wr_id].fetch_add(1);
      completed.fetch_add(1);
    }
  };
  std::atomic<bool> side_stop{false};
  std::thread side([&] {
    WorkCompletion wc[4];
    while (!side_stop.load()) {
      const int n = direct.cq_a->poll(wc, 4);
      if (n > 0) take(wc, n);
      if (n < 0) bad.fetch_add(1);
      std::this_thread::yield();
    }
  });

  for (int it = 0; it < kDirectIters && bad.load() == 0; ++it) {
    const size_t off = (static_cast<size_t>(it) % kSlots) * kDirectBytes;
    const auto seed = static_cast<uint8_t>(it * 13 + 1);
    for (size_t i = 0; i < kDirectBytes; ++i) {
      dsrc.data()[off + i] = static_cast<uint8_t>(seed + i * 3);
    }
    Sge w_sge{dsrc.addr() + off, static_cast<uint32_t>(kDirectBytes), dsrc.mr->lkey()};
    Sge r_sge{dback.addr() + off, static_cast<uint32_t>(kDirectBytes), dback.mr->lkey()};
    SendWr w = makeWr(2 * it, WrOpcode::kRdmaWrite, &w_sge, 1, ddst.addr() + off, ddst.mr->rkey());
    SendWr r =
        makeWr(2 * it + 1, WrOpcode::kRdmaRead, &r_sge, 1, ddst.addr() + off, ddst.mr->rkey());
    w.next = &r;
    post(*direct.a, w);
    ASSERT_TRUE(waitFor([&] {
      WorkCompletion wc[2];
      const int n = direct.cq_a->poll(wc, 2);
      if (n > 0) take(wc, n);
      return completed.load() >= 2 * (it + 1) || bad.load() != 0;
    })) << "iteration "
        << it;
    ASSERT_EQ(bad.load(), 0) << "iteration " << it;
    ASSERT_EQ(std::memcmp(ddst.data() + off, dsrc.data() + off, kDirectBytes), 0)
        << "iteration " << it;
    ASSERT_EQ(std::memcmp(dback.data() + off, dsrc.data() + off, kDirectBytes), 0)
        << "iteration " << it;
  }
  side_stop.store(true);
  side.join();
  stop.store(true);
  worker_a.join();
  worker_b.join();
  EXPECT_FALSE(worker_failed.load());
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(completed.load(), 2 * kDirectIters);
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "wr_id " << i;
  EXPECT_TRUE(ddst.canariesIntact());
  EXPECT_TRUE(dback.canariesIntact());
  EXPECT_TRUE(land_on_a.canariesIntact());
  EXPECT_TRUE(land_on_b.canariesIntact());
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
