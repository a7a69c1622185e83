// `lcores: auto`: the layout from the topology, the devices and the allowed CPUs.
#include "topology/lcore_auto.h"

#include <algorithm>
#include <deque>
#include <map>

#include "topology/placement.h"

namespace tent::topology {
namespace {

using config::AutoRails;

// The allowed CPUs per NUMA node, in the order lcores take them: one hardware
// thread of every core before the second thread of any, and cores from the last
// down, so CPU 0 (where housekeeping and most interrupts land) goes last.
class CpuPool {
 public:
  CpuPool(const Topology& topology, const std::vector<int>& allowed,
          std::vector<std::string>* notes) {
    std::map<int, std::vector<std::pair<size_t, int>>> ranked;  // node -> (thread rank, cpu)
    std::vector<int> known;
    for (auto c = topology.cores().rbegin(); c != topology.cores().rend(); ++c) {
      const CpuCore& core = *c;
      size_t rank = 0;
      for (int cpu : core.cpus) {
        known.push_back(cpu);
        if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) continue;
        ranked[core.numa_node].push_back({rank++, cpu});
      }
    }
    for (auto& [node, cpus] : ranked) {
      std::stable_sort(cpus.begin(), cpus.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& entry : cpus) free_[node].push_back(entry.second);
    }
    std::vector<int> unknown;
    std::sort(known.begin(), known.end());
    for (int cpu : allowed)
      if (!std::binary_search(known.begin(), known.end(), cpu)) unknown.push_back(cpu);
    if (!unknown.empty()) {
      notes->push_back("allowed CPUs " + formatCpuList(unknown) + " are not in the topology (" +
                       topology.source() + "): not used");
    }
  }

  size_t size() const {
    size_t n = 0;
    for (const auto& [node, cpus] : free_) n += cpus.size();
    return n;
  }

  // A free CPU on `node`, else on the node with the most free CPUs (lowest id on a
  // tie); -1 when none is left. *got_node: the node it came from.
  int take(int node, int* got_node) {
    auto it = free_.find(node);
    if (it == free_.end() || it->second.empty()) {
      it = free_.end();
      for (auto n = free_.begin(); n != free_.end(); ++n) {
        if (!n->second.empty() && (it == free_.end() || n->second.size() > it->second.size()))
          it = n;
      }
    }
    if (it == free_.end()) return -1;
    const int cpu = it->second.front();
    it->second.pop_front();
    *got_node = it->first;
    return cpu;
  }

  std::vector<int> remaining() const {
    std::vector<int> out;
    for (const auto& [node, cpus] : free_) out.insert(out.end(), cpus.begin(), cpus.end());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::map<int, std::deque<int>> free_;
};

std::string numaText(int node) {
  return node >= 0 ? "NUMA " + std::to_string(node) : "an unknown NUMA node";
}

// Devices by NUMA node (-1: unknown), nodes in id order with -1 last.
std::vector<std::pair<int, std::vector<const RailDevice*>>> devicesByNode(
    const std::vector<RailDevice>& devices) {
  std::map<int, std::vector<const RailDevice*>> by_node;
  for (const RailDevice& d : devices) by_node[d.numa_node].push_back(&d);
  std::vector<std::pair<int, std::vector<const RailDevice*>>> out;
  for (auto& [node, list] : by_node)
    if (node >= 0) out.emplace_back(node, std::move(list));
  if (by_node.count(-1) != 0) out.emplace_back(-1, std::move(by_node[-1]));
  return out;
}

size_t railLcores(AutoRails rails, size_t devices, size_t nodes) {
  if (rails == AutoRails::kDedicated) return devices;
  if (rails == AutoRails::kNuma) return nodes;
  return 0;
}

std::string railText(AutoRails rails, size_t count) {
  if (rails == AutoRails::kShared) return "rail pollers on the background lcores";
  return std::to_string(count) +
         (rails == AutoRails::kDedicated ? " dedicated rail lcores" : " per-NUMA rail lcores");
}

struct Planner {
  const std::vector<RailDevice>& devices;
  const config::LcoreAutoConfig& knobs;
  CpuPool& pool;
  AutoLayout& out;

