// tent-topo: prints what tent sees of a machine (live, or an hwloc XML file), the
// rail map it would use and the layout `lcores: auto` would choose, as one JSON
// object or (--human) as tables. --cpus and the lcore_auto flags ask "what if".
//   exit 0: printed (a layout that does not fit is printed as its error);
//   1: the topology or --config could not be loaded; 2: usage error.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include <gflags/gflags.h>

#include "base/cli/cli_flags.h"
#include "config/config.h"
#include "topology/cpu_set.h"
#include "topology/lcore_auto.h"
#include "topology/placement.h"
#include "topology/rail_map.h"
#include "topology/topology.h"

DEFINE_string(topology, "", "an hwloc XML file to read instead of this machine");
DEFINE_bool(human, false, "tables instead of one JSON object");
DEFINE_string(config, "",
              "a tent YAML config: its fabric devices and lcore_auto section (and "
              "topology.xml_file when --topology is not given)");
DEFINE_string(cpus, "",
              "what-if allowed CPUs, a list such as 0-3,8 (empty: this process's on the live "
              "machine, every CPU of an XML file)");
DEFINE_string(rails, "", "overrides lcore_auto.rails: auto, dedicated, numa or shared");
DEFINE_string(background_lcores, "", "overrides lcore_auto.background_lcores (a number)");
DEFINE_string(reserve_cpus, "", "overrides lcore_auto.reserve_cpus (a number)");

