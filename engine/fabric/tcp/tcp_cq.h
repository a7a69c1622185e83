// The tcp provider's completion queue: a bounded MPMC ring of completions
// (Vyukov's), filled by the device's service thread and polled by any number of
// threads, each completion handed to exactly one. The one wait: the producer waits for
// a cell whose entry a poller took and has not yet given back (two statements of that
// poller's; see push()).
//
// A polled completion releases its WR's send-queue slot (and every unsignaled one
// before it) through the QP's word in the device's QpWords table: the slot count a
// poster sees is exact, as on verbs. The word also counts the completions of the QP
// still in the ring, so a QP destroyed with completions unpolled hands their CQ
// entries back only as they are polled (CQ admission stays exact).
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>

#include "fabric/fabric.h"

namespace tent::fabric::tcp {

struct QpCore;

inline constexpr uint32_t kQpSlotBits = 14;
inline constexpr uint32_t kMaxQps = 1u << kQpSlotBits;                // QPs per tcp device
inline constexpr uint32_t kQpGenerations = 1u << (24 - kQpSlotBits);  // qp_num stays 24 bits
inline constexpr uint32_t kMaxCqDepth = 1u << 22;

// One word per QP slot: generation (16 bits) | completions in a CQ not yet polled
// (16 bits) | WRs released by polling (32 bits, wrapping).
class QpWords {
 public:
  QpWords() : words_(std::make_unique<std::atomic<uint64_t>[]>(kMaxQps)) {}
  std::atomic<uint64_t>& operator[](uint32_t slot) noexcept { return words_[slot]; }

  static uint16_t generation(uint64_t w) noexcept { return static_cast<uint16_t>(w >> 48); }
  static uint32_t unpolled(uint64_t w) noexcept { return static_cast<uint32_t>(w >> 32) & 0xffff; }
  static uint32_t released(uint64_t w) noexcept { return static_cast<uint32_t>(w); }
  static uint64_t make(uint16_t gen, uint32_t unpolled, uint32_t released) noexcept {
    return uint64_t{gen} << 48 | uint64_t{unpolled & 0xffff} << 32 | released;
  }

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

struct Cqe {
  WorkCompletion wc;
  uint32_t qp_slot = 0;
  uint16_t qp_gen = 0;
  uint32_t seq = 0;   // the WR's number on its QP, low 32 bits
  bool recv = false;  // a receive: releases a receive-queue slot (the device's recv words)
};

class CqCore {
 public:
  CqCore(std::shared_ptr<QpWords> words, std::shared_ptr<QpWords> recv_words, uint32_t depth);

  uint32_t depth() const noexcept { return depth_; }
  const QpWords* words() const noexcept { return words_.get(); }
  // Service thread. false when the ring is full (the CQ overflowed: poll() returns -1).
  bool push(const Cqe& cqe) noexcept;
  int poll(WorkCompletion* wc, int max) noexcept;

  // A poll takes each completion in two steps: claim() takes the oldest one (its ring
  // position), handBack() gives its cell back to the producer once the completion is
  // copied out. They are public so that a test can hold a claim the way a preempted
  // poller does.
  struct Claim {
    uint64_t pos = 0;
    Cqe cqe;
  };
  bool claim(Claim* out) noexcept;
  void handBack(const Claim& claim) noexcept;

  // Caller-side progress (docs/fabric.md, "tcp provider"): a poll that finds the ring
  // empty gives a turn to the receive side of the QPs whose send CQ this is and that
  // have WRs outstanding (at most kProgressTurns per poll, starting at a rotating
  // place), then looks again. The list is read without a lock; a QP leaves it before
  // it is freed: removeProgress() unlinks it and waits until every poll that could have
  // seen it left progress() (two reader counts by epoch parity: a poll that starts after
  // the unlink counts in the other one, so the wait ends).
  static constexpr int kProgressTurns = 2;
  void addProgress(QpCore* qp);     // control path: the QP's creation (tcp_qp.cc)
  void removeProgress(QpCore* qp);  // control path: before the QP is freed
  bool progress() noexcept;         // a poll that found nothing (tcp_progress_datapath.cc)

  // CQ admission (control path): the send-queue entries of the QPs attached, plus the
  // completions of destroyed QPs not yet polled. Decremented by poll() for the latter.
  std::atomic<uint64_t> reserved{0};

 private:
  struct Cell {
    std::atomic<uint64_t> seq{0};
    Cqe data;
  };
  bool retire(const Cqe& c) noexcept;  // false: its QP is gone (a stale completion)
  int drain(WorkCompletion* wc, int max) noexcept;
  // push(): the cell a poller took an entry from and has not yet given back.
  void waitForCell(const Cell& cell, uint64_t pos) noexcept;

  std::shared_ptr<QpWords> words_;
  std::shared_ptr<QpWords> recv_words_;  // the same layout for receive queues
  const uint32_t depth_;
  const uint64_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint64_t> enqueue_{0};
  alignas(64) std::atomic<uint64_t> dequeue_{0};
  alignas(64) std::atomic<bool> overflowed_{false};

  std::mutex progress_mu_;  // writers of the list (control path)
  std::atomic<QpCore*> progress_head_{nullptr};
  std::atomic<uint32_t> progress_count_{0};
  alignas(64) std::atomic<uint64_t> progress_epoch_{0};
  std::atomic<uint32_t> progress_inside_[2] = {};
  std::atomic<uint32_t> progress_cursor_{0};
};

class TcpCq final : public CompletionQueue {
 public:
  explicit TcpCq(std::shared_ptr<CqCore> core) : core_(std::move(core)) {}
  int poll(WorkCompletion* wc, int max) noexcept override { return core_->poll(wc, max); }
  uint32_t depth() const noexcept override { return core_->depth(); }
  const std::shared_ptr<CqCore>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<CqCore> core_;
};

}  // namespace tent::fabric::tcp
