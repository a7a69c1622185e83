// The submitter's hot path, on caller threads: resolution, routing, status and
// cancel. No allocation and no blocking; nothing here waits on the network. A request
// to a peer that is down or backing off fails at once; a target range missing from
// the cached descriptor fails at once and asks the control plane to refetch it.
#include <cassert>
#include <cstdio>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/ebr.h"
#include "datapath/submitter.h"
#include "model/slicing.h"

namespace tent::rdma {

namespace {

// datapath-lint: allow(allocation, noexcept) builds error messages only
std::string hexRange(const void* addr, uint64_t len) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%p, +%lu)", addr, static_cast<unsigned long>(len));
  return buf;
}

// A v1/v2 peer does not advertise access (0): its NIC alone decides.
bool targetPermits(const metadata::BufferDescriptor& b, OpCode op) noexcept {
  if (b.access == 0) return true;
  return (b.access &
          (op == OpCode::WRITE ? metadata::kBufferRemoteWrite : metadata::kBufferRemoteRead)) != 0;
}

thread_local uint32_t tls_rr = 0;

}  // namespace

Status Submitter::resolveRequest(const Request& req, size_t index, RdmaTask& task,
                                 const LocalTableView& local, uint64_t device_mask) noexcept {
  // Messages are built only on failure: the accepted path allocates nothing.
  // datapath-lint: allow(allocation) called on error returns only
  auto where = [index] { return "request " + std::to_string(index) + ": "; };
  if (req.length == 0) return Status::InvalidArgument(where() + "zero length");
  if (req.opcode != OpCode::READ && req.opcode != OpCode::WRITE)
    return Status::InvalidArgument(where() + "unknown opcode");
  auto source = reinterpret_cast<uint64_t>(req.source);
  const LocalBuffer* lb = req.source ? local.table->find(source, req.length) : nullptr;
  if (!lb)
    return Status::InvalidArgument(where() + "source " + hexRange(req.source, req.length) +
                                   " is not inside registered local memory");
  SegmentRecord* rec = datapath_.segments().find(req.target_id);
  if (!rec)
    return Status::NotFound(where() + "segment " + std::to_string(req.target_id) + " is not open");
  auto peer = rec->peer();
  if (!rec->up.load(std::memory_order_acquire) || !peer) {
    const uint64_t now = clock::engineNowNs(),
                   at = rec->retry_at_ns.load(std::memory_order_relaxed);
    return Status::Unavailable(
        where() + "segment " + (peer ? peer->name : std::string("?")) +
        " is unreachable; reconnecting" +
        (at > now ? ", next attempt in " + std::to_string((at - now) / 1'000'000) + " ms"
                  : std::string()));
  }
  const auto* tb = peer->descriptor.findBuffer(req.target_offset, req.length);
  if (!tb) {
    requests_.queueRefresh(req.target_id);  // the peer may have registered more since
    return Status::OutOfRange(where() + "target " +
                              hexRange(reinterpret_cast<void*>(req.target_offset), req.length) +
                              " is not inside the peer's registered memory");
  }
  // Refused here, as the peer's NIC would refuse it, but naming the range and the
  // access. The peer may have registered the range anew since: refetch.
  if (!targetPermits(*tb, req.opcode)) {
    requests_.queueRefresh(req.target_id);
    const bool write = req.opcode == OpCode::WRITE;
    return Status::PermissionDenied(
        where() + (write ? "WRITE to" : "READ from") + " target " +
        hexRange(reinterpret_cast<void*>(req.target_offset), req.length) +
        " refused (remote access error): the peer registered buffer " +
        (tb->name.empty() ? std::string() : "'" + tb->name + "' ") +
        hexRange(reinterpret_cast<void*>(tb->addr), tb->length) + " " +
        (write ? "read-only (access r)" : "write-only (access w)"));
  }
  // Every slice is one WR of at most the max message size: refuse what cannot be cut
  // into slices this engine can hold (never truncate).
  const uint64_t slices =
      sliceCount(req.length, config_.workers.block_size, datapath_.maxWrBytes());
  if (slices > datapath_.slicePool().capacity())
    return Status::InvalidArgument(
        where() + "length " + std::to_string(req.length) + " needs " + std::to_string(slices) +
        " slices of at most " +
        std::to_string(std::min(config_.workers.block_size, datapath_.maxWrBytes())) +
        " bytes, more than workers.slice_pool (" +
        std::to_string(datapath_.slicePool().capacity()) + ")");
  // Last, once nothing else can refuse the request: the task uses the buffer until it
  // ends, and an unregistration that got there first makes the pin fail.
  if (!lb->use.pin())
    return Status::InvalidArgument(where() + "source " + hexRange(req.source, req.length) +
                                   " is in memory being unregistered");
  task.source_use = &lb->use;
  topology::LocationId location = topology::kAnyLocation;
  (void)topology::bufferLocationForRange(local.table->layouts, source, req.length, &location);
  task.local_table = local.table;  // the task's reference: its slices outlive this section
  task.local_buffer = lb;
  task.target_buffer = static_cast<uint32_t>(tb - peer->descriptor.buffers.data());
  task.peer = std::move(peer);
  task.location = location;
  task.device_mask = device_mask & lb->device_mask;  // GPU memory: NICs that reach its GPU
  const DirectDecline admission = direct_.admission(req);
  task.direct_admission = static_cast<uint8_t>(admission);
  task.latency_sensitive = admission != DirectDecline::kNotLatencySensitive;
  task.priority_lane = task.latency_sensitive && datapath_.priorityLane();
  task.record = rec;
  return Status::OK();
}

