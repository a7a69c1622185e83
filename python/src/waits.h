// Waiting for tasks without the GIL, interruptible by Ctrl-C and by close().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "binding.h"

namespace tent::python {

inline constexpr size_t kAllTasks = SIZE_MAX;

struct WaitOutcome {
  TransferState state = TransferState::COMPLETED;  // the first failure, or COMPLETED
  uint64_t bytes = 0;
  size_t done = 0;    // tasks that left PENDING, in task order from `first`
  size_t failed = 0;  // of those, not COMPLETED
  size_t first_failed = SIZE_MAX;
  Status error;              // the wait itself failed: timeout, unknown batch, engine closed
  bool interrupted = false;  // a signal handler raised (Ctrl-C): the Python error is set
};

// Waits for tasks [first, first + count) of `batch` (count kAllTasks: every task
// the batch has) until `deadline_ns` (steady clock). Called with the GIL held; it
// releases the GIL and takes it back briefly every few milliseconds to run
// signal handlers, so a KeyboardInterrupt ends the wait. Stops early, with
// `error`, when `closed` becomes true.
WaitOutcome waitTasks(TransferEngine& engine, BatchId batch, size_t first, size_t count,
                      uint64_t deadline_ns, const std::atomic<bool>& closed);

uint64_t steadyNowNs();
// now + seconds, saturating.
uint64_t deadlineAfter(double seconds);

}  // namespace tent::python
