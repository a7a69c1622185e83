// Loading (file, string, environment), defaults, the key list, YAML output and
// applying log levels. The schema itself is in parse.cc.
#include "config/config.h"
#include "config/log_env.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "config/parse.h"
#include "config/yaml_reader.h"
#include "config/yaml_stream.h"
#include "base/bounded_file.h"
#include "tent/log.h"

namespace tent::config {
namespace {

using detail::MapReader;
using detail::Walk;

// A config file is a few KiB; anything this big is the wrong file.
constexpr uint64_t kMaxFileBytes = 16 << 20;

std::string withLine(const std::string& source, int line) {
  return line > 0 ? source + ":" + std::to_string(line) : source;
}

Result<std::shared_ptr<const Config>> parseDocument(const YAML::Node& root,
                                                    const std::string& source) {
  auto config = std::make_shared<Config>(*defaults());
  config->source = source;
  Walk walk = Walk::parse(source);
  const int line = detail::lineOfNode(root);
  MapReader top(walk, root, "", line > 0 ? line : 1);
  detail::readConfig(top, config.get());
  top.finish();
  if (walk.failed()) return walk.status();
  return std::shared_ptr<const Config>(std::move(config));
}

// Every yaml-cpp exception stops here: nothing throws across the config API.
Result<std::shared_ptr<const Config>> parseText(std::string_view yaml, const std::string& source) {
  try {
    const detail::YamlStream stream = detail::readYamlStream(std::string(yaml));
    if (stream.documents > 1) {
      return Status::InvalidArgument(withLine(source, stream.second_line) +
                                     ": expected one YAML document, found " +
                                     std::to_string(stream.documents));
    }
    return parseDocument(stream.first, source);
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    return Status::InvalidArgument(withLine(source, line) + ": malformed YAML: " + e.msg);
  } catch (const std::exception& e) {
    return Status::Internal(source + ": reading the config failed: " + e.what());
  }
}

Result<std::string> readWholeFile(const std::string& path) {
  BoundedFileOptions options;
  options.max_bytes = kMaxFileBytes;
  TENT_ASSIGN_OR_RETURN(BoundedFile file, readBoundedFile(path, "config file", options));
  return std::move(file.bytes);
}

std::string levelNames() {
  return "trace, debug, info, warn, error, off";
}

std::string componentNames() {
  std::string out;
  for (uint8_t i = 0; i < static_cast<uint8_t>(log::Component::kCount); ++i) {
    if (i > 0) out += ", ";
    out += log::componentName(static_cast<log::Component>(i));
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const Config>> loadFile(const std::string& path) {
  Result<std::string> text = readWholeFile(path);
  if (!text.ok()) return text.status();
  return parseText(*text, path);
}

Result<std::shared_ptr<const Config>> loadString(std::string_view yaml,
                                                 std::string_view source_name) {
  return parseText(yaml, std::string(source_name));
}

std::shared_ptr<const Config> defaults() {
  static const std::shared_ptr<const Config> kDefaults = [] {
    auto c = std::make_shared<Config>();
    LcoreSpec lcore;
    lcore.pollers = {{PollerKind::kRail, "*"}, {PollerKind::kBackground, ""}};
    c->lcores.push_back(lcore);
    return std::shared_ptr<const Config>(std::move(c));
  }();
  return kDefaults;
}

Result<std::shared_ptr<const Config>> loadFromEnvironment() {
  // The one environment read of the project.
  const char* path = std::getenv("TENT_CONFIG");
  if (path == nullptr || *path == '\0') return defaults();
  Result<std::shared_ptr<const Config>> config = loadFile(path);
  if (!config.ok()) return config.status().withContext("TENT_CONFIG");
  return config;
}

CqSizing cqSizing(const Config& c) {
  CqSizing z = requiredCqSizing(c);
  if (c.workers.cq_depth != 0) z.background_cq = z.rail_cq = c.workers.cq_depth;
  if (c.direct.cq_depth != 0) z.direct_cq = c.direct.cq_depth;
  return z;
}

CqSizing requiredCqSizing(const Config& c) {
  CqSizing z;
  // `lcores: auto` runs exactly lcore_auto.background_lcores background pollers.
  uint32_t background = c.lcores_auto ? c.lcore_auto.background_lcores : 0;
  for (const LcoreSpec& l : c.lcores)
    for (const PollerSpec& p : l.pollers) background += p.kind == PollerKind::kBackground;
  z.background_pollers = background == 0 ? 1 : background;  // the default layout has one
  const uint64_t per_poller =
      (uint64_t{c.endpoints.max_per_context} + z.background_pollers - 1) / z.background_pollers;
  auto clamp = [](uint64_t v) {  // the caller reports a depth this large as an error
    return static_cast<uint32_t>(std::min<uint64_t>(v, uint64_t{kMaxCqDepth} + 1));
  };
  z.endpoints_per_poller = static_cast<uint32_t>(per_poller);
  z.background_cq = clamp(per_poller * c.workers.qps_per_endpoint * c.workers.qp_depth);
  z.rail_cq = clamp(uint64_t{c.endpoints.max_per_context} * c.workers.qp_depth);
  z.direct_cq = clamp(uint64_t{c.endpoints.max_per_context} * c.direct.qp_depth);
  z.passive_cq =
      clamp(uint64_t{c.endpoints.max_passive_per_context} * (c.workers.qps_per_endpoint + 2));
  return z;
}

Status overlayLogLevelEnv(std::string_view text, LogConfig* log) {
  LogConfig out = *log;
  std::map<std::string, std::string> env_components;
  bool bare_level = false;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string word(text.substr(start, comma - start));
    start = comma + 1;
    if (word.empty()) continue;
    const size_t eq = word.find('=');
    const std::string level_name = eq == std::string::npos ? word : word.substr(eq + 1);
    log::Level level{};
    if (!log::parseLevel(level_name, &level)) {
      return Status::InvalidArgument(std::string(kLogLevelEnv) + ": unknown level '" + level_name +
                                     "' in '" + std::string(text) + "'; allowed: " + levelNames() +
                                     ", as LEVEL or COMPONENT=LEVEL separated by commas");
    }
    if (eq == std::string::npos) {
      out.level = level_name;
      bare_level = true;
      continue;
    }
    const std::string name = word.substr(0, eq);
    log::Component component{};
    if (!log::parseComponent(name, &component)) {
      return Status::InvalidArgument(std::string(kLogLevelEnv) + ": unknown component '" + name +
                                     "' in '" + std::string(text) +
                                     "'; allowed: " + componentNames());
    }
    env_components[name] = level_name;
  }
  // A bare level means every component: the file's per-component levels give way too.
  if (bare_level) out.components.clear();
  for (auto& [name, level_name] : env_components) out.components[name] = level_name;
  *log = std::move(out);
  return Status::OK();
}

Status applyLogConfig(const LogConfig& file_config) {
  LogConfig config = file_config;
  if (const char* env = std::getenv(kLogLevelEnv); env != nullptr)
    TENT_RETURN_IF_ERROR(overlayLogLevelEnv(env, &config));
  // Check everything first so a bad entry changes no level at all.
  log::Level global = log::Level::kWarn;
  if (!log::parseLevel(config.level, &global)) {
    return Status::InvalidArgument("log.level: unknown level '" + config.level +
                                   "'; allowed: " + levelNames());
  }
  std::vector<std::pair<log::Component, log::Level>> overrides;
  for (const auto& [name, level_name] : config.components) {
    log::Component component{};
    log::Level level{};
    if (!log::parseComponent(name, &component)) {
      return Status::InvalidArgument("log.components: unknown component '" + name +
                                     "'; allowed: " + componentNames());
    }
    if (!log::parseLevel(level_name, &level)) {
      return Status::InvalidArgument("log.components." + name + ": unknown level '" + level_name +
                                     "'; allowed: " + levelNames());
    }
    overrides.emplace_back(component, level);
  }
  log::setAllLevels(global);
  for (const auto& [component, level] : overrides) log::setLevel(component, level);
  return Status::OK();
}

const std::vector<KeyInfo>& keyList() {
  static const std::vector<KeyInfo> kKeys = [] {
    std::vector<KeyInfo> keys;
    try {
      Config config = *defaults();
      Walk walk = Walk::describe(&keys);
      MapReader top(walk, YAML::Node(), "", 0);
      detail::readConfig(top, &config);
    } catch (const std::exception& e) {
      keys.push_back({"<error>", e.what(), ""});  // the docs test fails loudly on it
    }
    return keys;
  }();
  return kKeys;
}

std::string toYaml(const Config& config) {
  try {
    Config copy = config;  // the walk takes mutable structs; emitting never changes them
    YAML::Emitter out;
    out << YAML::Comment("tent config (from " + config.source + ")");
    out << YAML::BeginMap;
    Walk walk = Walk::emit(&out);
    MapReader top(walk, YAML::Node(), "", 0);
    detail::readConfig(top, &copy);
    out << YAML::EndMap;
    if (!out.good()) return "# cannot write the config as YAML: " + out.GetLastError() + "\n";
    return std::string(out.c_str()) + "\n";
  } catch (const std::exception& e) {
    return std::string("# cannot write the config as YAML: ") + e.what() + "\n";
  }
}

Status validate(const Config& config) {
  // Writing and re-reading keeps one set of rules: the parser's.
  return loadString(toYaml(config), config.source + " (as YAML)").status();
}

std::string_view toString(PollerKind k) noexcept {
  switch (k) {
    case PollerKind::kRail:
      return "rail";
    case PollerKind::kBackground:
      return "background";
  }
  return "?";
}

std::string_view toString(FabricProvider p) noexcept {
  switch (p) {
    case FabricProvider::kAuto:
      return "auto";
    case FabricProvider::kVerbs:
      return "verbs";
    case FabricProvider::kSoft:
      return "soft";
    case FabricProvider::kTcp:
      return "tcp";
  }
  return "?";
}

std::string_view toString(PriorityLane p) noexcept {
  switch (p) {
    case PriorityLane::kAuto:
      return "auto";
    case PriorityLane::kOn:
      return "on";
    case PriorityLane::kOff:
      return "off";
  }
  return "?";
}

bool priorityLaneOn(const Config& config) noexcept {
  switch (config.workers.priority_lane) {
    case PriorityLane::kOn:
      return true;
    case PriorityLane::kOff:
      return false;
    case PriorityLane::kAuto:
      break;
  }
  return config.direct.mode != DirectMode::kOff;
}

std::string_view toString(DirectMode m) noexcept {
  switch (m) {
    case DirectMode::kAuto:
      return "auto";
    case DirectMode::kOff:
      return "off";
    case DirectMode::kForce:
      return "force";
  }
  return "?";
}

std::string_view toString(MetadataBackend b) noexcept {
  return b == MetadataBackend::kEtcd ? "etcd" : "p2p";
}

std::string_view toString(AutoRails r) noexcept {
  switch (r) {
    case AutoRails::kAuto:
      return "auto";
    case AutoRails::kDedicated:
      return "dedicated";
    case AutoRails::kNuma:
      return "numa";
    case AutoRails::kShared:
      return "shared";
  }
  return "?";
}

std::string_view toString(LcoreMode m) noexcept {
  switch (m) {
    case LcoreMode::kEal:
      return "eal";
    case LcoreMode::kManual:
      return "manual";
  }
  return "?";
}

}  // namespace tent::config
