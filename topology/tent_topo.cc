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

#include "config/config.h"
#include "topology/cpu_set.h"
#include "topology/lcore_auto.h"
#include "topology/placement.h"
#include "topology/rail_map.h"
#include "topology/topology.h"

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
    "[--rails=auto|dedicated|numa|shared] [--background-lcores=N] [--reserve-cpus=N]";

struct Options {
  std::string xml_file;  // empty: live machine (or the config's topology.xml_file)
  bool human = false;
  std::string config_file;  // its fabric devices and lcore_auto section
  std::string cpus;         // what-if allowed CPUs; empty: this process's (live) or all (XML)
  std::string rails, background, reserve;  // override lcore_auto keys
};

// "--name=value" or "--name value"; returns false when `arg` is not --name.
bool valueOf(std::string_view name, int argc, char** argv, int* i, std::string* out,
             std::string* complaint) {
  std::string_view arg = argv[*i];
  if (arg.rfind(name, 0) != 0) return false;
  arg.remove_prefix(name.size());
  if (arg.empty()) {
    if (*i + 1 >= argc) return (*complaint = std::string(name) + " needs a value"), true;
    *out = argv[++*i];
  } else if (arg[0] == '=') {
    *out = std::string(arg.substr(1));
  } else {
    return false;
  }
  if (out->empty()) *complaint = std::string(name) + " needs a value";
  return true;
}

// Returns an empty string when the arguments are fine, else the complaint.
std::string parseArgs(int argc, char** argv, Options* opts) {
  const std::pair<std::string_view, std::string*> valued[] = {
      {"--topology", &opts->xml_file},
      {"--config", &opts->config_file},
      {"--cpus", &opts->cpus},
      {"--rails", &opts->rails},
      {"--background-lcores", &opts->background},
      {"--reserve-cpus", &opts->reserve}};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--human") {
      opts->human = true;
      continue;
    }
    std::string complaint;
    bool known = false;
    for (const auto& [name, out] : valued) {
      if (!known) known = valueOf(name, argc, argv, &i, out, &complaint);
    }
    if (!complaint.empty()) return complaint;
    if (!known) return "unknown argument '" + std::string(arg) + "'";
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
    return Status::InvalidArgument("--background-lcores: expected a number, got '" +
                                   opts.background + "'");
  if (!opts.reserve.empty() && !number(opts.reserve, &c.lcore_auto.reserve_cpus))
    return Status::InvalidArgument("--reserve-cpus: expected a number, got '" + opts.reserve + "'");
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