  // Pins a new lcore near `node` running `pollers`.
  AutoLcore& add(int node, std::vector<config::PollerSpec> pollers, std::string role) {
    AutoLcore l;
    l.spec.cpu = pool.take(node, &l.numa_node);
    l.spec.pollers = std::move(pollers);
    l.spec.idle = knobs.idle;
    l.role = std::move(role);
    if (node != l.numa_node) {
      out.notes.push_back(l.role + " (devices on " + numaText(node) + ") runs on CPU " +
                          std::to_string(l.spec.cpu) + " of " + numaText(l.numa_node) +
                          ": no allowed CPU was left on its node");
    }
    out.lcores.push_back(std::move(l));
    return out.lcores.back();
  }

  static config::PollerSpec rail(const RailDevice& d) {
    return {config::PollerKind::kRail, d.name};
  }

  void railLcores(const std::vector<std::pair<int, std::vector<const RailDevice*>>>& nodes) {
    if (out.rails == AutoRails::kDedicated) {
      for (const RailDevice& d : devices) add(d.numa_node, {rail(d)}, "rail " + d.name);
    } else if (out.rails == AutoRails::kNuma) {
      for (const auto& [node, list] : nodes) {
        std::vector<config::PollerSpec> pollers;
        for (const RailDevice* d : list) pollers.push_back(rail(*d));
        add(node, std::move(pollers), "rail " + (node >= 0 ? numaText(node) : "(unknown NUMA)"));
      }
    }
  }

  // Background lcores round-robin over the devices' nodes, most devices first.
  void backgroundLcores(std::vector<std::pair<int, std::vector<const RailDevice*>>> nodes) {
    std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
      return a.second.size() > b.second.size();
    });
    const size_t first = out.lcores.size();
    for (uint32_t i = 0; i < knobs.background_lcores; ++i) {
      const int node = nodes.empty() ? -1 : nodes[i % nodes.size()].first;
      add(node, {{config::PollerKind::kBackground, ""}}, "background");
    }
    if (out.rails == AutoRails::kShared) shareRails(first);
  }

  // rails: shared - each device's rail poller on the background lcore of its node
  // with the fewest rail pollers (any background lcore when its node has none).
  void shareRails(size_t first) {
    for (const RailDevice& d : devices) {
      AutoLcore* best = nullptr;
      for (int pass = 0; pass < 2 && best == nullptr; ++pass) {
        for (size_t i = first; i < out.lcores.size(); ++i) {
          AutoLcore& l = out.lcores[i];
          if (pass == 0 && l.numa_node != d.numa_node) continue;
          if (best == nullptr || l.spec.pollers.size() < best->spec.pollers.size()) best = &l;
        }
      }
      if (best == nullptr) continue;  // no background lcore: the planner never asks for none
      best->spec.pollers.push_back(rail(d));
      best->role += (best->role == "background" ? " + rail " : ",") + d.name;
    }
  }
};

}  // namespace

std::vector<config::LcoreSpec> AutoLayout::specs() const {
  std::vector<config::LcoreSpec> out;
  for (const AutoLcore& l : lcores) out.push_back(l.spec);
  return out;
}

Result<AutoLayout> planAutoLcores(const Topology& topology, const std::vector<RailDevice>& devices,
                                  const std::vector<int>& allowed_in,
                                  const std::string& allowed_text,
                                  const config::LcoreAutoConfig& knobs) {
  AutoLayout out;
  out.allowed = allowed_in;
  std::sort(out.allowed.begin(), out.allowed.end());
  out.allowed.erase(std::unique(out.allowed.begin(), out.allowed.end()), out.allowed.end());
  CpuPool pool(topology, out.allowed, &out.notes);
  const auto nodes = devicesByNode(devices);
  const size_t usable = pool.size();
  auto need = [&](AutoRails r) {
    return railLcores(r, devices.size(), nodes.size()) + knobs.background_lcores +
           knobs.reserve_cpus;
  };
  out.rails = knobs.rails;
  if (knobs.rails == AutoRails::kAuto) {
    out.rails = AutoRails::kShared;
    for (AutoRails r : {AutoRails::kDedicated, AutoRails::kNuma}) {
      if (need(r) <= usable) {
        out.rails = r;
        break;
      }
    }
  }
  if (need(out.rails) > usable) {
    const size_t rails = railLcores(out.rails, devices.size(), nodes.size());
    return Status::ResourceExhausted(
        "needs " + std::to_string(need(out.rails)) + " CPUs (" + railText(out.rails, rails) + ", " +
        std::to_string(knobs.background_lcores) + " background, " +
        std::to_string(knobs.reserve_cpus) + " reserved for the application) but the process " +
        "may use " + std::to_string(usable) + ": " + allowed_text + "; " +
        (knobs.rails == AutoRails::kAuto || knobs.rails == AutoRails::kShared
             ? ""
             : "set lcore_auto.rails to numa or shared, ") +
        "lower lcore_auto.background_lcores or lcore_auto.reserve_cpus, or give the process " +
        "more CPUs");
  }
  Planner planner{devices, knobs, pool, out};
  planner.railLcores(nodes);
  planner.backgroundLcores(nodes);
  out.free_cpus = pool.remaining();
  return out;
}

