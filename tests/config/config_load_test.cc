// Good input: defaults, the examples, value syntax, YAML output, the environment
// variable and applying log levels.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "config/config.h"
#include "config/log_env.h"
#include "config_test_util.h"
#include "tent/log.h"

namespace tent::config {
namespace {

using testing::examplePath;
using testing::srcDir;
using testing::withSource;

const char* const kExamples[] = {"default.yaml", "soft-2rail.yaml", "node-8rail.yaml",
                                 "ci-manual.yaml", "tcp-host.yaml", "etcd.yaml"};

std::shared_ptr<const Config> mustLoad(const std::string& path) {
  auto r = loadFile(path);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : defaults();
}

TEST(ConfigDefaults, EveryKeyHasItsDocumentedDefault) {
  const Config& c = *defaults();
  EXPECT_EQ(c.eal.mode, LcoreMode::kEal);
  EXPECT_EQ(c.eal.memory_mb, 64u);
  EXPECT_TRUE(c.eal.no_huge && c.eal.no_pci && c.eal.no_shconf);
  EXPECT_EQ(c.eal.file_prefix, "");
  EXPECT_EQ(c.fabric.provider, FabricProvider::kAuto);
  EXPECT_TRUE(c.fabric.soft.devices.empty());
  EXPECT_EQ(c.fabric.soft.shm_dir, "/dev/shm");
  EXPECT_EQ(c.fabric.verbs.mtu, 4096u);
  EXPECT_EQ(c.workers.block_size, 65536u);
  EXPECT_EQ(c.workers.ring_size, 8192u);
  EXPECT_EQ(c.direct.mode, DirectMode::kAuto);
  EXPECT_EQ(c.direct.qp_depth, 1u);
  EXPECT_EQ(c.direct.max_bytes, 4u << 20);
  EXPECT_TRUE(c.direct.create_qp);
  EXPECT_EQ(c.bootstrap.listen, "127.0.0.1:0");
  EXPECT_EQ(c.log.level, "warn");
  EXPECT_EQ(c.source, "<defaults>");
}

TEST(ConfigDefaults, OneUnpinnedLcoreRunsEveryRailAndBackground) {
  const Config& c = *defaults();
  ASSERT_EQ(c.lcores.size(), 1u);
  EXPECT_EQ(c.lcores[0].cpu, -1);
  ASSERT_EQ(c.lcores[0].pollers.size(), 2u);
  EXPECT_EQ(c.lcores[0].pollers[0], (PollerSpec{PollerKind::kRail, "*"}));
  EXPECT_EQ(c.lcores[0].pollers[1], (PollerSpec{PollerKind::kBackground, ""}));
  EXPECT_EQ(c.lcores[0].idle, IdlePolicy{});
}

TEST(ConfigDefaults, EmptyOrCommentOnlyDocumentGivesTheDefaults) {
  for (const char* text : {"", "# nothing here\n", "{}\n", "---\n"}) {
    auto r = loadString(text, "empty.yaml");
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().toString();
    EXPECT_EQ(**r, withSource(*defaults(), "empty.yaml")) << text;
  }
}

TEST(ConfigDefaults, NullSectionKeepsItsDefaults) {
  auto r = loadString("workers:\ndirect:\n", "t.yaml");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ((*r)->workers, WorkerConfig{});
}

TEST(ConfigExamples, EveryExampleParses) {
  ASSERT_FALSE(srcDir().empty()) << "TENT_TEST_SRCDIR is not set";
  for (const char* name : kExamples) {
    auto r = loadFile(examplePath(name));
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().toString();
    if (r.ok()) {
      EXPECT_EQ((*r)->source, examplePath(name));
    }
  }
}

TEST(ConfigExamples, DefaultYamlIsExactlyTheDefaults) {
  auto c = mustLoad(examplePath("default.yaml"));
  EXPECT_EQ(*c, withSource(*defaults(), examplePath("default.yaml")));
}

TEST(ConfigExamples, Soft2RailHasTwoModeledDevicesAndOneLcore) {
  auto c = mustLoad(examplePath("soft-2rail.yaml"));
  EXPECT_EQ(c->fabric.provider, FabricProvider::kSoft);
  ASSERT_EQ(c->fabric.soft.devices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const SoftDevice& d = c->fabric.soft.devices[i];
    EXPECT_EQ(d.name, "soft" + std::to_string(i));
    EXPECT_EQ(d.numa_node, 0);
    EXPECT_DOUBLE_EQ(d.link_gbps, 100.0);
    EXPECT_EQ(d.latency_ns, 2000u);
  }
  ASSERT_EQ(c->lcores.size(), 1u);
  EXPECT_EQ(c->lcores[0].pollers, defaults()->lcores[0].pollers);
}

TEST(ConfigExamples, TcpHostListensEverywhereAndAdvertisesItsAddress) {
  auto c = mustLoad(examplePath("tcp-host.yaml"));
  EXPECT_EQ(c->fabric.provider, FabricProvider::kTcp);
  ASSERT_EQ(c->fabric.tcp.devices.size(), 1u);
  EXPECT_EQ(c->fabric.tcp.devices[0].name, "tcp0");
  EXPECT_EQ(c->fabric.tcp.devices[0].listen, "0.0.0.0:0");
  EXPECT_EQ(c->fabric.tcp.devices[0].advertise, "10.0.0.5");
  EXPECT_EQ(c->bootstrap.advertise_host, "10.0.0.5");
}

TEST(ConfigExamples, Node8RailPinsOneRailLcorePerNicAndFourBackground) {
  auto c = mustLoad(examplePath("node-8rail.yaml"));
  EXPECT_EQ(c->fabric.provider, FabricProvider::kVerbs);
  ASSERT_EQ(c->fabric.verbs.devices.size(), 8u);
  size_t rails = 0;
  size_t background = 0;
  for (const LcoreSpec& l : c->lcores) {
    EXPECT_GE(l.cpu, 0) << "every lcore of the node is pinned";
    ASSERT_EQ(l.pollers.size(), 1u);
    if (l.pollers[0].kind == PollerKind::kRail) {
      EXPECT_EQ(l.pollers[0].device, "mlx5_" + std::to_string(rails));
      // mlx5_0..3 sit on NUMA 0 (CPUs 0-47), mlx5_4..7 on NUMA 1 (CPUs 48-95).
      EXPECT_EQ(l.cpu >= 48, rails >= 4) << "rail lcore of mlx5_" << rails;
      ++rails;
    } else {
      ++background;
    }
  }
  EXPECT_EQ(rails, 8u);
  EXPECT_EQ(background, 4u);
  EXPECT_EQ(c->bootstrap.advertise_host, "10.0.0.12");
}

TEST(ConfigExamples, EtcdRegistersANameWithEtcd) {
  auto c = mustLoad(examplePath("etcd.yaml"));
  EXPECT_EQ(c->metadata.backend, MetadataBackend::kEtcd);
  EXPECT_EQ(c->metadata.name, "node-a");
  EXPECT_EQ(c->metadata.etcd.endpoints, std::vector<std::string>{"127.0.0.1:2379"});
  EXPECT_EQ(c->metadata.etcd.prefix, "/tent/");
  EXPECT_EQ(c->metadata.etcd.lease_ttl_s, 10u);
  EXPECT_EQ(toString(c->metadata.backend), "etcd");
}

TEST(ConfigExamples, CiManualUsesManualLcores) {
  auto c = mustLoad(examplePath("ci-manual.yaml"));
  EXPECT_EQ(c->eal.mode, LcoreMode::kManual);
  EXPECT_EQ(c->fabric.provider, FabricProvider::kSoft);
  EXPECT_EQ(c->lcores.size(), 2u);
}

TEST(ConfigValues, AcceptsTheUsualYamlSpellings) {
  const char* yaml = R"(
eal: {no_huge: False, no_pci: TRUE, memory_mb: "128", extra_args: [--log-level=8]}
workers: {block_size: 0x20000, ring_size: 1024}
fabric:
  soft:
    devices:
      - {name: s0, pci: "0000:3b:00.0", link_gbps: 12.5}
      - {name: s1, pci: "3b:00.1", numa_node: 1}
bootstrap: {listen: "[::1]:17800", advertise_host: "[fe80::1]"}
log: {level: info, components: {engine: debug, direct: trace}}
)";
  auto r = loadString(yaml, "t.yaml");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  const Config& c = **r;
  EXPECT_FALSE(c.eal.no_huge);
  EXPECT_TRUE(c.eal.no_pci);
  EXPECT_EQ(c.eal.memory_mb, 128u);
  EXPECT_EQ(c.eal.extra_args, std::vector<std::string>{"--log-level=8"});
  EXPECT_EQ(c.workers.block_size, 0x20000u);
  EXPECT_DOUBLE_EQ(c.fabric.soft.devices[0].link_gbps, 12.5);
  EXPECT_EQ(c.fabric.soft.devices[1].numa_node, 1);
  EXPECT_EQ(c.bootstrap.listen, "[::1]:17800");
  EXPECT_EQ(c.log.components.at("engine"), "debug");
  EXPECT_EQ(c.log.components.at("direct"), "trace");
}

TEST(ConfigYaml, WritesEveryConfigSoThatItReadsBackEqual) {
  std::vector<std::shared_ptr<const Config>> configs = {defaults()};
  for (const char* name : kExamples) configs.push_back(mustLoad(examplePath(name)));
  auto tweaked = std::make_shared<Config>(*defaults());
  tweaked->fabric.soft.devices.push_back({"dev-1.a", 3, "3b:00.0", 0.1, 7});
  tweaked->fabric.soft.shm_dir = "/dev/shm/with space: and # hash";
  tweaked->log.components["engine"] = "info";
  tweaked->eal.extra_args = {"--x=\"1 2\"", "'single'", "- dash"};
  tweaked->lcores.push_back({7, {{PollerKind::kBackground, ""}}, {1, 2, 3, 4}});
  configs.push_back(tweaked);
  for (const auto& c : configs) {
    const std::string yaml = toYaml(*c);
    auto back = loadString(yaml, c->source);
    ASSERT_TRUE(back.ok()) << back.status().toString() << "\n" << yaml;
    EXPECT_EQ(**back, *c) << yaml;
  }
}

TEST(ConfigValidate, HoldsConfigsBuiltInCodeToTheSameRules) {
  Config c = *defaults();
  EXPECT_TRUE(validate(c).ok());
  c.direct.qp_depth = 65;
  Status s = validate(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("direct.qp_depth: expected an integer in [1, 64], got '65'"),
            std::string::npos)
      << s.message();
  c = *defaults();
  c.lcores[0].pollers = {{PollerKind::kRail, "*"}};
  s = validate(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no lcore runs a 'background' poller"), std::string::npos);
  c = *defaults();
  c.fabric.soft.devices = {{"soft0", 0, "", 0, 0}, {"soft0", 0, "", 0, 0}};
  EXPECT_FALSE(validate(c).ok());
}

TEST(ConfigStrings, PollerSpecsRoundTrip) {
  for (const char* text : {"background", "rail:*", "rail:mlx5_0"}) {
    auto spec = parsePollerSpec(text);
    ASSERT_TRUE(spec.ok()) << text;
    EXPECT_EQ(toString(*spec), text);
  }
  for (const char* text : {"", "rail", "rail:", "rail:a b", "Background", "bg"}) {
    EXPECT_FALSE(parsePollerSpec(text).ok()) << text;
  }
}

TEST(ConfigStrings, EnumNames) {
  EXPECT_EQ(toString(PollerKind::kRail), "rail");
  EXPECT_EQ(toString(PollerKind::kBackground), "background");
  EXPECT_EQ(toString(FabricProvider::kAuto), "auto");
  EXPECT_EQ(toString(FabricProvider::kVerbs), "verbs");
  EXPECT_EQ(toString(FabricProvider::kSoft), "soft");
  EXPECT_EQ(toString(DirectMode::kAuto), "auto");
  EXPECT_EQ(toString(DirectMode::kOff), "off");
  EXPECT_EQ(toString(DirectMode::kForce), "force");
  EXPECT_EQ(toString(LcoreMode::kEal), "eal");
  EXPECT_EQ(toString(LcoreMode::kManual), "manual");
}

// ---- TENT_CONFIG -----------------------------------------------------------------

class ConfigEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("TENT_CONFIG");
    had_ = old != nullptr;
    if (had_) old_ = old;
  }
  void TearDown() override {
    if (had_) {
      setenv("TENT_CONFIG", old_.c_str(), 1);
    } else {
      unsetenv("TENT_CONFIG");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST_F(ConfigEnvironment, UnsetOrEmptyGivesTheDefaults) {
  unsetenv("TENT_CONFIG");
  auto r = loadFromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, defaults());
  setenv("TENT_CONFIG", "", 1);
  r = loadFromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, defaults());
}

TEST_F(ConfigEnvironment, NamesTheFileToLoad) {
  const std::string path = examplePath("soft-2rail.yaml");
  setenv("TENT_CONFIG", path.c_str(), 1);
  auto r = loadFromEnvironment();
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ((*r)->source, path);
  EXPECT_EQ((*r)->fabric.soft.devices.size(), 2u);
}

TEST_F(ConfigEnvironment, MissingFileIsAnErrorNamingVariableAndFile) {
  setenv("TENT_CONFIG", "/nonexistent/tent.yaml", 1);
  auto r = loadFromEnvironment();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("TENT_CONFIG"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("/nonexistent/tent.yaml"), std::string::npos);
}

TEST_F(ConfigEnvironment, BadFileReportsItsLine) {
  char path[] = "/tmp/tent-config-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "workers:\n  burst: 0\n";
  setenv("TENT_CONFIG", path, 1);
  auto r = loadFromEnvironment();
  unlink(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "TENT_CONFIG: " + std::string(path) +
                ":2: workers.burst: expected an integer in [1, 1024], got '0'");
}

// ---- applyLogConfig ------------------------------------------------------------------

class ConfigLog : public ::testing::Test {
 protected:
  void TearDown() override { log::setAllLevels(log::Level::kWarn); }
};

TEST_F(ConfigLog, SetsTheGlobalLevelThenComponentOverrides) {
  LogConfig lc;
  lc.level = "error";
  lc.components = {{"engine", "debug"}, {"direct", "trace"}};
  ASSERT_TRUE(applyLogConfig(lc).ok());
  EXPECT_EQ(log::level(log::Component::kEngine), log::Level::kDebug);
  EXPECT_EQ(log::level(log::Component::kDirect), log::Level::kTrace);
  EXPECT_EQ(log::level(log::Component::kFabric), log::Level::kError);
  EXPECT_EQ(log::level(log::Component::kConfig), log::Level::kError);
}

TEST_F(ConfigLog, AppliesWhatAFileSays) {
  auto r = loadString("log: {level: off, components: {lcore: info}}\n");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_TRUE(applyLogConfig((*r)->log).ok());
  EXPECT_EQ(log::level(log::Component::kLcore), log::Level::kInfo);
  EXPECT_EQ(log::level(log::Component::kEngine), log::Level::kOff);
}

TEST_F(ConfigLog, UnknownLevelIsAnErrorAndChangesNothing) {
  LogConfig lc;
  lc.level = "loud";
  Status s = applyLogConfig(lc);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("log.level"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'loud'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("trace, debug, info, warn, error, off"), std::string::npos);
  EXPECT_EQ(log::level(log::Component::kEngine), log::Level::kWarn);
}

TEST_F(ConfigLog, UnknownComponentOrComponentLevelIsAnErrorAndChangesNothing) {
  LogConfig lc;
  lc.level = "debug";
  lc.components = {{"enginee", "info"}};
  Status s = applyLogConfig(lc);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'enginee'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("engine, direct"), std::string::npos) << s.message();
  EXPECT_EQ(log::level(log::Component::kEngine), log::Level::kWarn);

