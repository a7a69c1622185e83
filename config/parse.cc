// The schema of tent's YAML config: every key, its range and the cross-field
// checks. docs/config.md is the prose for what is here; a test keeps them in step.
#include "config/parse.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/eal_args.h"
#include "tent/log.h"

namespace tent::config::detail {
namespace {

// ---- ranges ---------------------------------------------------------------------
// Wide enough for any machine we can imagine, narrow enough to catch typos
// (a block size in KiB, a timeout in seconds where milliseconds are meant).
constexpr int64_t kMaxCpu = 4095;
constexpr int64_t kMaxNumaNode = 1023;
constexpr int64_t kMaxTimeoutMs = 3600000;  // one hour
constexpr int64_t kMaxLinkTimeoutMs = 600000;
constexpr int64_t kMaxIdlePolls = 1 << 30;
constexpr int64_t kMaxSleepUs = 1000000;
constexpr int64_t kMaxBlockUs = 60000000;      // a minute: also bounds how stale idle stats get
constexpr int64_t kMaxLatencyNs = 1000000000;  // one second
constexpr double kMaxLinkGbps = 100000;
constexpr int64_t kMaxDirectBytes = int64_t{1} << 40;
constexpr int64_t kMaxEalMemoryMb = 65536;

// ---- text rules -----------------------------------------------------------------

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

bool validDeviceName(std::string_view s) {
  return !s.empty() && s.size() <= 63 && std::all_of(s.begin(), s.end(), isNameChar);
}

bool validNetdevName(std::string_view s) {
  return s.size() <= 15 && std::all_of(s.begin(), s.end(), isNameChar);  // IFNAMSIZ - 1
}

bool validFilePrefix(std::string_view s) {
  return s.size() <= 64 && std::all_of(s.begin(), s.end(), isNameChar);
}

bool isHexRun(std::string_view s, size_t min_len, size_t max_len) {
  return s.size() >= min_len && s.size() <= max_len && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c));
         });
}

// "0000:3b:00.0" or "3b:00.0" (domain 0); empty means "not given".
bool validPci(std::string_view s) {
  if (s.empty()) return true;
  const size_t dot = s.rfind('.');
  if (dot == std::string_view::npos || dot + 2 != s.size() || s[dot + 1] < '0' ||
      s[dot + 1] > '7') {
    return false;
  }
  std::string_view rest = s.substr(0, dot);  // [domain:]bus:device
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || !isHexRun(rest.substr(colon + 1), 2, 2)) return false;
  rest = rest.substr(0, colon);
  const size_t domain_colon = rest.find(':');
  if (domain_colon == std::string_view::npos) return isHexRun(rest, 2, 2);
  return isHexRun(rest.substr(0, domain_colon), 4, 8) &&
         isHexRun(rest.substr(domain_colon + 1), 2, 2);
}

// A host without a port: a name, an IPv4 address or a bracketed IPv6 address.
bool validHost(std::string_view s) {
  if (s.empty() || s.size() > 255) return false;
  if (s.front() == '[') {
    if (s.back() != ']' || s.size() < 3) return false;
    const std::string_view inner = s.substr(1, s.size() - 2);
    return std::all_of(inner.begin(), inner.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == ':' || c == '.' || c == '%';
    });
  }
  return std::all_of(s.begin(), s.end(), isNameChar);
}

bool validPort(std::string_view s) {
  if (s.empty() || s.size() > 5) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  return std::stoi(std::string(s)) <= 65535;
}

bool validHostPort(std::string_view s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  return validHost(s.substr(0, colon)) && validPort(s.substr(colon + 1));
}

bool validHostPortOrEmpty(std::string_view s) {
  return s.empty() || validHostPort(s);
}

bool isWildcardHost(std::string_view s) {
  return s == "0.0.0.0" || s == "[::]";
}

bool validAdvertiseHost(std::string_view s) {
  return s.empty() || (validHost(s) && !isWildcardHost(s));
}

// A numeric IPv4 address or a bracketed numeric IPv6 address (no names: a tcp device
// advertises its address to peers as it is, in a GID).
bool validNumericHost(std::string_view s) {
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') {
    in6_addr a6;
    return inet_pton(AF_INET6, std::string(s.substr(1, s.size() - 2)).c_str(), &a6) == 1;
  }
  in_addr a4;
  return inet_pton(AF_INET, std::string(s).c_str(), &a4) == 1;
}

