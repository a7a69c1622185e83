// Caller-side progress of the tcp provider: a poller that finds its CQ empty reads the
// sockets of the CQ's QPs with WRs outstanding itself, one non-blocking turn each (at
// most CqCore::kProgressTurns per poll), so a completion does not wait for the
// device's service thread to be scheduled - on a busy host that wait is the tail of a
// small round trip. The service thread stays the fallback and does everything a turn
// cannot (tcp_internal.h, head comment: the receive side's owner and the hand-off).
//
// Not the engine's datapath floor: the turn makes syscalls (recv/recvmsg, and the
// sendmsg of the responses it queues), as a NIC's doorbell and completion processing
// would be hardware. No allocation, no lock, never waits: a receive side someone else
// owns is left alone.
#include "fabric/tcp/tcp_internal.h"

namespace tent::fabric::tcp {

namespace {

// A QP worth a turn: WRs outstanding on an open connection. Read without owning the
// receive side (atomics only), so it is a hint; the turn itself checks again.
bool wantsTurn(const QpCore& q) noexcept {
  return q.done_pub.load(std::memory_order_acquire) != q.tail.load(std::memory_order_acquire) &&
         q.rx_conn.load(std::memory_order_acquire) != nullptr;
}

}  // namespace

bool CqCore::progress() noexcept {
  if (progress_head_.load(std::memory_order_acquire) == nullptr) return false;
  // Enter the current epoch's reader count; if the epoch moved meanwhile, a remover may
  // have looked at that count already: enter the new one instead.
  uint64_t epoch = progress_epoch_.load(std::memory_order_seq_cst);
  for (;;) {
    progress_inside_[epoch & 1].fetch_add(1, std::memory_order_seq_cst);
    const uint64_t now = progress_epoch_.load(std::memory_order_seq_cst);
    if (now == epoch) break;
    progress_inside_[epoch & 1].fetch_sub(1, std::memory_order_seq_cst);
    epoch = now;
  }
  // Start at a rotating place so that, with many QPs outstanding, each gets turns.
  const uint32_t count = progress_count_.load(std::memory_order_relaxed);
  const uint32_t start =
      count == 0 ? 0 : progress_cursor_.fetch_add(1, std::memory_order_relaxed) % count;
  int turns = 0;
  for (int pass = 0; pass < 2 && turns < kProgressTurns; ++pass) {
    uint32_t i = 0;
    for (QpCore* q = progress_head_.load(std::memory_order_acquire);
         q != nullptr && turns < kProgressTurns;
         q = q->progress_next.load(std::memory_order_acquire), ++i) {
      if ((pass == 0) != (i >= start)) continue;
      if (wantsTurn(*q) && q->dev->loop->callerTurn(*q)) ++turns;
    }
  }
  progress_inside_[epoch & 1].fetch_sub(1, std::memory_order_release);
  return turns != 0;
}

bool ServiceLoop::callerTurn(QpCore& q) noexcept {
  // The send side first: a send a full socket buffer cut short goes on as soon as there
  // is room, not when the service thread gets EPOLLOUT (nothing queued: no syscall).
  RxResult r = kickTx(q) == TxResult::kFault ? RxResult::kTxFault : RxResult::kAgain;
  uint32_t free = QpCore::kRxFree;
  if (q.rx_wanted.load(std::memory_order_seq_cst) ||
      !q.rx_owner.compare_exchange_strong(free, QpCore::kRxCaller, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
    if (r != RxResult::kAgain) wake();  // processQp acts on tx_stop / tx_abort
    return false;  // the service thread or another poller has it: leave it alone
  }
  Conn* c = q.rx_conn.load(std::memory_order_relaxed);
  // A hand-off not yet taken: the stream is the service thread's until it acts on it.
  if (c != nullptr && q.rx_handoff.load(std::memory_order_relaxed) == 0) {
    if (r == RxResult::kAgain) r = readStream(*c, /*caller=*/true);
    if (r == RxResult::kMore) {
      // Bytes left past the turn's budget: the stream stays open to pollers, and the
      // service thread reads on too (no edge-triggered event will say so again).
      q.rx_more.store(true, std::memory_order_relaxed);
    } else if (r != RxResult::kAgain) {
      q.rx_handoff.store(static_cast<uint8_t>(r), std::memory_order_relaxed);
    }
  }
  q.rx_owner.store(QpCore::kRxFree, std::memory_order_release);
  if (r != RxResult::kAgain) wake();  // the service thread takes the hand-off (scanQps)
  return true;
}

}  // namespace tent::fabric::tcp
