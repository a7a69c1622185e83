// Control path of the public API: engine construction, memory, segments, batches.
#include "api/engine_impl.h"
#include "api/wait_nap.h"

#include "base/clock.h"
#include "base/cpu_relax.h"
#include "base/tsc_rate.h"
#include "control/control_plane.h"
#include "fabric/select/select_provider.h"
#include "lcore/idle.h"
#include "tent/log.h"

namespace tent {

Result<std::unique_ptr<TransferEngineImpl>> TransferEngineImpl::create(
    std::shared_ptr<const config::Config> config) {
  clock::calibrate();  // before any engine timestamp: the clock it takes is then fixed
  std::unique_ptr<TransferEngineImpl> e(new TransferEngineImpl());
  e->config_ = std::move(config);
  TENT_RETURN_IF_ERROR(config::applyLogConfig(e->config_->log));
  auto topo = topology::Topology::load(e->config_->topology);
  if (!topo.ok()) return topo.status().withContext("topology");
  e->topology_ = std::make_unique<topology::Topology>(std::move(topo).value());
  auto choice = fabric::chooseProvider(e->config_->fabric, *e->topology_);
  if (!choice.ok()) return choice.status().withContext("fabric");
  e->provider_ = std::move(choice->provider);
  e->provider_choice_ = std::move(choice->reason);
  std::vector<topology::RailDevice> devices;
  for (size_t i = 0; i < e->provider_->deviceCount(); ++i) {
    const auto& info = e->provider_->device(i).info();
    devices.push_back({info.name, info.numa_node, info.pci, {}});
  }
  e->rails_ = std::make_unique<topology::RailMap>(topology::RailMap::build(devices, *e->topology_));
  auto transport = rdma::RdmaTransport::create(e->config_, *e->provider_, *e->rails_);
  if (!transport.ok()) return transport.status();
  e->transport_ = std::move(transport).value();
  if (!e->config_->metrics.listen.empty()) {
    auto exporter = metrics::Exporter::start(e->config_->metrics.listen, *e);
    if (!exporter.ok())
      return exporter.status().withContext(e->config_->source + ": metrics.listen");
    e->metrics_ = std::move(exporter).value();
  }
  TENT_INFO(kEngine, "engine %s up: provider %s (%s), %zu devices",
            e->transport_->segmentName().c_str(), std::string(e->provider_->name()).c_str(),
            e->provider_choice_.c_str(), e->provider_->deviceCount());
  return e;
}

TransferEngineImpl::~TransferEngineImpl() {
  metrics_.reset();    // no scrape reads the engine from here on
  transport_.reset();  // stops pollers and the control thread before memory goes
  for (auto& [addr, a] : allocations_) (void)release(addr, a);
}

Status TransferEngineImpl::release(void* addr, const Allocation& a) {
  return a.on_gpu ? cuda::freeDevice(a.gpu) : provider_->freeMemory(addr, a.length);
}

Result<void*> TransferEngineImpl::allocateLocalMemory(size_t length, const Location& location,
                                                      MemoryAccess access,
                                                      const std::string& name) {
  if (length == 0) return Status::InvalidArgument("allocate: zero length");
  auto gpu = cuda::parseCudaLocation(location);
  if (!gpu.ok()) return gpu.status().withContext("allocate");
  if (*gpu >= 0) return allocateDeviceMemory(length, *gpu, location, access, name);
  int numa = -1;
  if (location.rfind("cpu:", 0) == 0) numa = std::atoi(location.c_str() + 4);
  auto mem = provider_->allocateMemory(length, numa);
  if (!mem.ok()) return mem.status();
  Status s = transport_->registerBuffer(*mem, length, location, true, access, name);
  if (!s.ok()) {
    (void)provider_->freeMemory(*mem, length);
    return s;
  }
  std::lock_guard<std::mutex> lock(alloc_mu_);
  allocations_[*mem] = Allocation{length, false, {}};
  return *mem;
}

// cuda:N is device memory of GPU N or an error: never host memory in its place.
Result<void*> TransferEngineImpl::allocateDeviceMemory(size_t length, int gpu,
                                                       const Location& location,
                                                       MemoryAccess access,
                                                       const std::string& name) {
  auto mem = cuda::allocateDevice(gpu, length);
  if (!mem.ok()) return mem.status().withContext("allocate " + location);
  Status s = transport_->registerBuffer(mem->ptr, length, location, true, access, name);
  if (!s.ok()) {
    (void)cuda::freeDevice(*mem);
    return s;
  }
  std::lock_guard<std::mutex> lock(alloc_mu_);
  allocations_[mem->ptr] = Allocation{length, true, *mem};
  return mem->ptr;
}

Status TransferEngineImpl::freeLocalMemory(void* addr, UnregisterMode mode) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    auto it = allocations_.find(addr);
    if (it == allocations_.end())
      return Status::NotFound("free: memory was not allocated by allocateLocalMemory");
    a = it->second;
  }
  // Unregistered first: memory a transfer still uses is neither unregistered nor freed.
  Status s = transport_->unregisterBuffer(addr, mode);
  if (!s.ok()) return s.withContext("free");
  {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    // A concurrent free of the same address could not unregister it too: ours alone.
    allocations_.erase(addr);
  }
  return release(addr, a);
}

