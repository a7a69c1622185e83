// Workload classes JSON: accepted forms, defaults, and messages that name the problem.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "perf/tebench/workload_classes.h"

namespace tent::bench {
namespace {

std::string errorOf(const std::string& json) {
  auto r = parseWorkloadClasses(json);
  EXPECT_FALSE(r.ok()) << json;
  return r.ok() ? std::string() : r.status().message();
}

void expectMentions(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

TEST(WorkloadClasses, FullClassAndDefaults) {
  auto r = parseWorkloadClasses(R"([
    {"name":"fg","threads":2,"block_size":4096,"batch_size":1,"intent_type":"foreground_get",
     "deadline_us":250,"slo_us":300,"weight":4},
    {"name":"bg","threads":6,"block_size":4194304}])");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  const auto& fg = (*r)[0];
  EXPECT_EQ(fg.name, "fg");
  EXPECT_EQ(fg.threads, 2u);
  EXPECT_EQ(fg.block_size, 4096u);
  EXPECT_EQ(fg.intent_type, IntentType::FOREGROUND_GET);
  EXPECT_TRUE(fg.intent_given);
  EXPECT_EQ(fg.deadline_us, 250u);
  EXPECT_TRUE(fg.deadline_given);
  EXPECT_EQ(fg.slo_us, 300u);
  EXPECT_DOUBLE_EQ(fg.weight, 4.0);
  const auto& bg = (*r)[1];
  EXPECT_EQ(bg.batch_size, 1u);
  EXPECT_EQ(bg.intent_type, IntentType::UNSPEC);
  EXPECT_FALSE(bg.intent_given);
  EXPECT_EQ(bg.slo_us, 0u);
  EXPECT_DOUBLE_EQ(bg.weight, 1.0);
  EXPECT_EQ(totalThreads(*r), 8u);
}

TEST(WorkloadClasses, PollMode) {
  auto r = parseWorkloadClasses(R"([{"name":"a","threads":1,"block_size":8,"poll_mode":"yield"},
                                    {"name":"b","threads":1,"block_size":8},
                                    {"name":"c","threads":1,"block_size":8,"poll_mode":"wait"}])");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ((*r)[0].poll_mode, PollMode::kYield);
  EXPECT_TRUE((*r)[0].poll_given);
  EXPECT_FALSE((*r)[1].poll_given);
  EXPECT_EQ((*r)[2].poll_mode, PollMode::kWait);
  EXPECT_EQ(pollModeName(PollMode::kWait), "wait");
  expectMentions(errorOf(R"([{"name":"a","threads":1,"block_size":8,"poll_mode":"sleep"}])"),
                 {"field 'poll_mode'", "\"spin\", \"yield\" or \"wait\"", "\"sleep\""});
}

// Mooncake's optional isolated_gbps (number or null) for isolation_leakage.
TEST(WorkloadClasses, IsolatedGbps) {
  auto r = parseWorkloadClasses(R"([{"name":"a","threads":1,"block_size":8,"isolated_gbps":2.5},
                                    {"name":"b","threads":1,"block_size":8,"isolated_gbps":null},
                                    {"name":"c","threads":1,"block_size":8}])");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_TRUE((*r)[0].isolated_gbps.has_value());
  EXPECT_DOUBLE_EQ(*(*r)[0].isolated_gbps, 2.5);
  EXPECT_FALSE((*r)[1].isolated_gbps.has_value());
  EXPECT_FALSE((*r)[2].isolated_gbps.has_value());
  expectMentions(errorOf(R"([{"name":"a","threads":1,"block_size":8,"isolated_gbps":0}])"),
                 {"field 'isolated_gbps'", "> 0 or null"});
}

TEST(WorkloadClasses, IntentByNumber) {
  auto r = parseWorkloadClasses(R"([{"name":"a","threads":1,"block_size":8,"intent_type":3}])");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ((*r)[0].intent_type, IntentType::MIGRATION);
}

TEST(WorkloadClasses, MalformedJsonSaysWhere) {
  expectMentions(errorOf(R"([{"name":"a",}])"),
                 {"workload_classes_json", "not valid JSON", "byte"});
  expectMentions(errorOf(""), {"not valid JSON"});
}

