// tent-topo: prints what tent sees of a machine (live, or an hwloc XML file) and the
// rail map it would use, as one JSON object or (--human) as tables.
//   exit 0: printed; 1: the topology could not be loaded; 2: usage error.
#include <algorithm>
#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "topology/placement.h"
#include "topology/rail_map.h"
#include "topology/topology.h"

namespace {

using tent::topology::RailDevice;
using tent::topology::RailMap;
using tent::topology::Topology;
using Json = nlohmann::ordered_json;

constexpr const char* kUsage = "usage: tent-topo [--topology=FILE.xml] [--human]";

struct Options {
  std::string xml_file;  // empty: live machine
  bool human = false;
};

// Returns an empty string when the arguments are fine, else the complaint.
std::string parseArgs(int argc, char** argv, Options* opts) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--human") {
      opts->human = true;
    } else if (arg.rfind("--topology=", 0) == 0) {
      opts->xml_file = std::string(arg.substr(11));
      if (opts->xml_file.empty()) return "--topology= needs a file name";
    } else if (arg == "--topology") {
      if (i + 1 >= argc) return "--topology needs a file name";
      opts->xml_file = argv[++i];
    } else {
      return "unknown argument '" + std::string(arg) + "'";
    }
  }
  return {};
}

// The rail devices as the topology shows them (the fabric may add soft devices later).
std::vector<RailDevice> topologyDevices(const Topology& topo) {
  std::vector<RailDevice> devices;
  for (const auto& nic : topo.rdmaDevices())
    devices.push_back({nic.name, nic.numa_node, nic.pci, nic.pcie_path});
  return devices;
}

Json rankNames(const RailMap& map, const std::vector<uint32_t>& indices) {
  Json names = Json::array();
  for (uint32_t i : indices) names.push_back(map.device(i).name);
  return names;
}

Json toJson(const Topology& topo, const RailMap& map) {
  Json out;
  out["source"] = topo.source();
  out["numa_nodes"] = Json::array();
  for (const auto& n : topo.numaNodes())
    out["numa_nodes"].push_back({{"id", n.id}, {"cpus", tent::topology::formatCpuList(n.cpus)}});
  out["devices"] = Json::array();
  for (uint32_t i = 0; i < map.deviceCount(); ++i) {
    const auto& d = map.device(i);
    out["devices"].push_back(
        {{"name", d.name}, {"index", i}, {"pci", d.pci}, {"numa", d.numa_node}});
  }
  out["gpus"] = Json::array();
  for (const auto& g : topo.gpus())
    out["gpus"].push_back({{"name", g.name}, {"pci", g.pci}, {"numa", g.numa_node}});
  Json locations = Json::object();
  for (uint32_t id = 0; id < map.locationCount(); ++id) {
    const auto& r = map.ranked(id);
    locations[map.locationName(id)] = {{"rank0", rankNames(map, r.rank[0])},
                                       {"rank1", rankNames(map, r.rank[1])},
                                       {"rank2", rankNames(map, r.rank[2])},
                                       {"first_rank", r.first_rank}};
  }
  out["locations"] = std::move(locations);
  return out;
}

std::string joinNames(const RailMap& map, const std::vector<uint32_t>& indices) {
  if (indices.empty()) return "-";
  std::string text;
  for (uint32_t i : indices) text += (text.empty() ? "" : ",") + map.device(i).name;
  return text;
}

std::string orDash(const std::string& s) {
  return s.empty() ? "-" : s;
}

void printHuman(const Topology& topo, const RailMap& map) {
  std::printf("topology: %s\n\nNUMA nodes\n  %-6s %s\n", topo.source().c_str(), "node", "cpus");
  for (const auto& n : topo.numaNodes())
    std::printf("  %-6d %s\n", n.id, tent::topology::formatCpuList(n.cpus).c_str());

  std::printf("\nRDMA devices\n  %-5s %-12s %-14s %-5s %-16s %s\n", "index", "name", "pci", "numa",
              "cpus near", "pcie path");
  if (map.deviceCount() == 0) std::printf("  (none)\n");
  for (uint32_t i = 0; i < map.deviceCount(); ++i) {
    const auto& d = map.device(i);
    std::string path;
    for (const auto& p : d.pcie_path) path += (path.empty() ? "" : " > ") + p;
    std::printf("  %-5u %-12s %-14s %-5d %-16s %s\n", i, d.name.c_str(), orDash(d.pci).c_str(),
                d.numa_node, orDash(tent::topology::formatCpuList(map.cpusNearDevice(i))).c_str(),
                orDash(path).c_str());
  }

  std::printf("\nGPUs\n  %-9s %-12s %-14s %s\n", "location", "name", "pci", "numa");
  if (topo.gpus().empty()) std::printf("  (none)\n");
  for (size_t g = 0; g < topo.gpus().size(); ++g) {
    const auto& gpu = topo.gpus()[g];
    std::string loc = "cuda:" + std::to_string(g);
    std::printf("  %-9s %-12s %-14s %d\n", loc.c_str(), gpu.name.c_str(), gpu.pci.c_str(),
                gpu.numa_node);
  }

  // Rank columns as wide as their longest list, so rows stay aligned on big nodes.
  std::vector<std::array<std::string, 3>> cells;
  std::array<size_t, 3> width = {5, 5, 5};
  for (uint32_t id = 0; id < map.locationCount(); ++id) {
    const auto& r = map.ranked(id);
    cells.push_back(
        {joinNames(map, r.rank[0]), joinNames(map, r.rank[1]), joinNames(map, r.rank[2])});
    for (size_t k = 0; k < 3; ++k) width[k] = std::max(width[k], cells.back()[k].size());
  }
  std::printf("\nRail map (first = the rank that serves the location)\n  %-9s %-5s %-*s %-*s %s\n",
              "location", "first", static_cast<int>(width[0]), "rank0", static_cast<int>(width[1]),
              "rank1", "rank2");
  for (uint32_t id = 0; id < map.locationCount(); ++id) {
    int first_rank = map.ranked(id).first_rank;
    std::string first = first_rank < 0 ? "-" : std::to_string(first_rank);
    std::printf("  %-9s %-5s %-*s %-*s %s\n", map.locationName(id).c_str(), first.c_str(),
                static_cast<int>(width[0]), cells[id][0].c_str(), static_cast<int>(width[1]),
                cells[id][1].c_str(), cells[id][2].c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s\n", kUsage);
      return 0;
    }
  }
  Options opts;
  std::string complaint = parseArgs(argc, argv, &opts);
  if (!complaint.empty()) {
    std::fprintf(stderr, "tent-topo: %s (%s)\n", complaint.c_str(), kUsage);
    return 2;
  }
  auto topo = opts.xml_file.empty() ? Topology::loadLive() : Topology::loadXml(opts.xml_file);
  if (!topo.ok()) {
    std::fprintf(stderr, "tent-topo: %s\n", topo.status().message().c_str());
    return 1;
  }
  RailMap map = RailMap::build(topologyDevices(*topo), *topo);
  if (opts.human) {
    printHuman(*topo, map);
  } else {
    std::printf("%s\n", toJson(*topo, map).dump(2).c_str());
  }
  return 0;
}
