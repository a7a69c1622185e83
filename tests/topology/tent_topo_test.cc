// tent-topo, run as a program: JSON on the live machine and on test topologies,
// the --human table, and its errors (one line on stderr, non-zero exit).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/topology/test_data.h"

namespace tent::topology {
namespace {

using testing::dataFile;
using Json = nlohmann::json;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

RunResult runTentTopo(const std::string& args) {
  static int counter = 0;
  std::string err_file = ::testing::TempDir() + "/tent_topo_stderr_" + std::to_string(++counter);
  std::string cmd = quote(TENT_TOPO_EXE) + " " + args + " 2>" + quote(err_file);
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

Json parse(const RunResult& r) {
  Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
  return j;
}

size_t lineCount(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// RDMA devices the kernel shows (rdma-core lists the same directory).
size_t kernelRdmaDevices() {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/sys/class/infiniband", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

Json names(std::initializer_list<const char*> list) {
  Json j = Json::array();
  for (const char* s : list) j.push_back(s);
  return j;
}

TEST(TentTopo, LiveMachine) {
  RunResult r = runTentTopo("");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = parse(r);
  ASSERT_TRUE(j["devices"].is_array());
  // On this machine (no NIC) the list is empty; elsewhere it matches the kernel's.
  EXPECT_EQ(j["devices"].size(), kernelRdmaDevices());
  EXPECT_TRUE(j["gpus"].is_array());
  ASSERT_TRUE(j["locations"].is_object());
  EXPECT_TRUE(j["locations"].contains("*"));
  EXPECT_TRUE(
      j["locations"].contains("cpu:" + std::to_string(j["numa_nodes"][0]["id"].get<int>())));
  EXPECT_EQ(j["source"], "live");
}

TEST(TentTopo, TwoSocketJson) {
  RunResult r = runTentTopo("--topology=" + quote(dataFile("two_socket.xml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  Json j = parse(r);
  Json devices = Json::parse(R"([
    {"name":"mlx5_0","index":0,"pci":"0000:04:00.0","numa":0},
    {"name":"mlx5_1","index":1,"pci":"0000:05:00.0","numa":0},
    {"name":"mlx5_2","index":2,"pci":"0000:88:00.0","numa":1},
    {"name":"mlx5_3","index":3,"pci":"0000:88:00.1","numa":1}])");
  EXPECT_EQ(j["devices"], devices);
  Json gpus = Json::parse(R"([
    {"name":"cuda0","pci":"0000:03:00.0","numa":0},
    {"name":"cuda1","pci":"0000:83:00.0","numa":1},
    {"name":"cuda2","pci":"0000:84:00.0","numa":1}])");
  EXPECT_EQ(j["gpus"], gpus);
  const Json& loc = j["locations"];
  EXPECT_EQ(loc.size(), 6u);
  EXPECT_EQ(loc["*"]["rank0"], names({"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
  EXPECT_EQ(loc["cpu:1"]["rank0"], names({"mlx5_2", "mlx5_3"}));
  EXPECT_EQ(loc["cpu:1"]["rank2"], names({"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(loc["cuda:0"]["rank0"], names({"mlx5_0"}));
  EXPECT_EQ(loc["cuda:0"]["rank1"], names({"mlx5_1"}));
  EXPECT_EQ(loc["cuda:0"]["first_rank"], 0);
  EXPECT_EQ(loc["cuda:1"]["rank0"], Json::array());
  EXPECT_EQ(loc["cuda:1"]["rank1"], names({"mlx5_2", "mlx5_3"}));
  EXPECT_EQ(loc["cuda:1"]["first_rank"], 1);
}

TEST(TentTopo, EightGpuNodeJson) {
  RunResult r = runTentTopo("--topology " + quote(dataFile("eight_gpu_node.xml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = parse(r);
  EXPECT_EQ(j["devices"].size(), 8u);
  EXPECT_EQ(j["gpus"].size(), 8u);
  EXPECT_EQ(j["locations"]["cuda:5"]["rank0"], names({"mlx5_5"}));
  EXPECT_EQ(j["locations"]["cuda:5"]["rank1"], names({"mlx5_4", "mlx5_6", "mlx5_7"}));
}

TEST(TentTopo, NoNicTopologyHasEmptyLists) {
  RunResult r = runTentTopo("--topology=" + quote(dataFile("one_numa_no_nic.xml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json j = parse(r);
  EXPECT_EQ(j["devices"], Json::array());
  EXPECT_EQ(j["gpus"], Json::array());
  EXPECT_EQ(j["locations"]["cpu:0"]["first_rank"], -1);
}

TEST(TentTopo, HumanTable) {
  RunResult r = runTentTopo("--human --topology=" + quote(dataFile("two_numa_nvml_gpu.xml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mlx5_0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nvml0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Rail map"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('{'), std::string::npos) << "human output is not JSON";
}

// ---- lcores: auto, and what-if masks ----------------------------------------------

TEST(TentTopoLcores, WholeNodeByDefaultForAnXml) {
  RunResult r = runTentTopo("--topology=" + quote(dataFile("eight_gpu_node.xml")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json a = parse(r)["lcores_auto"];
  EXPECT_EQ(a["rails"], "dedicated");
  EXPECT_EQ(a["lcores"].size(), 9u);
  EXPECT_EQ(a["lcores"][0]["pollers"], names({"rail:mlx5_0"}));
  EXPECT_EQ(a["lcores"][0]["numa"], 0);
  EXPECT_EQ(a["lcores"][8]["pollers"], names({"background"}));
}

TEST(TentTopoLcores, WhatIfARanksMask) {
  RunResult r =
      runTentTopo("--topology=" + quote(dataFile("eight_gpu_node.xml")) + " --cpus=0-1,16-17");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json a = parse(r)["lcores_auto"];
  EXPECT_EQ(a["allowed_cpus"].get<std::string>().rfind("0-1,16-17", 0), 0u) << a;
  EXPECT_EQ(a["rails"], "numa");
  ASSERT_EQ(a["lcores"].size(), 3u);
  for (const Json& l : a["lcores"]) {
    EXPECT_EQ(l["numa"], 0) << l;
    const int cpu = l["cpu"];
    EXPECT_TRUE(cpu == 0 || cpu == 1 || cpu == 16 || cpu == 17) << cpu;
  }
  EXPECT_EQ(a["free_cpus"].get<std::string>().size(), 2u);  // one CPU, e.g. "17"
}

TEST(TentTopoLcores, TooFewCpusIsPrintedAsTheError) {
  RunResult r = runTentTopo("--topology=" + quote(dataFile("two_socket.xml")) +
                            " --cpus=5 --rails=dedicated");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json a = parse(r)["lcores_auto"];
  ASSERT_TRUE(a.contains("error")) << a;
  EXPECT_NE(a["error"].get<std::string>().find("needs 6 CPUs"), std::string::npos) << a;
  EXPECT_FALSE(a.contains("lcores"));
}

TEST(TentTopoLcores, KnobsFromAConfigAndFlags) {
  const std::string path = ::testing::TempDir() + "/tent_topo_auto.yaml";
  std::ofstream(path) << "fabric:\n  provider: soft\n  soft:\n    devices:\n"
                         "      - {name: softA, numa_node: 1}\n"
                         "lcores: auto\nlcore_auto: {background_lcores: 2, rails: shared}\n";
  RunResult r = runTentTopo("--topology=" + quote(dataFile("two_socket.xml")) +
                            " --config=" + quote(path) + " --reserve_cpus=0 --human");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("lcores: auto"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rail:softA"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rails: shared"), std::string::npos) << r.out;
  RunResult j =
      runTentTopo("--topology=" + quote(dataFile("two_socket.xml")) + " --config=" + quote(path));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const Json a = parse(j)["lcores_auto"];
  ASSERT_EQ(a["lcores"].size(), 2u);
  EXPECT_EQ(a["lcores"][0]["numa"], 1);  // softA's node first
  EXPECT_EQ(a["lcores"][0]["pollers"], names({"background", "rail:softA"}));
}

TEST(TentTopoLcores, BadFlagsAreUsageErrors) {
  for (const char* args : {"--cpus=x", "--cpus=3-1", "--rails=private", "--background_lcores=0",
                           "--reserve_cpus=lots", "--cpus"}) {
    RunResult r = runTentTopo(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(lineCount(r.err), 1u) << args << ": " << r.err;
  }
  RunResult missing = runTentTopo("--config=/nonexistent/tent.yaml");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/tent.yaml"), std::string::npos) << missing.err;
}

TEST(TentTopoErrors, MissingFile) {
  RunResult r = runTentTopo("--topology=/nonexistent/topo.xml");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(lineCount(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/topo.xml"), std::string::npos) << r.err;
}

TEST(TentTopoErrors, InvalidXml) {
  std::string path = ::testing::TempDir() + "/tent_topo_invalid.xml";
  std::ofstream(path) << "<topology version=\"2.0\"><object type=\"NUMANode\" <<<\n";
  RunResult r = runTentTopo("--topology=" + quote(path));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lineCount(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("tent_topo_invalid.xml"), std::string::npos) << r.err;
}

TEST(TentTopoErrors, NoNumaNode) {
  std::string path = ::testing::TempDir() + "/tent_topo_no_numa.xml";
  std::ofstream(path) << "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                         "<object type=\"Machine\" cpuset=\"0x1\"><object type=\"PU\" "
                         "os_index=\"0\" cpuset=\"0x1\"/></object></topology>\n";
  RunResult r = runTentTopo("--topology=" + quote(path));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lineCount(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("no NUMA node"), std::string::npos) << r.err;
}

TEST(TentTopoErrors, Usage) {
  for (const char* args : {"--bogus", "--topology=", "--topology", "extra"}) {
    RunResult r = runTentTopo(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(lineCount(r.err), 1u) << args << ": " << r.err;
    EXPECT_NE(r.err.find("usage"), std::string::npos) << r.err;
  }
  RunResult help = runTentTopo("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage"), std::string::npos);
}

}  // namespace
}  // namespace tent::topology
