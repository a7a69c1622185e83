// Discovery: what Topology reads from the hwloc XML test topologies, the live machine,
// and the load errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "config/config.h"
#include "tests/topology/test_data.h"
#include "topology/topology.h"

namespace tent::topology {
namespace {

using testing::dataFile;

Topology load(const std::string& name) {
  auto t = Topology::loadXml(dataFile(name));
  EXPECT_TRUE(t.ok()) << t.status().toString();
  return t.ok() ? std::move(t).value() : Topology();
}

std::vector<std::string> namesOf(const std::vector<PciDevice>& devices) {
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(d.name);
  return names;
}

std::vector<std::string> pcisOf(const std::vector<PciDevice>& devices) {
  std::vector<std::string> pcis;
  for (const auto& d : devices) pcis.push_back(d.pci);
  return pcis;
}

std::string writeTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(TopologyLoad, OneNumaMachineWithoutNic) {
  Topology t = load("one_numa_no_nic.xml");
  ASSERT_EQ(t.numaNodes().size(), 1u);
  EXPECT_EQ(t.numaNodes()[0].id, 0);
  EXPECT_EQ(t.numaNodes()[0].cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(t.rdmaDevices().empty());  // the Ethernet NIC is no RDMA device
  EXPECT_TRUE(t.gpus().empty());         // the BMC display adapter is no GPU
  ASSERT_EQ(t.cores().size(), 4u);
  EXPECT_EQ(t.cores()[0].cpus, (std::vector<int>{0, 4}));
  EXPECT_EQ(t.cores()[0].numa_node, 0);
  EXPECT_EQ(t.source(), dataFile("one_numa_no_nic.xml"));
  EXPECT_EQ(t.numaOfCpu(5), 0);
  EXPECT_EQ(t.numaOfCpu(8), -1);
  EXPECT_TRUE(t.cpusOfNuma(1).empty());
}

TEST(TopologyLoad, TwoSocketNumaAndCores) {
  Topology t = load("two_socket.xml");
  ASSERT_EQ(t.numaNodes().size(), 2u);
  EXPECT_EQ(t.cpusOfNuma(0), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(t.cpusOfNuma(1), (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_EQ(t.numaOfCpu(12), 1);
  ASSERT_EQ(t.cores().size(), 8u);
  EXPECT_EQ(t.cores()[4].cpus, (std::vector<int>{4, 12}));
  EXPECT_EQ(t.cores()[4].numa_node, 1);
}

TEST(TopologyLoad, TwoSocketRdmaDevicesSortedByPciWithPaths) {
  Topology t = load("two_socket.xml");
  const auto& nics = t.rdmaDevices();
  EXPECT_EQ(namesOf(nics), (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
  EXPECT_EQ(pcisOf(nics), (std::vector<std::string>{"0000:04:00.0", "0000:05:00.0", "0000:88:00.0",
                                                    "0000:88:00.1"}));
  ASSERT_EQ(nics.size(), 4u);
  EXPECT_EQ(nics[0].numa_node, 0);
  EXPECT_EQ(nics[1].numa_node, 0);
  EXPECT_EQ(nics[2].numa_node, 1);
  EXPECT_EQ(nics[3].numa_node, 1);
  EXPECT_EQ(nics[0].pcie_path, (std::vector<std::string>{"pci0000:00", "0000:00:01.0",
                                                         "0000:01:00.0", "0000:02:01.0"}));
  EXPECT_EQ(nics[1].pcie_path, (std::vector<std::string>{"pci0000:00", "0000:00:02.0"}));
  EXPECT_EQ(nics[3].pcie_path, (std::vector<std::string>{"pci0000:80", "0000:80:02.0",
                                                         "0000:86:00.0", "0000:87:00.0"}));
}

TEST(TopologyLoad, TwoSocketGpusFromCudaDevices) {
  Topology t = load("two_socket.xml");
  const auto& gpus = t.gpus();
  EXPECT_EQ(namesOf(gpus), (std::vector<std::string>{"cuda0", "cuda1", "cuda2"}));
  EXPECT_EQ(pcisOf(gpus),
            (std::vector<std::string>{"0000:03:00.0", "0000:83:00.0", "0000:84:00.0"}));
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].numa_node, 0);
  EXPECT_EQ(gpus[2].numa_node, 1);
  EXPECT_EQ(gpus[0].pcie_path, (std::vector<std::string>{"pci0000:00", "0000:00:01.0",
                                                         "0000:01:00.0", "0000:02:00.0"}));
}

TEST(TopologyLoad, EightGpuNode) {
  Topology t = load("eight_gpu_node.xml");
  ASSERT_EQ(t.rdmaDevices().size(), 8u);
  ASSERT_EQ(t.gpus().size(), 8u);  // the BMC display (card0) is left out
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(t.rdmaDevices()[k].name, "mlx5_" + std::to_string(k));
    EXPECT_EQ(t.gpus()[k].name, "cuda" + std::to_string(k));
    EXPECT_EQ(t.rdmaDevices()[k].numa_node, k < 4 ? 0 : 1);
    EXPECT_EQ(t.gpus()[k].numa_node, k < 4 ? 0 : 1);
  }
  EXPECT_EQ(t.cores().size(), 16u);
  EXPECT_EQ(t.cpusOfNuma(1).size(), 16u);
  EXPECT_EQ(t.numaOfCpu(24), 1);
}

TEST(TopologyLoad, GpuWithoutCudaDeviceNamedByManagementDevice) {
  Topology t = load("two_numa_nvml_gpu.xml");
  ASSERT_EQ(t.gpus().size(), 1u);  // the NVIDIA GPU, not the ASPEED display
  EXPECT_EQ(t.gpus()[0].name, "nvml0");
  EXPECT_EQ(t.gpus()[0].pci, "0000:43:00.0");
  EXPECT_EQ(t.gpus()[0].numa_node, 1);
  ASSERT_EQ(t.rdmaDevices().size(), 1u);
  EXPECT_EQ(t.rdmaDevices()[0].numa_node, 0);
}

TEST(TopologyLoad, XmlBufferEqualsFile) {
  std::ifstream in(dataFile("two_socket.xml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto t = Topology::loadXmlBuffer(text, "inline");
  ASSERT_TRUE(t.ok()) << t.status().toString();
  EXPECT_EQ(t->source(), "inline");
  EXPECT_EQ(t->rdmaDevices().size(), 4u);
  EXPECT_EQ(t->gpus().size(), 3u);
}

TEST(TopologyLoad, ConfigSelectsXmlOrLive) {
  config::TopologyConfig cfg;
  cfg.xml_file = dataFile("eight_gpu_node.xml");
  auto xml = Topology::load(cfg);
  ASSERT_TRUE(xml.ok()) << xml.status().toString();
  EXPECT_EQ(xml->gpus().size(), 8u);
  cfg.xml_file.clear();
  auto live = Topology::load(cfg);
  ASSERT_TRUE(live.ok()) << live.status().toString();
  EXPECT_EQ(live->source(), "live");
}

TEST(TopologyLoad, LiveMachineHasNumaNodesAndCores) {
  auto t = Topology::loadLive();
  ASSERT_TRUE(t.ok()) << t.status().toString();
  ASSERT_FALSE(t->numaNodes().empty());
  ASSERT_FALSE(t->cores().empty());
  for (const auto& core : t->cores())
    for (int cpu : core.cpus) EXPECT_GE(t->numaOfCpu(cpu), 0) << "cpu " << cpu;
}

TEST(TopologyLoadErrors, MissingFile) {
  auto t = Topology::loadXml(dataFile("no_such_file.xml"));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("no_such_file.xml"), std::string::npos);
  EXPECT_NE(t.status().message().find("No such file"), std::string::npos);
}

// topology.xml_file names a regular file of bounded size: /dev/zero (which a plain
// read never finishes, growing to gigabytes) and a FIFO (which blocks for a writer)
// are refused at once, naming the key and the path.
TEST(TopologyLoadErrors, NotARegularFile) {
  config::TopologyConfig cfg;
  cfg.xml_file = "/dev/zero";
  auto zero = Topology::load(cfg);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(),
            "topology.xml_file '/dev/zero' is a character device; it must be a regular file");
  const std::string fifo = ::testing::TempDir() + "tent-topology-fifo-" + std::to_string(getpid());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  cfg.xml_file = fifo;
  auto f = Topology::load(cfg);
  unlink(fifo.c_str());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("topology.xml_file '" + fifo + "' is a FIFO"),
            std::string::npos)
      << f.status().message();
}

TEST(TopologyLoadErrors, NotXml) {
  auto t = Topology::loadXml(writeTemp("garbage.xml", "this is not xml <"));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("garbage.xml"), std::string::npos);
}

TEST(TopologyLoadErrors, BrokenXml) {
  std::string text =
      "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
      "  <object type=\"Machine\" cpuset=\"0x1\"><object type=\"NUMANode\" os_index=\"0\"\n";
  auto t = Topology::loadXml(writeTemp("broken.xml", text));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("broken.xml"), std::string::npos);
}

TEST(TopologyLoadErrors, CommentsInsideTheTopology) {
  std::ifstream in(dataFile("two_socket.xml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.insert(text.find("<object type=\"Package\" os_index=\"1\""), "<!-- socket 1 -->\n");
  auto t = Topology::loadXmlBuffer(text, "commented.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("comments"), std::string::npos) << t.status().message();
}

TEST(TopologyLoadErrors, EmptyFile) {
  auto t = Topology::loadXml(writeTemp("empty.xml", ""));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

TEST(TopologyLoadErrors, NoNumaNode) {
  std::string text =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
      "<topology version=\"2.0\">\n"
      "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000001\" "
      "complete_cpuset=\"0x00000001\" allowed_cpuset=\"0x00000001\" nodeset=\"0x00000001\" "
      "complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\">\n"
      "    <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" "
      "complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\"/>\n"
      "  </object>\n</topology>\n";
  auto t = Topology::loadXml(writeTemp("no_numa.xml", text));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("no NUMA node"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace tent::topology
