// The futex syscall on an atomic word: the one call both sleepers of this floor make
// (the lcore's Doorbell, the callers' WaiterBell), written once.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

namespace tent::lcore {

// syscall(SYS_futex, word, op, val, timeout, nullptr, val3); its return value (errno set
// on failure). `val3` is FUTEX_WAIT_BITSET's mask; the other operations used ignore it.
long futexCall(std::atomic<uint32_t>& word, int op, uint32_t val, const timespec* timeout,
               uint32_t val3 = 0) noexcept;

}  // namespace tent::lcore