bool validNumericHostPort(std::string_view s) {
  const size_t colon = s.rfind(':');
  return colon != std::string_view::npos && validNumericHost(s.substr(0, colon)) &&
         validPort(s.substr(colon + 1));
}

bool validNumericAdvertise(std::string_view s) {
  return s.empty() || (validNumericHost(s) && !isWildcardHost(s));
}

bool validAbsolutePath(std::string_view s) {
  return !s.empty() && s.front() == '/';
}

constexpr TextRule kPathOrEmpty{"a file path, or empty", nullptr};
constexpr TextRule kDeviceName{
    "a device name of letters, digits, '_', '-' or '.' (1 to 63 characters)", validDeviceName};
constexpr TextRule kNetdevName{
    "a network interface name of letters, digits, '_', '-' or '.' (at most 15), or empty",
    validNetdevName};
constexpr TextRule kFilePrefix{
    "letters, digits, '_', '-' or '.' (at most 64), or empty for tent-<pid>", validFilePrefix};
constexpr TextRule kPci{"a PCI address such as 0000:3b:00.0 or 3b:00.0, or empty", validPci};
constexpr TextRule kHostPort{"host:port with a port in [0, 65535] (IPv6 as [addr]:port)",
                             validHostPort};
constexpr TextRule kHostPortOrOff{
    "host:port with a port in [0, 65535] (IPv6 as [addr]:port), or empty for off",
    validHostPortOrEmpty};
constexpr TextRule kAdvertiseHost{
    "a host name or address peers can reach (not a wildcard, no port), or empty",
    validAdvertiseHost};
constexpr TextRule kAbsolutePath{"an absolute path", validAbsolutePath};
constexpr TextRule kNumericHostPort{
    "a numeric IPv4 address or a bracketed IPv6 address with a port in [0, 65535] "
    "(10.0.0.5:0, [fd00::5]:7000)",
    validNumericHostPort};
constexpr TextRule kNumericAdvertise{
    "a numeric IPv4 address or a bracketed IPv6 address, no port, not a wildcard; or empty",
    validNumericAdvertise};

const std::vector<std::string_view> kLevelNames = {"trace", "debug", "info",
                                                   "warn",  "error", "off"};

std::vector<std::string_view> componentNames() {
  std::vector<std::string_view> names;
  for (uint8_t i = 0; i < static_cast<uint8_t>(log::Component::kCount); ++i) {
    names.push_back(log::componentName(static_cast<log::Component>(i)));
  }
  return names;
}

const EnumNames<LcoreMode> kLcoreModes = {{"eal", LcoreMode::kEal}, {"manual", LcoreMode::kManual}};
const EnumNames<FabricProvider> kProviders = {{"auto", FabricProvider::kAuto},
                                              {"verbs", FabricProvider::kVerbs},
                                              {"soft", FabricProvider::kSoft},
                                              {"tcp", FabricProvider::kTcp}};
const EnumNames<PriorityLane> kPriorityLanes = {
    {"auto", PriorityLane::kAuto}, {"on", PriorityLane::kOn}, {"off", PriorityLane::kOff}};
const EnumNames<DirectMode> kDirectModes = {
    {"auto", DirectMode::kAuto}, {"off", DirectMode::kOff}, {"force", DirectMode::kForce}};

std::string alreadyAt(std::string_view what, std::string_view where) {
  return std::string(what) + " (already given at " + std::string(where) + ")";
}

// ---- eal ------------------------------------------------------------------------------

void readEal(MapReader& m, EalConfig* e) {
  m.choice("mode", &e->mode, kLcoreModes);
  // DPDK keeps at most 64 GiB per page size (RTE_MAX_MEM_MB_PER_TYPE); without
  // hugepages a terabyte grew EAL's page records to gigabytes and crashed it. What
  // the machine can give is checked when EAL starts (lcore/eal_memory.h).
  m.integer("memory_mb", &e->memory_mb, 16, kMaxEalMemoryMb);
  m.boolean("no_huge", &e->no_huge);
  m.boolean("no_pci", &e->no_pci);
  m.boolean("no_shconf", &e->no_shconf);
  m.text("file_prefix", &e->file_prefix, kFilePrefix);
  std::string previous;
  m.stringList("extra_args", &e->extra_args,
               "non-empty EAL arguments: " + std::string(kEalArgsAllowed),
               [&previous](std::string_view arg, size_t) -> std::string {
                 std::string problem = arg.empty() ? "expected a non-empty EAL argument, got ''"
                                                   : ealArgumentProblem(arg, previous);
                 previous = arg;
                 return problem;
               });
}

