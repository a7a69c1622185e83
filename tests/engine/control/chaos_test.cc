// The chaos suite: a seeded, randomized fault schedule against one initiator engine
// (this process, real lcores, soft fabric) and peer processes, for a given time.
// Faults: a peer killed and restarted on its port, a peer stopped (SIGSTOP) and
// continued, a local buffer unregistered while a WRITE from it is in flight and
// registered again, an initiator process that closes its engine with transfers in
// flight, a flood of control connections to a peer and to this engine, and link
// faults through TENT_CHAOS_LINK_HOOK (a command run as `hook down|up`, for a peer
// reached across network namespaces; not scheduled when unset).
// Meanwhile worker threads open, transfer (WRITE then READ back, every byte checked)
// and close. Every API call has a bound (LoopCalls' deadlines plus slack): one that
// outlives it counts as hung. At the end every resource is back at its baseline.
//   engine_chaos [minutes]   (default 1; TENT_CHAOS_MINUTES overrides it)
//   TENT_CHAOS_SEED=<n>      replays a schedule (the seed is printed first)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "control/control_plane.h"
#include "control/endpoint_manager.h"
#include "tests/support/bounded_call.h"
#include "tests/support/engine_test_util.h"
#include "tests/support/peer_process.h"
#include "tests/support/process_resources.h"
#include "tests/support/raw_control.h"

