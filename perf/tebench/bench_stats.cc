#include "perf/tebench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <numeric>

namespace tent::bench {
namespace {

double mean(std::span<const double> values) noexcept {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double nsToUs(double ns) noexcept {
  return ns / 1000.0;
}

}  // namespace

// ---- LatencyLog ---------------------------------------------------------------

LatencyLog::LatencyLog(size_t max_chunks) : capacity_(max_chunks * kChunkSamples) {
  chunks_.reserve(max_chunks);
}

uint64_t LatencyLog::nextRandom() noexcept {
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return rng_ * 0x2545f4914f6cdd1dull;
}

void LatencyLog::record(uint64_t ns) noexcept {
  ++seen_;
  if (size_ == capacity_) {
    // Full: the seen_-th transfer replaces a held sample with probability capacity / seen_
    // (Algorithm R), which keeps every transfer recorded so far equally likely held.
    const auto slot =
        static_cast<uint64_t>((static_cast<unsigned __int128>(nextRandom()) * seen_) >> 64);
    if (slot < capacity_) chunks_[slot / kChunkSamples][slot % kChunkSamples] = ns;
    return;
  }
  if (chunks_.empty() || used_in_last_ == kChunkSamples) {
    std::unique_ptr<uint64_t[]> chunk(new (std::nothrow) uint64_t[kChunkSamples]);
    if (!chunk) {
      ++dropped_;
      return;
    }
    chunks_.push_back(std::move(chunk));  // within the reserved capacity: cannot throw
    used_in_last_ = 0;
  }
  chunks_.back()[used_in_last_++] = ns;
  ++size_;
}

void LatencyLog::appendTo(std::vector<uint64_t>* out, size_t keep) const {
  keep = std::min(keep, size_);
  out->reserve(out->size() + keep);
  for (size_t k = 0; k < keep; ++k) {
    const size_t i = k * size_ / keep;  // evenly spread: uniform over time, or over the sample
    out->push_back(chunks_[i / kChunkSamples][i % kChunkSamples]);
  }
}

void mergeSamples(std::span<const LatencyLog* const> logs, std::vector<uint64_t>* out,
                  uint64_t* transfers) {
  double share = 1;  // the smallest share of its transfers a log holds
  for (const LatencyLog* log : logs)
    if (log->transfers() != 0)
      share =
          std::min(share, static_cast<double>(log->size()) / static_cast<double>(log->transfers()));
  for (const LatencyLog* log : logs) {
    *transfers += log->transfers();
    // share 1: every sample, in recording order.
    log->appendTo(out,
                  static_cast<size_t>(std::llround(share * static_cast<double>(log->transfers()))));
  }
}

void LatencyLog::clear() noexcept {
  // Keep the first chunk: a new case starts recording without allocating.
  if (chunks_.size() > 1) chunks_.resize(1);
  used_in_last_ = 0;
  size_ = 0;
  seen_ = 0;
  dropped_ = 0;
}

// ---- percentiles and friends ------------------------------------------------

double percentileSorted(std::span<const uint64_t> sorted, double p) noexcept {
  if (sorted.empty()) return 0;
  if (p <= 0) return static_cast<double>(sorted.front());
  if (p >= 100) return static_cast<double>(sorted.back());
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const double frac = rank - static_cast<double>(lo);
  if (lo + 1 >= sorted.size()) return static_cast<double>(sorted[lo]);
  return static_cast<double>(sorted[lo]) * (1.0 - frac) +
         static_cast<double>(sorted[lo + 1]) * frac;
}

LatencySummary summarizeLatency(std::vector<uint64_t>* samples_ns) {
  LatencySummary s;
  auto& v = *samples_ns;
  std::sort(v.begin(), v.end());
  s.count = v.size();
  if (v.empty()) return s;
  const double sum = std::accumulate(v.begin(), v.end(), 0.0,
                                     [](double acc, uint64_t x) { return acc + double(x); });
  s.avg_us = nsToUs(sum / static_cast<double>(v.size()));
  s.p50_us = nsToUs(percentileSorted(v, 50));
  s.p99_us = nsToUs(percentileSorted(v, 99));
  s.p999_us = nsToUs(percentileSorted(v, 99.9));
  s.min_us = nsToUs(static_cast<double>(v.front()));
  s.max_us = nsToUs(static_cast<double>(v.back()));
  return s;
}

double fractionWithin(std::span<const uint64_t> sorted_ns, uint64_t limit_ns) noexcept {
  if (sorted_ns.empty()) return 1;
  auto end = std::upper_bound(sorted_ns.begin(), sorted_ns.end(), limit_ns);
  return static_cast<double>(end - sorted_ns.begin()) / static_cast<double>(sorted_ns.size());
}

double avgInstGbps(std::span<const uint64_t> durations_ns, uint64_t bytes_per_transfer) noexcept {
  double sum = 0;
  uint64_t n = 0;
  for (uint64_t d : durations_ns) {
    if (d != 0) sum += static_cast<double>(bytes_per_transfer) / static_cast<double>(d);  // B/ns
    ++n;
  }
  return n ? sum / static_cast<double>(n) : 0;
}

double avgLatencyFromInstUs(uint64_t bytes_per_transfer, double avg_inst_gbps) noexcept {
  if (!(avg_inst_gbps > 0)) return 0;
  return nsToUs(static_cast<double>(bytes_per_transfer) / avg_inst_gbps);  // GB/s = B/ns
}

double jainIndex(std::span<const double> values) noexcept {
  double sum = 0, squares = 0;
  for (double x : values) {
    sum += x;
    squares += x * x;
  }
  if (values.empty() || squares == 0) return 0;
  return sum * sum / (static_cast<double>(values.size()) * squares);
}

// ---- sweep ------------------------------------------------------------------

CaseRow computeCaseRow(CaseMeasurement* m) {
  CaseRow row;
  row.block_size = m->block_size;
  row.batch_size = m->batch_size;
  row.threads = m->threads;
  row.failed_transfers = m->failed_transfers;
  const uint64_t bytes_per_transfer = m->block_size * m->batch_size;
  LatencySummary lat = summarizeLatency(&m->transfer_ns);
  row.sampled = lat.count;
  row.transfers = std::max(m->transfers, lat.count);
  const double window_s = mean(m->thread_elapsed_s);
  if (window_s > 0) {
    row.bw_gbps = static_cast<double>(bytes_per_transfer * row.transfers) / 1e9 / window_s;
  }
  if (row.transfers > 0) {
    row.avg_lat_us = window_s * 1e6 * row.threads / static_cast<double>(row.transfers);
  }
  row.avg_inst_gbps = avgInstGbps(m->transfer_ns, bytes_per_transfer);
  row.avg_tx_us = lat.avg_us;
  row.p99_tx_us = lat.p99_us;
  row.p999_tx_us = lat.p999_us;
  return row;
}

// ---- QoS ----------------------------------------------------------------------

namespace {

ClassReport computeClass(const WorkloadClass& c, ClassMeasurement* m) {
  ClassReport r;
  r.config = c;
  const uint64_t bytes_per_transfer = c.block_size * c.batch_size;
  r.latency = summarizeLatency(&m->transfer_ns);
  r.operations = std::max(m->transfers, r.latency.count);
  r.failed_transfers = m->failed_transfers;
  r.deadline_expired = m->deadline_expired;
  r.transferred_bytes = r.operations * bytes_per_transfer;
  r.elapsed_s = mean(m->thread_elapsed_s);
  r.avg_inst_gbps = avgInstGbps(m->transfer_ns, bytes_per_transfer);
  r.avg_us_from_inst_gbps = avgLatencyFromInstUs(bytes_per_transfer, r.avg_inst_gbps);
  if (r.elapsed_s > 0) r.throughput_gbps = double(r.transferred_bytes) / 1e9 / r.elapsed_s;

  const uint64_t attempts = r.operations + r.failed_transfers + r.deadline_expired;
  uint64_t within = r.operations;
  if (c.slo_us != 0) {
    auto end = std::upper_bound(m->transfer_ns.begin(), m->transfer_ns.end(), c.slo_us * 1000);
    within = static_cast<uint64_t>(end - m->transfer_ns.begin());
    // The durations may be a uniform sample: the share within the SLO, of every transfer.
    if (r.latency.count != 0 && r.operations != r.latency.count)
      within = static_cast<uint64_t>(
          std::llround(static_cast<double>(within) * static_cast<double>(r.operations) /
                       static_cast<double>(r.latency.count)));
  }
  r.slo_attainment = attempts ? double(within) / double(attempts) : 1.0;
  if (c.slo_us == 0 && r.failed_transfers == 0 && r.deadline_expired == 0) r.slo_attainment = 1.0;
  if (r.elapsed_s > 0) r.goodput_gbps = double(within * bytes_per_transfer) / 1e9 / r.elapsed_s;
  r.weighted_goodput_gbps = r.goodput_gbps * c.weight;
  if (c.isolated_gbps)
    r.isolation_leakage = std::max(0.0, 1.0 - r.throughput_gbps / *c.isolated_gbps);
  return r;
}

}  // namespace

QosReport computeQosReport(const std::vector<WorkloadClass>& classes,
                           std::vector<ClassMeasurement>* measurements, double link_capacity_gbps) {
  QosReport report;
  std::vector<double> normalized;
  for (size_t i = 0; i < classes.size() && i < measurements->size(); ++i) {
    ClassReport r = computeClass(classes[i], &(*measurements)[i]);
    report.aggregate_throughput_gbps += r.throughput_gbps;
    report.weighted_goodput_gbps += r.weighted_goodput_gbps;
    normalized.push_back(r.throughput_gbps / r.config.weight);
    if (r.isolation_leakage) {
      report.max_isolation_leakage =
          std::max(report.max_isolation_leakage.value_or(0.0), *r.isolation_leakage);
    }
    report.classes.push_back(std::move(r));
  }
  report.jain_fairness = jainIndex(normalized);
  report.link_capacity_gbps = link_capacity_gbps;
  if (link_capacity_gbps > 0) {
    report.total_utilization = report.aggregate_throughput_gbps / link_capacity_gbps;
  }
  return report;
}

std::vector<std::pair<double, double>> cdfPoints(std::span<const uint64_t> sorted_ns) {
  std::vector<std::pair<double, double>> points;
  if (sorted_ns.empty()) return points;
  auto add = [&](double q) {
    points.emplace_back(nsToUs(percentileSorted(sorted_ns, q * 100)), q);
  };
  for (int i = 0; i <= 990; ++i) add(i / 1000.0);        // 0.000 .. 0.990, step 0.001
  for (int i = 1; i <= 90; ++i) add(0.99 + i * 0.0001);  // .. 0.999, step 0.0001
  for (int i = 1; i <= 9; ++i) add(0.999 + i * 0.0001);  // .. 0.9999
  for (double q : {0.99995, 0.99999}) add(q);
  add(1.0);
  return points;
}

}  // namespace tent::bench