// ---- fabric -----------------------------------------------------------------------------

void readSoftDevice(MapReader& m, SoftDevice& d, std::map<std::string, std::string>* names) {
  m.require("name");
  m.text("name", &d.name, kDeviceName);
  if (m.parsing() && m.has("name")) {
    auto [it, fresh] = names->emplace(d.name, m.pathOf("name"));
    if (!fresh)
      m.fail("name", alreadyAt("duplicate soft device name '" + d.name + "'", it->second));
  }
  m.integer("numa_node", &d.numa_node, 0, kMaxNumaNode);
  m.text("pci", &d.pci, kPci);
  m.real("link_gbps", &d.link_gbps, 0, kMaxLinkGbps);
  m.integer("latency_ns", &d.latency_ns, 0, kMaxLatencyNs);
}

void readSoft(MapReader& m, SoftFabricConfig* s) {
  std::map<std::string, std::string> names;
  m.mapList<SoftDevice>("devices", &s->devices, [&](MapReader& item, SoftDevice& d, size_t) {
    readSoftDevice(item, d, &names);
  });
  m.real("default_link_gbps", &s->default_link_gbps, 0, kMaxLinkGbps);
  m.integer("default_latency_ns", &s->default_latency_ns, 0, kMaxLatencyNs);
  m.replacedBy("peer_dead_timeout_ms", "fabric.soft.retry_budget_ms");
  m.integer("retry_budget_ms", &s->retry_budget_ms, 1, kMaxLinkTimeoutMs);
  // An MR key holds a 16-bit slot (engine/fabric/soft/soft_layout.h, kMaxMrs): the soft
  // provider refused more at engine creation, inside the documented range.
  m.integer("max_mrs", &s->max_mrs, 1, 65536);
  m.byteSize("max_message_bytes", &s->max_message_bytes, 4096, int64_t{1} << 31);
  m.text("shm_dir", &s->shm_dir, kAbsolutePath);
  m.boolean("copy_payload", &s->copy_payload);
  m.byteSize("stream_copy_min_bytes", &s->stream_copy_min_bytes, 0, int64_t{1} << 31);
}

// The deny-list: device names, unique, none of them also in the allow-list.
void readVerbsExcludes(MapReader& m, VerbsFabricConfig* v) {
  std::map<std::string, std::string> names;
  m.stringList(
      "exclude_devices", &v->exclude_devices, "device names",
      [&](std::string_view name, size_t i) -> std::string {
        if (!validDeviceName(name)) {
          return "expected " + std::string(kDeviceName.expected) + ", got '" + std::string(name) +
                 "'";
        }
        const std::string here = m.pathOf("exclude_devices") + "[" + std::to_string(i) + "]";
        if (std::find(v->devices.begin(), v->devices.end(), name) != v->devices.end())
          return "device '" + std::string(name) +
                 "' is also in fabric.verbs.devices (allow-list); name it in one list";
        auto [it, fresh] = names.emplace(name, here);
        return fresh ? "" : alreadyAt("duplicate device '" + std::string(name) + "'", it->second);
      });
}