// Found by fuzzing: a number beyond a double is valid JSON but makes nlohmann throw
// out_of_range, which escaped the parser and terminated tebench.
TEST(WorkloadClasses, NumberBeyondADoubleIsAnError) {
  expectMentions(errorOf("[1e400]"), {"workload_classes_json", "out of range", "1e400"});
  expectMentions(errorOf(R"([{"name":"x","threads":1,"block_size":8,"weight":-1e999}])"),
                 {"workload_classes_json", "out of range"});
}

// Deep nesting overflowed the stack (dump() and copies of nlohmann values recurse):
// anything nested beyond a few levels is refused before it is parsed.
TEST(WorkloadClasses, DeepNestingIsRefusedNotACrash) {
  constexpr size_t kLevels = 200000;
  const std::string arrays = std::string(kLevels, '[') + std::string(kLevels, ']');
  expectMentions(errorOf(arrays), {"workload_classes_json", "nested deeper than 8", "byte 9"});
  std::string objects = R"([{"name":)";
  for (size_t i = 0; i < kLevels; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kLevels, '}') + "}]";
  expectMentions(errorOf(objects), {"nested deeper than 8", "byte 40"});
  // Brackets inside strings are text, not nesting.
  const std::string name = R"([{"name":")" + std::string(100, '[') + R"(\"{{{{{{{{{{",)" +
                           R"("threads":1,"block_size":8}])";
  EXPECT_TRUE(parseWorkloadClasses(name).ok()) << errorOf(name);
  EXPECT_TRUE(parseWorkloadClasses(R"([[[[[[[[1]]]]]]]])").status().message().find("class 0") !=
              std::string::npos);
}

// A value quoted back in a message is cut short: a megabyte of input is not a message.
TEST(WorkloadClasses, MessagesQuoteValuesShort) {
  const std::string big = R"([[")" + std::string(1 << 20, 'x') + R"("]])";
  const std::string msg = errorOf(big);
  expectMentions(msg, {"class 0", "must be a JSON object", "..."});
  EXPECT_LT(msg.size(), 200u) << msg.size();
  const std::string huge_number = "[" + std::string(1 << 20, '7') + "]";
  EXPECT_LT(errorOf(huge_number).size(), 300u);
  const std::string bad_literal = "[" + std::string(1 << 20, 't') + "]";
  EXPECT_LT(errorOf(bad_literal).size(), 300u);
  const std::string long_name(1 << 20, 'n');
  EXPECT_LT(errorOf(R"([{"name":")" + long_name + R"("}])").size(), 300u);
  EXPECT_LT(errorOf(R"([{")" + long_name + R"(":1}])").size(), 300u);
  const std::string twice = R"({"name":")" + long_name + R"(","threads":1,"block_size":8})";
  EXPECT_LT(errorOf("[" + twice + "," + twice + "]").size(), 300u);
}

TEST(WorkloadClasses, ShapeErrors) {
  expectMentions(errorOf("{}"), {"non-empty JSON array"});
  expectMentions(errorOf("[]"), {"non-empty JSON array"});
  expectMentions(errorOf("[3]"), {"class 0", "must be a JSON object"});
}

TEST(WorkloadClasses, UnknownFieldNamed) {
  expectMentions(errorOf(R"([{"name":"fg","threads":1,"block_size":4096,"slo":300}])"),
                 {"class 0 (\"fg\")", "field 'slo'", "unknown", "slo_us"});
}

TEST(WorkloadClasses, MissingRequiredField) {
  expectMentions(errorOf(R"([{"name":"fg","block_size":4096}])"),
                 {"class 0 (\"fg\")", "field 'threads'", "missing"});
  expectMentions(errorOf(R"([{"threads":1,"block_size":4096}])"), {"field 'name'", "missing"});
}

