// tebench statistics: latency samples, percentiles, the sweep table's columns
// and the QoS metrics (SLO attainment, goodput, weighted goodput, Jain fairness).
// Units: latencies are recorded in ns and reported in us; GB/s is decimal
// (1e9 bytes/s, so bytes per ns), as in Mooncake's tebench.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "perf/tebench/workload_classes.h"

namespace tent::bench {

// An append-only log of latency samples (ns). Samples go into fixed-size
// chunks, so recording never copies earlier samples (a growing vector would
// stall the measuring thread for a copy of everything recorded so far).
class LatencyLog {
 public:
  static constexpr size_t kChunkSamples = size_t{1} << 16;  // 512 KiB per chunk

  // Holds at most max_chunks * kChunkSamples samples (64 chunks: 4M samples, 32 MiB).
  explicit LatencyLog(size_t max_chunks = 64);
  // Records one transfer's duration; allocates a new chunk once per kChunkSamples
  // samples until the log is full. Past that it keeps a uniform sample of every
  // transfer recorded (reservoir sampling), so a run longer than the log still reports
  // the percentiles of the whole run. A chunk that cannot be allocated counts the
  // sample as dropped.
  void record(uint64_t ns) noexcept;
  size_t size() const noexcept { return size_; }         // samples held
  uint64_t transfers() const noexcept { return seen_; }  // every record() call
  uint64_t dropped() const noexcept { return dropped_; }
  // Appends every sample held: in recording order while the log holds every
  // transfer, a uniform sample of them (in no order) once it is full.
  void appendTo(std::vector<uint64_t>* out) const { appendTo(out, size_); }
  // Appends `keep` of the samples held (at most size()), spread evenly over them.
  void appendTo(std::vector<uint64_t>* out, size_t keep) const;
  void clear() noexcept;

 private:
  uint64_t nextRandom() noexcept;  // xorshift64*