void readVerbs(MapReader& m, VerbsFabricConfig* v) {
  std::map<std::string, std::string> names;
  m.stringList(
      "devices", &v->devices, "device names", [&](std::string_view name, size_t i) -> std::string {
        if (!validDeviceName(name)) {
          return "expected " + std::string(kDeviceName.expected) + ", got '" + std::string(name) +
                 "'";
        }
        const std::string here = m.pathOf("devices") + "[" + std::to_string(i) + "]";
        auto [it, fresh] = names.emplace(name, here);
        return fresh ? "" : alreadyAt("duplicate device '" + std::string(name) + "'", it->second);
      });
  readVerbsExcludes(m, v);
  m.integer("port", &v->port, 1, 255);
  m.integer("gid_index", &v->gid_index, -1, 255);
  m.text("gid_interface", &v->gid_interface, kNetdevName);
  m.integerChoice("mtu", &v->mtu, {256, 512, 1024, 2048, 4096});
  m.integer("timeout", &v->timeout, 0, 31);
  if (m.parsing() && m.has("timeout") && v->timeout == 0) {
    m.fail("timeout",
           "0 turns the NIC's ACK timer off: a dead peer is never detected and its WRs never "
           "complete; use 1..31 (4.096 us x 2^timeout, 14 = 67 ms)");
  }
  m.integer("retry_cnt", &v->retry_cnt, 0, 7);
  m.integer("rnr_retry", &v->rnr_retry, 0, 7);
  m.integer("max_rd_atomic", &v->max_rd_atomic, 1, 255);
  m.boolean("relaxed_ordering", &v->relaxed_ordering);
  // At most one ibv_post_send chunk (verbs_objects.h, kPostChunkWrs): each chunk ends signaled.
  m.integer("signal_every", &v->signal_every, 1, 32);
}

void readTcpDevice(MapReader& m, TcpDevice& d, std::map<std::string, std::string>* names) {
  m.require("name");
  m.text("name", &d.name, kDeviceName);
  if (m.parsing() && m.has("name")) {
    auto [it, fresh] = names->emplace(d.name, m.pathOf("name"));
    if (!fresh) m.fail("name", alreadyAt("duplicate tcp device name '" + d.name + "'", it->second));
  }
  m.text("listen", &d.listen, kNumericHostPort);
  m.text("advertise", &d.advertise, kNumericAdvertise);
  m.integer("numa_node", &d.numa_node, 0, kMaxNumaNode);
  if (m.parsing() && d.advertise.empty() &&
      isWildcardHost(std::string_view(d.listen).substr(0, d.listen.rfind(':')))) {
    m.fail("advertise", "is required when listen is a wildcard ('" + d.listen +
                            "'): peers need an address they can connect to");
  }
}

void readTcp(MapReader& m, TcpFabricConfig* t) {
  std::map<std::string, std::string> names;
  m.mapList<TcpDevice>("devices", &t->devices, [&](MapReader& item, TcpDevice& d, size_t) {
    readTcpDevice(item, d, &names);
  });
  m.integer("retry_budget_ms", &t->retry_budget_ms, 10, kMaxLinkTimeoutMs);
  m.integer("max_mrs", &t->max_mrs, 1, 65536);
  m.byteSize("max_message_bytes", &t->max_message_bytes, 4096, int64_t{1} << 31);
  m.integer("gpu_staging_buffers", &t->gpu_staging_buffers, 1, 1024);
  m.byteSize("gpu_staging_buffer_bytes", &t->gpu_staging_buffer_bytes, 4096, int64_t{1} << 30);
  m.boolean("caller_progress", &t->caller_progress);
}

void readFabric(MapReader& m, FabricConfig* f) {
  m.choice("provider", &f->provider, kProviders);
  m.section("soft", [&](MapReader& s) { readSoft(s, &f->soft); });
  m.section("verbs", [&](MapReader& s) { readVerbs(s, &f->verbs); });
  m.section("tcp", [&](MapReader& s) { readTcp(s, &f->tcp); });
}

// Device names a rail poller may name; empty when the config does not pin them
// down (provider auto, or a provider that discovers every device).
std::vector<std::string> listedDevices(const FabricConfig& f) {
  std::vector<std::string> names;
  if (f.provider == FabricProvider::kSoft) {
    for (const SoftDevice& d : f.soft.devices) names.push_back(d.name);
  } else if (f.provider == FabricProvider::kVerbs) {
    names = f.verbs.devices;
  } else if (f.provider == FabricProvider::kTcp) {
    for (const TcpDevice& d : f.tcp.devices) names.push_back(d.name);
    if (names.empty()) names.push_back("tcp0");  // the tcp provider's default device
  }
  return names;
}

// ---- lcores -----------------------------------------------------------------------------