TEST(WorkloadClasses, BadValuesNamed) {
  expectMentions(errorOf(R"([{"name":"x","threads":0,"block_size":4096}])"),
                 {"field 'threads'", "[1, 1024]", "got 0"});
  expectMentions(errorOf(R"([{"name":"x","threads":"2","block_size":4096}])"),
                 {"field 'threads'", "got \"2\""});
  expectMentions(errorOf(R"([{"name":"x","threads":1,"block_size":4096.0}])"),
                 {"field 'block_size'", "integer"});
  expectMentions(errorOf(R"([{"name":"x","threads":1,"block_size":-1}])"), {"field 'block_size'"});
  expectMentions(errorOf(R"([{"name":"x","threads":1,"block_size":8,"weight":0}])"),
                 {"field 'weight'", "> 0"});
  expectMentions(errorOf(R"([{"name":"x","threads":1,"block_size":8,"intent_type":"urgent"}])"),
                 {"field 'intent_type'", "foreground_get", "\"urgent\""});
  expectMentions(errorOf(R"([{"name":"x","threads":1,"block_size":8,"slo_us":true}])"),
                 {"field 'slo_us'"});
  expectMentions(errorOf(R"([{"name":"","threads":1,"block_size":8}])"),
                 {"field 'name'", "non-empty string"});
}

TEST(WorkloadClasses, DuplicateNames) {
  expectMentions(errorOf(R"([{"name":"a","threads":1,"block_size":8},
                            {"name":"a","threads":1,"block_size":8}])"),
                 {"class 1", "duplicate name \"a\""});
}

TEST(WorkloadClasses, LoadFromFile) {
  const std::string path = ::testing::TempDir() + "tebench_classes_test.json";
  {
    std::ofstream out(path);
    out << R"([{"name":"f","threads":1,"block_size":4096}])";
  }
  auto text = loadWorkloadText("@" + path);
  ASSERT_TRUE(text.ok()) << text.status().toString();
  EXPECT_TRUE(parseWorkloadClasses(*text).ok());
  std::remove(path.c_str());
  auto missing = loadWorkloadText("@/nonexistent/classes.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/classes.json"), std::string::npos);
  EXPECT_EQ(*loadWorkloadText("[1]"), "[1]");
}

TEST(WorkloadClasses, TimesAreBoundedLikeTheFlags) {
  expectMentions(errorOf(R"([{"name":"a","threads":1,"block_size":8,"deadline_us":86400000001}])"),
                 {"class 0", "deadline_us", "[0, 86400000000]"});
  expectMentions(errorOf(R"([{"name":"a","threads":1,"block_size":8,"slo_us":1e30}])"),
                 {"class 0", "slo_us"});
  EXPECT_TRUE(
      parseWorkloadClasses(R"([{"name":"a","threads":1,"block_size":8,"deadline_us":86400000000}])")
          .ok());
}

// @/dev/zero read without end (and grew to gigabytes); a FIFO blocked for a writer.
// Only a regular file of at most 1 MiB is read.
TEST(WorkloadClasses, LoadsOnlyABoundedRegularFile) {
  auto zero = loadWorkloadText("@/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(),
            "--workload_classes_json file '/dev/zero' is a character device; it must be a "
            "regular file");
  const std::string fifo = ::testing::TempDir() + "tebench_classes_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto f = loadWorkloadText("@" + fifo);
  std::remove(fifo.c_str());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("is a FIFO"), std::string::npos) << f.status().message();
  const std::string big = ::testing::TempDir() + "tebench_classes_big.json";
  {
    std::ofstream out(big);
    out << std::string((1 << 20) + 1, ' ');
  }
  auto b = loadWorkloadText("@" + big);
  std::remove(big.c_str());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("is larger than 1 MiB"), std::string::npos)
      << b.status().message();
}

TEST(WorkloadClasses, LatencySensitiveRule) {
  EXPECT_TRUE(isLatencySensitive(IntentType::FOREGROUND_GET, 0));
  EXPECT_TRUE(isLatencySensitive(IntentType::UNSPEC, 300));
  EXPECT_FALSE(isLatencySensitive(IntentType::MIGRATION, 0));
  EXPECT_EQ(intentName(IntentType::WEIGHT_LOADING), "weight_loading");
}

}  // namespace
}  // namespace tent::bench
