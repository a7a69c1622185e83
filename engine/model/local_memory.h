// Local memory: buffers registered on every device, the table the datapath resolves
// sources against (an immutable snapshot, replaced on every change), and the local
// segment descriptor peers fetch. Control path, any thread (one mutex); the datapath
// reads the current snapshot through view() inside an EBR read section (one load,
// no lock: a std::atomic<std::shared_ptr> load takes a spin lock and two atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_memory.h"
#include "wire/segment_descriptor.h"
#include "model/segments.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"
#include "wire/segment_descriptor.h"

namespace tent::rdma {

class RdmaContext;

// What the datapath loads: the current snapshot. A task copies `table` (one
// reference) to keep it for its slices; a replaced view is freed after an EBR grace
// period, so a reader inside a section may use it without a reference.
struct LocalTableView {
  std::shared_ptr<const LocalBufferTable> table;
};

class LocalMemory {
 public:
  LocalMemory(std::vector<RdmaContext*> contexts, const topology::RailMap& rails);

  // Set once the control listener knows the segment name.
  void setIdentity(std::string segment_name, uint64_t instance);
  // Called after every change, outside the lock (the control plane pushes descriptors).
  void onChange(std::function<void()> fn) { on_change_ = std::move(fn); }

  // Host memory is one buffer per max_mr_size chunk (usually one). Device memory
  // (location "*" finds it, "cuda:N" must match it) is one buffer per physical
  // allocation, on the devices that can reach its GPU.
  // `name` (at most metadata::kMaxBufferNameBytes) travels in the descriptor.
  Status registerBuffer(void* addr, size_t length, const Location& location, bool engine_allocated,
                        MemoryAccess access, const std::string& name = "");
  // Unregisters every buffer registered at `addr` (local_memory_unregister.cc). While
  // tasks use one of them: kFailIfInUse refuses (FailedPrecondition, how many);
  // kCancelTransfers cancels them and waits up to `drain_ns` for them to end (then
  // Timeout, and the buffers stay registered). Once it returns OK no task uses them,
  // none can start, and their memory regions are deregistered.
  Status unregisterBuffer(void* addr, UnregisterMode mode, uint64_t drain_ns);
  ~LocalMemory();
  LocalMemory(const LocalMemory&) = delete;
  LocalMemory& operator=(const LocalMemory&) = delete;

  // The current snapshot, for the control path (takes the mutex).
  std::shared_ptr<const LocalBufferTable> table() const;
  // The datapath's: valid until the caller leaves its EBR read section.
  const LocalTableView* view() const noexcept { return view_.load(std::memory_order_acquire); }
  // Replaced views not freed yet (a reader may still be inside its section); for tests.
  size_t retiredViews() const;
  metadata::SegmentDescriptor descriptor() const;
  std::vector<uint8_t> encodedDescriptor(uint16_t version) const;
  uint64_t instance() const noexcept { return instance_; }
  const std::string& segmentName() const noexcept { return segment_name_; }

 private:
  metadata::SegmentDescriptor buildDescriptor(const LocalBufferTable& table) const;
  // Host memory: one buffer per max_mr_size chunk, registered on every device at once.
  Status makeHostBuffers(void* addr, size_t length, const Location& location, bool engine_allocated,
                         uint32_t access, std::vector<std::shared_ptr<LocalBuffer>>* out) const;
  // GPU memory (local_gpu_memory.cc).
  struct GpuPlace {
    std::string name;             // "cuda:K" of the rail map, or "cuda:<ordinal>"
    topology::LocationId id = 0;  // kAnyLocation when the topology does not know the GPU
  };
  GpuPlace placeGpu(int ordinal) const;
  Result<std::shared_ptr<LocalBuffer>> makeGpuBuffer(const cuda::Chunk& piece, uint64_t group,
                                                     bool engine_allocated, uint32_t access) const;
  Status makeGpuBuffers(const std::vector<cuda::Chunk>& pieces, uint64_t group,
                        bool engine_allocated, uint32_t access,
                        std::vector<std::shared_ptr<LocalBuffer>>* out) const;
  // Names and numbers the buffers of one registration and publishes them.
  Status publishBuffers(std::vector<std::shared_ptr<LocalBuffer>> buffers, const std::string& name,
                        MemoryAccess access);

  std::vector<RdmaContext*> contexts_;
  const topology::RailMap& rails_;
  std::string segment_name_;
  uint64_t instance_ = 0;
  std::function<void()> on_change_;
  // Under mu_: publishes `table` and retires the view it replaces.
  void publishLocked(std::shared_ptr<const LocalBufferTable> table);
  // Under mu_: frees retired views no reader can still hold.
  void reapLocked();
  // Unregistration (local_memory_unregister.cc).
  using BufferList = std::vector<std::shared_ptr<LocalBuffer>>;
  Result<BufferList> groupLocked(uint64_t group) const;
  Status drain(const BufferList& group, uint64_t drain_ns);
  // Under mu_: publishes the table without `group` and deregisters its memory regions.
  void removeLocked(uint64_t group, const BufferList& buffers);

  mutable std::mutex mu_;
  std::atomic<const LocalTableView*> view_{nullptr};                 // replaced under mu_
  std::vector<std::pair<const LocalTableView*, uint64_t>> retired_;  // view, EBR epoch
  uint64_t version_ = 0;                                             // under mu_
  uint64_t registered_ = 0;  // under mu_: buffers ever published, for LocalBuffer::seq
};

}  // namespace tent::rdma