// What the lcores seen so far have claimed, for checks across lcores.
struct LcoreScan {
  std::vector<std::string> devices;          // rail devices must be among these (if any)
  std::map<int, std::string> cpus;           // pinned CPU -> path of the lcore
  std::map<std::string, std::string> rails;  // rail device ("*" too) -> path of its poller
  bool background = false;
};

void readIdle(MapReader& m, IdlePolicy* p) {
  m.integer("spin_polls", &p->spin_polls, 0, kMaxIdlePolls);
  m.integer("pause_polls", &p->pause_polls, 0, kMaxIdlePolls);
  m.integer("sleep_min_us", &p->sleep_min_us, 1, kMaxSleepUs);
  m.integer("sleep_max_us", &p->sleep_max_us, 1, kMaxSleepUs);
  m.integer("block_max_us", &p->block_max_us, 0, kMaxBlockUs);
  if (p->sleep_min_us > p->sleep_max_us) {
    m.fail("sleep_min_us", "must not exceed sleep_max_us (" + std::to_string(p->sleep_max_us) +
                               "), got " + std::to_string(p->sleep_min_us));
  }
}

std::string checkPoller(std::string_view text, const std::string& here, LcoreScan* scan) {
  Result<PollerSpec> spec = parsePollerSpec(text);
  if (!spec.ok()) return spec.status().message();
  if (spec->kind == PollerKind::kBackground) {
    scan->background = true;
    return "";
  }
  const std::string& dev = spec->device;
  if (dev != "*" && !scan->devices.empty() &&
      std::find(scan->devices.begin(), scan->devices.end(), dev) == scan->devices.end()) {
    std::vector<std::string_view> known(scan->devices.begin(), scan->devices.end());
    return "rail device '" + dev + "' is not one of the fabric's devices: " + joinNames(known);
  }
  auto [it, fresh] = scan->rails.emplace(dev, here);
  return fresh ? ""
               : alreadyAt("rail:" + dev + " is given twice; each rail poller runs on one lcore",
                           it->second);
}

void readLcore(MapReader& m, LcoreSpec& l, LcoreScan* scan) {
  m.integer("cpu", &l.cpu, -1, kMaxCpu);
  if (m.parsing() && m.has("cpu") && l.cpu >= 0) {
    auto [it, fresh] = scan->cpus.emplace(l.cpu, m.path());
    if (!fresh)
      m.fail("cpu", alreadyAt("CPU " + std::to_string(l.cpu) + " is pinned twice", it->second));
  }
  std::vector<std::string> texts;
  for (const PollerSpec& p : l.pollers) texts.push_back(toString(p));
  m.require("pollers");
  m.stringList("pollers", &texts, "poller specs (background, rail:*, rail:<device>)",
               [&](std::string_view text, size_t j) {
                 return checkPoller(text, m.pathOf("pollers") + "[" + std::to_string(j) + "]",
                                    scan);
               });
  if (m.parsing() && m.has("pollers") && texts.empty()) {
    m.fail("pollers", "expected at least one poller, got an empty list");
  }
  l.pollers.clear();
  for (const std::string& t : texts) {
    Result<PollerSpec> spec = parsePollerSpec(t);
    if (spec.ok()) l.pollers.push_back(*spec);
  }
  m.section("idle", [&](MapReader& s) { readIdle(s, &l.idle); });
}

const EnumNames<AutoRails> kAutoRails = {{"auto", AutoRails::kAuto},
                                         {"dedicated", AutoRails::kDedicated},
                                         {"numa", AutoRails::kNuma},
                                         {"shared", AutoRails::kShared}};

// How `lcores: auto` lays lcores out; the layout itself needs the topology and the
// process's CPUs, so topology/lcore_auto.cc derives it when the runtime starts.
void readLcoreAuto(MapReader& m, LcoreAutoConfig* a, bool lcores_auto) {
  const LcoreAutoConfig given = *a;
  m.choice("rails", &a->rails, kAutoRails);
  m.integer("background_lcores", &a->background_lcores, 1, 64);
  m.integer("reserve_cpus", &a->reserve_cpus, 0, 64);
  m.section("idle", [&](MapReader& s) { readIdle(s, &a->idle); });
  if (!m.parsing() || lcores_auto || *a == given) return;
  for (const char* key : {"rails", "background_lcores", "reserve_cpus", "idle"}) {
    if (m.has(key)) return m.fail(key, "applies only with 'lcores: auto', but lcores is a list");
  }
}

