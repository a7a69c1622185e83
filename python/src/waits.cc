#include "waits.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace tent::python {

namespace {

// How often a wait takes the GIL to run signal handlers: the Ctrl-C latency.
constexpr uint64_t kSignalCheckNs = 20'000'000;

// Runs Python's signal handlers; true when one raised (the error is then set).
bool signalRaised() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

}  // namespace

uint64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t deadlineAfter(double seconds) {
  const double ns = seconds * 1e9;
  const uint64_t now = steadyNowNs();
  if (ns >= static_cast<double>(UINT64_MAX - now)) return UINT64_MAX;
  return now + static_cast<uint64_t>(ns);
}

WaitOutcome waitTasks(TransferEngine& engine, BatchId batch, size_t first, size_t count,
                      uint64_t deadline_ns, const std::atomic<bool>& closed) {
  WaitOutcome out;
  py::gil_scoped_release nogil;
  uint64_t next_check = steadyNowNs() + kSignalCheckNs;
  for (size_t i = first; count == kAllTasks || i - first < count;) {
    if (closed.load(std::memory_order_acquire)) {
      out.error = Status::Canceled("the engine was closed during the wait");
      break;
    }
    const uint64_t now = steadyNowNs();
    if (now >= next_check) {
      if (signalRaised()) {
        out.interrupted = true;
        break;
      }
      next_check = now + kSignalCheckNs;
    }
    if (now >= deadline_ns) {
      out.error = Status::Timeout("task " + std::to_string(i) + " of batch " +
                                  std::to_string(batch) + " still pending");
      break;
    }
    auto st = engine.waitTransfer(batch, i, std::min(deadline_ns, next_check) - now);
    if (!st.ok()) {
      const StatusCode code = st.status().code();
      if (code == StatusCode::kTimeout) continue;  // a slice ended: signals, deadline
      if (code == StatusCode::kResourceExhausted) {
        // The batch completed; its notification waits for room at the target
        // (back-pressure): ask again until the deadline, then say so.
        if (steadyNowNs() + 1'000'000 >= deadline_ns) {
          out.error = st.status();
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (code == StatusCode::kOutOfRange && count == kAllTasks) break;  // past the last task
      out.error = st.status();
      break;
    }
    out.bytes += st->transferred_bytes;
    ++out.done;
    if (st->state != TransferState::COMPLETED) {
      if (out.failed++ == 0) {
        out.first_failed = i;
        out.state = st->state;
      }
    }
    ++i;
  }
  return out;
}

}  // namespace tent::python
