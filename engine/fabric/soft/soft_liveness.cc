// The liveness anchor: how peers learn, without a syscall, that a soft provider's
// process died. A robust futex (futex(2), set_robust_list(2)): the anchor thread
// registers the `owner` word of each of its device headers in its robust list and
// stores its TID there; when the thread ends - the process was killed, crashed or
// exited, or the provider shut down and stopped it - the kernel sets
// FUTEX_OWNER_DIED in every word. A peer reads the word from its read-only mapping
// of the control file (ownerAlive()). The kernel marks the words while the process
// exits, before it closes the process's files: the order a NIC sees a host die in
// (its QPs stop answering once the process's verbs context is torn down).
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

namespace {

robust_list* entryOf(ControlHeader* h) noexcept {
  return reinterpret_cast<robust_list*>(&h->robust_next);
}

}  // namespace

Status LivenessAnchor::start(std::vector<ControlHeader*> headers) {
  headers_ = std::move(headers);
  thread_ = std::thread([this] { run(); });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return started_; });
  if (error_ != 0) {
    lock.unlock();
    stop();
    return Status::Internal(std::string("soft: set_robust_list failed: ") + std::strerror(error_));
  }
  return Status::OK();
}

void LivenessAnchor::run() {
  // The head lives on this thread's stack for as long as the thread: the kernel
  // reads it when the thread exits.
  robust_list_head head{};
  head.list.next = headers_.empty() ? &head.list : entryOf(headers_.front());
  head.futex_offset = static_cast<long>(offsetof(ControlHeader, owner)) -
                      static_cast<long>(offsetof(ControlHeader, robust_next));
  head.list_op_pending = nullptr;
  const auto tid = static_cast<uint32_t>(syscall(SYS_gettid));
  for (size_t i = 0; i < headers_.size(); ++i) {
    entryOf(headers_[i])->next = i + 1 < headers_.size() ? entryOf(headers_[i + 1]) : &head.list;
    headers_[i]->owner.store(tid, std::memory_order_release);
  }
  const bool registered = syscall(SYS_set_robust_list, &head, sizeof head) == 0;
  std::unique_lock<std::mutex> lock(mu_);
  if (!registered) {
    error_ = errno;
    for (ControlHeader* h : headers_) h->owner.store(0, std::memory_order_release);
  }
  started_ = true;
  cv_.notify_all();
  if (!registered) return;
  cv_.wait(lock, [this] { return stopping_; });
  // Returning ends the thread: the kernel now marks every word FUTEX_OWNER_DIED.
}

void LivenessAnchor::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

LivenessAnchor::~LivenessAnchor() {
  stop();
}

}  // namespace tent::fabric::soft