void readLcores(MapReader& top, Config* c) {
  LcoreScan scan;
  scan.devices = listedDevices(c->fabric);
  top.mapListOrWord<LcoreSpec>(
      "lcores", &c->lcores, "auto", &c->lcores_auto,
      [&](MapReader& item, LcoreSpec& l, size_t) { readLcore(item, l, &scan); });
  top.section("lcore_auto",
              [&](MapReader& m) { readLcoreAuto(m, &c->lcore_auto, c->lcores_auto); });
  if (!top.parsing() || !top.has("lcores") || c->lcores_auto) return;
  if (c->lcores.empty())
    return top.fail("lcores", "expected at least one lcore, got an empty list");
  if (!scan.background) {
    top.fail("lcores", "no lcore runs a 'background' poller; at least one is required");
  }
}

// ---- engine ---------------------------------------------------------------------------------

void readEndpoints(MapReader& m, EndpointConfig* e) {
  m.integer("max_per_context", &e->max_per_context, 1, 65536);
  m.integer("max_passive_per_context", &e->max_passive_per_context, 1, 65536);
  m.integer("reconnect_initial_ms", &e->reconnect_initial_ms, 1, kMaxLinkTimeoutMs);
  m.integer("reconnect_max_ms", &e->reconnect_max_ms, 1, kMaxLinkTimeoutMs);
  if (e->reconnect_initial_ms > e->reconnect_max_ms) {
    m.fail("reconnect_initial_ms", "must not exceed reconnect_max_ms (" +
                                       std::to_string(e->reconnect_max_ms) + "), got " +
                                       std::to_string(e->reconnect_initial_ms));
  }
}

// An explicit CQ depth must hold what can attach to it; a derived one must fit a CQ
// (reported at `blame`, the key of the formula in this section).
void checkCqDepth(MapReader& m, const char* key, const char* blame, uint32_t configured,
                  uint32_t needed, const std::string& formula) {
  if (!m.parsing()) return;
  if (configured == 0 && needed > kMaxCqDepth) {
    m.fail(blame, "the derived CQ depth " + formula + " = " + std::to_string(needed) +
                      " exceeds the largest CQ (" + std::to_string(kMaxCqDepth) +
                      "); lower those keys or set " + m.pathOf(key));
  } else if (configured != 0 && configured < needed) {
    m.fail(key, "must hold every send queue that may attach to it: " + formula + " = " +
                    std::to_string(needed) + " (0 derives it), got " + std::to_string(configured));
  }
}

void readWorkers(MapReader& m, Config* c) {
  WorkerConfig* w = &c->workers;
  m.byteSize("block_size", &w->block_size, 4096, int64_t{1} << 30);
  m.powerOfTwo("ring_size", &w->ring_size, 64, 1 << 20);
  m.integer("burst", &w->burst, 1, 1024);
  m.integer("qps_per_endpoint", &w->qps_per_endpoint, 1, 64);
  m.integer("qp_depth", &w->qp_depth, 1, 32768);
  m.integer("cq_depth", &w->cq_depth, 0, kMaxCqDepth);
  m.integer("slice_pool", &w->slice_pool, 1, 1 << 24);
  m.integer("max_batch_capacity", &w->max_batch_capacity, 1, 1 << 24);
  m.integer("max_slice_retries", &w->max_slice_retries, 0, 16);
  m.integer("device_error_threshold", &w->device_error_threshold, 1, 1 << 20);
  m.integer("device_pause_ms", &w->device_pause_ms, 0, kMaxTimeoutMs);
  m.integer("slice_timeout_ms", &w->slice_timeout_ms, 1, kMaxTimeoutMs);
  m.choice("priority_lane", &w->priority_lane, kPriorityLanes);
  // Never read by the engine: what one pass posts is bounded by burst and the QPs' room.
  m.replacedBy("post_batch", "workers.burst (slices dequeued, hence at most posted, per pass)");
  if (w->burst > w->ring_size) {
    m.fail("burst", "must not exceed ring_size (" + std::to_string(w->ring_size) + "), got " +
                        std::to_string(w->burst));
  }
  const CqSizing z = requiredCqSizing(*c);
  const uint32_t needed = std::max(z.background_cq, z.rail_cq);
  const std::string formula =
      z.background_cq >= z.rail_cq
          ? "ceil(endpoints.max_per_context " + std::to_string(c->endpoints.max_per_context) +
                " / " + std::to_string(z.background_pollers) + " background pollers) x " +
                "workers.qps_per_endpoint " + std::to_string(w->qps_per_endpoint) +
                " x workers.qp_depth " + std::to_string(w->qp_depth)
          : "endpoints.max_per_context " + std::to_string(c->endpoints.max_per_context) +
                " rail QPs x workers.qp_depth " + std::to_string(w->qp_depth);
  checkCqDepth(m, "cq_depth", "qp_depth", w->cq_depth, needed, formula);
  if (m.parsing() && z.passive_cq > kMaxCqDepth) {
    m.fail("qps_per_endpoint",
           "the passive CQ would need endpoints.max_passive_per_context " +
               std::to_string(c->endpoints.max_passive_per_context) +
               " x (workers.qps_per_endpoint " + std::to_string(w->qps_per_endpoint) +
               " + 2) entries, more than the largest CQ (" + std::to_string(kMaxCqDepth) + ")");
  }
}

