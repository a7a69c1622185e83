// The lcore runtime: DPDK EAL lcores running run-to-completion loops over
// registered pollers, or (manual mode) the same loops stepped by a test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "lcore/poller.h"
#include "tent/status.h"

namespace tent::lcore {

struct LcoreStats {
  uint64_t busy_cycles = 0;  // TSC cycles spent in passes where some poller was busy
  uint64_t idle_cycles = 0;  // TSC cycles of idle passes, sleeping included
  uint64_t busy_passes = 0;
  uint64_t idle_passes = 0;
  uint64_t sleeps = 0;          // every sleep of the idle policy (naps and blocks)
  uint64_t blocks = 0;          // sleeps until woken: no poller expected unannounced work
  uint64_t doorbell_wakes = 0;  // wake-up syscalls producers made for this lcore
  // Its doorbell is armed: asleep, or in the re-check pass just before a sleep. An
  // lcore seen armed stays so until something rings it or its sleep times out.
  bool asleep = false;
};

class Runtime {
 public:
  // EAL mode: initialises EAL once per process (later calls share the running
  // lcores; their layout comes from the first config). Manual mode: a fresh
  // runtime with `config.lcores.size()` lcores and no threads.
  static Result<std::shared_ptr<Runtime>> acquire(const config::Config& config);

  virtual ~Runtime() = default;
  virtual bool manual() const noexcept = 0;
  virtual size_t lcoreCount() const noexcept = 0;
  virtual int cpuOf(size_t lcore) const noexcept = 0;  // -1: not pinned
  virtual const config::LcoreSpec& spec(size_t lcore) const = 0;

  // After attach() returns the lcore calls poller->poll_lc() on every pass.
  virtual Status attach(size_t lcore, Poller* poller) = 0;
  // After detach() returns the lcore never calls the poller again.
  virtual Status detach(size_t lcore, Poller* poller) = 0;

  virtual LcoreStats stats(size_t lcore) const = 0;

  // Manual mode only: one pass over the lcore's pollers; returns how many were busy.
  virtual size_t runOnce(size_t lcore) = 0;
};

// The EAL argument list tent would use for `config` (for logs and tests).
std::vector<std::string> ealArguments(const config::Config& config);

// The lcores a runtime built from `config` has: `config.lcores`, or when that is
// empty the default, one unpinned lcore running rail "*" and background. With
// `lcores: auto` the layout topology/lcore_auto.h derives for this process (logged
// at info level), or its error (too few CPUs, topology not loadable).
Result<std::vector<config::LcoreSpec>> lcoreLayout(const config::Config& config);

}  // namespace tent::lcore
