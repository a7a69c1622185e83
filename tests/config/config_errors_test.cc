// Bad input: every kind of error and the exact pieces of its message —
// "<file>:<line>: <key path>: <what is allowed / what is wrong>".
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config_test_util.h"

namespace tent::config {
namespace {

using testing::parseError;

struct BadCase {
  const char* what;
  const char* yaml;
  int line;
  const char* path;                 // "" for errors about the whole document
  std::vector<std::string> pieces;  // each must appear after "tent.yaml:<line>: <path>: "
};

void expectError(const BadCase& c) {
  SCOPED_TRACE(c.what);
  const Status s = parseError(c.yaml);
  ASSERT_FALSE(s.ok()) << "accepted:\n" << c.yaml;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  std::string prefix = "tent.yaml:" + std::to_string(c.line) + ": ";
  if (*c.path != '\0') prefix += std::string(c.path) + ": ";
  ASSERT_EQ(s.message().substr(0, prefix.size()), prefix) << s.message();
  for (const std::string& piece : c.pieces) {
    EXPECT_NE(s.message().find(piece, prefix.size()), std::string::npos)
        << "missing '" << piece << "' in: " << s.message();
  }
}

TEST(ConfigErrors, TheBriefsExampleMessageExactly) {
  const Status s = parseError("eal:\n  memory_mb: 64\nworkers:\n  block_size: big\n");
  EXPECT_EQ(
      s.message(),
      "tent.yaml:4: workers.block_size: expected a size in [4096, 1073741824] (bytes, optionally with a binary unit: k, m, g, t (either case, optionally followed by iB; powers of 1024)), got "
      "'big'");
}

TEST(ConfigErrors, MalformedYamlGivesYamlCppsLine) {
  expectError({"unclosed flow list", "workers:\n  burst: 4\neal: [\n", 4, "", {"malformed YAML"}});
  expectError({"bad indentation", "workers:\n  burst: 4\n bad: 1\n", 3, "", {"malformed YAML"}});
  expectError({"tab indentation", "workers:\n\tburst: 4\n", 2, "", {"malformed YAML"}});
}

// Found by fuzzing: yaml-cpp 0.7's LoadAll loops for ever, allocating a null document
// per turn, on a document no node can start with (a lone ','; jbeder/yaml-cpp#1040).
TEST(ConfigErrors, AStrayCommaIsMalformedYamlNotAnEndlessLoop) {
  expectError({"a lone comma", ",", 1, "", {"malformed YAML", "unexpected ','"}});
  expectError({"after a comment", "# tent\n  , workers: {}\n", 2, "", {"unexpected ','"}});
  expectError({"in the second document", "workers: {}\n---\n,\n", 3, "", {"unexpected ','"}});
  expectError({"three documents",
               "a: 1\n---\nb: 2\n---\nc: 3\n",
               3,
               "",
               {"expected one YAML document, found 3"}});
}

TEST(ConfigErrors, DocumentShape) {
  expectError({"list at the top",
               "- a\n- b\n",
               1,
               "",
               {"expected a map with keys eal, fabric", "log", "got a list"}});
  expectError({"scalar at the top", "hello\n", 1, "", {"expected a map", "got 'hello'"}});
  expectError({"two documents",
               "workers: {}\n---\nlog: {}\n",
               3,
               "",
               {"expected one YAML document, found 2"}});
  expectError({"duplicate key",
               "eal:\n  no_pci: true\n  no_pci: false\n",
               3,
               "eal.no_pci",
               {"duplicate key", "line 2"}});
  expectError({"non-scalar key", "eal:\n  ? [a]\n  : 1\n", 2, "eal", {"plain names", "a list"}});
}

TEST(ConfigErrors, UnknownKeysListWhatIsAllowedThere) {
  expectError({"top level",
               "workerz: {}\n",
               1,
               "workerz",
               {"unknown key",
                "allowed top-level keys: eal, fabric, topology, lcores, lcore_auto, endpoints, "
                "workers, direct, notify, qos, bootstrap, metadata, timeouts, metrics, log"}});
  expectError({"nested",
               "fabric:\n  soft:\n    max_mr: 4\n",
               3,
               "fabric.soft.max_mr",
               {"unknown key", "keys of fabric.soft:", "devices", "max_mrs", "shm_dir"}});
  expectError({"in a list item",
               "lcores:\n  - pollers: [background]\n    cores: 2\n",
               3,
               "lcores[0].cores",
               {"unknown key", "keys of lcores[0]: cpu, pollers, idle"}});
  expectError({"log component",
               "log:\n  components: {engin: info}\n",
               2,
               "log.components.engin",
               {"unknown key", "common, config", "engine", "direct"}});
}

TEST(ConfigErrors, WrongTypes) {
  expectError({"map for an integer",
               "workers:\n  burst: {a: 1}\n",
               2,
               "workers.burst",
               {"expected an integer in [1, 1024]", "got a map"}});
  expectError({"list for a string",
               "bootstrap:\n  listen: [a]\n",
               2,
               "bootstrap.listen",
               {"expected host:port", "got a list"}});
  expectError({"yes is not a boolean",
               "eal:\n  no_huge: yes\n",
               2,
               "eal.no_huge",
               {"expected true or false, got 'yes'"}});
  expectError({"no value",
               "workers:\n  block_size:\n",
               2,
               "workers.block_size",
               {"expected a size", "got nothing"}});
  expectError(
      {"float for an integer", "workers:\n  burst: 1.5\n", 2, "workers.burst", {"got '1.5'"}});
  expectError({"number text",
               "fabric:\n  soft:\n    default_link_gbps: fast\n",
               3,
               "fabric.soft.default_link_gbps",
               {"expected a number in [0, 100000]", "got 'fast'"}});
  expectError({"scalar for a section",
               "workers: 5\n",
               1,
               "workers",
               {"expected a map with keys block_size, ring_size", "got '5'"}});
  expectError({"scalar for a list",
               "eal:\n  extra_args: --foo\n",
               2,
               "eal.extra_args",
               {"expected a list of", "got '--foo'"}});
  expectError({"map in a string list",
               "eal:\n  extra_args: [{a: 1}]\n",
               2,
               "eal.extra_args[0]",
               {"got a map"}});
  expectError({"list of maps given a map",
               "lcores: {cpu: 1}\n",
               1,
               "lcores",
               {"expected a list of maps", "got a map"}});
}

// Ranges the engine survives: a terabyte of EAL memory was inside [16, 1048576] and
// made DPDK crash after growing to 4 GiB; DPDK keeps at most 64 GiB per page size.
TEST(ConfigErrors, EalMemoryIsWithinWhatDpdkSurvives) {
  expectError({"a terabyte",
               "eal:\n  memory_mb: 1048576\n",
               2,
               "eal.memory_mb",
               {"expected an integer in [16, 65536], got '1048576'"}});
  EXPECT_TRUE(parseError("eal:\n  memory_mb: 65536\n").ok());
}

// The soft provider refused max_mrs over 65536 at engine creation, inside [1, 1048576].
TEST(ConfigErrors, SoftMrsWithinWhatTheProviderTakes) {
  expectError({"more MRs than an rkey's slot holds",
               "fabric:\n  soft:\n    max_mrs: 65537\n",
               3,
               "fabric.soft.max_mrs",
               {"expected an integer in [1, 65536], got '65537'"}});
  EXPECT_TRUE(parseError("fabric:\n  soft:\n    max_mrs: 65536\n").ok());
}

TEST(ConfigErrors, OutOfRange) {
  expectError({"below",
               "workers:\n  block_size: 4095\n",
               2,
               "workers.block_size",
               {"expected a size in [4096, 1073741824]", "got '4095'"}});
  expectError({"above",
               "workers:\n  block_size: 1073741825\n",
               2,
               "workers.block_size",
               {"got '1073741825'"}});
  expectError({"negative for unsigned",
               "direct:\n  timeout_ms: -1\n",
               2,
               "direct.timeout_ms",
               {"expected an integer in [1, 3600000], got '-1'"}});
  expectError({"beyond int64",
               "direct:\n  max_bytes: 99999999999999999999999\n",
               2,
               "direct.max_bytes",
               {"[0, 1099511627776]"}});
  expectError({"cpu",
               "lcores:\n  - {cpu: -2, pollers: [background]}\n",
               2,
               "lcores[0].cpu",
               {"expected an integer in [-1, 4095], got '-2'"}});
  expectError({"verbs retry",
               "fabric:\n  verbs:\n    retry_cnt: 8\n",
               3,
               "fabric.verbs.retry_cnt",
               {"[0, 7]"}});
  expectError({"verbs timeout 0",
               "fabric:\n  verbs:\n    timeout: 0\n",
               3,
               "fabric.verbs.timeout",
               {"a dead peer is never detected", "1..31"}});
  expectError({"verbs signal_every",
               "fabric:\n  verbs:\n    signal_every: 0\n",
               3,
               "fabric.verbs.signal_every",
               {"[1, 32]"}});
  expectError({"verbs mtu",
               "fabric:\n  verbs:\n    mtu: 1000\n",
               3,
               "fabric.verbs.mtu",
               {"expected one of 256, 512, 1024, 2048, 4096, got '1000'"}});
  expectError({"link",
               "fabric:\n  soft:\n    devices: [{name: s, link_gbps: -1}]\n",
               3,
               "fabric.soft.devices[0].link_gbps",
               {"[0, 100000]", "got '-1'"}});
}

TEST(ConfigErrors, QosTrafficClassIsDscpShiftedAndSlFitsFourBits) {
  expectError({"ECN bits set",
               "qos:\n  direct:\n    traffic_class: 185\n",
               3,
               "qos.direct.traffic_class",
               {"multiple of 4", "ECN", "DSCP 46 is 184"}});
  expectError({"above 252",
               "qos:\n  data: {traffic_class: 256}\n",
               2,
               "qos.data.traffic_class",
               {"[0, 252]"}});
  expectError({"service level",
               "qos:\n  control: {service_level: 16}\n",
               2,
               "qos.control.service_level",
               {"[0, 15]"}});
  EXPECT_TRUE(config::loadString("qos: {direct: {traffic_class: 184, service_level: 5}}\n").ok());
}

TEST(ConfigErrors, DirectQpDepthIsOneToSixtyFour) {
  expectError({"zero",
               "direct:\n  qp_depth: 0\n",
               2,
               "direct.qp_depth",
               {"expected an integer in [1, 64], got '0'"}});
  expectError({"65", "direct:\n  qp_depth: 65\n", 2, "direct.qp_depth", {"got '65'"}});
  EXPECT_TRUE(parseError("direct:\n  qp_depth: 64\n  cq_depth: 16384\n").ok());
}

TEST(ConfigErrors, BadEnumValuesListTheAllowedOnes) {
  expectError({"provider",
               "fabric:\n  provider: rdma\n",
               2,
               "fabric.provider",
               {"expected one of auto, verbs, soft, tcp, got 'rdma'"}});
  expectError({"direct mode",
               "direct:\n  mode: on\n",
               2,
               "direct.mode",
               {"expected one of auto, off, force, got 'on'"}});
  expectError({"lcore mode",
               "eal:\n  mode: threads\n",
               2,
               "eal.mode",
               {"expected one of eal, manual, got 'threads'"}});
  expectError({"log level",
               "log:\n  level: loud\n",
               2,
               "log.level",
               {"expected one of trace, debug, info, warn, error, off, got 'loud'"}});
  expectError({"component level",
               "log:\n  components:\n    engine: verbose\n",
               3,
               "log.components.engine",
               {"expected one of trace, debug", "got 'verbose'"}});
}

TEST(ConfigErrors, RingSizesArePowersOfTwo) {
  expectError({"not a power",
               "workers:\n  ring_size: 1000\n",
               2,
               "workers.ring_size",
               {"expected a power of two in [64, 1048576], got '1000'"}});
  expectError({"too small", "workers:\n  ring_size: 32\n", 2, "workers.ring_size", {"got '32'"}});
  EXPECT_TRUE(parseError("workers:\n  ring_size: 1024\n").ok());
}

TEST(ConfigErrors, BadPollerSpecs) {
  const char* allowed = "expected background, rail:* or rail:<device>";
  expectError({"bare rail",
               "lcores:\n  - pollers: [background, rail]\n",
               2,
               "lcores[0].pollers[1]",
               {allowed, "got 'rail'"}});
  expectError({"empty device",
               "lcores:\n  - pollers: [\"rail:\", background]\n",
               2,
               "lcores[0].pollers[0]",
               {allowed, "got 'rail:'"}});
  expectError({"typo",
               "lcores:\n  - pollers: [backgrund]\n",
               2,
               "lcores[0].pollers[0]",
               {"got 'backgrund'"}});
  expectError({"item line",
               "lcores:\n  - pollers:\n      - background\n      - rail:a b\n",
               4,
               "lcores[0].pollers[1]",
               {"got 'rail:a b'"}});
  expectError({"empty pollers",
               "lcores:\n  - {cpu: 1, pollers: []}\n  - pollers: [background]\n",
               2,
               "lcores[0].pollers",
               {"at least one poller"}});
  expectError({"pollers missing",
               "lcores:\n  - cpu: 1\n",
               2,
               "lcores[0].pollers",
               {"required key is missing"}});
}

TEST(ConfigErrors, LcorePlacementAcrossLcores) {
  expectError({"empty list", "lcores: []\n", 1, "lcores", {"at least one lcore"}});
  expectError({"no background",
               "lcores:\n  - pollers: [\"rail:*\"]\n",
               2,
               "lcores",
               {"no lcore runs a 'background' poller"}});
  expectError(
      {"same cpu twice",
       "lcores:\n  - {cpu: 3, pollers: [background]}\n  - {cpu: 3, pollers: [background]}\n",
       3,
       "lcores[1].cpu",
       {"CPU 3 is pinned twice", "lcores[0]"}});
  expectError({"rail twice",
               "lcores:\n  - pollers: [\"rail:*\", background]\n  - pollers: [\"rail:*\"]\n",
               3,
               "lcores[1].pollers[0]",
               {"rail:* is given twice", "lcores[0].pollers[0]"}});
  expectError({"rail of an unlisted device",
               "fabric:\n  provider: soft\n  soft:\n    devices: [{name: soft0}, {name: soft1}]\n"
               "lcores:\n  - pollers: [background, \"rail:soft2\"]\n",
               6,
               "lcores[0].pollers[1]",
               {"'soft2' is not one of", "soft0, soft1"}});
  // Two unpinned lcores are fine, and so is any rail name when devices are discovered.
  EXPECT_TRUE(parseError("lcores:\n  - pollers: [background]\n  - pollers: [background, "
                         "\"rail:mlx5_9\"]\n")
                  .ok());
}

TEST(ConfigErrors, SoftDevices) {
  expectError({"duplicate name",
               "fabric:\n  soft:\n    devices:\n      - name: soft0\n      - name: soft1\n"
               "      - name: soft0\n",
               6,
               "fabric.soft.devices[2].name",
               {"duplicate soft device name 'soft0'", "fabric.soft.devices[0].name"}});
  expectError({"name missing",
               "fabric:\n  soft:\n    devices:\n      - numa_node: 1\n",
               4,
               "fabric.soft.devices[0].name",
               {"required key is missing"}});
  expectError({"bad name",
               "fabric:\n  soft:\n    devices: [{name: \"a/b\"}]\n",
               3,
               "fabric.soft.devices[0].name",
               {"a device name of letters", "got 'a/b'"}});
  expectError({"bad pci",
               "fabric:\n  soft:\n    devices: [{name: s, pci: \"3b:00.8\"}]\n",
               3,
               "fabric.soft.devices[0].pci",
               {"a PCI address such as 0000:3b:00.0", "got '3b:00.8'"}});
  expectError({"item not a map",
               "fabric:\n  soft:\n    devices: [soft0]\n",
               3,
               "fabric.soft.devices[0]",
               {"expected a map with keys name, numa_node", "got 'soft0'"}});
  expectError({"verbs device allowed and excluded",
               "fabric:\n  verbs:\n    devices: [mlx5_0]\n    exclude_devices: [mlx5_1, mlx5_0]\n",
               4,
               "fabric.verbs.exclude_devices[1]",
               {"device 'mlx5_0' is also in fabric.verbs.devices"}});
  expectError({"duplicate excluded verbs device",
               "fabric:\n  verbs:\n    exclude_devices: [mlx5_bond_0, mlx5_bond_0]\n",
               3,
               "fabric.verbs.exclude_devices[1]",
               {"duplicate device 'mlx5_bond_0'"}});
  expectError({"duplicate verbs device",
               "fabric:\n  verbs:\n    devices: [mlx5_0, mlx5_0]\n",
               3,
               "fabric.verbs.devices[1]",
               {"duplicate device 'mlx5_0'", "fabric.verbs.devices[0]"}});
}

TEST(ConfigErrors, BootstrapListenIsHostColonPort) {
  const char* allowed = "expected host:port with a port in [0, 65535]";
  for (const char* listen : {"127.0.0.1", "127.0.0.1:", ":80", "host:70000", "host:-1", "::1:80",
                             "h st:1", "host:80x"}) {
    const std::string yaml = "bootstrap:\n  listen: \"" + std::string(listen) + "\"\n";
    expectError({listen,
                 yaml.c_str(),
                 2,
                 "bootstrap.listen",
                 {allowed, "got '" + std::string(listen) + "'"}});
  }
  for (const char* listen : {"127.0.0.1:0", "0.0.0.0:65535", "node-7.example:17800", "[::1]:0"}) {
    EXPECT_TRUE(parseError("bootstrap:\n  listen: \"" + std::string(listen) + "\"\n").ok())
        << listen;
  }
  expectError({"wildcard advertise",
               "bootstrap:\n  advertise_host: 0.0.0.0\n",
               2,
               "bootstrap.advertise_host",
               {"not a wildcard", "got '0.0.0.0'"}});
}

TEST(ConfigErrors, CrossFieldChecks) {
  expectError({"sleep bounds",
               "lcores:\n  - pollers: [background]\n    idle:\n      sleep_min_us: 200\n"
               "      sleep_max_us: 100\n",
               4,
               "lcores[0].idle.sleep_min_us",
               {"must not exceed sleep_max_us (100), got 200"}});
  expectError({"sleep min above the default max",
               "lcores:\n  - pollers: [background]\n    idle: {sleep_min_us: 101}\n",
               3,
               "lcores[0].idle.sleep_min_us",
               {"sleep_max_us (100)"}});
  expectError({"direct cq below what attaches",
               "direct:\n  qp_depth: 8\n  cq_depth: 4\n",
               3,
               "direct.cq_depth",
               {"endpoints.max_per_context 256 x direct.qp_depth 8 = 2048", "got 4"}});
  expectError({"worker cq too small",
               "workers:\n  qp_depth: 512\n  cq_depth: 1000\n",
               3,
               "workers.cq_depth",
               {"ceil(endpoints.max_per_context 256 / 1 background pollers)",
                "workers.qps_per_endpoint 2", "workers.qp_depth 512", "= 262144", "got 1000"}});
  expectError({"derived cq over the largest",
               "endpoints: {max_per_context: 65536}\nworkers:\n  qp_depth: 32768\n",
               3,
               "workers.qp_depth",
               {"= 4194305 exceeds the largest CQ (4194304)", "set workers.cq_depth"}});
  expectError({"reconnect delays inverted",
               "endpoints:\n  reconnect_initial_ms: 500\n  reconnect_max_ms: 100\n",
               2,
               "endpoints.reconnect_initial_ms",
               {"must not exceed reconnect_max_ms (100), got 500"}});
  expectError({"burst above ring",
               "workers:\n  ring_size: 64\n  burst: 128\n",
               3,
               "workers.burst",
               {"must not exceed ring_size (64), got 128"}});
}

TEST(ConfigErrors, OtherStringRules) {
  expectError({"file prefix", "eal:\n  file_prefix: a/b\n", 2, "eal.file_prefix", {"got 'a/b'"}});
  expectError({"empty EAL argument",
               "eal:\n  extra_args: [--a, \"\"]\n",
               2,
               "eal.extra_args[1]",
               {"non-empty EAL argument"}});
  expectError({"relative shm dir",
               "fabric:\n  soft:\n    shm_dir: shm\n",
               3,
               "fabric.soft.shm_dir",
               {"expected an absolute path, got 'shm'"}});
}

// Options DPDK's rte_eal_init() handles by printing and exiting the process (or only
// printing) are refused at validation, not discovered as an exit(0) inside engine creation.
TEST(ConfigErrors, EalArgumentsThatPrintOrExitAreRefused) {
  const std::vector<std::string> pieces = {"DPDK", "allowed: options that configure EAL",
                                           "not -h/--help, -v/--version or --log-level=help"};
  for (const char* arg : {"--help", "-h", "--hel", "--version", "-v", "-vh", "-vvh"}) {
    std::vector<std::string> with_arg = pieces;
    with_arg.push_back(std::string("'") + arg + "'");
    expectError({arg,
                 (std::string("eal:\n  extra_args: [--vdev=net_null0, '") + arg + "']\n").c_str(),
                 2, "eal.extra_args[1]", with_arg});
  }
  expectError({"log-level help",
               "eal:\n  extra_args: [--log-level=help]\n",
               2,
               "eal.extra_args[0]",
               {"'--log-level=help'", "prints DPDK's log types and exits"}});
  expectError({"log-level help, abbreviated",
               "eal:\n  extra_args:\n    - --lo=help\n",
               3,
               "eal.extra_args[0]",
               {"exits"}});
  expectError({"log-level help as the next argument",
               "eal:\n  extra_args:\n    - --log-level\n    - help\n",
               4,
               "eal.extra_args[1]",
               {"'--log-level help'", "exits"}});
  expectError({"help exits",
               "eal:\n  extra_args: [--help]\n",
               2,
               "eal.extra_args[0]",
               {"'--help' makes DPDK print its usage and exit the process"}});
}

TEST(ConfigErrors, EalArgumentsThatConfigureAreAccepted) {
  // -d, -a and -n take a value, so the "h" of "-dh", "-ahost" or "-nvh" is in that value.
  const Status s = parseError(
      "eal:\n  extra_args: [--vdev=net_null0, -d, librte_x.so, -dh, -ahost, -nvh, --log-level, "
      "'lib.eal:debug', --log-level=8, --huge-dir=/mnt/h, help, --, --help-me-not]\n");
  EXPECT_TRUE(s.ok()) << s.message();
}

// Found by fuzzing: a string that is not UTF-8 was accepted, and toYaml() wrote it
// back changed (the emitter replaces such bytes), so validate() saw another config.
// A NUL or other control byte would silently cut a path or an EAL argument short.
TEST(ConfigErrors, StringsArePrintableUtf8) {
  const std::vector<std::string> pieces = {"expected printable UTF-8 text"};
  expectError({"byte that is not UTF-8",
               "eal:\n  extra_args: [\"--vdev=a\xe5\x30\"]\n",
               2,
               "eal.extra_args[0]",
               {"expected printable UTF-8 text", "byte 0xe5 at offset 8"}});
  expectError({"NUL escape in a path",
               "topology:\n  xml_file: \"/etc/t.xml\\0.bak\"\n",
               2,
               "topology.xml_file",
               {"expected printable UTF-8 text", "control character 0x00"}});
  expectError({"tab in a device name",
               "fabric:\n  verbs:\n    devices: [\"mlx\\t0\"]\n",
               3,
               "fabric.verbs.devices[0]",
               {"control character 0x09 at offset 3"}});
  expectError({"overlong encoding",
               "bootstrap:\n  advertise_host: \"\xc0\xae\"\n",
               2,
               "bootstrap.advertise_host",
               {"not UTF-8"}});
  const Status ok =
      parseError("fabric:\n  soft:\n    shm_dir: \"/dev/shm/\u00e9t\u00e9 \U0001F600\"\n");
  EXPECT_TRUE(ok.ok()) << ok.message();
}

// A path that names a FIFO made loadFile() block in open() until a writer came.
// Anything but a regular file is refused before a byte is read.
TEST(ConfigErrors, LoadFileRefusesWhatIsNotARegularFile) {
  const std::string dir = ::testing::TempDir() + "tent-config-fifo-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string fifo = dir + "/tent.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto r = loadFile(fifo);
  unlink(fifo.c_str());
  rmdir(dir.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_EQ(r.status().message(),
            "config file '" + fifo + "' is a FIFO; it must be a regular file");
  auto device = loadFile("/dev/null");
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("'/dev/null' is a character device; it must be a"),
            std::string::npos)
      << device.status().message();
}

TEST(ConfigErrors, LoadFileNamesTheFile) {
  auto missing = loadFile("/nonexistent/dir/tent.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/tent.yaml"), std::string::npos);
  auto dir = loadFile("/tmp");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kIoError);
  EXPECT_NE(dir.status().message().find("is a directory; it must be a regular file"),
            std::string::npos)
      << dir.status().message();
}

