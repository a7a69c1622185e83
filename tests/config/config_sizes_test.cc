// Sizes in the config follow the one rule of every command-line flag
// (base/byte_size.h): the shared table, through a size key of the config. A size out
// of the key's range, and a spelling the rule refuses, name the key and the rule.
#include <gtest/gtest.h>

#include <string>

#include "base/byte_size.h"
#include "config/config.h"
#include "tests/support/byte_size_table.h"

namespace tent::config {
namespace {

TEST(ConfigSizes, TheSharedTableThroughWorkersBlockSize) {
  for (const auto& c : tent::testing::kByteSizeCases) {
    // Quoted: YAML would otherwise read "" as null, "-4" as a number; the rule sees
    // the text either way.
    auto cfg = loadString(std::string("workers: {block_size: \"") + c.text + "\"}\n", "t.yaml");
    auto flag = parseByteSize(c.text);
    const bool in_range = flag.ok() && *flag >= 4096 && *flag <= (uint64_t{1} << 30);
    EXPECT_EQ(cfg.ok(), c.valid && in_range) << "'" << c.text << "'";
    if (cfg.ok()) {
      EXPECT_EQ((*cfg)->workers.block_size, c.bytes) << c.text;
    }
    if (!cfg.ok()) {
      EXPECT_NE(cfg.status().message().find("workers.block_size"), std::string::npos);
      EXPECT_NE(cfg.status().message().find("binary unit"), std::string::npos)
          << cfg.status().toString();
    }
  }
}

// Not a size, but the tcp section's one switch: off unless asked for, and it reaches
// the fabric config.
TEST(ConfigSizes, TcpCallerProgressIsOffByDefaultAndParsed) {
  auto d = loadString("fabric: {tcp: {retry_budget_ms: 4000}}\n", "t.yaml");
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_FALSE((*d)->fabric.tcp.caller_progress);
  auto c = loadString("fabric: {tcp: {caller_progress: true}}\n", "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_TRUE((*c)->fabric.tcp.caller_progress);
  auto bad = loadString("fabric: {tcp: {caller_progress: 3}}\n", "t.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("caller_progress"), std::string::npos)
      << bad.status().toString();
}

TEST(ConfigSizes, UnquotedAndEveryByteKey) {
  auto c = loadString(R"(workers: {block_size: 256k}
direct: {max_bytes: 1MiB}
fabric:
  soft: {max_message_bytes: 1G, stream_copy_min_bytes: 64k}
  tcp: {max_message_bytes: 2g, gpu_staging_buffer_bytes: 4M}
)",
                      "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ((*c)->workers.block_size, 256u << 10);
  EXPECT_EQ((*c)->direct.max_bytes, uint64_t{1} << 20);
  EXPECT_EQ((*c)->fabric.soft.max_message_bytes, uint64_t{1} << 30);
  EXPECT_EQ((*c)->fabric.soft.stream_copy_min_bytes, 64u << 10);
  EXPECT_EQ((*c)->fabric.tcp.max_message_bytes, uint64_t{2} << 30);
  EXPECT_EQ((*c)->fabric.tcp.gpu_staging_buffer_bytes, 4u << 20);
  auto big = loadString("workers: {block_size: 2G}\n", "t.yaml");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("[4096, 1073741824]"), std::string::npos)
      << big.status().toString();
}

}  // namespace
}  // namespace tent::config