  size_t capacity_;  // samples
  std::vector<std::unique_ptr<uint64_t[]>> chunks_;
  size_t used_in_last_ = 0;
  size_t size_ = 0;
  uint64_t seen_ = 0;
  uint64_t dropped_ = 0;
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;  // fixed: the same run keeps the same sample
};

// The samples of several threads' logs in one vector, each thread weighted by its
// transfers: when a log holds only a sample of its thread's transfers, the others are
// thinned to the same share, so a fast thread does not count less than a slow one.
// Adds every transfer of the logs to *transfers.
void mergeSamples(std::span<const LatencyLog* const> logs, std::vector<uint64_t>* out,
                  uint64_t* transfers);

// Percentile p in [0, 100] of ascending samples, interpolating linearly
// between closest ranks (rank = p/100 * (n-1)); 0 for no samples.
double percentileSorted(std::span<const uint64_t> sorted, double p) noexcept;

struct LatencySummary {
  uint64_t count = 0;
  double avg_us = 0, p50_us = 0, p99_us = 0, p999_us = 0, min_us = 0, max_us = 0;
};
// Sorts `samples_ns` in place and summarises them.
LatencySummary summarizeLatency(std::vector<uint64_t>* samples_ns);

// Fraction of samples <= limit_ns (1 for no samples).
double fractionWithin(std::span<const uint64_t> sorted_ns, uint64_t limit_ns) noexcept;

// Mean over transfers of (bytes / that transfer's duration), in GB/s. Each
// transfer moved `bytes_per_transfer` bytes. A zero duration counts as 0 GB/s,
// as in Mooncake's tebench (its whole-microsecond timer reads 0 for short
// transfers; tent's ns timer does not).
double avgInstGbps(std::span<const uint64_t> durations_ns, uint64_t bytes_per_transfer) noexcept;

// The RFC's "average latency derived from instantaneous bandwidth": bytes per
// transfer / Avg Inst GB/s, in us (the harmonic mean of the durations); 0 when
// there is no instantaneous bandwidth.
double avgLatencyFromInstUs(uint64_t bytes_per_transfer, double avg_inst_gbps) noexcept;

// Jain's fairness index (sum x)^2 / (n * sum x^2); 0 when every x is 0.
double jainIndex(std::span<const double> values) noexcept;

// ---- sweep mode ------------------------------------------------------------

// What one sweep case measured. A "transfer" is one submitted batch, timed
// from submitTransfer to the status poll that saw it complete.
struct CaseMeasurement {
  uint64_t block_size = 0;
  uint32_t batch_size = 0;
  uint32_t threads = 0;
  std::vector<double> thread_elapsed_s;  // each thread's measured window
  std::vector<uint64_t> transfer_ns;     // every transfer of all threads, or a uniform sample
  uint64_t transfers = 0;                // every completed transfer (0: transfer_ns.size())
  uint64_t failed_transfers = 0;
};

struct CaseRow {
  uint64_t block_size = 0;
  uint32_t batch_size = 0;
  uint32_t threads = 0;
  uint64_t transfers = 0;
  uint64_t sampled = 0;      // transfers whose durations the Tx columns summarise
  double bw_gbps = 0;        // bytes of all threads / mean thread window
  double avg_inst_gbps = 0;  // mean of per-transfer bytes / duration
  double avg_lat_us = 0;     // mean thread window * threads / transfers: the whole loop
  double avg_tx_us = 0;      // mean transfer duration (submit to the poll that saw completion)
  double p99_tx_us = 0;
  double p999_tx_us = 0;
  uint64_t failed_transfers = 0;
};
// Sorts m->transfer_ns in place.
CaseRow computeCaseRow(CaseMeasurement* m);

// ---- QoS mode ---------------------------------------------------------------

struct ClassMeasurement {
  std::vector<double> thread_elapsed_s;  // each thread of the class
  std::vector<uint64_t> transfer_ns;     // completed transfers, or a uniform sample of them
  uint64_t transfers = 0;                // every completed transfer (0: transfer_ns.size())
  uint64_t failed_transfers = 0;         // count against SLO attainment, not bytes
  uint64_t deadline_expired = 0;         // not started (deadline passed at submit): SLO misses
};

struct ClassReport {
  WorkloadClass config;
  uint64_t operations = 0;  // completed transfers (batches)
  uint64_t transferred_bytes = 0;
  uint64_t failed_transfers = 0;
  uint64_t deadline_expired = 0;  // not started: their deadline had passed at submit
  double elapsed_s = 0;
  double throughput_gbps = 0;
  double avg_inst_gbps = 0;
  double avg_us_from_inst_gbps = 0;  // bytes per transfer / avg_inst_gbps; 0 = none
  LatencySummary latency;
  double slo_attainment = 1;  // within slo_us / (completed + failed); 1 without SLO
  double goodput_gbps = 0;    // bytes of transfers within the SLO / elapsed_s
  double weighted_goodput_gbps = 0;
  std::optional<double> isolation_leakage;  // with isolated_gbps: max(0, 1 - throughput / it)
};

struct QosReport {
  std::vector<ClassReport> classes;
  double aggregate_throughput_gbps = 0;
  double weighted_goodput_gbps = 0;
  double jain_fairness = 0;                     // over throughput_gbps / weight per class
  std::optional<double> max_isolation_leakage;  // over the classes that have one
  double link_capacity_gbps = 0;                // 0 = not given
  std::optional<double> total_utilization;      // aggregate / capacity, when given
};

// Sorts every measurement's samples in place (they stay sorted, for the CDF).
QosReport computeQosReport(const std::vector<WorkloadClass>& classes,
                           std::vector<ClassMeasurement>* measurements, double link_capacity_gbps);

// CDF points (latency_us, cumulative fraction) of ascending samples: a fine
// uniform grid plus tail quantiles up to the maximum, for plotting.
std::vector<std::pair<double, double>> cdfPoints(std::span<const uint64_t> sorted_ns);

}  // namespace tent::bench
