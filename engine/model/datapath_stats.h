// Completion statistics of the datapath: payload bytes per device and per intent,
// deadlines missed and expired at submit. Counted on the thread that sees the event
// (an lcore, or a caller polling its direct task) in that thread's own cache-line
// aligned block: relaxed adds, no shared counter on the hot path. stats() sums the
// blocks. Threads beyond kBlocks share blocks (still exact: the adds are atomic).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fabric/fabric.h"
#include "model/slicing.h"
#include "tent/transfer_engine.h"

namespace tent::rdma {

inline constexpr size_t kIntentCount = static_cast<size_t>(IntentType::WEIGHT_LOADING) + 1;

struct alignas(64) CompletionCounterBlock {
  std::array<std::atomic<uint64_t>, kMaxDevices> bytes_per_device{};
  std::array<std::atomic<uint64_t>, kIntentCount> bytes_per_intent{};
  std::atomic<uint64_t> deadlines_missed{0};
  std::atomic<uint64_t> deadlines_expired_at_submit{0};
};

// Adds what a port served to peers as their target (the provider's count: tcp keeps
// one; where the peer's NIC alone serves them it is 0). Control path.
void addTargetCounts(const fabric::PortCounters& port, TargetStats* out) noexcept;

// This thread's block index (assigned on first use, process-wide).
size_t completionCounterSlot() noexcept;

class CompletionCounters {
 public:
  static constexpr size_t kBlocks = 64;
  CompletionCounters() : blocks_(std::make_unique<CompletionCounterBlock[]>(kBlocks)) {}

  CompletionCounterBlock& mine() const noexcept {
    return blocks_[completionCounterSlot() % kBlocks];
  }
  void addBytes(uint32_t device, IntentType intent, uint64_t bytes) const noexcept {
    CompletionCounterBlock& b = mine();
    auto i = static_cast<size_t>(intent);
    b.bytes_per_device[device % kMaxDevices].fetch_add(bytes, std::memory_order_relaxed);
    b.bytes_per_intent[i < kIntentCount ? i : 0].fetch_add(bytes, std::memory_order_relaxed);
  }
  void countMissed() const noexcept {
    mine().deadlines_missed.fetch_add(1, std::memory_order_relaxed);
  }
  void countExpiredAtSubmit() const noexcept {
    mine().deadlines_expired_at_submit.fetch_add(1, std::memory_order_relaxed);
  }

  // Control path: sums of every block.
  uint64_t bytesOnDevice(size_t device) const noexcept;
  uint64_t bytesOfIntent(size_t intent) const noexcept;
  uint64_t deadlinesMissed() const noexcept;
  uint64_t deadlinesExpiredAtSubmit() const noexcept;

 private:
  std::unique_ptr<CompletionCounterBlock[]> blocks_;
};

}  // namespace tent::rdma
