// One fabric_bench case: warm-up, measurement, percentiles, model, and a check
// that the bytes really moved (READ back after WRITEs; known data before READs).
#include <algorithm>
#include <cstring>

#include "perf/fabric_bench/bench.h"
#include "perf/fabric_bench/bench_loop.h"

namespace tent::perf::fabric_bench {

namespace {

constexpr size_t kMaxSamples = size_t{8} << 20;

unsigned char patternByte(uint64_t i, uint32_t seed, uint32_t q) {
  return static_cast<unsigned char>(i * 131 + seed * 7 + q * 13 + 1);
}

void fillPattern(unsigned char* p, uint64_t size, uint32_t seed, uint32_t q) {
  for (uint64_t i = 0; i < size; ++i) p[i] = patternByte(i, seed, q);
}

struct Layout {
  unsigned char* transfer;  // slot the measured WRs use
  unsigned char* verify;    // slot the checks use
  uint64_t remote;
};

Layout layoutOf(const Bench& b, uint32_t q) {
  auto* base = static_cast<unsigned char*>(b.local);
  return {base + q * b.slot_bytes, base + (b.options.qps + q) * b.slot_bytes,
          b.remote_addr + q * b.slot_bytes};
}

// Before a READ case the target gets known bytes; before a WRITE case our source does.
Status prepareData(Bench& b, Loop& loop, uint64_t size, uint32_t seed) {
  for (uint32_t q = 0; q < b.options.qps; ++q) {
    Layout l = layoutOf(b, q);
    if (b.options.opcode == fabric::WrOpcode::kRdmaWrite) {
      fillPattern(l.transfer, size, seed, q);
      continue;
    }
    fillPattern(l.verify, size, seed, q);
    auto status = loop.once(q, fabric::WrOpcode::kRdmaWrite, reinterpret_cast<uint64_t>(l.verify),
                            l.remote, size);
    if (status != fabric::WcStatus::kSuccess) {
      return Status::IoError("fabric_bench: seeding the target failed: " +
                             std::string(fabric::toString(status)));
    }
    std::memset(l.transfer, 0, size);
  }
  return Status::OK();
}

Result<bool> verifyData(Bench& b, Loop& loop, uint64_t size) {
  for (uint32_t q = 0; q < b.options.qps; ++q) {
    Layout l = layoutOf(b, q);
    if (b.options.opcode == fabric::WrOpcode::kRdmaWrite) {
      std::memset(l.verify, 0, size);
      auto status = loop.once(q, fabric::WrOpcode::kRdmaRead, reinterpret_cast<uint64_t>(l.verify),
                              l.remote, size);
      if (status != fabric::WcStatus::kSuccess) {
        return Status::IoError("fabric_bench: read-back failed: " +
                               std::string(fabric::toString(status)));
      }
    }
    if (std::memcmp(l.transfer, l.verify, size) != 0) return false;
  }
  return true;
}

double percentileUs(std::vector<uint32_t>& v, double p) {
  if (v.empty()) return 0;
  size_t rank = static_cast<size_t>(p * static_cast<double>(v.size()));
  if (rank >= v.size()) rank = v.size() - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(rank), v.end());
  return v[rank] / 1000.0;
}

Status checkDrive(const Drive& d, const char* phase) {
  if (d.cq_error) return Status::IoError(std::string("fabric_bench: CQ error during ") + phase);
  if (d.errors) {
    return Status::IoError(std::string("fabric_bench: ") + std::to_string(d.errors) +
                           " WRs failed during " + phase +
                           ", first: " + std::string(fabric::toString(d.first_error)));
  }
  if (d.post_failed)
    return Status::IoError(std::string("fabric_bench: postSend failed during ") + phase);
  return Status::OK();
}

}  // namespace

double modelGbps(const Options& options, double link_gbps, uint64_t size) {
  if (link_gbps <= 0) return 0;
  // Closed loop: qps*depth WRs circulate; each needs its wire time plus latency
  // when the link is idle, so throughput is the smaller of the link and that bound.
  double bits = static_cast<double>(size) * 8;
  double per_wr_ns = bits / link_gbps + static_cast<double>(options.latency_ns);
  double in_flight = static_cast<double>(options.qps) * options.depth;
  return std::min(link_gbps, in_flight * bits / per_wr_ns);
}

Result<CaseResult> runCase(Bench& bench, uint64_t size) {
  static uint32_t seed = 0;
  ++seed;
  const Options& o = bench.options;
  Loop loop;
  loop.prepare(bench, size);
  TENT_RETURN_IF_ERROR(prepareData(bench, loop, size, seed));
  if (o.warmup > 0) TENT_RETURN_IF_ERROR(checkDrive(loop.run(o.warmup, 0, nullptr), "warm-up"));

  std::vector<uint32_t> samples;
  samples.reserve(o.iters ? std::min<uint64_t>(o.iters, kMaxSamples) : kMaxSamples);
  uint64_t duration_ns = o.iters ? 0 : static_cast<uint64_t>(o.duration_s * 1e9);
  Drive d = loop.run(o.iters, duration_ns, &samples);
  TENT_RETURN_IF_ERROR(checkDrive(d, "measurement"));

  CaseResult r;
  r.size = size;
  r.wrs = d.completed;
  r.samples = samples.size();
  uint64_t elapsed = d.end_ns > d.start_ns ? d.end_ns - d.start_ns : 1;
  r.seconds = static_cast<double>(elapsed) / 1e9;
  r.achieved_gbps = static_cast<double>(d.completed) * static_cast<double>(size) * 8 /
                    static_cast<double>(elapsed);
  double link =
      o.provider == config::FabricProvider::kSoft ? o.link_gbps : bench.device->info().link_gbps;
  r.model_gbps = modelGbps(o, link, size);
  r.p50_us = percentileUs(samples, 0.50);
  r.p99_us = percentileUs(samples, 0.99);
  r.p999_us = percentileUs(samples, 0.999);
  TENT_ASSIGN_OR_RETURN(r.verified, verifyData(bench, loop, size));
  r.memcpy_p50_us = memcpyP50Us(size);
  r.timer_p50_us = timerP50Us();
  return r;
}

}  // namespace tent::perf::fabric_bench
