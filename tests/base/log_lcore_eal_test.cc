// On a real EAL lcore, log lines name the config lcore (the number EngineStats and
// the metrics use); on the main thread they do not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "lcore/runtime.h"
#include "log_test_util.h"
#include "tent/log.h"

namespace tent::log::testing {
namespace {

class LoggingPoller final : public lcore::Poller {
 public:
  lcore::PollResult poll_lc() noexcept override {
    if (!done_.load(std::memory_order_acquire)) {
      write(Component::kLcore, Level::kWarn, "from a poller");
      done_.store(true, std::memory_order_release);
    }
    return lcore::PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "logging"; }
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> done_{false};
};

TEST(LogOnLcore, LinesFromAnLcoreNameIt) {
  config::Config c;
  c.eal.mode = config::LcoreMode::kEal;
  c.eal.file_prefix = "tent-log-eal-test-" + std::to_string(getpid());
  c.lcores = {config::LcoreSpec{-1, {}, {}}, config::LcoreSpec{-1, {}, {}}};
  c.source = "log_lcore_eal_test";
  auto rt = lcore::Runtime::acquire(c);
  ASSERT_TRUE(rt.ok()) << rt.status().toString();

  LoggingPoller poller;
  CaptureStderr capture;
  ASSERT_TRUE((*rt)->attach(1, &poller).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!poller.done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_TRUE((*rt)->detach(1, &poller).ok());
  write(Component::kLcore, Level::kWarn, "from the main thread");
  const std::vector<std::string> all = capture.lines();
  ASSERT_TRUE(poller.done());

  std::vector<std::smatch> tent_lines;
  for (const std::string& line : all) {
    std::smatch m;
    if (std::regex_match(line, m, lineFormat())) tent_lines.push_back(m);
  }
  ASSERT_EQ(tent_lines.size(), 2u);
  EXPECT_EQ(tent_lines[0][13], "from a poller");
  EXPECT_EQ(tent_lines[0][12], "1");
  EXPECT_NE(std::stol(tent_lines[0][10]), static_cast<long>(gettid()));
  EXPECT_EQ(tent_lines[1][13], "from the main thread");
  EXPECT_FALSE(tent_lines[1][11].matched);
}

}  // namespace
}  // namespace tent::log::testing