Status TransferEngineImpl::registerLocalMemory(void* addr, size_t length, const Location& location,
                                               MemoryAccess access, const std::string& name) {
  return transport_->registerBuffer(addr, length, location, false, access, name);
}

Status TransferEngineImpl::unregisterLocalMemory(void* addr, UnregisterMode mode) {
  {
    std::lock_guard<std::mutex> lock(alloc_mu_);
    if (allocations_.count(addr) != 0)  // freeLocalMemory owns that registration
      return Status::FailedPrecondition(
          "unregister: memory from allocateLocalMemory; use freeLocalMemory");
  }
  return transport_->unregisterBuffer(addr, mode);
}

Result<SegmentId> TransferEngineImpl::openSegment(const std::string& name) {
  return transport_->openSegment(name);
}

Result<std::string> TransferEngineImpl::localMetadata() {
  return transport_->control().localMetadata();
}

Result<SegmentId> TransferEngineImpl::addRemoteMetadata(std::string_view blob) {
  return transport_->control().addRemoteMetadata(blob);
}

Status TransferEngineImpl::closeSegment(SegmentId id) {
  return transport_->closeSegment(id);
}

void TransferEngineImpl::cancelWaits() {
  transport_->control().cancelWaits();
}

Result<std::vector<SegmentBufferInfo>> TransferEngineImpl::segmentBuffers(SegmentId id) {
  return transport_->segmentBuffers(id);
}

Result<BatchId> TransferEngineImpl::allocateBatch(size_t capacity) {
  if (capacity == 0 || capacity > config_->workers.max_batch_capacity)
    return Status::InvalidArgument("batch capacity must be in [1, " +
                                   std::to_string(config_->workers.max_batch_capacity) +
                                   "] (workers.max_batch_capacity)");
  return batches_.allocate(capacity);
}

Status TransferEngineImpl::freeBatch(BatchId id) {
  // A notification still bound to the batch: sent if the batch completed, dropped
  // (counted) otherwise; its status is what freeBatch returns once the batch is freed.
  Status notified = Status::OK();
  if (BatchSlot* b = batches_.find(id);
      b != nullptr && b->notify_state.load(std::memory_order_acquire) != BatchSlot::kNoNotify)
    notified = settleNotificationOnFree(id, *b);
  // Slices still in flight: the batch retires until they drain, and the rail pollers
  // reap the direct WRs nobody will poll for any more.
  auto abandonAll = [](void* transport, BatchSlot& batch) {
    const size_t n = std::min(batch.count.load(std::memory_order_acquire), batch.capacity);
    for (size_t i = 0; i < n; ++i)
      static_cast<rdma::RdmaTransport*>(transport)->abandon(batch.tasks[i]);
  };
  Status freed = batches_.free(id, abandonAll, transport_.get());
  return freed.ok() ? notified : freed;
}

rdma::RdmaTask* TransferEngineImpl::taskFor(BatchId id, size_t task_id) {
  BatchSlot* batch = batches_.find(id);
  if (!batch || task_id >= batch->count.load()) return nullptr;
  return &batch->tasks[task_id];
}

// Not datapath: the caller asked to wait, so it backs off (spin, pause, sleep).
Result<TransferStatus> TransferEngineImpl::waitTransfer(BatchId id, size_t task_id,
                                                        uint64_t timeout_ns) {
  // Spins briefly, then sleeps on the completion bell: a task's end rings it, the nap's
  // bound (api/wait_nap.h) finds what nobody rings for (a direct task whose CQ only its
  // caller polls).
  lcore::IdleBackoff backoff(lcore::waiterPolicy(kWorkerWaitNapUs));
  lcore::WaiterBell& bell = transport_->datapath().completionBell();
  lcore::WaiterBellSleeper sleeper(bell);
  const uint64_t deadline = clock::engineNowNs() + timeout_ns;
  for (;;) {
    const uint32_t seen = sleeper.armed() ? bell.sequence() : 0;  // before the check
    auto st = getTransferStatus(id, task_id);
    if (!st.ok() || st->state != TransferState::PENDING) return st;
    const uint64_t now = clock::engineNowNs();
    if (now >= deadline)
      return Status::Timeout("task " + std::to_string(task_id) + " still pending");
    uint32_t backoff_us = 0;
    switch (backoff.step(&backoff_us)) {
      case lcore::IdleAction::kSpin:
        break;
      case lcore::IdleAction::kPause:
        cpuRelax();
        break;
      case lcore::IdleAction::kSleep:
        if (!sleeper.armed()) {
          sleeper.arm();  // registered: check the task once more before the first nap
        } else {
          const rdma::RdmaTask* task = taskFor(id, task_id);  // there: its status was read
          const bool direct = task != nullptr && task->direct.load(std::memory_order_acquire);
          (void)bell.wait(seen, waitNapUs(direct, backoff_us, deadline - now));
        }
        break;
    }
  }
}

EngineStats TransferEngineImpl::stats() const {
  EngineStats out;
  transport_->fillStats(&out);
  out.tsc_hz = clock::tscHz();
  out.provider_choice = provider_choice_;
  return out;
}

std::string TransferEngineImpl::metricsAddress() const {
  return metrics_ ? metrics_->address() : std::string();
}

}  // namespace tent
