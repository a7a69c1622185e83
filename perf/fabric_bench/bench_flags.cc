// fabric_bench flags: --name=value only; anything unknown or malformed is an error.
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "base/byte_size.h"
#include "perf/fabric_bench/bench.h"

namespace tent::perf::fabric_bench {

namespace {

// Counts and sizes by the one rule of flags and config (base/byte_size.h).
bool parseU64(std::string_view text, uint64_t* out) {
  auto v = parseByteSize(text);
  if (!v.ok()) return false;
  *out = *v;
  return true;
}

bool parseDouble(std::string_view text, double* out) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || *end != '\0' || !(v >= 0)) return false;
  *out = v;
  return true;
}

bool parseSizes(std::string_view text, std::vector<uint64_t>* out) {
  out->clear();
  while (!text.empty()) {
    size_t comma = text.find(',');
    uint64_t v = 0;
    if (!parseU64(text.substr(0, comma), &v) || v == 0 || v > kMaxSize) return false;
    out->push_back(v);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return !out->empty();
}

bool parseU32(std::string_view text, uint32_t lo, uint32_t hi, uint32_t* out) {
  uint64_t v = 0;
  if (!parseU64(text, &v) || v < lo || v > hi) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

// Applies one --name=value; false with `error` set when it is not acceptable.
bool applyFlag(std::string_view name, std::string_view value, Options* o, bool* saw_duration,
               std::string* error) {
  bool ok = true;
  if (name == "provider") {
    if (value == "soft")
      o->provider = config::FabricProvider::kSoft;
    else if (value == "verbs")
      o->provider = config::FabricProvider::kVerbs;
    else
      ok = false;
  } else if (name == "qps") {
    ok = parseU32(value, 1, kMaxQps, &o->qps);
  } else if (name == "size") {
    ok = parseSizes(value, &o->sizes);
  } else if (name == "opcode") {
    if (value == "write")
      o->opcode = fabric::WrOpcode::kRdmaWrite;
    else if (value == "read")
      o->opcode = fabric::WrOpcode::kRdmaRead;
    else
      ok = false;
  } else if (name == "depth") {
    ok = parseU32(value, 1, 4096, &o->depth);
  } else if (name == "link_gbps") {
    ok = parseDouble(value, &o->link_gbps);
  } else if (name == "latency_ns") {
    ok = parseU64(value, &o->latency_ns);
  } else if (name == "duration") {
    ok = parseDouble(value, &o->duration_s) && o->duration_s > 0;
    *saw_duration = true;
  } else if (name == "iters") {
    ok = parseU64(value, &o->iters) && o->iters > 0;
  } else if (name == "warmup") {
    ok = parseU64(value, &o->warmup);
  } else if (name == "processes") {
    uint32_t p = 0;
    ok = parseU32(value, 1, 2, &p);
    o->processes = static_cast<int>(p);
  } else if (name == "device") {
    o->device = std::string(value);
    ok = !value.empty();
  } else {
    *error = "unknown flag --" + std::string(name);
    return false;
  }
  if (!ok) *error = "bad value for --" + std::string(name) + ": '" + std::string(value) + "'";
  return ok;
}

}  // namespace

std::string usage() {
  return R"(usage: fabric_bench [flags]
  --provider=soft|verbs   fabric provider (default soft)
  --qps=N                 queue pairs, 1..64 (default 1)
  --size=S[,S...]         message sizes (64k, 1MiB: base/byte_size.h), one case each (default 4096)
  --opcode=write|read     RDMA WRITE or READ (default write)
  --depth=N               WRs in flight per QP, 1..4096 (default 1)
  --link_gbps=G           soft: modeled link in Gbit/s, 0 = unlimited (default 0)
  --latency_ns=N          soft: modeled one-way latency (default 0)
  --duration=SECONDS      measuring time per case (default 2)
  --iters=N               measure N WRs per case instead of a duration
  --warmup=N              WRs before measuring (default 200)
  --processes=1|2         2: the target is a forked process (default 1)
  --device=NAME           verbs: the device to use (default: the first)
  --help                  this text
Prints a table and one JSON line per case (achieved_gbps and link_gbps in Gbit/s).
)";
}

ParseOutcome parseArgs(int argc, char** argv, Options* out, std::string* error) {
  Options o;
  bool saw_duration = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return ParseOutcome::kHelp;
    size_t eq = arg.find('=');
    if (arg.substr(0, 2) != "--" || eq == std::string_view::npos) {
      *error = "expected --name=value, got '" + std::string(arg) + "'";
      return ParseOutcome::kError;
    }
    if (!applyFlag(arg.substr(2, eq - 2), arg.substr(eq + 1), &o, &saw_duration, error)) {
      return ParseOutcome::kError;
    }
  }
  if (saw_duration && o.iters != 0) {
    *error = "--duration and --iters exclude each other";
    return ParseOutcome::kError;
  }
  *out = o;
  return ParseOutcome::kRun;
}

config::FabricConfig fabricConfigFor(const Options& options) {
  config::FabricConfig config;
  config.provider = options.provider;
  config::SoftDevice soft;
  soft.name = "soft0";
  soft.numa_node = 0;
  soft.link_gbps = options.link_gbps;
  soft.latency_ns = options.latency_ns;
  config.soft.devices = {soft};
  if (!options.device.empty()) config.verbs.devices = {options.device};
  return config;
}

}  // namespace tent::perf::fabric_bench
