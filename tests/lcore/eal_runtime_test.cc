// The EAL runtime with real lcores (2 beside the main thread, unpinned). EAL is
// initialised once per process, so every test here shares one EAL layout and
// holds its runtime only for its own duration.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "eal_test_util.h"
#include "lcore/ring.h"
#include "lcore/runtime.h"
#include "test_pollers.h"

namespace tent::lcore {
namespace {

using testing::acquireTwoLcores;
using testing::CountingPoller;
using testing::ealConfig;
using testing::passes;
using testing::waitFor;
using namespace std::chrono_literals;

TEST(EalArguments, DefaultsWorkWithoutHugepagesOrPci) {
  config::Config c;
  c.lcores = {config::LcoreSpec{-1, {}, {}}, config::LcoreSpec{1, {}, {}}};
  c.eal.extra_args = {"--vdev=net_null0"};
  const auto args = ealArguments(c);
  ASSERT_GE(args.size(), 9u);
  EXPECT_EQ(args[0], "tent");
  auto has = [&](const std::string& a) {
    return std::find(args.begin(), args.end(), a) != args.end();
  };
  EXPECT_TRUE(has("--no-huge"));
  EXPECT_TRUE(has("--no-pci"));
  EXPECT_TRUE(has("--no-shconf"));
  EXPECT_TRUE(has("--no-telemetry"));
  EXPECT_TRUE(has("--file-prefix=tent-" + std::to_string(getpid())));
  const auto m = std::find(args.begin(), args.end(), "-m");
  ASSERT_NE(m, args.end());
  EXPECT_EQ(*(m + 1), "64");
  EXPECT_EQ(args.back(), "--vdev=net_null0");
  const auto lcores = std::find_if(
      args.begin(), args.end(), [](const std::string& a) { return a.rfind("--lcores=", 0) == 0; });
  ASSERT_NE(lcores, args.end());
  // Main lcore 0 and unpinned lcore 1 share the "every CPU" set; lcore 2 is pinned to CPU 1.
  const std::string value = lcores->substr(9);
  EXPECT_EQ(value.rfind("0@(", 0), 0u) << value;
  const std::string every = value.substr(2, value.find(')') - 1);
  EXPECT_EQ(value, "0@" + every + ",1@" + every + ",2@1");
}

TEST(EalArguments, FollowTheConfig) {
  config::Config c;
  c.eal.no_huge = false;
  c.eal.no_pci = false;
  c.eal.memory_mb = 256;
  c.eal.file_prefix = "mine";
  const auto args = ealArguments(c);
  auto has = [&](const std::string& a) {
    return std::find(args.begin(), args.end(), a) != args.end();
  };
  EXPECT_FALSE(has("--no-huge"));
  EXPECT_FALSE(has("--no-pci"));
  EXPECT_TRUE(has("256"));
  EXPECT_TRUE(has("--file-prefix=mine"));
}

TEST(EalRuntime, AcquireSharesOneRuntimePerProcess) {
  auto a = acquireTwoLcores();
  ASSERT_NE(a, nullptr);
  auto b = acquireTwoLcores();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_FALSE(a->manual());
  EXPECT_EQ(a->lcoreCount(), 2u);
  EXPECT_EQ(a->cpuOf(0), -1);
  EXPECT_EQ(a->runOnce(0), 0u);  // the lcores run themselves
}

// Lcore 0 pings sequence numbers to lcore 1 through one ring; lcore 1 echoes
// them back through another. Each side checks it sees every number in order.
class Pinger final : public Poller {
 public:
  Pinger(RawRing& out, RawRing& in, uint64_t rounds) : out_(out), in_(in), rounds_(rounds) {}
  PollResult poll_lc() noexcept override {
    thread_ = std::this_thread::get_id();
    if (done_.load(std::memory_order_relaxed)) return PollResult::kIdle;
    if (!in_flight_) {
      in_flight_ = out_.enqueue(reinterpret_cast<void*>(next_));
      return in_flight_ ? PollResult::kBusy : PollResult::kIdle;
    }
    void* echo;
    if (in_.dequeueBurst_sc(&echo, 1) == 0) return PollResult::kIdle;
    if (reinterpret_cast<uintptr_t>(echo) != next_) errors_.fetch_add(1);
    in_flight_ = false;
    if (next_++ == rounds_) done_.store(true, std::memory_order_release);
    return PollResult::kBusy;
  }
  std::string_view name() const noexcept override { return "pinger"; }
  bool done() const { return done_.load(std::memory_order_acquire); }
  uint64_t errors() const { return errors_.load(); }
  uint64_t completed() const { return next_ - 1; }  // read after done()
  std::thread::id thread() const { return thread_; }

