// Stress (not in the default run): control threads attach and detach short-lived
// pollers as fast as they can while another thread runs passes. Freed poller sets
// and pollers get their addresses reused at once, which is what would expose an
// ABA bug in the quiescence protocol; a call after detach is counted (and is a
// use-after-free that ASan reports).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "lcore/runtime.h"

namespace tent::lcore {
namespace {

std::atomic<uint64_t> g_calls_after_detach{0};

class GuardedPoller final : public Poller {
 public:
  PollResult poll_lc() noexcept override {
    if (detached_.load(std::memory_order_acquire)) g_calls_after_detach.fetch_add(1);
    calls_.fetch_add(1, std::memory_order_relaxed);
    return PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "guarded"; }
  void markDetached() noexcept { detached_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> detached_{false};
  std::atomic<uint64_t> calls_{0};
};

TEST(AttachStress, ManualPassesAgainstTwoControlThreads) {
  constexpr int kRoundsPerThread = 200000;
  config::Config c;
  c.eal.mode = config::LcoreMode::kManual;
  c.lcores.resize(1);
  auto rt = Runtime::acquire(c);
  ASSERT_TRUE(rt.ok());
  Runtime& runtime = **rt;
  std::atomic<int> running{2};
  std::atomic<uint64_t> failures{0};
  auto control = [&] {
    for (int i = 0; i < kRoundsPerThread; ++i) {
      auto poller = std::make_unique<GuardedPoller>();
      if (!runtime.attach(0, poller.get()).ok()) failures.fetch_add(1);
      if (!runtime.detach(0, poller.get()).ok()) failures.fetch_add(1);
      poller->markDetached();
    }
    running.fetch_sub(1);
  };
  std::thread a(control), b(control);
  uint64_t passes = 0;
  while (running.load() > 0) {
    runtime.runOnce(0);
    ++passes;
  }
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_EQ(g_calls_after_detach.load(), 0u);
  EXPECT_GT(passes, 0u);
}

}  // namespace
}  // namespace tent::lcore
