// fabric_bench output: an aligned table row and one JSON line per case.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "perf/fabric_bench/bench.h"

namespace tent::perf::fabric_bench {

namespace {

const char* opcodeName(fabric::WrOpcode op) {
  return op == fabric::WrOpcode::kRdmaRead ? "read" : "write";
}

double linkOf(const Bench& b) {
  return b.options.provider == config::FabricProvider::kSoft ? b.options.link_gbps
                                                             : b.device->info().link_gbps;
}

}  // namespace

void printTableHeader() {
  std::printf("%-6s %4s %4s %10s %6s %5s %9s %9s | %10s %10s %6s | %9s %9s %9s %10s %5s\n", "prov",
              "proc", "qps", "size", "op", "depth", "link_Gbps", "lat_ns", "Gbps", "model_Gbps",
              "frac", "p50_us", "p99_us", "p999_us", "memcpy_p50", "ok");
}

void printTableRow(const Bench& b, const CaseResult& r) {
  const Options& o = b.options;
  double frac = r.model_gbps > 0 ? r.achieved_gbps / r.model_gbps : 0;
  std::printf(
      "%-6s %4d %4u %10llu %6s %5u %9.1f %9llu | %10.2f %10.2f %6.3f | %9.3f %9.3f %9.3f %10.3f "
      "%5s\n",
      std::string(b.provider->name()).c_str(), o.processes, o.qps,
      static_cast<unsigned long long>(r.size), opcodeName(o.opcode), o.depth, linkOf(b),
      static_cast<unsigned long long>(o.latency_ns), r.achieved_gbps, r.model_gbps, frac, r.p50_us,
      r.p99_us, r.p999_us, r.memcpy_p50_us, r.verified ? "yes" : "NO");
}

std::string jsonLine(const Bench& b, const CaseResult& r) {
  const Options& o = b.options;
  nlohmann::ordered_json j;
  j["provider"] = b.provider->name();
  j["qps"] = o.qps;
  j["size"] = r.size;
  j["opcode"] = opcodeName(o.opcode);
  j["link_gbps"] = linkOf(b);
  j["achieved_gbps"] = r.achieved_gbps;
  j["p50_us"] = r.p50_us;
  j["p99_us"] = r.p99_us;
  j["p999_us"] = r.p999_us;
  j["latency_ns"] = o.latency_ns;
  j["depth"] = o.depth;
  j["processes"] = o.processes;
  j["model_gbps"] =
      r.model_gbps > 0 ? nlohmann::ordered_json(r.model_gbps) : nlohmann::ordered_json();
  j["achieved_over_model"] = r.model_gbps > 0
                                 ? nlohmann::ordered_json(r.achieved_gbps / r.model_gbps)
                                 : nlohmann::ordered_json();
  j["achieved_GBps"] = r.achieved_gbps / 8;
  j["memcpy_p50_us"] = r.memcpy_p50_us;
  j["p50_over_memcpy"] = r.memcpy_p50_us > 0 ? r.p50_us / r.memcpy_p50_us : 0.0;
  j["timer_p50_us"] = r.timer_p50_us;
  j["wrs"] = r.wrs;
  j["samples"] = r.samples;
  j["seconds"] = r.seconds;
  j["verified"] = r.verified;
  j["link_model"] = b.provider->linkModel();
  return j.dump();
}

}  // namespace tent::perf::fabric_bench
