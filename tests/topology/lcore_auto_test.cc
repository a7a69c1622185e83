// `lcores: auto` on the test topologies with several affinity masks: every CPU in
// the mask, one lcore per CPU, rails near their devices, disjoint masks give
// disjoint layouts, a mask on one NUMA node keeps everything there, and too few
// CPUs is an error that says how many are needed and which are allowed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/topology/test_data.h"
#include "topology/lcore_auto.h"
#include "topology/placement.h"

namespace tent::topology {
namespace {

using config::AutoRails;
using testing::dataFile;
using testing::railDevicesOf;

Topology load(const std::string& name) {
  auto t = Topology::loadXml(dataFile(name));
  EXPECT_TRUE(t.ok()) << t.status().toString();
  return t.ok() ? std::move(t).value() : Topology();
}

config::LcoreAutoConfig knobs(AutoRails rails = AutoRails::kAuto, uint32_t background = 1,
                              uint32_t reserve = 1) {
  config::LcoreAutoConfig k;
  k.rails = rails;
  k.background_lcores = background;
  k.reserve_cpus = reserve;
  return k;
}

std::vector<int> cpus(std::string_view list) {
  auto parsed = parseCpuList(list);
  EXPECT_TRUE(parsed.ok()) << parsed.status().toString();
  return parsed.ok() ? *parsed : std::vector<int>{};
}

Result<AutoLayout> plan(const Topology& t, std::string_view mask, config::LcoreAutoConfig k) {
  return planAutoLcores(t, railDevicesOf(t), cpus(mask), std::string(mask), k);
}

// The properties every layout has, whatever the knobs.
void expectSound(const Topology& t, const AutoLayout& l, const std::vector<int>& allowed,
                 const config::LcoreAutoConfig& k) {
  std::set<int> used;
  size_t background = 0;
  std::set<std::string> rails;
  for (const AutoLcore& lc : l.lcores) {
    EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), lc.spec.cpu))
        << "CPU " << lc.spec.cpu << " is outside the allowed set";
    EXPECT_TRUE(used.insert(lc.spec.cpu).second) << "CPU " << lc.spec.cpu << " used twice";
    EXPECT_EQ(lc.numa_node, t.numaOfCpu(lc.spec.cpu));
    for (const auto& p : lc.spec.pollers) {
      if (p.kind == config::PollerKind::kBackground) ++background;
      if (p.kind == config::PollerKind::kRail) {
        EXPECT_TRUE(rails.insert(p.device).second);
      }
    }
  }
  EXPECT_EQ(background, k.background_lcores);
  EXPECT_EQ(rails.size(), t.rdmaDevices().size()) << "every device has one rail poller";
  EXPECT_GE(l.free_cpus.size(), k.reserve_cpus);
}

TEST(LcoreAuto, WholeEightGpuNodeGetsADedicatedRailLcorePerNicOnItsNode) {
  const Topology t = load("eight_gpu_node.xml");
  auto l = plan(t, "0-31", knobs());
  ASSERT_TRUE(l.ok()) << l.status().toString();
  expectSound(t, *l, cpus("0-31"), knobs());
  EXPECT_EQ(l->rails, AutoRails::kDedicated);
  ASSERT_EQ(l->lcores.size(), 9u);
  for (size_t k = 0; k < 8; ++k) {
    const auto& lc = l->lcores[k];
    ASSERT_EQ(lc.spec.pollers.size(), 1u);
    const std::string dev = lc.spec.pollers[0].device;
    const auto& nic = *std::find_if(t.rdmaDevices().begin(), t.rdmaDevices().end(),
                                    [&](const PciDevice& d) { return d.name == dev; });
    EXPECT_EQ(lc.numa_node, nic.numa_node) << dev;
    EXPECT_LT(lc.spec.cpu, 16) << "one hardware thread per core before any sibling";
  }
  EXPECT_EQ(l->lcores[8].role, "background");
  EXPECT_TRUE(l->notes.empty());
}

