// SlicePoller: a posting poller on an lcore. Background pollers carry bulk
// slices of the endpoints they own; rail pollers carry latency-sensitive slices that
// fell back from the direct path (on the rail QP every endpoint of their contexts
// has) and poll their contexts' direct CQs. Each poller has its own MPSC input ring,
// its own QPs and its own data CQ per context it posts on, so no QP has two posters
// and no CQ two pollers. It sees the engine only through a DatapathContext.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "lcore/poller.h"
#include "lcore/slot_ring.h"
#include "model/rdma_task.h"

namespace tent::rdma {

class DatapathContext;
class DirectPath;
class RdmaContext;
class RdmaEndPoint;

// Written by the poller's lcore only (foreground_slices: by any submitting thread):
// the lcore bumps its own with bumpLc(), a load and a store, no locked instruction.
struct PollerCounters {
  std::atomic<uint64_t> slices_posted{0};
  std::atomic<uint64_t> slices_completed{0};
  std::atomic<uint64_t> slice_errors{0};
  std::atomic<uint64_t> slice_retries{0};
  std::atomic<uint64_t> slice_timeouts{0};
  std::atomic<uint64_t> foreground_slices{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> dead_device_failures{0};  // slices failed for a dead device
};

class SlicePoller final : public lcore::Poller {
 public:
  enum class Kind : uint8_t { kRail, kBackground };
  // WRs built (and slices dequeued) per pass: the whole range of workers.burst.
  static constexpr uint32_t kMaxPost = 1024;
  static constexpr uint32_t kMaxChains = 8;  // distinct QPs posted per pass
  static constexpr uint32_t kPollBatch = 32;

  // `direct`: the direct path whose CQs a rail poller polls (nullptr for background).
  SlicePoller(DatapathContext& datapath, DirectPath* direct, uint32_t posting_index, Kind kind,
              size_t lcore);
  ~SlicePoller() override;
  Status init(uint32_t ring_size, uint32_t contexts);

  // Any thread: hands slices to this poller. Returns how many were taken.
  unsigned enqueue(RdmaSlice* const* slices, unsigned n) noexcept;
  void countForeground() noexcept {
    counters_.foreground_slices.fetch_add(1, std::memory_order_relaxed);
  }
  // Rail pollers: contexts whose direct CQs this poller polls.
  void addRailContext(RdmaContext* context) { rail_contexts_.push_back(context); }
  const std::vector<RdmaContext*>& railContexts() const noexcept { return rail_contexts_; }

  lcore::PollResult poll_lc() noexcept override;
  // Slices held or WRs on our CQs (rail: direct lanes in use): the lcore only naps.
  bool needsPolling_lc() const noexcept override;
  std::string_view name() const noexcept override { return name_; }
  Kind kind() const noexcept { return kind_; }
  uint32_t postingIndex() const noexcept { return posting_index_; }
  size_t lcore() const noexcept { return lcore_; }
  const PollerCounters& counters() const noexcept { return counters_; }
  // Slices this poller holds (queued, pending or in flight); for tests and stats.
  uint64_t heldSlices() const noexcept {
    // released_ first: both only grow and released_ <= claimed at every instant.
    const uint64_t released = released_.load(std::memory_order_acquire);
    return ring_->raw().claimed() - released;
  }

 private:
  struct Chain {
    fabric::QueuePair* qp = nullptr;
    RdmaContext* context = nullptr;
    fabric::SendWr* head = nullptr;
    fabric::SendWr* tail = nullptr;
    uint32_t count = 0;
  };

  unsigned drainRing_lc() noexcept;
  unsigned postPending_lc(uint64_t now) noexcept;
  enum class Stage : uint8_t { kStaged, kKeep, kGone };
  Stage stageSlice_lc(RdmaSlice* s, uint64_t now) noexcept;
  Stage forward_lc(RdmaSlice* s) noexcept;
  void postChains_lc(uint64_t now) noexcept;
  unsigned pollDataCqs_lc(uint64_t now) noexcept;
  void complete_lc(RdmaSlice* s, fabric::WcStatus status, uint64_t now) noexcept;
  void failOrRetry_lc(RdmaSlice* s, uint64_t now) noexcept;
  void finish_lc(RdmaSlice* s, SliceResult result) noexcept;
  // Returns the pass's finished slices to the pool (one CAS) and counts them released.
  void flushFinished_lc() noexcept;
  void checkTimeouts_lc(uint64_t now) noexcept;
  // Fails what this poller has posted on a dead device; returns how many.
  unsigned failDead_lc(uint32_t context) noexcept;

  // Intrusive lists: pending (singly linked; FIFO on background pollers, earliest
  // deadline first on rail pollers, FIFO among equal deadlines and after every
  // deadline for none) and in flight (doubly linked, post order).
  void pushPending_lc(RdmaSlice* s) noexcept;
  void mergePending_lc(RdmaSlice* head, RdmaSlice* tail) noexcept;
  void pushInflight_lc(RdmaSlice* s) noexcept;
  void unlinkInflight_lc(RdmaSlice* s) noexcept;
  // Timed out (TIMEOUT recorded), their WR awaiting its flush (doubly linked).
  void unlinkTimedOut_lc(RdmaSlice* s) noexcept;

  DatapathContext& dp_;
  DirectPath* const direct_;  // rail pollers only
  uint32_t posting_index_;
  Kind kind_;
  size_t lcore_;
  std::string name_;
  std::unique_ptr<lcore::SlotRing<RdmaSlice>> ring_;
  std::vector<RdmaContext*> rail_contexts_;
  std::vector<uint32_t> cq_inflight_;  // per context: WRs posted on our CQ, not yet polled

  RdmaSlice* pending_head_ = nullptr;
  RdmaSlice* pending_tail_ = nullptr;
  RdmaSlice* inflight_head_ = nullptr;
  RdmaSlice* inflight_tail_ = nullptr;
  RdmaSlice* timed_out_head_ = nullptr;
  RdmaSlice* timed_out_tail_ = nullptr;

  std::array<fabric::SendWr, kMaxPost> wrs_{};
  std::array<fabric::Sge, kMaxPost> sges_{};
  std::array<Chain, kMaxChains> chains_{};
  uint32_t staged_ = 0;
  uint32_t chain_count_ = 0;
  uint64_t passes_ = 0;
  uint32_t rr_ = 0;
  // Slices accounted this pass, returned to the pool together at its end.
  static constexpr uint32_t kFinishBatch = 256;
  std::array<RdmaSlice*, kFinishBatch> finished_{};
  uint32_t finished_count_ = 0;

  PollerCounters counters_;
  // The slices this poller holds are the ring's claims (every slice comes through it)
  // minus released_, which only the lcore writes: what it lets go of (finished, or
  // forwarded to another poller). Neither side writes a line the other writes on every
  // transfer, and an enqueue adds no atomic of its own to the ring's claim.
  alignas(64) std::atomic<uint64_t> released_{0};
};

}  // namespace tent::rdma
