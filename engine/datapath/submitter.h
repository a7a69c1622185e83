// Submitter: the worker-path submit and the request API of the datapath, on caller
// threads. It resolves each request once (source buffer, segment, target buffer,
// placement), routes it (the direct path when it accepts, else slices on the
// pollers), and serves status, cancel and abandon. RdmaTransport builds it and
// forwards the public API's calls to it. Setup in submitter.cc; the hot path in
// submitter_datapath.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "config/config.h"
#include "datapath/datapath_context.h"
#include "datapath/direct_path.h"
#include "model/control_requests.h"
#include "model/local_memory.h"
#include "model/rdma_task.h"
#include "model/segment_table.h"
#include "tent/transfer_engine.h"

namespace tent::rdma {

class RdmaEndPoint;

class Submitter {
 public:
  // `manual_lcores`: the lcores run only when the caller steps them, so a full poller
  // ring never drains while a submit waits for room: it fails at once instead.
  Submitter(const config::Config& config, DatapathContext& datapath, DirectPath& direct,
            const LocalMemory& local, ControlRequests& requests, bool manual_lcores);
  Submitter(const Submitter&) = delete;
  Submitter& operator=(const Submitter&) = delete;

  // Validates every request first (nothing is submitted when one is invalid), then
  // routes each: the direct path for latency-sensitive ones when it accepts, else slices
  // on the pollers. `tasks[i]` (contiguous) receives request i. Never waits on the
  // network: a peer that is down or backing off fails the call at once.
  Status submitTransferTasks(std::span<const Request> requests, RdmaTask* tasks,
                             uint64_t device_mask = ~0ull) noexcept;
  // Drives direct completions of a pending direct task, then reads its status.
  TransferStatus getTransferStatus(RdmaTask& task) noexcept;
  // Terminal means drained: CANCELED is published by the task's last slice.
  Status cancel(RdmaTask& task) noexcept;
  // The task's caller will not poll it any more (its batch was freed while WRs were
  // in flight): its direct lanes are reaped by the rail pollers.
  void abandon(RdmaTask& task) noexcept;
  // The one way to get an endpoint: a ready one, or nullptr after asking the control
  // plane to connect. Never blocks.
  RdmaEndPoint* getEndpointForContextIndex(uint32_t context, SegmentId segment,
                                           uint32_t peer_device) noexcept;

  // Tasks that took the worker path (statistics).
  uint64_t workerTasks() const noexcept { return worker_tasks_.load(std::memory_order_relaxed); }

 private:
  Status resolveRequest(const Request& req, size_t index, RdmaTask& task,
                        const LocalTableView& local, uint64_t device_mask) noexcept;
  // Routes one resolved task: TIMEOUT at once when already late, else the direct
  // path when it admitted and accepts, else the worker path. False when starved.
  bool routeTask(RdmaTask& task) noexcept;
  Status submitWorker(RdmaTask& task, uint64_t now) noexcept;
  bool enqueueSlice(RdmaTask& task, RdmaSlice* slice) noexcept;

  const config::Config& config_;
  DatapathContext& datapath_;
  DirectPath& direct_;
  const LocalMemory& local_;
  ControlRequests& requests_;
  const bool manual_lcores_;
  std::atomic<uint64_t> worker_tasks_{0};
};

}  // namespace tent::rdma
