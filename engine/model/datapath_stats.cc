#include "model/datapath_stats.h"

namespace tent::rdma {

void addTargetCounts(const fabric::PortCounters& port, TargetStats* out) noexcept {
  out->write_bytes += port.target_write_bytes;
  out->writes += port.target_writes;
  out->read_bytes += port.target_read_bytes;
  out->reads += port.target_reads;
}

size_t completionCounterSlot() noexcept {
  static std::atomic<size_t> next{0};
  thread_local const size_t slot = next.fetch_add(1, std::memory_order_relaxed);
  return slot;
}

namespace {
template <typename F>
uint64_t sum(const std::unique_ptr<CompletionCounterBlock[]>& blocks, F field) noexcept {
  uint64_t total = 0;
  for (size_t i = 0; i < CompletionCounters::kBlocks; ++i)
    total += field(blocks[i]).load(std::memory_order_relaxed);
  return total;
}
}  // namespace

uint64_t CompletionCounters::bytesOnDevice(size_t device) const noexcept {
  return sum(
      blocks_, [device](auto& b) -> auto& { return b.bytes_per_device[device]; });
}
uint64_t CompletionCounters::bytesOfIntent(size_t intent) const noexcept {
  return sum(
      blocks_, [intent](auto& b) -> auto& { return b.bytes_per_intent[intent]; });
}
uint64_t CompletionCounters::deadlinesMissed() const noexcept {
  return sum(
      blocks_, [](auto& b) -> auto& { return b.deadlines_missed; });
}
uint64_t CompletionCounters::deadlinesExpiredAtSubmit() const noexcept {
  return sum(
      blocks_, [](auto& b) -> auto& { return b.deadlines_expired_at_submit; });
}

}  // namespace tent::rdma
