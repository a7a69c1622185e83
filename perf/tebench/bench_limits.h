// The ranges of tebench's numeric flags and workload-class fields, in one place (a
// flag library can take them over as they are). Each is a range the run survives: a
// time converts to int64 nanoseconds without overflow, a size times a batch times a
// thread count stays within 64 bits.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace tent::bench {

// Seconds: --duration, --warmup, --transfer_timeout (one day).
inline constexpr double kMaxSeconds = 86400;
// Microseconds: --deadline_us, --request_interval_us, --aggregate_interval_us, a
// class's deadline_us and slo_us (one day).
inline constexpr uint64_t kMaxMicros = 86'400'000'000;
// Bytes of one request: --start_block_size, --max_block_size, a class's block_size.
inline constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 40;
// Bytes allocated on each side: --total_buffer_size.
inline constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 50;
// Requests per transfer: --start_batch_size, --max_batch_size, a class's batch_size.
inline constexpr uint32_t kMaxBatch = 65536;
// Threads: --start_num_threads, --max_num_threads, a class's threads.
inline constexpr uint32_t kMaxThreads = 1024;
// GB/s: --qos_link_capacity_gbps (a petabyte per second).
inline constexpr double kMaxLinkGBps = 1e6;

// The product, or UINT64_MAX when it does not fit (bytes that no buffer holds).
inline uint64_t saturatingProduct(std::initializer_list<uint64_t> factors) noexcept {
  uint64_t out = 1;
  for (uint64_t f : factors)
    if (__builtin_mul_overflow(out, f, &out)) return UINT64_MAX;
  return out;
}

inline uint64_t saturatingSum(uint64_t a, uint64_t b) noexcept {
  uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? UINT64_MAX : out;
}

}  // namespace tent::bench