// A launcher gives each of 8 ranks two cores (four hardware threads) of one socket.
TEST(LcoreAuto, EightRanksWithDisjointMasksGetDisjointCpusOnTheirNode) {
  const Topology t = load("eight_gpu_node.xml");
  std::set<int> taken;
  for (int rank = 0; rank < 8; ++rank) {
    const std::vector<int> mask = {2 * rank, 2 * rank + 1, 2 * rank + 16, 2 * rank + 17};
    const std::string text = formatCpuList(mask);
    auto l = planAutoLcores(t, railDevicesOf(t), mask, text, knobs());
    ASSERT_TRUE(l.ok()) << "rank " << rank << ": " << l.status().toString();
    expectSound(t, *l, mask, knobs());
    EXPECT_EQ(l->rails, AutoRails::kNuma) << "8 dedicated rails do not fit 3 CPUs";
    EXPECT_EQ(l->lcores.size(), 3u);
    const int node = t.numaOfCpu(mask[0]);
    for (const AutoLcore& lc : l->lcores) {
      EXPECT_TRUE(taken.insert(lc.spec.cpu).second)
          << "rank " << rank << " reuses CPU " << lc.spec.cpu;
      EXPECT_EQ(lc.numa_node, node) << "rank " << rank << ": the mask is on NUMA " << node;
    }
  }
  EXPECT_EQ(taken.size(), 24u);
}

TEST(LcoreAuto, MaskOnOneNumaNodeKeepsEverythingThere) {
  const Topology t = load("two_socket.xml");
  for (AutoRails rails : {AutoRails::kDedicated, AutoRails::kNuma, AutoRails::kShared}) {
    auto k = knobs(rails, 2);
    auto l = plan(t, "4-7,12-15", k);
    ASSERT_TRUE(l.ok()) << l.status().toString();
    expectSound(t, *l, cpus("4-7,12-15"), k);
    for (const AutoLcore& lc : l->lcores) EXPECT_EQ(lc.numa_node, 1) << lc.role;
    // mlx5_0 and mlx5_1 sit on NUMA 0: said, not hidden.
    if (rails != AutoRails::kShared) {
      EXPECT_FALSE(l->notes.empty());
    }
  }
}

TEST(LcoreAuto, RailModesOnTwoSockets) {
  const Topology t = load("two_socket.xml");
  auto numa = plan(t, "0-15", knobs(AutoRails::kNuma));
  ASSERT_TRUE(numa.ok());
  ASSERT_EQ(numa->lcores.size(), 3u);  // one per node with devices + background
  EXPECT_EQ(numa->lcores[0].numa_node, 0);
  EXPECT_EQ(numa->lcores[0].spec.pollers.size(), 2u);  // mlx5_0, mlx5_1
  EXPECT_EQ(numa->lcores[1].numa_node, 1);

  auto shared = plan(t, "0-15", knobs(AutoRails::kShared, 2));
  ASSERT_TRUE(shared.ok());
  ASSERT_EQ(shared->lcores.size(), 2u);
  for (const AutoLcore& lc : shared->lcores) {
    ASSERT_EQ(lc.spec.pollers.size(), 3u) << lc.role;  // background + its node's two rails
    EXPECT_EQ(lc.spec.pollers[0].kind, config::PollerKind::kBackground);
    for (size_t p = 1; p < 3; ++p) {
      const std::string& dev = lc.spec.pollers[p].device;
      const bool node0 = dev == "mlx5_0" || dev == "mlx5_1";
      EXPECT_EQ(lc.numa_node, node0 ? 0 : 1) << dev;
    }
  }
}

