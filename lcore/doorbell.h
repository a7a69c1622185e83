// Doorbell: how a thread that hands work to a sleeping lcore wakes it, at the cost
// of one syscall only when the lcore really sleeps.
//
// The lcore, before it sleeps: arm_lc() (the state becomes kArmed, then a seq_cst
// fence), one more pass over its pollers (the re-check), and only if that pass
// found nothing wait_lc(). A producer, after its work is visible (the ring's tail
// moved): ring() (a seq_cst fence, then a load of the state; only if it reads kArmed
// does it take the doorbell and make the futex wake syscall).
//
// No lost wake-up: the two sides are the store-fence-load pattern (Dekker). The
// lcore stores kArmed, fences (F1), then loads the ring in its re-check pass; the
// producer stores the ring's tail, fences (F2), then loads the state. Both fences
// are in the single total order of seq_cst operations. If F2 precedes F1, the
// lcore's re-check, after F1, sees the tail written before F2 (and does not
// sleep). If F1 precedes F2, the producer's load, after F2, sees kArmed (or a later
// value) and rings. Either way the work is found. x86 reorders only a store with a
// later load, which is exactly what the fences forbid; DPDK's ring tail store is a
// release store the compiler may not move across the fence either.
//
// A producer whose slot another producer's tail update publishes (RTS and classic
// multi-producer rings publish in reservation order) is covered by that producer:
// it, too, rings after its enqueue returns, and its tail store publishes both.
//
// Naps (the lcore still expects completions nobody announces, so it sleeps at most
// idle.sleep_max_us) are not rung by producers: nap_lc() sets the state kNapping,
// which ring() ignores, and the nap ends on its timer as before the doorbell. A
// producer pays a syscall only towards an lcore that blocks until woken, and a
// napping consumer is not pulled onto its producer's CPU by every hand-over.
// Control threads (attach/detach, stop) use ringAlways(), which ends a nap too.
//
// futex, not eventfd: one syscall on each side, a timed wait on an absolute
// CLOCK_MONOTONIC deadline (so spurious wake-ups do not stretch a sleep), no fd.
#pragma once

#include <atomic>
#include <cstdint>

namespace tent::lcore {

class Doorbell {
 public:
  // ---- any thread ----
  // After making work visible to the owner's pollers (e.g. a ring enqueue): wakes
  // the owner when it sleeps or is about to. Awake owner: a fence and a load.
  void ring() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // F2, see above
    if (state_.load(std::memory_order_relaxed) == kArmed) wake(kArmed);
  }
  // Control threads (not the datapath): like ring(), and also ends a nap.
  void ringAlways() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // F2
    const uint32_t s = state_.load(std::memory_order_relaxed);
    if (s != kAwake) wake(s);
  }
  // futex wake syscalls made by ring() (for tests and stats).
  uint64_t wakes() const noexcept { return wakes_.load(std::memory_order_relaxed); }
  // Armed: the owner sleeps, or is in the re-check before a sleep (for tests and
  // stats; a snapshot, stale as soon as it is read).
  bool armed() const noexcept { return state_.load(std::memory_order_relaxed) == kArmed; }
  // Armed or napping.
  bool sleeping() const noexcept { return state_.load(std::memory_order_relaxed) != kAwake; }

  // ---- the owning lcore ----
  // From now on ring() wakes; the caller re-checks for work before wait_lc().
  void arm_lc() noexcept {
    state_.store(kArmed, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // F1, see above
  }
  // The re-check found work: no sleep after all.
  void disarm_lc() noexcept { state_.store(kAwake, std::memory_order_relaxed); }
  // After arm_lc() and a re-check that found nothing: sleeps until ring() or `us`
  // microseconds pass, and disarms. Returns true when it was rung.
  bool wait_lc(uint32_t us) noexcept { return sleep_lc(kArmed, us); }
  // A nap: sleeps `us` microseconds unless ringAlways() ends it (ring() does not).
  // No re-check needed: work handed over meanwhile waits at most the nap.
  bool nap_lc(uint32_t us) noexcept {
    state_.store(kNapping, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with ringAlways()'s
    return sleep_lc(kNapping, us);
  }

 private:
  static constexpr uint32_t kAwake = 0;
  static constexpr uint32_t kArmed = 1;
  static constexpr uint32_t kNapping = 2;
  void wake(uint32_t from) noexcept;  // out of line: the slow path
  bool sleep_lc(uint32_t state, uint32_t us) noexcept;

  alignas(64) std::atomic<uint32_t> state_{kAwake};
  std::atomic<uint64_t> wakes_{0};
};

}  // namespace tent::lcore
