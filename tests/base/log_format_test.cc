// Log lines: UTC timestamp to the microsecond, component, level, the thread's kernel
// id, the lcore only on lcore threads; one line per call even from several threads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <set>
#include <thread>

#include "log_test_util.h"
#include "tent/log.h"
#include "tent/log_sink.h"

namespace tent::log::testing {
namespace {

using Clock = std::chrono::system_clock;

Clock::time_point timeOf(const std::smatch& m) {
  std::tm t{};
  t.tm_year = std::stoi(m[1]) - 1900;
  t.tm_mon = std::stoi(m[2]) - 1;
  t.tm_mday = std::stoi(m[3]);
  t.tm_hour = std::stoi(m[4]);
  t.tm_min = std::stoi(m[5]);
  t.tm_sec = std::stoi(m[6]);
  return Clock::from_time_t(timegm(&t)) + std::chrono::microseconds(std::stoi(m[7]));
}

TEST(LogFormat, TimestampComponentLevelAndThread) {
  const auto before = std::chrono::floor<std::chrono::microseconds>(Clock::now());
  CaptureStderr capture;
  write(Component::kEngine, Level::kWarn, "hello %d", 42);
  const std::vector<std::string> lines = capture.lines();
  const auto after = Clock::now();
  ASSERT_EQ(lines.size(), 1u);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, lineFormat())) << lines[0];
  EXPECT_LE(before, timeOf(m)) << lines[0];
  EXPECT_LE(timeOf(m), after) << lines[0];
  EXPECT_EQ(m[8], "engine");
  EXPECT_EQ(m[9], "W");
  EXPECT_EQ(std::stol(m[10]), static_cast<long>(gettid()));
  EXPECT_FALSE(m[11].matched) << "not an lcore thread: " << lines[0];
  EXPECT_EQ(m[13], "hello 42");
}

TEST(LogFormat, LcoreAppearsWhenTheThreadIsOne) {
  CaptureStderr capture;
  std::thread([] {
    setThreadLcore(3);
    write(Component::kLcore, Level::kError, "on lcore");
  }).join();
  write(Component::kMetrics, Level::kInfo, "not on one");
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), 2u);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, lineFormat())) << lines[0];
  EXPECT_EQ(m[8], "lcore");
  EXPECT_EQ(m[9], "E");
  EXPECT_NE(std::stol(m[10]), static_cast<long>(gettid())) << "another thread, another tid";
  EXPECT_EQ(m[12], "3");
  EXPECT_EQ(m[13], "on lcore");
  ASSERT_TRUE(std::regex_match(lines[1], m, lineFormat())) << lines[1];
  EXPECT_EQ(m[8], "metrics");
  EXPECT_FALSE(m[11].matched) << "setThreadLcore is per thread: " << lines[1];
  EXPECT_EQ(threadLcore(), -1);
}

TEST(LogFormat, LongMessagesAreCutButStayOneLine) {
  const std::string long_text(5000, 'x');
  CaptureStderr capture;
  write(Component::kCommon, Level::kWarn, "%s", long_text.c_str());
  write(Component::kCommon, Level::kWarn, "next");
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), 2u);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, lineFormat()));
  EXPECT_GT(m[13].length(), 900);
  EXPECT_LT(m[13].length(), 1200);
  EXPECT_EQ(m[13].str().find_first_not_of('x'), std::string::npos);
  ASSERT_TRUE(std::regex_match(lines[1], m, lineFormat()));
  EXPECT_EQ(m[13], "next");
}

// Each call is one write of a whole line: lines of concurrent threads never mix.
TEST(LogFormat, ConcurrentWritersDoNotInterleave) {
  constexpr int kThreads = 3;
  constexpr int kLines = 300;
  CaptureStderr capture;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i)
        write(Component::kEngine, Level::kWarn, "thread %d line %d of a message of some length", t,
              i);
    });
  }
  for (auto& th : threads) th.join();
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLines));
  std::set<std::string> messages;
  for (const std::string& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, lineFormat())) << line;
    messages.insert(m[13]);
  }
  EXPECT_EQ(messages.size(), lines.size());
}

TEST(LogFormat, MacrosKeepTheLevelFilter) {
  setLevel(Component::kEngine, Level::kError);
  CaptureStderr capture;
  TENT_WARN(kEngine, "filtered");
  TENT_ERROR(kEngine, "shown");
  const std::vector<std::string> lines = capture.lines();
  setLevel(Component::kEngine, Level::kWarn);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" E tid="), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("shown"), std::string::npos);
}

struct SunkLine {
  Component component;
  Level level;
  std::string message;
};
std::vector<SunkLine> g_sunk;  // one test thread writes and reads it

void sinkInto(Component c, Level l, const char* message, size_t length) {
  g_sunk.push_back({c, l, std::string(message, length)});
}

TEST(LogSink, TakesTheBareMessageInsteadOfStderrAndKeepsTheFilter) {
  g_sunk.clear();
  setLevel(Component::kEngine, Level::kInfo);
  CaptureStderr capture;
  setSink(&sinkInto);
  TENT_INFO(kEngine, "to the sink %d", 7);
  TENT_DEBUG(kEngine, "filtered");
  setSink(nullptr);
  TENT_WARN(kEngine, "back on stderr");
  setLevel(Component::kEngine, Level::kWarn);
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(g_sunk.size(), 1u);
  EXPECT_EQ(g_sunk[0].component, Component::kEngine);
  EXPECT_EQ(g_sunk[0].level, Level::kInfo);
  EXPECT_EQ(g_sunk[0].message, "to the sink 7");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("back on stderr"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace tent::log::testing
