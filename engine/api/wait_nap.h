// How long waitTransfer's caller sleeps per nap once its spin is over.
//
// A worker task's end always rings the completion bell (the thread that accounts its
// last slice, lcore/waiter_bell.h), so its waiter sleeps the whole bound at once, the
// bound being only a safety net: each nap that ends unrung is a wake-up that takes a
// CPU from the threads moving the bytes (with the backoff's ramp from 1 us, every
// timed wait stretched by the kernel's timer slack, a 4 MiB transfer over tcp cost its
// waiter about ten). A direct task's completions appear only when its caller polls the
// direct CQ, so that waiter follows the backoff's ramp up to a short bound. No nap runs
// past the wait's deadline.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tent {

inline constexpr uint32_t kDirectWaitNapUs = 100;
inline constexpr uint32_t kWorkerWaitNapUs = 2000;

// `backoff_us`: the idle backoff's next sleep; `ns_left`: time to the wait's deadline.
constexpr uint32_t waitNapUs(bool direct, uint32_t backoff_us, uint64_t ns_left) noexcept {
  const uint64_t nap = direct ? std::min<uint64_t>(backoff_us, kDirectWaitNapUs) : kWorkerWaitNapUs;
  const uint64_t until_deadline = ns_left / 1000 + 1;  // at least 1 us: the wait ends
  return static_cast<uint32_t>(std::min(nap, until_deadline));
}

}  // namespace tent
