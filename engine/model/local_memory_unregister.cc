// Unregistering local memory (LocalMemory, local_memory.h): never while a task uses
// it. Each buffer counts the tasks whose source lies in it (BufferUse, pinned when a
// request is resolved, unpinned when its task ends); a buffer is removed only once it
// is retired with no pin held, so no task can start on it afterwards and none is left
// that could post from or into it. Control path.

#include "base/clock.h"
#include "base/hex.h"
#include "lcore/idle.h"
#include "model/local_memory.h"

namespace tent::rdma {

namespace {

std::string transfers(uint64_t n) {
  return std::to_string(n) + (n == 1 ? " transfer" : " transfers");
}

uint64_t usersOf(const std::vector<std::shared_ptr<LocalBuffer>>& group) {
  uint64_t n = 0;
  for (const auto& b : group) n += b->use.users();
  return n;
}

}  // namespace

Result<LocalMemory::BufferList> LocalMemory::groupLocked(uint64_t group) const {
  BufferList out;
  for (const auto& b : view_.load(std::memory_order_relaxed)->table->buffers)
    if (b->group == group) out.push_back(b);
  if (out.empty()) return Status::NotFound("unregister: no buffer registered at this address");
  for (const auto& b : out)
    if (b->use.retired())
      return Status::FailedPrecondition("unregister: the buffer at " + hexAddr(group) +
                                        " is being unregistered by another call");
  return out;
}

void LocalMemory::removeLocked(uint64_t group, const BufferList& buffers) {
  auto table = std::make_shared<LocalBufferTable>(*view_.load(std::memory_order_relaxed)->table);
  for (size_t i = table->buffers.size(); i-- > 0;) {
    if (table->buffers[i]->group != group) continue;
    table->layouts.erase(table->layouts.begin() + static_cast<std::ptrdiff_t>(i));
    table->buffers.erase(table->buffers.begin() + static_cast<std::ptrdiff_t>(i));
  }
  table->version = ++version_;
  publishLocked(std::move(table));
  // Retired with no pin: nothing posts with these keys any more. Old snapshots (a
  // reader's, a finished task's) keep the LocalBuffer, not its registrations: a peer's
  // READ or WRITE with the old rkey now fails as on a NIC.
  for (const auto& b : buffers)
    for (auto& mr : b->mrs) mr.reset();
}

Status LocalMemory::unregisterBuffer(void* addr, UnregisterMode mode, uint64_t drain_ns) {
  if (mode != UnregisterMode::kFailIfInUse && mode != UnregisterMode::kCancelTransfers)
    return Status::InvalidArgument("unregister: unknown UnregisterMode");
  const auto group = reinterpret_cast<uint64_t>(addr);
  BufferList buffers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TENT_ASSIGN_OR_RETURN(buffers, groupLocked(group));
    if (mode == UnregisterMode::kFailIfInUse) {
      // All or nothing: a buffer retired here is given back when another is in use.
      uint64_t users = 0;
      std::vector<LocalBuffer*> retired;
      for (const auto& b : buffers) {
        const uint64_t n = b->use.tryRetire();  // never kRetiredAlready: groupLocked, mu_
        if (n == 0)
          retired.push_back(b.get());
        else
          users += n;
      }
      if (users != 0) {
        for (LocalBuffer* b : retired) b->use.unretire();
        return Status::FailedPrecondition(
            "unregister: " + transfers(users) + " in progress use the memory at " + hexAddr(group) +
            "; let them finish, cancel them, or unregister with cancellation "
            "(UnregisterMode::kCancelTransfers; Python: cancel=True)");
      }
      removeLocked(group, buffers);
    } else {
      for (const auto& b : buffers) b->use.retireAndCancel();
    }
  }
  if (mode == UnregisterMode::kCancelTransfers) TENT_RETURN_IF_ERROR(drain(buffers, drain_ns));
  if (on_change_) on_change_();
  return Status::OK();
}

// The buffers are retired and their tasks asked to cancel: waits (never holding the
// mutex, which the control thread takes to serve the descriptor) until no task uses
// them, then removes them. Past the bound it gives them back, registered.
Status LocalMemory::drain(const BufferList& buffers, uint64_t drain_ns) {
  lcore::IdleBackoff backoff(lcore::waiterPolicy(1000));
  const uint64_t deadline = clock::engineNowNs() + drain_ns;
  uint64_t users = usersOf(buffers);
  while (users != 0 && clock::engineNowNs() < deadline) {
    backoff.onIdle();
    users = usersOf(buffers);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (users != 0) {
    for (const auto& b : buffers) b->use.unretire();
    return Status::Timeout("unregister: " + transfers(users) + " canceled on the memory at " +
                           hexAddr(buffers.front()->group) + " still draining after " +
                           std::to_string(drain_ns / 1'000'000) +
                           " ms (timeouts.unregister_drain_ms); it stays registered");
  }
  removeLocked(buffers.front()->group, buffers);
  return Status::OK();
}

}  // namespace tent::rdma
