// Runtime implementations (private to lcore/): the part shared by the EAL and
// manual runtimes, and the factory of each.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "lcore/loop.h"
#include "lcore/runtime.h"

namespace tent::lcore {

// Owns one LcoreLoop per lcore and serialises attach/detach over all of them.
class LoopRuntime : public Runtime {
 public:
  size_t lcoreCount() const noexcept override { return loops_.size(); }
  const config::LcoreSpec& spec(size_t lcore) const override;
  Status attach(size_t lcore, Poller* poller) override;
  Status detach(size_t lcore, Poller* poller) override;
  LcoreStats stats(size_t lcore) const override;

 protected:
  explicit LoopRuntime(std::vector<config::LcoreSpec> specs);
  Status checkLcore(size_t lcore) const;
  Status checkCaller(const char* what) const;

  const std::vector<config::LcoreSpec> specs_;
  std::vector<std::unique_ptr<LcoreLoop>> loops_;
  // Serialises attach/detach/launch/stop: a poller set is published by one thread at a time.
  mutable std::mutex control_mu_;
};

Result<std::shared_ptr<Runtime>> acquireManualRuntime(std::vector<config::LcoreSpec> specs);
Result<std::shared_ptr<Runtime>> acquireEalRuntime(const config::Config& config,
                                                   std::vector<config::LcoreSpec> specs);

}  // namespace tent::lcore
