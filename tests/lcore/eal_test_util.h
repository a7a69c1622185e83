// Helpers of the EAL lcore tests. EAL is initialised once per process, so every
// test of a binary uses the same layout (2 unpinned lcores) and eal section.
#pragma once

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "config/config.h"
#include "lcore/runtime.h"

namespace tent::lcore::testing {

inline config::Config ealConfig(size_t lcores, config::IdlePolicy idle = {}) {
  config::Config c;
  c.eal.mode = config::LcoreMode::kEal;
  c.eal.file_prefix = "tent-lcore-eal-test-" + std::to_string(getpid());
  for (size_t i = 0; i < lcores; ++i) c.lcores.push_back(config::LcoreSpec{-1, {}, idle});
  c.source = "eal_runtime_test";
  return c;
}

inline std::shared_ptr<Runtime> acquireTwoLcores(config::IdlePolicy idle = {}) {
  auto rt = Runtime::acquire(ealConfig(2, idle));
  EXPECT_TRUE(rt.ok()) << rt.status().toString();
  return rt.ok() ? *rt : nullptr;
}

// Waits (bounded) for a condition the lcores bring about.
template <typename Pred>
bool waitFor(Pred pred, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

inline uint64_t passes(const Runtime& rt, size_t lcore) {
  const LcoreStats s = rt.stats(lcore);
  return s.busy_passes + s.idle_passes;
}

}  // namespace tent::lcore::testing
