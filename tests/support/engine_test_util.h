// Helpers for engine tests: build an engine from YAML, wait for tasks (stepping
// the pollers in manual lcore mode), fill and check byte patterns.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "api/engine_impl.h"
#ifdef TENT_HAVE_VERBS
#include "tests/support/fake_verbs/loopback_verbs.h"
#endif

namespace tent::testing {

// The fabric under the engine tests, from TENT_TEST_PROVIDER: unset or "soft" (the
// default), "fake-verbs": the verbs provider's real code over the loopback fake
// device (tests/fabric_verbs/loopback_verbs.h), devices soft0 and soft1 - what the
// meson suite fake-verbs runs - or "tcp": the tcp provider over 127.0.0.1, devices
// soft0 and soft1 (suite tcp). Anything else stops the test program.
enum class TestFabric { kSoft, kFakeVerbs, kTcp };

inline TestFabric testFabric() {
  const char* env = std::getenv("TENT_TEST_PROVIDER");
  const std::string_view want = env ? env : "";
  if (want.empty() || want == "soft") return TestFabric::kSoft;
  if (want == "tcp") return TestFabric::kTcp;
#ifdef TENT_HAVE_VERBS
  if (want == "fake-verbs") return TestFabric::kFakeVerbs;
#else
  if (want == "fake-verbs") {
    std::fprintf(stderr, "TENT_TEST_PROVIDER=fake-verbs: the verbs provider is not built\n");
    std::exit(1);
  }
#endif
  std::fprintf(stderr, "TENT_TEST_PROVIDER=%s: expected soft, fake-verbs or tcp\n", env);
  std::exit(1);
}

// What Provider::name() and EngineStats::provider say under testFabric().
inline std::string_view testProviderName() {
  switch (testFabric()) {
    case TestFabric::kSoft:
      return "soft";
    case TestFabric::kFakeVerbs:
      return "verbs";
    case TestFabric::kTcp:
      return "tcp";
  }
  return "?";
}

// For tests of soft-only features (the fault injector, link models), which have no
// counterpart on verbs: skips the test, saying why, on any other fabric.
#define TENT_SKIP_UNLESS_SOFT(feature)                                                    \
  do {                                                                                    \
    if (::tent::testing::testFabric() != ::tent::testing::TestFabric::kSoft)              \
      GTEST_SKIP() << (feature) << " is a soft-provider feature; this run uses provider " \
                   << ::tent::testing::testProviderName();                                \
  } while (0)

// The fabric section: two unlimited soft devices with a 50 ms retry budget, the
// fake's soft0 and soft1 with (5 + 1) x 4.096 us x 2^11 = 50 ms, or two tcp devices
// soft0 and soft1 on 127.0.0.1 (their budget bounds a silent peer, not a dead one,
// whose closed connection is seen at once; a loaded machine must not trip it). Single
// quotes: tests find the bootstrap's `listen: "127.0.0.1:0"` by its spelling.
inline std::string fabricYaml() {
  if (testFabric() == TestFabric::kTcp) {
    return R"(fabric:
  provider: tcp
  tcp:
    devices:
      - {name: soft0, listen: '127.0.0.1:0'}
      - {name: soft1, listen: '127.0.0.1:0'}
    retry_budget_ms: 2000
)";
  }
#ifdef TENT_HAVE_VERBS
  if (testFabric() == TestFabric::kFakeVerbs) {
    fabric::testing::engineTestVerbs();  // installs the override once per process
    return R"(fabric:
  provider: verbs
  verbs: {devices: [soft0, soft1], timeout: 11, retry_cnt: 5}
)";
  }
#endif
  return R"(fabric:
  provider: soft
  soft:
    devices:
      - {name: soft0, numa_node: 0}
      - {name: soft1, numa_node: 0}
    retry_budget_ms: 50
)";
}

// For a test that shows a contract break on purpose: while alive, the fake device
// counts contract breaks (two threads inside post_send on one QP, CQ overflows)
// instead of aborting. On soft there is nothing to count (always 0).
class CountContractBreaks {
 public:
  CountContractBreaks() { setPolicy(true); }
  ~CountContractBreaks() { setPolicy(false); }
  CountContractBreaks(const CountContractBreaks&) = delete;
  CountContractBreaks& operator=(const CountContractBreaks&) = delete;
  uint64_t concurrentPosts() const {
#ifdef TENT_HAVE_VERBS
    if (testFabric() == TestFabric::kFakeVerbs)
      return fabric::testing::engineTestVerbs().stats().concurrent_posts - posts_before_;
#endif
    return 0;
  }