namespace {

using tent::Result;
using tent::Status;
using tent::topology::AutoLayout;
using tent::topology::RailDevice;
using tent::topology::RailMap;
using tent::topology::Topology;
using Json = nlohmann::ordered_json;

constexpr const char* kUsage =
    "usage: tent-topo [--topology=FILE.xml] [--human] [--config=FILE.yaml] [--cpus=LIST] "
    "[--rails=auto|dedicated|numa|shared] [--background_lcores=N] [--reserve_cpus=N]";

struct Options {
  std::string xml_file;  // empty: live machine (or the config's topology.xml_file)
  bool human = false;
  std::string config_file;  // its fabric devices and lcore_auto section
  std::string cpus;         // what-if allowed CPUs; empty: this process's (live) or all (XML)
  std::string rails, background, reserve;  // override lcore_auto keys
};

Options readFlags() {
  Options o;
  o.xml_file = FLAGS_topology;
  o.human = FLAGS_human;
  o.config_file = FLAGS_config;
  o.cpus = FLAGS_cpus;
  o.rails = FLAGS_rails;
  o.background = FLAGS_background_lcores;
  o.reserve = FLAGS_reserve_cpus;
  return o;
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

// ---- lcores: auto -------------------------------------------------------------

// The config whose fabric and lcore_auto section the layout uses, with the flags'
// overrides applied and checked by the config's own rules.
Result<tent::config::Config> layoutConfig(const Options& opts) {
  using tent::config::AutoRails;
  tent::config::Config c = *tent::config::defaults();
  if (!opts.config_file.empty()) {
    auto loaded = tent::config::loadFile(opts.config_file);
    if (!loaded.ok()) return loaded.status();
    c = **loaded;
  }
  auto number = [](const std::string& text, uint32_t* out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && end == text.data() + text.size();
  };
  if (!opts.background.empty() && !number(opts.background, &c.lcore_auto.background_lcores))
    return Status::InvalidArgument("--background_lcores: expected a number, got '" +
                                   opts.background + "'");
  if (!opts.reserve.empty() && !number(opts.reserve, &c.lcore_auto.reserve_cpus))
    return Status::InvalidArgument("--reserve_cpus: expected a number, got '" + opts.reserve + "'");
  if (!opts.rails.empty()) {
    bool found = false;
    for (AutoRails r :
         {AutoRails::kAuto, AutoRails::kDedicated, AutoRails::kNuma, AutoRails::kShared}) {
      if (opts.rails == tent::config::toString(r)) c.lcore_auto.rails = r, found = true;
    }
    if (!found)
      return Status::InvalidArgument("--rails: expected auto, dedicated, numa or shared, got '" +
                                     opts.rails + "'");
  }
  c.lcores_auto = true;  // what-if: as if the config said `lcores: auto`
  c.lcores.clear();
  TENT_RETURN_IF_ERROR(tent::config::validate(c));
  return c;
}

// The CPUs the layout may use, and how to say where they came from.
Result<std::pair<std::vector<int>, std::string>> layoutCpus(const Options& opts,
                                                            const Topology& topo, bool live) {
  if (!opts.cpus.empty()) {
    auto cpus = tent::topology::parseCpuList(opts.cpus);
    if (!cpus.ok()) return cpus.status().withContext("--cpus");
    return std::make_pair(*cpus, tent::topology::formatCpuList(*cpus) + " (--cpus)");
  }
  if (live) {
    const auto allowed = tent::topology::processAllowedCpus();
    return std::make_pair(allowed.cpus, tent::topology::describeAllowed(allowed));
  }
  std::vector<int> all;
  for (const auto& n : topo.numaNodes()) all.insert(all.end(), n.cpus.begin(), n.cpus.end());
  return std::make_pair(all, tent::topology::formatCpuList(all) +
                                 " (every CPU of the topology; --cpus gives a launcher's mask)");
}

Json layoutJson(const Result<AutoLayout>& layout, const std::string& allowed_text) {
  Json out;
  out["allowed_cpus"] = allowed_text;
  if (!layout.ok()) {
    out["error"] = layout.status().message();
    return out;
  }
  out["rails"] = std::string(tent::config::toString(layout->rails));
  out["lcores"] = Json::array();
  for (size_t k = 0; k < layout->lcores.size(); ++k) {
    const auto& l = layout->lcores[k];
    Json pollers = Json::array();
    for (const auto& p : l.spec.pollers) pollers.push_back(tent::config::toString(p));
    out["lcores"].push_back({{"lcore", k},
                             {"cpu", l.spec.cpu},
                             {"numa", l.numa_node},
                             {"role", l.role},
                             {"pollers", pollers}});
  }
  out["free_cpus"] = tent::topology::formatCpuList(layout->free_cpus);
  out["notes"] = layout->notes;
  return out;
}

void printLayoutHuman(const Result<AutoLayout>& layout, const std::string& allowed_text) {
  std::printf("\nlcores: auto\n  allowed CPUs: %s\n", allowed_text.c_str());
  if (!layout.ok()) {
    std::printf("  error: %s\n", layout.status().message().c_str());
    return;
  }
  std::printf("  rails: %s\n  %-5s %-4s %-4s %-32s %s\n",
              std::string(tent::config::toString(layout->rails)).c_str(), "lcore", "cpu", "numa",
              "role", "pollers");
  for (size_t k = 0; k < layout->lcores.size(); ++k) {
    const auto& l = layout->lcores[k];
    std::string pollers;
    for (const auto& p : l.spec.pollers) pollers += (pollers.empty() ? "" : ",") + toString(p);
    std::printf("  %-5zu %-4d %-4d %-32s %s\n", k, l.spec.cpu, l.numa_node, l.role.c_str(),
                pollers.c_str());
  }
  std::printf("  free for the application: %s\n",
              orDash(tent::topology::formatCpuList(layout->free_cpus)).c_str());
  for (const auto& note : layout->notes) std::printf("  note: %s\n", note.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = tent::cli::parseFlags(&argc, &argv, kUsage); rc != tent::cli::kContinue) return rc;
  if (argc > 1) {
    std::fprintf(stderr, "tent-topo: unexpected argument '%s' (%s)\n", argv[1], kUsage);
    return 2;
  }
  for (const char* name : {"topology", "config", "cpus", "rails", "background_lcores",
                           "reserve_cpus"}) {
    const auto info = gflags::GetCommandLineFlagInfoOrDie(name);
    if (!info.is_default && info.current_value.empty()) {
      std::fprintf(stderr, "tent-topo: --%s needs a value (%s)\n", name, kUsage);
      return 2;
    }
  }
  Options opts = readFlags();
  auto config = layoutConfig(opts);
  if (!config.ok()) {
    std::fprintf(stderr, "tent-topo: %s\n", config.status().message().c_str());
    return opts.config_file.empty() ? 2 : 1;
  }
  if (opts.xml_file.empty()) opts.xml_file = config->topology.xml_file;
  const bool live = opts.xml_file.empty();
  auto topo = live ? Topology::loadLive() : Topology::loadXml(opts.xml_file);
  if (!topo.ok()) {
    std::fprintf(stderr, "tent-topo: %s\n", topo.status().message().c_str());
    return 1;
  }
  auto cpus = layoutCpus(opts, *topo, live);
  if (!cpus.ok()) {
    std::fprintf(stderr, "tent-topo: %s (%s)\n", cpus.status().message().c_str(), kUsage);
    return 2;
  }
  RailMap map = RailMap::build(topologyDevices(*topo), *topo);
  const auto layout =
      tent::topology::planAutoLcores(*topo, tent::topology::fabricDevices(*config, *topo),
                                     cpus->first, cpus->second, config->lcore_auto);
  if (opts.human) {
    printHuman(*topo, map);
    printLayoutHuman(layout, cpus->second);
  } else {
    Json out = toJson(*topo, map);
    out["lcores_auto"] = layoutJson(layout, cpus->second);
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}
