// RdmaTransport: contexts, endpoints, segments, pollers and the two paths a
// request can take (direct, worker). Control-path members live in
// rdma_transport.cc / rdma_control.cc, the datapath in rdma_transport_datapath.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <tbb/concurrent_hash_map.h>

#include "config/config.h"
#include "engine/fabric/fabric.h"
#include "engine/metadata/bootstrap.h"
#include "engine/metadata/control_protocol.h"
#include "engine/rdma/endpoint_store.h"
#include "engine/rdma/rdma_context.h"
#include "engine/rdma/rdma_task.h"
#include "engine/rdma/segments.h"
#include "engine/rdma/slice_poller.h"
#include "engine/rdma/slicing.h"
#include "lcore/runtime.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"

namespace tent::rdma {

class DirectPath;

class RdmaTransport {
 public:
  static Result<std::unique_ptr<RdmaTransport>> create(std::shared_ptr<const config::Config> config,
                                                       fabric::Provider& provider,
                                                       const topology::RailMap& rails);
  ~RdmaTransport();
  RdmaTransport(const RdmaTransport&) = delete;
  RdmaTransport& operator=(const RdmaTransport&) = delete;

  // ---- control path ----
  const std::string& segmentName() const noexcept { return segment_name_; }
  uint64_t instance() const noexcept { return instance_; }
  Status registerBuffer(void* addr, size_t length, const Location& location, bool engine_allocated,
                        MemoryAccess access);
  std::shared_ptr<const LocalBufferTable> localTable() const { return local_table_.load(); }
  Status unregisterBuffer(void* addr, bool* engine_allocated, size_t* length);
  Result<SegmentId> openSegment(const std::string& name);
  Status closeSegment(SegmentId id);
  Result<std::vector<SegmentBufferInfo>> segmentBuffers(SegmentId id);
  // Refetches a peer descriptor (rate-limited for misses unless `force`). When the peer
  // restarted, its endpoints are reset (all but `keep`).
  Status refreshSegment(SegmentId id, bool force, const RdmaEndPoint* keep = nullptr);
  Status cancel(RdmaTask& task);
  void fillStats(EngineStats* out) const;

  // ---- datapath (caller threads) ----
  // Validates every request first (nothing is submitted when one is invalid), then
  // routes each: the direct path for latency-sensitive ones when it accepts, else slices
  // on the pollers. `tasks[i]` (contiguous) receives request i.
  Status submitTransferTasks(std::span<const Request> requests, RdmaTask* tasks,
                             uint64_t device_mask = ~0ull);
  // Drives direct completions of a pending direct task, then reads its status.
  TransferStatus getTransferStatus(RdmaTask& task) noexcept;
  // The one way to get an endpoint: a ready one, or nullptr after asking the control
  // thread to connect. Never blocks.
  RdmaEndPoint* getEndpointForContextIndex(uint32_t context, SegmentId segment,
                                           uint32_t peer_device) noexcept;

  // ---- shared with pollers and the direct path ----
  const config::Config& config() const noexcept { return *config_; }
  const topology::RailMap& rails() const noexcept { return rails_; }
  size_t contextCount() const noexcept { return contexts_.size(); }
  RdmaContext& context(size_t i) noexcept { return *contexts_[i]; }
  EndpointStore& endpoints() noexcept { return endpoints_; }
  SlicePool& slicePool() noexcept { return *slice_pool_; }
  DirectPath& direct() noexcept { return *direct_; }
  // Endpoints get a direct QP (and advertise it) unless the mode is off or the
  // config asks to advertise none (as a peer without direct support).
  bool directEnabled() const noexcept {
    return config_->direct.create_qp && config_->direct.mode != config::DirectMode::kOff;
  }
  // Picks the device pair for a slice (first try and retries); false when none.
  bool routeSlice(RdmaSlice& slice, uint64_t now) noexcept;
  uint64_t pausedMask(uint64_t now) const noexcept;
  // A direct slice that could not be posted continues on its context's rail poller.
  void fallbackSlice(RdmaTask& task, RdmaSlice* slice, uint64_t now) noexcept;
  // Finishes the slice's status (if not reported yet) and frees it.
  void finishSlice(RdmaSlice* slice, SliceResult result) noexcept;

