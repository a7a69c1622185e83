// TransferEngineImpl: the public API over the RDMA transport. Owns the config,
// topology, fabric provider, rail map, transport and the batch table.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "api/batch_table.h"
#include "config/config.h"
#include "cuda/cuda_memory.h"
#include "fabric/fabric.h"
#include "metrics/exporter.h"
#include "model/rdma_task.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"
#include "topology/topology.h"
#include "transport/rdma_transport.h"

namespace tent {

class TransferEngineImpl final : public TransferEngine {
 public:
  static Result<std::unique_ptr<TransferEngineImpl>> create(
      std::shared_ptr<const config::Config> config);
  ~TransferEngineImpl() override;

  std::string segmentName() const override { return transport_->segmentName(); }
  std::string controlAddress() const override { return transport_->controlAddress(); }
  // Same default arguments as the interface, so calls through the impl type work too.
  Result<void*> allocateLocalMemory(size_t length, const Location& location = "*",
                                    MemoryAccess access = MemoryAccess::kRemoteReadWrite,
                                    const std::string& name = "") override;
  Status freeLocalMemory(void* addr, UnregisterMode mode = UnregisterMode::kFailIfInUse) override;
  Status registerLocalMemory(void* addr, size_t length, const Location& location = "*",
                             MemoryAccess access = MemoryAccess::kRemoteReadWrite,
                             const std::string& name = "") override;
  Status unregisterLocalMemory(void* addr,
                               UnregisterMode mode = UnregisterMode::kFailIfInUse) override;
  Result<SegmentId> openSegment(const std::string& name) override;
  Status closeSegment(SegmentId id) override;
  Result<std::string> localMetadata() override;
  Result<SegmentId> addRemoteMetadata(std::string_view blob) override;
  Result<std::vector<SegmentBufferInfo>> segmentBuffers(SegmentId id) override;
  Result<BatchId> allocateBatch(size_t capacity) override;
  Status freeBatch(BatchId batch) override;
  Status submitTransfer(BatchId batch, std::span<const Request> requests) noexcept override;
  Status submitTransfer(BatchId batch, std::span<const Request> requests,
                        std::string_view notification) override;
  Status sendNotification(SegmentId target, std::string_view message) override;
  Result<std::vector<Notification>> getNotifications() override;
  Result<std::vector<Notification>> waitNotifications(uint64_t timeout_ns) override;
  Result<TransferStatus> getTransferStatus(BatchId batch, size_t task_id) noexcept override;
  Result<TransferStatus> getBatchTransferStatus(BatchId batch) noexcept override;
  Status cancelTransfer(BatchId batch, size_t task_id) noexcept override;
  Result<TransferStatus> waitTransfer(BatchId batch, size_t task_id, uint64_t timeout_ns) override;
  EngineStats stats() const override;
  std::string metricsAddress() const override;
  void cancelWaits() override;

  // Internal (tests, tools): submit with a device mask (bit i = device i).
  Status submitTransferWithMask(BatchId batch, std::span<const Request> requests,
                                uint64_t mask) noexcept;
  rdma::RdmaTransport& transport() noexcept { return *transport_; }
  fabric::Provider& provider() noexcept { return *provider_; }
  const config::Config& config() const noexcept { return *config_; }
  // The metrics endpoint, or nullptr when metrics.listen is empty (tests: its port).
  const metrics::Exporter* metricsExporter() const noexcept { return metrics_.get(); }
  // The task object behind (batch, task id), or nullptr (tests).
  rdma::RdmaTask* taskFor(BatchId batch, size_t task_id);
  const BatchTable& batches() const noexcept { return batches_; }  // tests

 private:
  TransferEngineImpl() = default;
  // The batch's notification, once its tasks are terminal (engine_impl_notify_datapath.cc):
  // posts it when `total` is COMPLETED (never waits: PENDING while it cannot be posted
  // yet), drops it when the batch failed. Returns what the status call returns.
  Result<TransferStatus> settleNotification(BatchSlot& batch, TransferStatus total) noexcept;
  // freeBatch of a batch that still carries its notification (engine_impl_notify.cc):
  // posts it if the batch completed (waiting up to notify.timeout_ms for an endpoint or
  // a send buffer), else drops it. What freeBatch returns.
  Status settleNotificationOnFree(BatchId id, BatchSlot& batch);
  Result<void*> allocateDeviceMemory(size_t length, int gpu, const Location& location,
                                     MemoryAccess access, const std::string& name);

  std::shared_ptr<const config::Config> config_;
  std::unique_ptr<topology::Topology> topology_;
  std::unique_ptr<fabric::Provider> provider_;
  std::string provider_choice_;  // why provider_ serves (fabric::ProviderChoice::reason)
  std::unique_ptr<topology::RailMap> rails_;
  std::unique_ptr<rdma::RdmaTransport> transport_;
  std::unique_ptr<metrics::Exporter> metrics_;  // reads stats(): stopped before the transport

  BatchTable batches_;  // destroyed before the transport (slices reference tasks)
  // Engine-allocated memory: host memory of the provider, or device memory of a GPU.
  struct Allocation {
    size_t length = 0;
    bool on_gpu = false;
    cuda::DeviceAllocation gpu;  // when on_gpu
  };
  Status release(void* addr, const Allocation& a);
  std::mutex alloc_mu_;
  std::map<void*, Allocation> allocations_;
};

}  // namespace tent
