// Real EAL lcores (one lcore running the rail pollers and a background poller),
// loopback over two soft devices: several threads mixing foreground (direct path)
// and bulk (worker path) requests; every transfer verifies its bytes.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

const std::string kYaml = R"(
eal: {file_prefix: "tent-engine-eal-test"}
fabric:
  provider: soft
  soft: {devices: [{name: soft0, numa_node: 0}, {name: soft1, numa_node: 0}]}
lcores:
  - pollers: ["rail:*", background]
    idle: {spin_polls: 64, pause_polls: 256, sleep_min_us: 1, sleep_max_us: 50}
bootstrap: {listen: "127.0.0.1:0"}
)";

TEST(EngineEal, ThreadsMixForegroundAndBulk) {
  auto engine = makeEngine(kYaml);
  ASSERT_NE(engine, nullptr);
  ASSERT_FALSE(engine->transport().runtime().manual());
  constexpr int kThreads = 3;
  constexpr size_t kRegion = 2 << 20;
  auto* src = static_cast<uint8_t*>(*engine->allocateLocalMemory(kThreads * kRegion, "*"));
  auto* dst = static_cast<uint8_t*>(*engine->allocateLocalMemory(kThreads * kRegion, "*"));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      uint8_t* s = src + t * kRegion;
      uint8_t* d = dst + t * kRegion;
      for (int round = 0; round < 40; ++round) {
        bool bulk = (round % 4) == 0;
        size_t len = bulk ? kRegion : 4096 << (round % 5);
        uint32_t seed = t * 1000 + round;
        fillPattern(s, len, seed);
        Request r{OpCode::WRITE,
                  s,
                  LOCAL_SEGMENT_ID,
                  reinterpret_cast<uint64_t>(d),
                  len,
                  0,
                  0,
                  bulk ? IntentType::MIGRATION : IntentType::FOREGROUND_GET};
        auto b = engine->allocateBatch(1);
        if (!b.ok() || !engine->submitTransfer(*b, {&r, 1}).ok()) {
          failures++;
          continue;
        }
        auto st = engine->waitTransfer(*b, 0, 10'000'000'000ull);
        if (!st.ok() || st->state != TransferState::COMPLETED) failures++;
        if (checkPattern(d, len, seed) != -1) failures++;
        (void)engine->freeBatch(*b);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto stats = engine->stats();
  EXPECT_GT(stats.direct.succeeded, 0u);
  EXPECT_GT(stats.worker.tasks, 0u);
  ASSERT_EQ(stats.lcores.size(), 1u);
  EXPECT_NE(stats.lcores[0].pollers.find("background"), std::string::npos);
  EXPECT_NE(stats.lcores[0].pollers.find("rail:soft0+soft1"), std::string::npos);
  EXPECT_GT(stats.lcores[0].busy_cycles + stats.lcores[0].idle_cycles, 0u);
}

TEST(EngineEal, EngineCanBeRecreatedInTheSameProcess) {
  for (int i = 0; i < 2; ++i) {
    auto engine = makeEngine(kYaml);
    ASSERT_NE(engine, nullptr);
    auto* a = static_cast<uint8_t*>(*engine->allocateLocalMemory(1 << 20, "*"));
    auto* b = static_cast<uint8_t*>(*engine->allocateLocalMemory(1 << 20, "*"));
    fillPattern(a, 1 << 20, 70 + i);
    Request r{OpCode::WRITE, a, LOCAL_SEGMENT_ID, reinterpret_cast<uint64_t>(b), 1 << 20};
    auto batch = *engine->allocateBatch(1);
    ASSERT_TRUE(engine->submitTransfer(batch, {&r, 1}).ok());
    EXPECT_EQ(engine->waitTransfer(batch, 0, 10'000'000'000ull)->state, TransferState::COMPLETED);
    EXPECT_EQ(checkPattern(b, 1 << 20, 70 + i), -1);
  }
}

}  // namespace
}  // namespace tent::testing