  // ---- tests and tools ----
  lcore::Runtime& runtime() noexcept { return *runtime_; }
  size_t pollerCount() const noexcept { return pollers_.size(); }
  SlicePoller& poller(size_t i) noexcept { return *pollers_[i]; }
  // Manual lcore mode: one pass of every lcore; returns busy pollers.
  size_t stepPollers();

 private:
  explicit RdmaTransport(std::shared_ptr<const config::Config> config, fabric::Provider& provider,
                         const topology::RailMap& rails);
  Status init();
  Status planPollers();
  Status attachPollers();
  void detachPollers();
  std::shared_ptr<const PeerSegment> segment(SegmentId id) const;
  void publishLocalDescriptor();
  metadata::SegmentDescriptor buildLocalDescriptor() const;
  Result<metadata::SegmentDescriptor> fetchDescriptor(const std::string& name) const;
  void installSegment(SegmentId id, metadata::SegmentDescriptor d);
  void resetSegmentEndpoints(SegmentId id, const RdmaEndPoint* except);

  // Control thread: connects and retires endpoints; the listener answers peers.
  void controlLoop();
  void serviceSlot(EndpointSlot* slot);
  Status connectSlot(EndpointSlot* slot);
  metadata::ControlFrame handleControl(const metadata::ControlFrame& request);
  Result<metadata::BootstrapMessage> acceptBootstrap(const metadata::BootstrapMessage& request);

  // Submission helpers (datapath).
  Status resolveRequest(const Request& req, size_t index, RdmaTask& task,
                        const std::shared_ptr<const LocalBufferTable>& local, uint64_t device_mask);
  Status submitWorker(RdmaTask& task, uint64_t now) noexcept;
  bool enqueueSlice(RdmaTask& task, RdmaSlice* slice) noexcept;
  bool suspected(SegmentId id) const;
  void clearSuspect(SegmentId id);
  SlicePoller* pollerFor(const RdmaTask& task, const RdmaSlice& slice) noexcept;

  std::shared_ptr<const config::Config> config_;
  fabric::Provider& provider_;
  const topology::RailMap& rails_;
  std::vector<std::string> device_names_;
  std::vector<std::unique_ptr<RdmaContext>> contexts_;
  std::vector<std::unique_ptr<SlicePoller>> pollers_;
  std::vector<SlicePoller*> background_;
  std::vector<SlicePoller*> rail_of_context_;
  std::shared_ptr<lcore::Runtime> runtime_;
  std::unique_ptr<SlicePool> slice_pool_;
  std::unique_ptr<DirectPath> direct_;
  EndpointStore endpoints_;
  std::string segment_name_;
  uint64_t instance_ = 0;

  // Local memory: control path publishes a new table; readers take snapshots.
  std::mutex local_mu_;
  std::atomic<std::shared_ptr<const LocalBufferTable>> local_table_;
  std::atomic<uint64_t> local_version_{0};
  std::vector<uint8_t> local_descriptor_bytes_;  // under local_mu_

  // Peer segments (LOCAL_SEGMENT_ID included).
  using SegmentMap = tbb::concurrent_hash_map<SegmentId, std::shared_ptr<const PeerSegment>>;
  SegmentMap segments_;
  std::mutex segments_mu_;                        // open/close/refresh
  std::map<std::string, SegmentId> segment_ids_;  // under segments_mu_
  std::atomic<SegmentId> next_segment_{1};
  tbb::concurrent_hash_map<SegmentId, uint64_t> last_miss_refresh_ns_;
  // Segments whose peer could not be reached by the control thread: the next submit
  // refetches the descriptor first, so a restarted peer's new rkeys are used.
  tbb::concurrent_hash_map<SegmentId, bool> suspect_;

  // Passive endpoints, keyed by (our context, initiator instance, initiator device).
  std::mutex passive_mu_;
  std::vector<RdmaEndPoint*> passive_;

  std::unique_ptr<metadata::ControlServer> server_;
  std::thread control_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> worker_tasks_{0};
};

}  // namespace tent::rdma
