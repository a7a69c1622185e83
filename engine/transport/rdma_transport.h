// RdmaTransport: wires the parts of the RDMA transport together and serves the
// public API's requests.
//   contexts      one per fabric device: its CQs, direct lane, health
//   pollers       rail and background pollers on the lcores (the worker path)
//   datapath      the narrow context pollers and the direct path see
//   local memory  registered buffers and the local descriptor
//   segments      the segment table (records, endpoint slots) the datapath reads
//   control plane the event-loop thread: listener, sessions, endpoint lifecycles
//   submitter     the datapath's request API: submit, status, cancel (it forwards)
// Setup lives in rdma_transport.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "control/control_plane.h"
#include "datapath/datapath_context.h"
#include "datapath/direct_path.h"
#include "datapath/slice_poller.h"
#include "datapath/submitter.h"
#include "fabric/fabric.h"
#include "lcore/runtime.h"
#include "model/control_requests.h"
#include "model/local_memory.h"
#include "model/rdma_context.h"
#include "model/rdma_task.h"
#include "model/segment_table.h"
#include "notify/notify_inbox.h"
#include "notify/notify_link.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"

namespace tent::rdma {

class RdmaTransport {
 public:
  static Result<std::unique_ptr<RdmaTransport>> create(std::shared_ptr<const config::Config> config,
                                                       fabric::Provider& provider,
                                                       const topology::RailMap& rails);
  ~RdmaTransport();
  RdmaTransport(const RdmaTransport&) = delete;
  RdmaTransport& operator=(const RdmaTransport&) = delete;

  // ---- control path ----
  const std::string& segmentName() const noexcept { return control_->segmentName(); }
  const std::string& controlAddress() const noexcept { return control_->controlAddress(); }
  uint64_t instance() const noexcept { return control_->instance(); }
  Status registerBuffer(void* addr, size_t length, const Location& location, bool engine_allocated,
                        MemoryAccess access, const std::string& name = "");
  // Refused while tasks use the buffer, or cancels them (LocalMemory::unregisterBuffer).
  Status unregisterBuffer(void* addr, UnregisterMode mode);
  std::shared_ptr<const LocalBufferTable> localTable() const { return local_->table(); }
  const LocalMemory& localMemory() const noexcept { return *local_; }
  Result<SegmentId> openSegment(const std::string& name) { return control_->openSegment(name); }
  Status closeSegment(SegmentId id) { return control_->closeSegment(id); }
  Result<std::vector<SegmentBufferInfo>> segmentBuffers(SegmentId id);
  // The task's caller will not poll it any more (its batch was freed while WRs were
  // in flight): its direct lanes are reaped by the rail pollers (Submitter::abandon).
  void abandon(RdmaTask& task) noexcept { submitter_->abandon(task); }
  void fillStats(EngineStats* out) const;

  // ---- notifications (rdma_transport_notify*.cc) ----
  // One message to `target` over the notify QP of its endpoint (context 0, peer device
  // 0: one QP per sender keeps arrival order), waiting (lcore::waiterPolicy) for the
  // endpoint to connect and the peer's NIC to acknowledge, at most notify.timeout_ms.
  Status sendNotification(SegmentId target, std::string_view message);
  // Datapath: posts one message to `target` and returns at once (a batch's notification,
  // sent from a status poll). kRetry while the endpoint connects or every send buffer
  // awaits its acknowledgement. Counts the outcome (sent, refused, unsupported, failed).
  // `link` / `ticket` (optional) receive the link and the SEND's ticket.
  notify::PostResult postNotification(SegmentId target, std::string_view message,
                                      std::shared_ptr<notify::NotifyLink>* link = nullptr,
                                      uint64_t* ticket = nullptr) noexcept;
  // What arrived (waiting up to `timeout_ns` for something; 0 = one look).
  Result<std::vector<Notification>> takeNotifications(uint64_t timeout_ns);
  notify::Counters& notifyCounters() noexcept { return notify_counters_; }
  const notify::Inbox& inbox() const noexcept { return *inbox_; }

  // ---- datapath (caller threads): the Submitter's (datapath/submitter.h) ----
  Status submitTransferTasks(std::span<const Request> requests, RdmaTask* tasks,
                             uint64_t device_mask = ~0ull) noexcept {
    return submitter_->submitTransferTasks(requests, tasks, device_mask);
  }
  TransferStatus getTransferStatus(RdmaTask& task) noexcept {
    return submitter_->getTransferStatus(task);
  }
  Status cancel(RdmaTask& task) noexcept { return submitter_->cancel(task); }
  RdmaEndPoint* getEndpointForContextIndex(uint32_t context, SegmentId segment,
                                           uint32_t peer_device) noexcept {
    return submitter_->getEndpointForContextIndex(context, segment, peer_device);
  }

  // ---- shared with tests and tools ----
  const config::Config& config() const noexcept { return *config_; }
  const topology::RailMap& rails() const noexcept { return rails_; }
  size_t contextCount() const noexcept { return contexts_.size(); }
  RdmaContext& context(size_t i) noexcept { return *contexts_[i]; }
  SlicePool& slicePool() noexcept { return *slice_pool_; }
  DirectPath& direct() noexcept { return *direct_; }
  DatapathContext& datapath() noexcept { return *datapath_; }
  control::ControlPlane& control() noexcept { return *control_; }
  bool directEnabled() const noexcept {
    return config_->direct.create_qp && config_->direct.mode != config::DirectMode::kOff;
  }
  lcore::Runtime& runtime() noexcept { return *runtime_; }
  size_t pollerCount() const noexcept { return pollers_.size(); }
  SlicePoller& poller(size_t i) noexcept { return *pollers_[i]; }
  // Manual lcore mode: one pass of every lcore; returns busy pollers.
  size_t stepPollers();

 private:
  RdmaTransport(std::shared_ptr<const config::Config> config, fabric::Provider& provider,
                const topology::RailMap& rails);
  Status makeSlicePool();
  Status init();
  Status planPollers();
  Status initContexts();
  Status attachPollers();
  void detachPollers();

  std::shared_ptr<const config::Config> config_;
  fabric::Provider& provider_;
  const topology::RailMap& rails_;
  std::vector<std::unique_ptr<RdmaContext>> contexts_;
  std::vector<std::unique_ptr<SlicePoller>> pollers_;
  std::vector<uint32_t> background_;  // posting indices
  std::vector<SlicePoller*> rail_of_context_;
  std::shared_ptr<lcore::Runtime> runtime_;
  std::unique_ptr<SlicePool> slice_pool_;
  std::unique_ptr<SegmentTable> segments_;
  std::unique_ptr<ControlRequests> requests_;
  std::unique_ptr<DatapathContext> datapath_;
  std::unique_ptr<DirectPath> direct_;
  std::unique_ptr<LocalMemory> local_;
  std::unique_ptr<Submitter> submitter_;
  notify::Counters notify_counters_;
  std::unique_ptr<notify::Inbox> inbox_;  // outlives the control plane's endpoints
  std::unique_ptr<control::ControlPlane> control_;
};

}  // namespace tent::rdma