std::vector<RailDevice> fabricDevices(const config::Config& config, const Topology& topology) {
  std::vector<RailDevice> devices;
  for (const PciDevice& nic : topology.rdmaDevices())
    devices.push_back({nic.name, nic.numa_node, nic.pci, nic.pcie_path});
  const config::FabricConfig& f = config.fabric;
  if (f.provider == config::FabricProvider::kTcp) {
    // tcp devices are sockets, not PCIe functions: named by the config (or tcp0).
    devices.clear();
    for (const config::TcpDevice& d : f.tcp.devices)
      devices.push_back({d.name, d.numa_node, {}, {}});
    if (devices.empty()) devices.push_back({"tcp0", 0, {}, {}});
  } else if (f.provider == config::FabricProvider::kVerbs && !f.verbs.devices.empty()) {
    std::vector<RailDevice> listed;
    for (const std::string& name : f.verbs.devices) {
      auto it = std::find_if(devices.begin(), devices.end(),
                             [&](const RailDevice& d) { return d.name == name; });
      listed.push_back(it != devices.end() ? *it : RailDevice{name, -1, {}, {}});
    }
    devices = std::move(listed);
  } else if (f.provider != config::FabricProvider::kVerbs && !f.soft.devices.empty() &&
             (f.provider == config::FabricProvider::kSoft || devices.empty())) {
    devices.clear();
    for (const config::SoftDevice& d : f.soft.devices)
      devices.push_back({d.name, d.numa_node, d.pci, {}});
  } else if (devices.empty() && f.provider != config::FabricProvider::kVerbs) {
    devices.push_back({"soft0", 0, {}, {}});  // the soft provider's default
  }
  // Placed as the engine places them: a PCI address found in the topology wins.
  const RailMap map = RailMap::build(devices, topology);
  std::vector<RailDevice> placed;
  for (uint32_t i = 0; i < map.deviceCount(); ++i) placed.push_back(map.device(i));
  return placed;
}

std::string summary(const AutoLayout& layout) {
  std::string text = "rails " + std::string(config::toString(layout.rails)) + ":";
  for (size_t k = 0; k < layout.lcores.size(); ++k) {
    const AutoLcore& l = layout.lcores[k];
    text += (k ? "; " : " ") + std::string("lcore ") + std::to_string(k) + " cpu " +
            std::to_string(l.spec.cpu) + " (" + numaText(l.numa_node) + ")";
    for (size_t p = 0; p < l.spec.pollers.size(); ++p)
      text += (p ? "," : " ") + config::toString(l.spec.pollers[p]);
  }
  return text + "; free for the application: " +
         (layout.free_cpus.empty() ? "none" : formatCpuList(layout.free_cpus));
}

std::string describeAllowed(const AllowedCpus& allowed) {
  std::string text = formatCpuList(allowed.cpus);
  if (allowed.cpuset.empty()) return text + " (affinity; no cgroup cpuset found)";
  return text + " (affinity " + formatCpuList(allowed.affinity) + ", cgroup cpuset " +
         formatCpuList(allowed.cpuset) + ")";
}

Result<AutoLayout> autoLcoreLayout(const config::Config& config) {
  const std::string prefix = config.source + ": lcores: auto: ";
  auto topology = Topology::load(config.topology);
  if (!topology.ok()) return topology.status().withContext(prefix + "topology");
  const AllowedCpus allowed = processAllowedCpus();
  auto layout = planAutoLcores(*topology, fabricDevices(config, *topology), allowed.cpus,
                               describeAllowed(allowed), config.lcore_auto);
  if (!layout.ok()) return Status(layout.status().code(), prefix + layout.status().message());
  return layout;
}

}  // namespace tent::topology
