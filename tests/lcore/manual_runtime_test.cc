// The manual (deterministic, thread-free) runtime: passes stepped by the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "lcore/runtime.h"
#include "test_pollers.h"
#include "topology/cpu_set.h"

namespace tent::lcore {
namespace {

using testing::CountingPoller;

config::Config manualConfig(size_t lcores) {
  config::Config c;
  c.eal.mode = config::LcoreMode::kManual;
  for (size_t i = 0; i < lcores; ++i) c.lcores.push_back(config::LcoreSpec{});
  return c;
}

std::shared_ptr<Runtime> acquireManual(size_t lcores) {
  auto rt = Runtime::acquire(manualConfig(lcores));
  EXPECT_TRUE(rt.ok()) << rt.status().toString();
  return rt.ok() ? *rt : nullptr;
}

TEST(ManualRuntime, EmptyConfigGetsTheDefaultLayout) {
  auto rt = acquireManual(0);
  ASSERT_TRUE(rt->manual());
  ASSERT_EQ(rt->lcoreCount(), 1u);
  const auto& spec = rt->spec(0);
  EXPECT_EQ(spec.cpu, -1);
  ASSERT_EQ(spec.pollers.size(), 2u);
  EXPECT_EQ(spec.pollers[0].kind, config::PollerKind::kRail);
  EXPECT_EQ(spec.pollers[0].device, "*");
  EXPECT_EQ(spec.pollers[1].kind, config::PollerKind::kBackground);
  EXPECT_EQ(rt->cpuOf(0), -1);
}

// `lcores: auto` is resolved by acquire() for this process: pinned within its
// affinity, the knobs' background lcores, every device's rail poller.
TEST(ManualRuntime, LcoresAutoIsDerivedForThisProcess) {
  config::Config c = manualConfig(0);
  c.lcores_auto = true;
  c.lcore_auto.reserve_cpus = 0;  // fits any machine: one lcore
  c.fabric.provider = config::FabricProvider::kSoft;
  c.fabric.soft.devices = {{"soft0", 0, "", 0, 0}, {"soft1", 0, "", 0, 0}};
  auto rt = Runtime::acquire(c);
  ASSERT_TRUE(rt.ok()) << rt.status().toString();
  const std::vector<int> allowed = topology::affinityCpus();
  size_t background = 0;
  std::vector<std::string> rails;
  for (size_t l = 0; l < (*rt)->lcoreCount(); ++l) {
    const auto& spec = (*rt)->spec(l);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), spec.cpu), allowed.end()) << spec.cpu;
    for (const auto& p : spec.pollers) {
      if (p.kind == config::PollerKind::kBackground) ++background;
      if (p.kind == config::PollerKind::kRail) rails.push_back(p.device);
    }
  }
  EXPECT_EQ(background, 1u);
  std::sort(rails.begin(), rails.end());
  EXPECT_EQ(rails, (std::vector<std::string>{"soft0", "soft1"}));

  c.lcore_auto.reserve_cpus = 64;  // more than this machine has
  auto none = Runtime::acquire(c);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("lcores: auto: needs 65 CPUs"), std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("may use"), std::string::npos);
}

TEST(ManualRuntime, EachAcquireIsAFreshRuntime) {
  auto a = acquireManual(2);
  auto b = acquireManual(3);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(a->lcoreCount(), 2u);
  EXPECT_EQ(b->lcoreCount(), 3u);
}

TEST(ManualRuntime, RunOnceCallsEveryPollerAndCountsBusy) {
  auto rt = acquireManual(1);
  CountingPoller busy("busy", 2), idle("idle");
  ASSERT_TRUE(rt->attach(0, &busy).ok());
  ASSERT_TRUE(rt->attach(0, &idle).ok());
  EXPECT_EQ(rt->runOnce(0), 1u);
  EXPECT_EQ(rt->runOnce(0), 1u);
  EXPECT_EQ(rt->runOnce(0), 0u);
  EXPECT_EQ(busy.calls(), 3u);
  EXPECT_EQ(idle.calls(), 3u);
  busy.addWork(1);
  idle.addWork(1);
  EXPECT_EQ(rt->runOnce(0), 2u);
}

