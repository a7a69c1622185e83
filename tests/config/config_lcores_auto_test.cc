// `lcores: auto` and the lcore_auto section: parsing, YAML round trip, errors
// that name the key and the line, and the idle policy's block_max_us.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "config_test_util.h"

namespace tent::config {
namespace {

using testing::parseError;

std::shared_ptr<const Config> mustParse(const std::string& yaml) {
  auto c = loadString(yaml, "tent.yaml");
  EXPECT_TRUE(c.ok()) << c.status().toString();
  return c.ok() ? *c : defaults();
}

TEST(ConfigLcoresAuto, TheScalarAutoSelectsTheDerivedLayout) {
  auto c = mustParse("lcores: auto\n");
  EXPECT_TRUE(c->lcores_auto);
  EXPECT_TRUE(c->lcores.empty());
  EXPECT_EQ(c->lcore_auto, LcoreAutoConfig{});
  EXPECT_FALSE(defaults()->lcores_auto);
}

TEST(ConfigLcoresAuto, KnobsParseAndRoundTrip) {
  auto c = mustParse(
      "lcores: auto\n"
      "lcore_auto:\n"
      "  rails: numa\n"
      "  background_lcores: 4\n"
      "  reserve_cpus: 0\n"
      "  idle: {spin_polls: 10, block_max_us: 0}\n");
  EXPECT_EQ(c->lcore_auto.rails, AutoRails::kNuma);
  EXPECT_EQ(c->lcore_auto.background_lcores, 4u);
  EXPECT_EQ(c->lcore_auto.reserve_cpus, 0u);
  EXPECT_EQ(c->lcore_auto.idle.spin_polls, 10u);
  EXPECT_EQ(c->lcore_auto.idle.block_max_us, 0u);
  const std::string yaml = toYaml(*c);
  EXPECT_NE(yaml.find("lcores: auto"), std::string::npos) << yaml;
  auto back = loadString(yaml, c->source);
  ASSERT_TRUE(back.ok()) << back.status().toString() << "\n" << yaml;
  EXPECT_EQ(**back, *c);
  EXPECT_TRUE(validate(*c).ok());
}

TEST(ConfigLcoresAuto, CqSizingCountsTheAutoBackgroundLcores) {
  auto c = mustParse("lcores: auto\nlcore_auto: {background_lcores: 4}\n");
  EXPECT_EQ(requiredCqSizing(*c).background_pollers, 4u);
}

void expectError(const std::string& yaml, const std::string& prefix, const std::string& piece) {
  const Status s = parseError(yaml);
  ASSERT_FALSE(s.ok()) << yaml;
  EXPECT_EQ(s.message().substr(0, prefix.size()), prefix) << s.message();
  EXPECT_NE(s.message().find(piece), std::string::npos) << s.message();
}

TEST(ConfigLcoresAuto, ErrorsNameTheKeyTheLineAndWhatIsAllowed) {
  expectError("lcores: automatic\n",
              "tent.yaml:1: lcores: ", "expected a list of maps, or auto, got 'automatic'");
  expectError("lcores: {cpu: 1}\n", "tent.yaml:1: lcores: ", "a list of maps, or auto");
  expectError("lcores: auto\nlcore_auto:\n  background_lcores: 0\n",
              "tent.yaml:3: lcore_auto.background_lcores: ", "expected an integer in [1, 64]");
  expectError("lcores: auto\nlcore_auto:\n  rails: private\n",
              "tent.yaml:3: lcore_auto.rails: ", "one of auto, dedicated, numa, shared");
  expectError("lcores: auto\nlcore_auto:\n  reserve_cpus: 65\n",
              "tent.yaml:3: lcore_auto.reserve_cpus: ", "[0, 64]");
  expectError("lcore_auto:\n  cores: 3\n", "tent.yaml:2: lcore_auto.cores: ", "unknown key");
  expectError("lcores: auto\nlcore_auto:\n  idle: {sleep_min_us: 9, sleep_max_us: 8}\n",
              "tent.yaml:3: lcore_auto.idle.sleep_min_us: ", "must not exceed sleep_max_us");
}

// Knobs of the derived layout next to an explicit list would do nothing: an error.
TEST(ConfigLcoresAuto, KnobsWithAnExplicitListAreAnError) {
  expectError("lcores:\n  - pollers: [background]\nlcore_auto:\n  background_lcores: 3\n",
              "tent.yaml:4: lcore_auto.background_lcores: ",
              "applies only with 'lcores: auto', but lcores is a list");
  // Their defaults, as toYaml writes them, are fine.
  EXPECT_TRUE(
      parseError("lcores:\n  - pollers: [background]\nlcore_auto:\n  background_lcores: 1\n").ok());
}

TEST(ConfigIdle, BlockMaxUsHasItsRange) {
  auto c = mustParse("lcores:\n  - pollers: [background]\n    idle: {block_max_us: 0}\n");
  EXPECT_EQ(c->lcores[0].idle.block_max_us, 0u);
  EXPECT_EQ(IdlePolicy{}.block_max_us, 100000u);
  expectError("lcores:\n  - pollers: [background]\n    idle: {block_max_us: 60000001}\n",
              "tent.yaml:3: lcores[0].idle.block_max_us: ", "[0, 60000000]");
}

}  // namespace
}  // namespace tent::config
