// futexCall: the floor's one futex syscall. No allocation, no logging.
#include <sys/syscall.h>
#include <unistd.h>

#include "lcore/futex.h"

namespace tent::lcore {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "the futex word is the atomic's storage");

long futexCall(std::atomic<uint32_t>& word, int op, uint32_t val, const timespec* timeout,
               uint32_t val3) noexcept {
  // datapath-lint: allow(syscall) the doorbell's and the waiter bell's wake and wait
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, val, timeout, nullptr, val3);
}

}  // namespace tent::lcore