Status Submitter::submitTransferTasks(std::span<const Request> requests, RdmaTask* tasks,
                                      uint64_t device_mask) noexcept {
  ebr::ReadSection section;
  const LocalTableView& local = *local_.view();  // held by this read section
  for (size_t i = 0; i < requests.size(); ++i) {
    tasks[i].request = requests[i];
    Status s = resolveRequest(requests[i], i, tasks[i], local, device_mask);
    if (!s.ok()) {
      releaseSources(tasks, i);  // nothing of the call runs
      for (size_t k = 0; k < i; ++k) tasks[k].record = nullptr;
      return s;
    }
  }
  size_t starved = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!routeTask(tasks[i])) ++starved;
    tasks[i].record = nullptr;  // this read section's, not the task's
  }
  if (starved)
    return Status::ResourceExhausted(std::to_string(starved) +
                                     " tasks failed: slice pool or poller rings exhausted");
  return Status::OK();
}

bool Submitter::routeTask(RdmaTask& task) noexcept {
  // Each task's own submit time: a late request in a long batch is judged by it,
  // on the deadline's own clock (steady_clock; the engine clock is for durations).
  const uint64_t now = clock::engineNowNs();
  if (task.request.deadline_ns != 0 && task.request.deadline_ns <= steadyNowNs()) {
    // Already late: not started (nothing posted, no byte moved), TIMEOUT at once.
    task.endUnstarted(TransferState::TIMEOUT);
    datapath_.completions().countExpiredAtSubmit();
    return true;
  }
  datapath_.placeTask(task, now);  // the one device placement of the request
  assert(task.direct_admission != RdmaTask::kAdmissionUnset);  // resolveRequest sets it
  const auto admission = static_cast<DirectDecline>(task.direct_admission);
  if (task.direct_admission == RdmaTask::kAdmissionUnset) {
    // Never resolved (a path that forgot DirectPath::admission()): the worker path.
  } else if (admission == DirectDecline::kAccepted) {
    if (direct_.trySubmitDirect(task, now) == DirectDecline::kAccepted) return true;
  } else if (task.latency_sensitive) {
    direct_.countDecline(admission);  // declined by direct.mode or direct.max_bytes
  }
  return submitWorker(task, now).ok();
}