  lc.components = {{"engine", "chatty"}};
  s = applyLogConfig(lc);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("log.components.engine"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'chatty'"), std::string::npos) << s.message();
  EXPECT_EQ(log::level(log::Component::kFabric), log::Level::kWarn);
}

TEST_F(ConfigLog, EnvironmentLevelWinsOverTheFile) {
  LogConfig lc;
  lc.level = "error";
  lc.components = {{"engine", "info"}};
  ASSERT_TRUE(overlayLogLevelEnv("debug", &lc).ok());
  EXPECT_EQ(lc.level, "debug");
  EXPECT_TRUE(lc.components.empty()) << "a bare level means every component";
}

TEST_F(ConfigLog, EnvironmentComponentsMergeWithTheFile) {
  LogConfig lc;
  lc.components = {{"engine", "info"}, {"fabric", "error"}};
  ASSERT_TRUE(overlayLogLevelEnv("engine=trace,direct=debug", &lc).ok());
  EXPECT_EQ(lc.level, "warn");
  EXPECT_EQ(lc.components.at("engine"), "trace");
  EXPECT_EQ(lc.components.at("direct"), "debug");
  EXPECT_EQ(lc.components.at("fabric"), "error");
  ASSERT_TRUE(overlayLogLevelEnv("info,lcore=off", &lc).ok());
  EXPECT_EQ(lc.level, "info");
  EXPECT_EQ(lc.components, (std::map<std::string, std::string>{{"lcore", "off"}}));
}

TEST_F(ConfigLog, EnvironmentBadWordNamesTheVariableAndTheAllowedValues) {
  LogConfig lc;
  Status s = overlayLogLevelEnv("loud", &lc);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("TENT_LOG_LEVEL"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'loud'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("trace, debug, info, warn, error, off"), std::string::npos);
  s = overlayLogLevelEnv("info,enginee=debug", &lc);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'enginee'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("engine, direct"), std::string::npos) << s.message();
  EXPECT_EQ(lc.level, "warn") << "a bad word changes nothing";
}

TEST_F(ConfigLog, ApplyReadsTheEnvironment) {
  ASSERT_EQ(setenv("TENT_LOG_LEVEL", "error,engine=debug", 1), 0);
  LogConfig lc;
  lc.level = "info";
  const Status s = applyLogConfig(lc);
  Status bad;
  ASSERT_EQ(setenv("TENT_LOG_LEVEL", "chatty", 1), 0);
  bad = applyLogConfig(lc);
  unsetenv("TENT_LOG_LEVEL");
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(log::level(log::Component::kEngine), log::Level::kDebug);
  EXPECT_EQ(log::level(log::Component::kFabric), log::Level::kError);
}

}  // namespace
}  // namespace tent::config
