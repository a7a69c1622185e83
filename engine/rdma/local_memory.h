// Local memory: buffers registered on every device, the table the datapath resolves
// sources against (an immutable snapshot, replaced on every change), and the local
// segment descriptor peers fetch. Control path, any thread (one mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/metadata/segment_descriptor.h"
#include "engine/rdma/segments.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"

namespace tent::rdma {

class RdmaContext;

class LocalMemory {
 public:
  LocalMemory(std::vector<RdmaContext*> contexts, const topology::RailMap& rails);

  // Set once the control listener knows the segment name.
  void setIdentity(std::string segment_name, uint64_t instance);
  // Called after every change, outside the lock (the control plane pushes descriptors).
  void onChange(std::function<void()> fn) { on_change_ = std::move(fn); }

  Status registerBuffer(void* addr, size_t length, const Location& location, bool engine_allocated,
                        MemoryAccess access);
  Status unregisterBuffer(void* addr);
  std::shared_ptr<const LocalBufferTable> table() const { return table_.load(); }
  metadata::SegmentDescriptor descriptor() const;
  std::vector<uint8_t> encodedDescriptor(uint16_t version) const;
  uint64_t instance() const noexcept { return instance_; }
  const std::string& segmentName() const noexcept { return segment_name_; }

 private:
  metadata::SegmentDescriptor buildDescriptor(const LocalBufferTable& table) const;

  std::vector<RdmaContext*> contexts_;
  const topology::RailMap& rails_;
  std::string segment_name_;
  uint64_t instance_ = 0;
  std::function<void()> on_change_;
  mutable std::mutex mu_;
  std::atomic<std::shared_ptr<const LocalBufferTable>> table_;
  uint64_t version_ = 0;  // under mu_
};

}  // namespace tent::rdma
