// The soft provider: a userspace reliable-connection NIC emulation. See
// docs/fabric.md for what it emulates and how it differs from hardware.
// Most callers build it through fabric::createProvider(); tests and benchmarks that
// need a deterministic clock or explicit devices use the factories below.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.h"
#include "base/clock.h"
#include "fabric/fabric.h"
#include "topology/topology.h"

namespace tent::fabric::soft {

// The time source of the link model. `now_ns == nullptr` selects CLOCK_MONOTONIC
// (vDSO, no syscall). A plain function pointer keeps the default path cheap.
struct Clock {
  uint64_t (*now_ns)(void* ctx) noexcept = nullptr;
  void* ctx = nullptr;
};

using clock::monotonicNs;
// CLOCK_MONOTONIC_COARSE: ~10 ns, one-tick resolution; for rate-limiting checks.
uint64_t coarseNs() noexcept;

// A clock the test moves by hand; must outlive the provider using it.
class ManualClock {
 public:
  explicit ManualClock(uint64_t start_ns = 1'000'000) : now_(start_ns) {}
  Clock clock() noexcept { return Clock{&ManualClock::read, this}; }
  uint64_t now() const noexcept { return now_.load(std::memory_order_acquire); }
  void set(uint64_t ns) noexcept { now_.store(ns, std::memory_order_release); }
  void advance(uint64_t ns) noexcept { now_.fetch_add(ns, std::memory_order_acq_rel); }

 private:
  static uint64_t read(void* ctx) noexcept { return static_cast<ManualClock*>(ctx)->now(); }
  std::atomic<uint64_t> now_;
};

struct SoftOptions {
  Clock clock;
};

// The devices the soft provider creates: the config's list when not empty; else one
// per topology RDMA device (same name, NUMA node and PCI address) with the default
// link and latency; else a single "soft0" on NUMA node 0.
std::vector<config::SoftDevice> resolveDevices(const config::SoftFabricConfig& config,
                                               const std::vector<topology::PciDevice>& rdma);

Result<std::unique_ptr<Provider>> createSoftProvider(const config::SoftFabricConfig& config,
                                                     const topology::Topology& topology);

// Explicit devices (config.devices is ignored) and options.
Result<std::unique_ptr<Provider>> createSoftProvider(const config::SoftFabricConfig& config,
                                                     std::vector<config::SoftDevice> devices,
                                                     SoftOptions options = {});

}  // namespace tent::fabric::soft