 private:
  RawRing& out_;
  RawRing& in_;
  const uint64_t rounds_;
  uintptr_t next_ = 1;
  bool in_flight_ = false;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> errors_{0};
  std::thread::id thread_;
};

class Ponger final : public Poller {
 public:
  Ponger(RawRing& in, RawRing& out) : in_(in), out_(out) {}
  PollResult poll_lc() noexcept override {
    thread_ = std::this_thread::get_id();
    void* msgs[8];
    const unsigned n = in_.dequeueBurst_sc(msgs, 8);
    for (unsigned i = 0; i < n; ++i) {
      if (reinterpret_cast<uintptr_t>(msgs[i]) != expected_++) errors_.fetch_add(1);
      while (!out_.enqueue(msgs[i])) {
      }  // cannot stay full: the pinger has one message in flight
    }
    return n > 0 ? PollResult::kBusy : PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "ponger"; }
  uint64_t errors() const { return errors_.load(); }
  std::thread::id thread() const { return thread_; }

 private:
  RawRing& in_;
  RawRing& out_;
  uintptr_t expected_ = 1;
  std::atomic<uint64_t> errors_{0};
  std::thread::id thread_;
};

TEST(EalRuntime, TwoLcoresPingPongThroughRings) {
  constexpr uint64_t kRounds = 5000;
  auto rt = acquireTwoLcores();
  ASSERT_NE(rt, nullptr);
  auto ping = RawRing::create("ping", 64);
  auto pong = RawRing::create("pong", 64);
  ASSERT_TRUE(ping.ok() && pong.ok());
  Pinger pinger(**ping, **pong, kRounds);
  Ponger ponger(**ping, **pong);
  ASSERT_TRUE(rt->attach(1, &ponger).ok());
  ASSERT_TRUE(rt->attach(0, &pinger).ok());
  ASSERT_TRUE(waitFor([&] { return pinger.done(); })) << "ping-pong did not finish";
  ASSERT_TRUE(rt->detach(0, &pinger).ok());
  ASSERT_TRUE(rt->detach(1, &ponger).ok());
  EXPECT_EQ(pinger.completed(), kRounds);
  EXPECT_EQ(pinger.errors(), 0u);
  EXPECT_EQ(ponger.errors(), 0u);
  EXPECT_EQ((*ping)->count() + (*pong)->count(), 0u);
  // Two distinct lcore threads, neither of them this one.
  EXPECT_NE(pinger.thread(), ponger.thread());
  EXPECT_NE(pinger.thread(), std::this_thread::get_id());
  EXPECT_NE(ponger.thread(), std::this_thread::get_id());
  EXPECT_GE(rt->stats(0).busy_passes, 2 * kRounds);
  EXPECT_GE(rt->stats(1).busy_passes, kRounds);
}

TEST(EalRuntime, AttachedPollerRunsAndDetachedNeverRunsAgain) {
  auto rt = acquireTwoLcores();
  ASSERT_NE(rt, nullptr);
  CountingPoller keep("keep");
  ASSERT_TRUE(rt->attach(0, &keep).ok());
  for (int round = 0; round < 40; ++round) {
    const size_t lcore = round % 2;
    CountingPoller p("p" + std::to_string(round), round % 3 == 0 ? 100 : 0);
    ASSERT_TRUE(rt->attach(lcore, &p).ok());
    ASSERT_TRUE(waitFor([&] { return p.calls() > 0; })) << "attached poller never called";
    ASSERT_TRUE(rt->detach(lcore, &p).ok());
    const uint64_t frozen = p.calls();
    // Let the lcore run many more passes; the detached poller must not move.
    const uint64_t base = passes(*rt, lcore);
    ASSERT_TRUE(waitFor([&] { return passes(*rt, lcore) > base + 50; }));
    EXPECT_EQ(p.calls(), frozen) << "round " << round;
  }  // `p` dies here: a call after detach would also be a use-after-free under ASan
  EXPECT_GT(keep.calls(), 0u);
  ASSERT_TRUE(rt->detach(0, &keep).ok());
}

TEST(EalRuntime, PollersMayNotAttachOrDetach) {
  auto rt = acquireTwoLcores();
  ASSERT_NE(rt, nullptr);
  testing::SelfDetachingPoller p(*rt, 1);
  ASSERT_TRUE(rt->attach(1, &p).ok());
  ASSERT_TRUE(waitFor([&] { return p.tried(); }));
  EXPECT_EQ(p.code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(rt->detach(1, &p).ok());
}

TEST(EalRuntime, BusyIdleAndSleepAccounting) {
  config::IdlePolicy idle;
  idle.spin_polls = 16;
  idle.pause_polls = 16;
  idle.sleep_min_us = 10;
  idle.sleep_max_us = 50;
  auto rt = acquireTwoLcores(idle);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(rt->spec(0).idle.sleep_max_us, 50u);
  CountingPoller worker("worker", 5000);
  ASSERT_TRUE(rt->attach(1, &worker).ok());
  ASSERT_TRUE(waitFor([&] { return rt->stats(1).busy_passes >= 5000; }));
  ASSERT_TRUE(waitFor([&] { return rt->stats(1).sleeps > 0 && rt->stats(0).sleeps > 0; }));
  ASSERT_TRUE(rt->detach(1, &worker).ok());
  const LcoreStats s = rt->stats(1);
  EXPECT_EQ(s.busy_passes, 5000u);  // exactly the passes where the poller had work
  EXPECT_GT(s.busy_cycles, 0u);
  EXPECT_GT(s.idle_passes, 0u);
  EXPECT_GT(s.idle_cycles, 0u);
  EXPECT_EQ(rt->stats(0).busy_passes, 0u);
}

// Long sleeps must not hold up attach/detach or stop: a new poller set wakes the
// lcore, and stop is checked between bounded sleep chunks.
TEST(EalRuntime, LongIdleSleepsDoNotHoldUpDetachOrStop) {
  config::IdlePolicy sleepy;
  sleepy.spin_polls = 0;
  sleepy.pause_polls = 0;
  sleepy.sleep_min_us = 2'000'000;
  sleepy.sleep_max_us = 2'000'000;
  auto rt = acquireTwoLcores(sleepy);
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(waitFor([&] { return rt->stats(0).sleeps > 0; }));
  const auto start = std::chrono::steady_clock::now();
  CountingPoller p("p");
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(rt->attach(0, &p).ok());
    ASSERT_TRUE(rt->detach(0, &p).ok());
  }
  const uint64_t frozen = p.calls();
  EXPECT_GE(frozen, 5u);  // each attach waits for one pass over the new set
  rt.reset();             // stop
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // Not a timing threshold: the nominal sleeps alone would add up to 22 s.
  RecordProperty(
      "attach_detach_stop_ms",
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()));
  EXPECT_EQ(p.calls(), frozen);
}

TEST(EalRuntime, ReleaseStopsLoopsAndReacquireRelaunches) {
  auto rt = acquireTwoLcores();
  ASSERT_NE(rt, nullptr);
  CountingPoller first("first"), second("second");
  ASSERT_TRUE(rt->attach(0, &first).ok());
  ASSERT_TRUE(rt->attach(1, &second).ok());
  ASSERT_TRUE(waitFor([&] { return first.calls() > 0 && second.calls() > 0; }));
  rt.reset();  // last reference: both loops stop before this returns
  const uint64_t a = first.calls(), b = second.calls();
  for (int i = 0; i < 20000; ++i) std::this_thread::yield();
  EXPECT_EQ(first.calls(), a);
  EXPECT_EQ(second.calls(), b);

  auto again = acquireTwoLcores();
  ASSERT_NE(again, nullptr);
  CountingPoller third("third");
  ASSERT_TRUE(again->attach(1, &third).ok());
  ASSERT_TRUE(waitFor([&] { return third.calls() > 0; }));
  EXPECT_EQ(first.calls(), a);  // pollers of the old runtime are gone with it
  ASSERT_TRUE(again->detach(1, &third).ok());
}

TEST(EalRuntime, ConfigThatDoesNotFitEalIsAnError) {
  {
    auto first = acquireTwoLcores();  // makes sure EAL exists with its 2 lcores
    ASSERT_NE(first, nullptr);
    auto bigger = Runtime::acquire(ealConfig(3));
    ASSERT_FALSE(bigger.ok());
    EXPECT_EQ(bigger.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(bigger.status().message().find("needs 3 lcores"), std::string::npos)
        << bigger.status().message();
  }
  auto bigger = Runtime::acquire(ealConfig(3));  // also with no runtime alive
  ASSERT_FALSE(bigger.ok());
  EXPECT_NE(bigger.status().message().find("cannot be re-initialised"), std::string::npos)
      << bigger.status().message();

  config::Config pinned = ealConfig(2);
  pinned.lcores[1].cpu = 0;
  auto moved = Runtime::acquire(pinned);
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.status().message().find("lcore 1 wants CPU 0"), std::string::npos)
      << moved.status().message();

  config::Config nowhere = ealConfig(1);
  nowhere.lcores[0].cpu = 4095;
  auto bad = Runtime::acquire(nowhere);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("lcores[0].cpu"), std::string::npos)
      << bad.status().message();