TEST(ManualRuntime, BusyAndIdlePassesAreAccounted) {
  auto rt = acquireManual(2);
  CountingPoller p("p", 3);
  ASSERT_TRUE(rt->attach(1, &p).ok());
  for (int i = 0; i < 10; ++i) rt->runOnce(1);
  const LcoreStats s = rt->stats(1);
  EXPECT_EQ(s.busy_passes, 3u);
  EXPECT_EQ(s.idle_passes, 7u);
  EXPECT_GT(s.busy_cycles, 0u);
  EXPECT_GT(s.idle_cycles, 0u);
  EXPECT_EQ(s.sleeps, 0u);  // manual passes never apply the idle policy
  const LcoreStats other = rt->stats(0);
  EXPECT_EQ(other.busy_passes + other.idle_passes, 0u);
}

TEST(ManualRuntime, DetachedPollerIsNeverCalledAgain) {
  auto rt = acquireManual(1);
  CountingPoller a("a"), b("b");
  ASSERT_TRUE(rt->attach(0, &a).ok());
  ASSERT_TRUE(rt->attach(0, &b).ok());
  rt->runOnce(0);
  ASSERT_TRUE(rt->detach(0, &a).ok());
  rt->runOnce(0);
  rt->runOnce(0);
  EXPECT_EQ(a.calls(), 1u);
  EXPECT_EQ(b.calls(), 3u);
  ASSERT_TRUE(rt->attach(0, &a).ok());  // re-attach works
  rt->runOnce(0);
  EXPECT_EQ(a.calls(), 2u);
}

TEST(ManualRuntime, AttachDetachErrors) {
  auto rt = acquireManual(2);
  CountingPoller p("p");
  EXPECT_EQ(rt->attach(2, &p).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(rt->attach(0, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt->detach(0, &p).code(), StatusCode::kNotFound);
  ASSERT_TRUE(rt->attach(0, &p).ok());
  EXPECT_EQ(rt->attach(0, &p).code(), StatusCode::kAlreadyExists);
  // One lcore per poller: poll_lc() is single-threaded.
  const Status twice = rt->attach(1, &p);
  EXPECT_EQ(twice.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(twice.message().find("lcore 0"), std::string::npos) << twice.message();
  EXPECT_EQ(rt->detach(1, &p).code(), StatusCode::kNotFound);
  EXPECT_EQ(rt->detach(5, &p).code(), StatusCode::kOutOfRange);
}

TEST(ManualRuntime, PollersMayNotAttachOrDetach) {
  auto rt = acquireManual(1);
  testing::SelfDetachingPoller p(*rt, 0);
  ASSERT_TRUE(rt->attach(0, &p).ok());
  rt->runOnce(0);
  ASSERT_TRUE(p.tried());
  EXPECT_EQ(p.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(rt->detach(0, &p).ok());  // from the control side it works
}

TEST(ManualRuntime, OutOfRangeQueriesAreHarmless) {
  auto rt = acquireManual(1);
  EXPECT_EQ(rt->runOnce(7), 0u);
  EXPECT_EQ(rt->stats(7).busy_passes, 0u);
  EXPECT_TRUE(rt->spec(7).pollers.empty());
}

// The attach/detach protocol also holds in manual mode when a control thread
// detaches while the test thread is the lcore running passes.
TEST(ManualRuntime, DetachFromAnotherThreadWhilePassesRun) {
  auto rt = acquireManual(1);
  CountingPoller p("p");
  ASSERT_TRUE(rt->attach(0, &p).ok());
  std::atomic<bool> detached{false};
  std::atomic<uint64_t> calls_at_detach{0};
  std::thread control([&] {
    while (p.calls() < 1000) std::this_thread::yield();
    ASSERT_TRUE(rt->detach(0, &p).ok());
    calls_at_detach = p.calls();
    detached = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!detached && std::chrono::steady_clock::now() < deadline) rt->runOnce(0);
  control.join();
  ASSERT_TRUE(detached);
  for (int i = 0; i < 100; ++i) rt->runOnce(0);
  EXPECT_EQ(p.calls(), calls_at_detach.load());
}

}  // namespace
}  // namespace tent::lcore