void readDirect(MapReader& m, Config* c) {
  DirectConfig* d = &c->direct;
  m.choice("mode", &d->mode, kDirectModes);
  m.byteSize("max_bytes", &d->max_bytes, 0, kMaxDirectBytes);
  m.integer("qp_depth", &d->qp_depth, 1, 64);
  m.integer("cq_depth", &d->cq_depth, 0, kMaxCqDepth);
  m.integer("timeout_ms", &d->timeout_ms, 1, kMaxTimeoutMs);
  m.boolean("create_qp", &d->create_qp);
  m.boolean("poll_by_rail", &d->poll_by_rail);
  m.integer("rail_grace_us", &d->rail_grace_us, 0, kMaxTimeoutMs);
  checkCqDepth(m, "cq_depth", "qp_depth", d->cq_depth, requiredCqSizing(*c).direct_cq,
               "endpoints.max_per_context " + std::to_string(c->endpoints.max_per_context) +
                   " x direct.qp_depth " + std::to_string(d->qp_depth));
}

void readNotify(MapReader& m, NotifyConfig* n) {
  m.boolean("enabled", &n->enabled);
  m.integer("max_message_bytes", &n->max_message_bytes, 1, 1 << 20);
  m.integer("credits", &n->credits, 1, 1024);
  m.integer("inbox_count", &n->inbox_count, 1, 1 << 24);
  m.integer("inbox_bytes", &n->inbox_bytes, 1, uint64_t{1} << 36);
  m.integer("timeout_ms", &n->timeout_ms, 1, kMaxLinkTimeoutMs);
  if (m.parsing() && n->inbox_bytes < n->max_message_bytes)
    m.fail("inbox_bytes", "must hold one message of notify.max_message_bytes (" +
                              std::to_string(n->max_message_bytes) + ")");
}

void readQosClass(MapReader& m, QosClass* q) {
  m.integer("traffic_class", &q->traffic_class, 0, 252);
  m.integer("service_level", &q->service_level, 0, 15);
  if (m.parsing() && (q->traffic_class & 3) != 0) {
    m.fail(
        "traffic_class",
        "expected DSCP << 2 (a multiple of 4: the low 2 bits are ECN, which the NIC sets), got " +
            std::to_string(q->traffic_class) + "; DSCP " + std::to_string(q->traffic_class >> 2) +
            " is " + std::to_string(q->traffic_class & ~3));
  }
}

void readQos(MapReader& m, QosConfig* q) {
  m.section("direct", [&](MapReader& c) { readQosClass(c, &q->direct); });
  m.section("data", [&](MapReader& c) { readQosClass(c, &q->data); });
  m.section("control", [&](MapReader& c) { readQosClass(c, &q->control); });
}