// One error per run: the first in the reference's key order (ring_size is read
// before burst), whatever the order in the file.
TEST(ConfigErrors, ReportsTheFirstErrorInKeyOrder) {
  const Status s = parseError("workers:\n  burst: 0\n  ring_size: 3\n");
  EXPECT_EQ(s.message(),
            "tent.yaml:3: workers.ring_size: expected a power of two in [64, 1048576], got '3'");
}

TEST(ConfigErrors, ReplacedKeyNamesItsReplacement) {
  expectError({"peer_dead_timeout_ms became retry_budget_ms",
               "fabric:\n  soft:\n    peer_dead_timeout_ms: 200\n",
               3,
               "fabric.soft.peer_dead_timeout_ms",
               {"replaced by fabric.soft.retry_budget_ms"}});
  // Never read by the engine (issue 13): refused, pointing at what bounds a pass.
  expectError({"post_batch was removed",
               "workers:\n  post_batch: 32\n",
               2,
               "workers.post_batch",
               {"replaced by workers.burst"}});
}

// metadata (issue 25): each bad value names its key, line and what is allowed.
TEST(ConfigErrors, MetadataKeys) {
  expectError({"unknown backend", "metadata:\n  backend: zookeeper\n", 2, "metadata.backend",
               {"p2p", "etcd", "zookeeper"}});
  expectError({"etcd without endpoints", "metadata:\n  backend: etcd\n", 2, "metadata.backend",
               {"metadata.etcd.endpoints"}});
  expectError({"endpoint without port",
               "metadata:\n  backend: etcd\n  etcd:\n    endpoints: [\"a:1\", \"b\"]\n", 4,
               "metadata.etcd.endpoints[1]", {"host:port of an etcd member", "'b'"}});
  expectError({"port 0", "metadata:\n  etcd:\n    endpoints: [\"h:0\"]\n", 3,
               "metadata.etcd.endpoints[0]", {"port in [1, 65535]"}});
  expectError({"duplicate endpoint", "metadata:\n  etcd:\n    endpoints: [\"h:1\", \"h:1\"]\n",
               3, "metadata.etcd.endpoints[1]", {"duplicate endpoint 'h:1'", "endpoints[0]"}});
  expectError({"prefix without slash", "metadata:\n  etcd:\n    prefix: tent\n", 3,
               "metadata.etcd.prefix", {"starting with '/'"}});
  expectError({"ttl too short", "metadata:\n  etcd:\n    lease_ttl_s: 1\n", 3,
               "metadata.etcd.lease_ttl_s", {"[2, 3600]"}});
  expectError({"retry order",
               "metadata:\n  etcd:\n    retry_initial_ms: 900\n    retry_max_ms: 800\n", 3,
               "metadata.etcd.retry_initial_ms", {"must not exceed retry_max_ms (800)"}});
  expectError({"user without password", "metadata:\n  etcd:\n    user: root\n", 3,
               "metadata.etcd.user", {"password_file"}});
  expectError({"cert without key", "metadata:\n  etcd:\n    tls:\n      cert_file: /c\n", 4,
               "metadata.etcd.tls.cert_file", {"key_file"}});
  expectError({"name with p2p", "metadata:\n  name: node-a\n", 2, "metadata.name",
               {"backend: etcd"}});
  expectError({"name with a slash", "metadata:\n  backend: etcd\n  name: a/b\n", 3,
               "metadata.name", {"without spaces or '/'"}});
}

}  // namespace
}  // namespace tent::config