TEST(LcoreAuto, TooFewCpusSaysHowManyAreNeededAndWhichAreAllowed) {
  const Topology t = load("eight_gpu_node.xml");
  auto one = plan(t, "3", knobs());
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(one.status().message().find("needs 2 CPUs"), std::string::npos)
      << one.status().message();
  EXPECT_NE(one.status().message().find("may use 1: 3"), std::string::npos);

  auto dedicated = plan(t, "0-1,16-17", knobs(AutoRails::kDedicated));
  ASSERT_FALSE(dedicated.ok());
  const std::string& m = dedicated.status().message();
  EXPECT_NE(m.find("needs 10 CPUs (8 dedicated rail lcores, 1 background, 1 reserved"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("may use 4: 0-1,16-17"), std::string::npos) << m;
  EXPECT_NE(m.find("lcore_auto.rails"), std::string::npos) << m;

  EXPECT_FALSE(plan(t, "", knobs(AutoRails::kShared, 1, 0)).ok());
}

TEST(LcoreAuto, SiblingThreadsOnlyWhenCoresRunOut) {
  const Topology t = load("eight_gpu_node.xml");
  auto k = knobs(AutoRails::kShared, 2, 0);
  auto l = plan(t, "0,16", k);  // one core, both threads
  ASSERT_TRUE(l.ok()) << l.status().toString();
  EXPECT_EQ(l->lcores[0].spec.cpu, 0);
  EXPECT_EQ(l->lcores[1].spec.cpu, 16);
  auto spread = plan(t, "0-1,16-17", k);
  ASSERT_TRUE(spread.ok());
  // Both cores' first threads before either sibling; the last core first.
  EXPECT_EQ(spread->lcores[0].spec.cpu, 1);
  EXPECT_EQ(spread->lcores[1].spec.cpu, 0);
}

TEST(LcoreAuto, AllowedCpusOutsideTheTopologyAreNotUsed) {
  const Topology t = load("two_socket.xml");
  auto l = plan(t, "0-1,100", knobs());
  ASSERT_TRUE(l.ok()) << l.status().toString();
  for (const AutoLcore& lc : l->lcores) EXPECT_NE(lc.spec.cpu, 100);
  ASSERT_FALSE(l->notes.empty());
  EXPECT_NE(l->notes[0].find("100"), std::string::npos) << l->notes[0];
}

TEST(LcoreAuto, IdlePolicyOfTheKnobsOnEveryLcore) {
  const Topology t = load("two_socket.xml");
  auto k = knobs();
  k.idle.spin_polls = 12345;
  auto l = plan(t, "0-15", k);
  ASSERT_TRUE(l.ok());
  for (const auto& spec : l->specs()) EXPECT_EQ(spec.idle.spin_polls, 12345u);
}

TEST(LcoreAuto, FabricDevicesFollowTheProviders) {
  const Topology t = load("two_socket.xml");
  config::Config c;
  EXPECT_EQ(fabricDevices(c, t).size(), 4u);  // the topology's NICs
  c.fabric.provider = config::FabricProvider::kSoft;
  config::SoftDevice listed;
  listed.name = "soft7";
  listed.numa_node = 1;
  c.fabric.soft.devices = {listed};
  auto soft = fabricDevices(c, t);
  ASSERT_EQ(soft.size(), 1u);
  EXPECT_EQ(soft[0].name, "soft7");
  EXPECT_EQ(soft[0].numa_node, 1);
  c.fabric.provider = config::FabricProvider::kVerbs;
  c.fabric.verbs.devices = {"mlx5_3", "mlx5_9"};
  auto verbs = fabricDevices(c, t);
  ASSERT_EQ(verbs.size(), 2u);
  EXPECT_EQ(verbs[0].numa_node, 1);
  EXPECT_EQ(verbs[1].numa_node, -1);  // not in the topology
  c.fabric.provider = config::FabricProvider::kTcp;  // sockets: the config's, or tcp0
  auto tcp_default = fabricDevices(c, t);
  ASSERT_EQ(tcp_default.size(), 1u);
  EXPECT_EQ(tcp_default[0].name, "tcp0");
  config::TcpDevice tcp1;
  tcp1.name = "tcp1";
  tcp1.numa_node = 1;
  c.fabric.tcp.devices = {tcp1};
  auto tcp = fabricDevices(c, t);
  ASSERT_EQ(tcp.size(), 1u);
  EXPECT_EQ(tcp[0].name, "tcp1");
  EXPECT_EQ(tcp[0].numa_node, 1);

  const Topology none = load("one_numa_no_nic.xml");
  auto fallback = fabricDevices(config::Config{}, none);
  ASSERT_EQ(fallback.size(), 1u);
  EXPECT_EQ(fallback[0].name, "soft0");
}

}  // namespace
}  // namespace tent::topology