Status Submitter::submitWorker(RdmaTask& task, uint64_t now) noexcept {
  const Request& req = task.request;
  const uint64_t block = config_.workers.block_size;
  const uint64_t max_wr = datapath_.maxWrBytes();
  const uint64_t count = sliceCount(req.length, block, max_wr);  // <= slice pool (resolve)
  task.reset(req, static_cast<uint32_t>(count));
  const uint32_t rr = tls_rr++;
  bool starved = false;
  for (uint64_t k = 0; k < count; ++k) {
    RdmaSlice* s = count == 1 ? task.takeInlineSlice()
                   : starved  ? nullptr
                              : datapath_.slicePool().allocate();
    if (!s) {  // account the slices we cannot carry: the task fails, nothing leaks
      starved = true;
      (void)datapath_.settleSlice(task, 0, SliceResult::kFailed);
      continue;
    }
    uint64_t off = 0, len = 0;
    sliceRange(req.length, block, k, &off, &len, max_wr);
    s->init(task, off, len, static_cast<uint16_t>(rr + k), now);  // len <= max_wr: one WR
    if (!datapath_.placeSlice(*s)) {
      datapath_.finishSlice(s, SliceResult::kFailed);
      continue;
    }
    if (!enqueueSlice(task, s)) starved = true;
  }
  // After the slices: a locked add right after reset() would wait for the task's lines
  // (last written by the lcore that completed its previous use) before the slices are
  // built; here the ring's claim has already waited for them.
  worker_tasks_.fetch_add(1, std::memory_order_relaxed);
  return starved ? Status::ResourceExhausted("starved") : Status::OK();
}

bool Submitter::enqueueSlice(RdmaTask& task, RdmaSlice* s) noexcept {
  // Rings full: the pollers are draining them; wait a bounded time (backpressure).
  const uint64_t give_up = clock::engineNowNs() + 1000000000ull;
  while (!datapath_.enqueue(task, s, task.record)) {
    if (manual_lcores_ || clock::engineNowNs() > give_up ||
        !datapath_.pollerFor(task, *s, task.record)) {
      datapath_.finishSlice(s, SliceResult::kFailed);
      return false;
    }
    // The caller's own submit waits (bounded) for room on a local ring, never on the
    // network or a peer. datapath-lint: allow(blocking) backpressure
    std::this_thread::yield();
  }
  return true;
}

TransferStatus Submitter::getTransferStatus(RdmaTask& task) noexcept {
  // A direct task with WRs still posted (pending, or canceled and draining) is
  // driven by its caller: poll its contexts' direct CQs.
  if (task.direct.load(std::memory_order_acquire) &&
      task.slices_left.load(std::memory_order_acquire) != 0) {
    ebr::ReadSection section;
    direct_.pollTask(task);
  }
  TransferStatus st;
  st.state = task.loadState();
  // A pending task of one slice has no progress to report before its end; not reading
  // the completion line while the task runs leaves it to the core that updates it.
  if (st.state != TransferState::PENDING || task.slice_count > 1)
    st.transferred_bytes = task.transferred_bytes.load(std::memory_order_relaxed);
  return st;
}

Status Submitter::cancel(RdmaTask& task) noexcept {
  // Terminal means drained: CANCELED is published by the task's last slice, once no
  // WR of it can touch the caller's memory. Slices not posted yet are dropped; posted
  // WRs drain through normal completion (their bytes count).
  if (task.loadState() != TransferState::PENDING) return Status::OK();
  task.cancel_requested.store(true, std::memory_order_release);
  task.recordError(TransferState::CANCELED);
  if (task.direct.load(std::memory_order_acquire)) {
    ebr::ReadSection section;
    direct_.abandon(task);  // the rail poller reaps it if its caller stops polling
    direct_.pollTask(task);
  }
  return Status::OK();
}

void Submitter::abandon(RdmaTask& task) noexcept {
  if (!task.referenced() || !task.direct.load(std::memory_order_acquire)) return;
  ebr::ReadSection section;
  direct_.abandon(task);
}

RdmaEndPoint* Submitter::getEndpointForContextIndex(uint32_t context, SegmentId segment,
                                                    uint32_t peer_device) noexcept {
  ebr::ReadSection section;
  return direct_.getEndpointForContextIndex(context, segment, peer_device, clock::engineNowNs());
}

}  // namespace tent::rdma