void readBootstrap(MapReader& m, BootstrapConfig* b) {
  m.text("listen", &b->listen, kHostPort);
  m.text("advertise_host", &b->advertise_host, kAdvertiseHost);
  m.integer("connect_timeout_ms", &b->connect_timeout_ms, 1, kMaxLinkTimeoutMs);
  m.integer("io_timeout_ms", &b->io_timeout_ms, 1, kMaxLinkTimeoutMs);
  m.integer("descriptor_refresh_ms", &b->descriptor_refresh_ms, 0, kMaxLinkTimeoutMs);
  m.integer("max_connections", &b->max_connections, 1, 1 << 20);
  m.integer("max_connections_per_source", &b->max_connections_per_source, 1, 1 << 20);
  m.integer("handshake_timeout_ms", &b->handshake_timeout_ms, 1, kMaxLinkTimeoutMs);
  m.integer("keepalive_ms", &b->keepalive_ms, 10, kMaxLinkTimeoutMs);
  m.integer("peer_timeout_ms", &b->peer_timeout_ms, 1, kMaxLinkTimeoutMs);
  m.integer("max_segments", &b->max_segments, 2, 1 << 20);
  m.section("auth",
            [&](MapReader& a) { a.text("secret_file", &b->auth.secret_file, kPathOrEmpty); });
}

void readTimeouts(MapReader& m, TimeoutConfig* t) {
  m.integer("endpoint_destroy_ms", &t->endpoint_destroy_ms, 0, kMaxLinkTimeoutMs);
  m.integer("unregister_drain_ms", &t->unregister_drain_ms, 0, kMaxLinkTimeoutMs);
}

void readMetrics(MapReader& m, MetricsConfig* metrics) {
  m.text("listen", &metrics->listen, kHostPortOrOff);
}

void readLog(MapReader& m, LogConfig* l) {
  m.textChoice("level", &l->level, kLevelNames);
  m.stringMap("components", &l->components, componentNames(), kLevelNames);
}

}  // namespace

bool isHostPort(std::string_view s) {
  return validHostPort(s);
}
bool isHost(std::string_view s) {
  return validHost(s);
}

void readConfig(MapReader& top, Config* c) {
  // Fabric before lcores: rail pollers are checked against the listed devices.
  top.section("eal", [&](MapReader& m) { readEal(m, &c->eal); });
  top.section("fabric", [&](MapReader& m) { readFabric(m, &c->fabric); });
  top.section("topology",
              [&](MapReader& m) { m.text("xml_file", &c->topology.xml_file, kPathOrEmpty); });
  readLcores(top, c);
  // Endpoints before workers and direct: their CQ depths follow from the caps.
  top.section("endpoints", [&](MapReader& m) { readEndpoints(m, &c->endpoints); });
  top.section("workers", [&](MapReader& m) { readWorkers(m, c); });
  top.section("direct", [&](MapReader& m) { readDirect(m, c); });
  top.section("notify", [&](MapReader& m) { readNotify(m, &c->notify); });
  top.section("qos", [&](MapReader& m) { readQos(m, &c->qos); });
  top.section("bootstrap", [&](MapReader& m) { readBootstrap(m, &c->bootstrap); });
  top.section("metadata", [&](MapReader& m) { readMetadata(m, &c->metadata); });
  top.section("timeouts", [&](MapReader& m) { readTimeouts(m, &c->timeouts); });
  top.section("metrics", [&](MapReader& m) { readMetrics(m, &c->metrics); });
  top.section("log", [&](MapReader& m) { readLog(m, &c->log); });
}

}  // namespace tent::config::detail

namespace tent::config {

Result<PollerSpec> parsePollerSpec(std::string_view text) {
  constexpr std::string_view kRailPrefix = "rail:";
  if (text == "background") return PollerSpec{PollerKind::kBackground, ""};
  if (text.substr(0, kRailPrefix.size()) == kRailPrefix) {
    const std::string_view device = text.substr(kRailPrefix.size());
    if (device == "*" || detail::validDeviceName(device)) {
      return PollerSpec{PollerKind::kRail, std::string(device)};
    }
  }
  return Status::InvalidArgument("expected background, rail:* or rail:<device>, got '" +
                                 std::string(text) + "'");
}

std::string toString(const PollerSpec& p) {
  if (p.kind == PollerKind::kBackground) return "background";
  return "rail:" + p.device;
}

}  // namespace tent::config