  auto fewer = Runtime::acquire(ealConfig(1));  // a smaller layout fits
  ASSERT_TRUE(fewer.ok()) << fewer.status().toString();
  EXPECT_EQ((*fewer)->lcoreCount(), 1u);
}

// A second engine in the process gets its own config or a clear error: EAL's
// arguments are fixed at its one initialisation, and engines alive together
// share the lcores.
TEST(EalRuntime, ProcessWideSettingsThatDifferAreAnError) {
  auto first = acquireTwoLcores();
  ASSERT_NE(first, nullptr);
  config::Config more_memory = ealConfig(2);
  more_memory.eal.memory_mb = 128;
  for (int alive = 1; alive >= 0; --alive) {
    auto other = Runtime::acquire(more_memory);
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(other.status().message().find("cannot be re-initialised"), std::string::npos)
        << other.status().message();
    EXPECT_NE(other.status().message().find("-m 128"), std::string::npos)
        << other.status().message();
    first.reset();  // the EAL arguments stay fixed with no runtime alive too
  }

  first = acquireTwoLcores();
  ASSERT_NE(first, nullptr);
  config::IdlePolicy sleepy;
  sleepy.sleep_max_us = 1000;
  auto other_idle = Runtime::acquire(ealConfig(2, sleepy));
  ASSERT_FALSE(other_idle.ok());
  EXPECT_NE(other_idle.status().message().find("lcores[0] differs"), std::string::npos)
      << other_idle.status().message();
  auto fewer = Runtime::acquire(ealConfig(1));
  ASSERT_FALSE(fewer.ok());
  EXPECT_NE(fewer.status().message().find("already running in this process has 2"),
            std::string::npos)
      << fewer.status().message();

  first.reset();  // nothing alive: the new layout and idle policy are its own
  auto own = Runtime::acquire(ealConfig(2, sleepy));
  ASSERT_TRUE(own.ok()) << own.status().toString();
  EXPECT_EQ((*own)->spec(0).idle.sleep_max_us, 1000u);
}

}  // namespace
}  // namespace tent::lcore