namespace tent::testing {

double g_minutes = 1;

namespace {

const std::string kFabric = R"(
fabric:
  provider: soft
  soft:
    devices:
      - {name: soft0, numa_node: 0}
      - {name: soft1, numa_node: 0}
    retry_budget_ms: 50
endpoints: {reconnect_initial_ms: 20, reconnect_max_ms: 500}
)";
constexpr uint32_t kConnectMs = 1000, kIoMs = 1000, kSliceMs = 3000;
// Bounds against a hang (never speed requirements): LoopCalls' deadline for an open
// is connect + io timeout; a transfer ends within its slice timeout and retries.
constexpr double kCallBound = (kConnectMs + kIoMs) / 1000.0 + 10;
constexpr double kTransferBound = 60;
constexpr size_t kPeerBytes = 1 << 20, kRegion = 32 << 10;
constexpr int kPeers = 2, kWorkers = 3;

// What the engine's endpoints are, asked on its control loop (bounded).
std::string describeEndpoints(TransferEngineImpl& e) {
  auto& control = e.transport().control();
  auto answer = std::make_shared<std::promise<std::string>>();
  auto text = answer->get_future();
  control.loop().post([&control, answer] { answer->set_value(control.endpoints().describe()); });
  if (text.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
    return "(the control loop did not answer)\n";
  return text.get();
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

size_t threadCount() {
  return countEntries("/proc/self/task");
}

long rssKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

// One peer process; only the chaos thread starts, kills, stops it. Workers read its
// address and life (bumped at each kill and each restart) to tell a transfer that
// met another life of the peer from corruption.
struct ChaosPeer {
  PeerProcess proc;
  std::string name;
  std::atomic<uint64_t> addr{0};
  std::atomic<uint32_t> life{0};
};

struct Counts {
  std::mutex mu;
  std::map<std::string, uint64_t> faults;
  std::atomic<uint64_t> verified{0}, failed{0}, other_life{0}, corrupt{0}, hung{0};
  std::atomic<uint64_t> opens{0}, open_failures{0}, closes{0};
  void fault(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu);
    ++faults[kind];
  }
};

class Chaos {
 public:
  Chaos(TransferEngineImpl& e, uint64_t seed) : e_(e), seed_(seed) {}

  bool startPeers(std::string* err) {
    for (int i = 0; i < kPeers; ++i) {
      peers_.push_back(std::make_unique<ChaosPeer>());
      ChaosPeer& p = *peers_.back();
      if (!p.proc.start(peerExe(), kPeerBytes, 1 + i, "127.0.0.1:0", kFabric, err)) return false;
      p.name = p.proc.segment;
      p.addr = p.proc.addr;
    }
    return true;
  }

  void run(double seconds) {
    local_ = static_cast<uint8_t*>(*e_.allocateLocalMemory(2 * kRegion * kWorkers, "*"));
    std::vector<std::thread> workers;
    for (int t = 0; t < kWorkers; ++t) workers.emplace_back([this, t] { worker(t); });
    std::mt19937_64 rng(seed_);
    const auto start = std::chrono::steady_clock::now();
    while (secondsSince(start) < seconds && counts.hung.load() == 0) {
      sleepMs(50 + rng() % 400);
      injectOne(rng);
    }
    stop_ = true;
    for (auto& w : workers) w.join();
    for (auto& p : peers_) ::kill(p->proc.pid, SIGCONT);
  }

  // Closes what the run opened and ends the peers; resources are measured after.
  void finish() {
    for (auto& p : peers_) {
      auto seg = boundedCall([&] { return e_.openSegment(p->name); }, kCallBound);
      if (seg && seg->ok()) (void)boundedCall([&] { return e_.closeSegment(**seg); }, kCallBound);
      p->proc.kill();
    }
    (void)e_.freeLocalMemory(local_);
  }

  Counts counts;

 private:
  static void sleepMs(uint64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  // ---- workers: open, WRITE, READ back, check; close now and then ----------------
  void worker(int t) {
    std::mt19937_64 rng(seed_ * 1000 + t + 1);
    uint8_t* out = local_ + 2 * kRegion * t;
    uint8_t* in = out + kRegion;
    uint32_t pattern = 1000 * (t + 1);
    while (!stop_.load() && counts.hung.load() == 0) {
      ChaosPeer& p = *peers_[rng() % peers_.size()];
      const uint32_t life = p.life.load();
      const uint64_t remote = p.addr.load() + kRegion * t;  // each worker its own region
      auto seg = boundedCall([&] { return e_.openSegment(p.name); }, kCallBound);
      if (!seg) return hung("openSegment " + p.name);
      ++counts.opens;
      if (!seg->ok()) {
        ++counts.open_failures;
        continue;
      }
      const size_t len = 1 + rng() % kRegion;
      roundTrip(**seg, out, in, remote, len, ++pattern, p, life);
      if (rng() % 4 == 0) {  // the reopen pattern: close, the next round opens again
        auto closed = boundedCall([&] { return e_.closeSegment(**seg); }, kCallBound);
        if (!closed) return hung("closeSegment " + p.name);
        ++counts.closes;
      }
    }
  }

  void roundTrip(SegmentId seg, uint8_t* out, uint8_t* in, uint64_t remote, size_t len,
                 uint32_t pattern, ChaosPeer& p, uint32_t life) {
    fillPattern(out, len, pattern);
    std::memset(in, 0, len);
    auto b = e_.allocateBatch(2);
    if (!b.ok()) return (void)++counts.failed;
    Request w{OpCode::WRITE, out, seg, remote, len};
    Request r{OpCode::READ, in, seg, remote, len};
    bool ok = transfer(*b, 0, w) && transfer(*b, 1, r);
    (void)e_.freeBatch(*b);
    if (counts.hung.load() != 0) return;
    if (!ok) return (void)++counts.failed;
    if (checkPattern(in, len, pattern) == -1) return (void)++counts.verified;
    // Completed with other bytes: only a peer that restarted in between may explain it
    // (the READ met its next life, its own pattern); anything else is corruption.
    if (p.life.load() != life)
      ++counts.other_life;
    else
      ++counts.corrupt;
  }

  bool transfer(BatchId b, size_t task, const Request& req) {
    if (!e_.submitTransfer(b, {&req, 1}).ok()) return false;
    const TransferStatus st = waitTask(e_, b, task, kTransferBound);
    if (st.state == TransferState::PENDING) {
      const EngineStats es = e_.stats();
      std::fprintf(
          stderr,
          "chaos: a %s of %lu bytes to segment %lu still pending: slices posted %lu, "
          "completed %lu, errors %lu, retries %lu; direct lanes in use %lu\n%s",
          req.opcode == OpCode::WRITE ? "WRITE" : "READ", static_cast<unsigned long>(req.length),
          static_cast<unsigned long>(req.target_id),
          static_cast<unsigned long>(es.worker.slices_posted),
          static_cast<unsigned long>(es.worker.slices_completed),
          static_cast<unsigned long>(es.worker.slice_errors),
          static_cast<unsigned long>(es.worker.slice_retries),
          static_cast<unsigned long>(es.direct.lanes_in_use), describeEndpoints(e_).c_str());
      hung("transfer");
    }
    return st.state == TransferState::COMPLETED;
  }

  void hung(const std::string& what) {
    std::fprintf(stderr, "chaos: HUNG: %s (seed %lu)\n", what.c_str(),
                 static_cast<unsigned long>(seed_));
    ++counts.hung;
  }

  // ---- the schedule ---------------------------------------------------------------
  void injectOne(std::mt19937_64& rng) {
    ChaosPeer& p = *peers_[rng() % peers_.size()];
    const bool link = std::getenv("TENT_CHAOS_LINK_HOOK") != nullptr;
    switch (rng() % (link ? 6 : 5)) {
      case 0:
        return killAndRestart(p, rng);
      case 1:
        return stopAndContinue(p, rng);
      case 2:
        return reregisterInFlight(p, rng);
      case 3:
        return closeInFlight(p, rng);
      case 4:
        return flood(p, rng);
      default:
        return linkFault(rng);
    }
  }

  void killAndRestart(ChaosPeer& p, std::mt19937_64& rng) {
    counts.fault("peer killed and restarted");
    ++p.life;
    p.proc.kill();
    sleepMs(rng() % 1000);
    std::string err;
    // The port may still be held for a moment by the last life's sockets.
    for (int tries = 0; !p.proc.start(peerExe(), kPeerBytes, p.life + 10, p.name, kFabric, &err);
         ++tries) {
      p.proc.kill();
      if (tries == 100) {
        ADD_FAILURE() << "peer " << p.name << " did not restart: " << err;
        return hung("peer restart");
      }
      sleepMs(50);
    }
    p.addr = p.proc.addr;
    ++p.life;
  }

  void stopAndContinue(ChaosPeer& p, std::mt19937_64& rng) {
    counts.fault("peer stopped and continued");
    ::kill(p.proc.pid, SIGSTOP);
    sleepMs(100 + rng() % 3000);  // beyond io_timeout_ms at times: its session goes slow
    ::kill(p.proc.pid, SIGCONT);
  }

  // A WRITE from a buffer that is unregistered while the WRITE may be in flight: the
  // unregistration fails (the buffer is in use) or waits; the WRITE ends either way;
  // the buffer is registered again and used.
  void reregisterInFlight(ChaosPeer& p, std::mt19937_64& rng) {
    counts.fault("unregister while in flight, register again");
    const size_t len = 1 + rng() % kRegion;
    std::vector<uint8_t> buf(len);
    fillPattern(buf.data(), len, static_cast<uint32_t>(rng()));
    for (int round = 0; round < 2; ++round) {
      if (!e_.registerLocalMemory(buf.data(), len, "*").ok()) return;
      auto seg = boundedCall([&] { return e_.openSegment(p.name); }, kCallBound);
      if (!seg) return hung("openSegment (reregister)");
      auto b = e_.allocateBatch(1);
      bool submitted = false;
      if (seg->ok() && b.ok()) {
        Request w{OpCode::WRITE, buf.data(), **seg, p.addr.load() + kRegion * kWorkers, len};
        submitted = e_.submitTransfer(*b, {&w, 1}).ok();
      }
      const Status early = e_.unregisterLocalMemory(buf.data());
      if (submitted && waitTask(e_, *b, 0, kTransferBound).state == TransferState::PENDING)
        return hung("WRITE from a buffer being unregistered");
      if (b.ok()) (void)e_.freeBatch(*b);
      if (!early.ok() && !e_.unregisterLocalMemory(buf.data()).ok()) {
        ADD_FAILURE() << "unregister after the WRITE ended: still refused";
        return;
      }
    }
  }

  // An initiator process closes its engine with a WRITE and a READ in flight.
  void closeInFlight(ChaosPeer& p, std::mt19937_64& rng) {
    counts.fault("engine closed in flight");
    const char* exe = std::getenv("TENT_ENGINE_INITIATOR");
    if (exe == nullptr) return;
    const std::string addr = std::to_string(p.addr.load());
    const std::string off = std::to_string(kRegion * (kWorkers + 1));
    const std::string seed = std::to_string(rng() % 100000);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(exe, exe, p.name.c_str(), addr.c_str(), off.c_str(), seed.c_str(), "close",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const auto start = std::chrono::steady_clock::now();
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (secondsSince(start) > kCallBound + kTransferBound) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return hung("engine close with transfers in flight");
      }
      sleepMs(10);
    }
    // Exit 1 is a peer that was away (killed, stopped): the close itself returned.
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
      ADD_FAILURE() << "initiator closing in flight ended with status " << status;
  }

  // Control connections that go nowhere: some send garbage, some a partial frame.
  void flood(ChaosPeer& p, std::mt19937_64& rng) {
    counts.fault("control connection flood");
    const std::string target = rng() % 2 ? p.name : e_.segmentName();
    std::vector<std::unique_ptr<test::RawControl>> conns;
    const int n = 32 + static_cast<int>(rng() % 224);
    for (int i = 0; i < n; ++i) {
      auto c = std::make_unique<test::RawControl>();
      if (!c->connect(target)) break;
      const uint8_t junk[7] = {0xff, 0, 0, 0, 0x10, 1, 2};
      if (i % 3 == 0) (void)c->sendBytes(junk, sizeof junk);
      conns.push_back(std::move(c));
    }
    sleepMs(rng() % 300);
  }

  void linkFault(std::mt19937_64& rng) {
    counts.fault("link down and up (hook)");
    const std::string hook = std::getenv("TENT_CHAOS_LINK_HOOK");
    if (std::system((hook + " down").c_str()) != 0) ADD_FAILURE() << hook << " down failed";
    sleepMs(100 + rng() % 2000);
    if (std::system((hook + " up").c_str()) != 0) ADD_FAILURE() << hook << " up failed";
  }

  TransferEngineImpl& e_;
  const uint64_t seed_;
  std::vector<std::unique_ptr<ChaosPeer>> peers_;
  uint8_t* local_ = nullptr;
  std::atomic<bool> stop_{false};
};

struct Baseline {
  ResourceStats resources;
  uint64_t connections = 0, slices_open = 0, lanes = 0;
  size_t fds = 0, threads = 0, maps = 0;
  long rss = 0;
  static Baseline of(TransferEngineImpl& e) {
    const EngineStats s = e.stats();
    Baseline b;
    b.resources = s.resources;
    b.connections = s.control.connections_open;
    b.slices_open = s.worker.slices_posted - s.worker.slices_completed - s.worker.slice_errors;
    b.lanes = s.direct.lanes_in_use;
    b.fds = countEntries("/proc/self/fd");
    b.threads = threadCount();
    b.maps = countDataMappings();
    b.rss = rssKiB();
    return b;
  }
  bool same(const Baseline& o) const {
    return resources.endpoints_live == o.resources.endpoints_live &&
           resources.endpoints_retired == o.resources.endpoints_retired &&
           resources.qps_live == o.resources.qps_live && connections == o.connections &&
           slices_open == o.slices_open && lanes == o.lanes && fds == o.fds &&
           threads == o.threads && maps == o.maps;
  }
};

long delta(uint64_t now, uint64_t base) {
  return static_cast<long>(now) - static_cast<long>(base);
}

TEST(Chaos, FaultsInjectedAndSurvived) {
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("TENT_CHAOS_SEED")) seed = std::strtoull(s, nullptr, 0);
  std::printf("chaos: seed %lu (replay: TENT_CHAOS_SEED=%lu), %.1f minutes\n",
              static_cast<unsigned long>(seed), static_cast<unsigned long>(seed), g_minutes);
  std::fflush(stdout);
  auto owned = makeEngine(
      "bootstrap: {listen: \"127.0.0.1:0\", connect_timeout_ms: " + std::to_string(kConnectMs) +
      ", io_timeout_ms: " + std::to_string(kIoMs) + "}\n" + kFabric +
      "workers: {slice_timeout_ms: " + std::to_string(kSliceMs) + "}\n" +
      // No notify QPs: a soft device keeps the receive area of every QP slot that ever had a
      // receive queue until it closes, so the data mappings below would not come back to
      // the baseline (bounded by the slots used at once). engine_notify churns notify QPs.
      "notify: {enabled: false}\n");
  ASSERT_NE(owned, nullptr);
  TransferEngineImpl& e = *owned;
  (void)*e.allocateLocalMemory(4096, "*");  // the allocator's first mapping, before the baseline
  const Baseline base = Baseline::of(e);
  auto chaos = std::make_unique<Chaos>(e, seed);
  std::string err;
  ASSERT_TRUE(chaos->startPeers(&err)) << err;
  chaos->run(g_minutes * 60);
  Counts& c = chaos->counts;
  if (c.hung.load() != 0) {
    (void)owned.release();  // a hung call still holds the engine and the harness
    (void)chaos.release();
    FAIL() << "hung calls: " << c.hung.load() << " (seed " << seed << ")";
  }
  chaos->finish();
  Baseline now = Baseline::of(e);
  const bool back = eventually(
      [&] {
        now = Baseline::of(e);
        return now.same(base);
      },
      60);
  uint64_t faults = 0;
  for (auto& [kind, n] : c.faults) {
    std::printf("chaos: fault %-45s %lu\n", kind.c_str(), static_cast<unsigned long>(n));
    faults += n;
  }
  std::printf(
      "chaos: %lu faults; transfers verified %lu, failed %lu, met another peer life %lu, "
      "corrupt %lu, hung %lu; opens %lu (%lu failed), closes %lu\n",
      static_cast<unsigned long>(faults), static_cast<unsigned long>(c.verified.load()),
      static_cast<unsigned long>(c.failed.load()), static_cast<unsigned long>(c.other_life.load()),
      static_cast<unsigned long>(c.corrupt.load()), static_cast<unsigned long>(c.hung.load()),
      static_cast<unsigned long>(c.opens.load()),
      static_cast<unsigned long>(c.open_failures.load()),
      static_cast<unsigned long>(c.closes.load()));
  std::printf(
      "chaos: resource deltas: endpoints %ld, retired %ld, QPs %ld, control connections %ld, "
      "slices in flight %ld, direct lanes %ld, fds %ld, threads %ld, data mappings %ld, RSS "
      "%+ld KiB (not asserted: the allocator keeps freed memory)\n",
      delta(now.resources.endpoints_live, base.resources.endpoints_live),
      delta(now.resources.endpoints_retired, base.resources.endpoints_retired),
      delta(now.resources.qps_live, base.resources.qps_live),
      delta(now.connections, base.connections), delta(now.slices_open, base.slices_open),
      delta(now.lanes, base.lanes), delta(now.fds, base.fds), delta(now.threads, base.threads),
      delta(now.maps, base.maps), now.rss - base.rss);
  if (!back) std::printf("chaos: endpoints held at the end:\n%s", describeEndpoints(e).c_str());
  std::fflush(stdout);
  EXPECT_TRUE(back) << "resources did not return to their baseline (seed " << seed << ")";
  EXPECT_EQ(c.corrupt.load(), 0u) << "seed " << seed;
  EXPECT_GT(c.verified.load(), 0u);
  EXPECT_GT(faults, 0u);
}

}  // namespace
}  // namespace tent::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) tent::testing::g_minutes = std::atof(argv[1]);
  if (const char* m = std::getenv("TENT_CHAOS_MINUTES")) tent::testing::g_minutes = std::atof(m);
  if (!(tent::testing::g_minutes > 0)) {
    std::fprintf(stderr, "engine_chaos: the run must last more than 0 minutes\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
