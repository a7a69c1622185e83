// A tcp device (private to engine/fabric/tcp): one listening socket, its MR table and
// its service thread.
#pragma once

#include <memory>

#include "fabric/tcp/tcp_internal.h"

namespace tent::fabric::tcp {

// Binds and listens on `spec.listen`, and starts the device's service thread.
Result<std::shared_ptr<DeviceState>> openDevice(const config::TcpDevice& spec, uint32_t index,
                                                const config::TcpFabricConfig& config);

// The device's staging pool, made on the first call, ready for `gpu`'s copies.
Status ensureStaging(DeviceState& dev, int gpu);

class TcpDevice final : public Device {
 public:
  explicit TcpDevice(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {}
  const DeviceInfo& info() const noexcept override { return state_->info; }
  PortIdentity portIdentity() const override { return state_->identity; }
  Result<std::unique_ptr<MemoryRegion>> registerMemory(void* addr, size_t length,
                                                       uint32_t access) override;
  // Device memory, staged through the device's pinned host buffers (tcp_staging.h;
  // tcp_gpu.cc): the first registration makes the pool.
  Result<std::unique_ptr<MemoryRegion>> registerGpuMemory(void* addr, size_t length,
                                                          uint32_t access,
                                                          const cuda::PointerInfo& gpu) override;
  Result<std::unique_ptr<CompletionQueue>> createCq(uint32_t depth) override;
  Result<std::unique_ptr<QueuePair>> createQp(const QpInitAttr& attr) override;
  PortCounters counters() const noexcept override;
  DeviceState& state() noexcept { return *state_; }

 private:
  Status checkRegistration(void* addr, size_t length, uint32_t access) const;
  std::shared_ptr<DeviceState> state_;
};

}  // namespace tent::fabric::tcp