 private:
  void setPolicy(bool count) {
#ifdef TENT_HAVE_VERBS
    if (testFabric() != TestFabric::kFakeVerbs) return;
    auto& fake = fabric::testing::engineTestVerbs();
    if (count) posts_before_ = fake.stats().concurrent_posts;
    fake.setOnContractBreak(count ? fabric::testing::OnContractBreak::kCount
                                  : fabric::testing::OnContractBreak::kAbort);
#else
    (void)count;
#endif
  }
  uint64_t posts_before_ = 0;
};

// Manual lcore mode, two unlimited devices (see fabricYaml()), short timeouts.
// `extra` adds top-level sections this one does not have; `bootstrap` adds keys to
// its bootstrap map (e.g. ", keepalive_ms: 100"), `workers` to its workers map (e.g.
// ", max_slice_retries: 0"; a repeated key replaces block_size and the like only if
// the test drops it from here - see simWorkers()).
inline std::string simYaml(const std::string& extra = "", const std::string& bootstrap = "",
                           const std::string& workers = "") {
  return R"(
eal: {mode: manual}
)" + fabricYaml() +
         R"(lcores:
  - pollers: ["rail:*"]
  - pollers: [background]
workers: {max_batch_capacity: 1024)" +
         (workers.find("slice_timeout_ms") == std::string::npos ? ", slice_timeout_ms: 5000" : "") +
         (workers.find("ring_size") == std::string::npos ? ", ring_size: 1024" : "") +
         (workers.find("block_size") == std::string::npos ? ", block_size: 65536" : "") +
         (workers.find("slice_pool") == std::string::npos ? ", slice_pool: 4096" : "") + workers +
         R"(}
bootstrap: {listen: "127.0.0.1:0", connect_timeout_ms: 1000)" +
         bootstrap + R"(}
timeouts: {endpoint_destroy_ms: 200}
)" + extra;
}

inline std::unique_ptr<TransferEngineImpl> makeEngine(const std::string& yaml) {
  auto e = TransferEngine::createFromYaml(yaml);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  if (!e.ok()) return nullptr;
  return std::unique_ptr<TransferEngineImpl>(static_cast<TransferEngineImpl*>(e->release()));
}

// Polls a task until it leaves PENDING, stepping the pollers when the runtime is
// manual. Bounded: returns the last status after `seconds`.
inline TransferStatus waitTask(TransferEngineImpl& e, BatchId b, size_t task, double seconds = 20) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool manual = e.transport().runtime().manual();
  for (;;) {
    if (manual) e.transport().stepPollers();
    auto st = e.getTransferStatus(b, task);
    EXPECT_TRUE(st.ok()) << st.status().toString();
    if (!st.ok() || st->state != TransferState::PENDING) return st.ok() ? *st : TransferStatus{};
    if (std::chrono::steady_clock::now() > deadline) return *st;
    if (!manual) std::this_thread::yield();
  }
}

// Waits until `pred()` holds, yielding; false after `seconds` (a bound against a
// hang, never a speed requirement: keep it generous).
template <typename Pred>
bool eventually(Pred pred, double seconds = 30) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

// Steps (manual mode) until no poller holds a slice, bounded.
inline bool drainPollers(TransferEngineImpl& e, double seconds = 10) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    uint64_t held = 0;
    for (size_t i = 0; i < e.transport().pollerCount(); ++i)
      held += e.transport().poller(i).heldSlices();
    if (held == 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (e.transport().runtime().manual())
      e.transport().stepPollers();
    else
      std::this_thread::yield();
  }
}

inline void fillPattern(void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<uint8_t>(x >> 24);
  }
}

// Index of the first byte that differs from the pattern, or -1.
inline long checkPattern(const void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<const uint8_t*>(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    if (b[i] != static_cast<uint8_t>(x >> 24)) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace tent::testing
