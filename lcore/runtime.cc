// Runtime::acquire, the shared attach/detach bookkeeping, and the manual runtime.
#include <string>

#include "lcore/runtime_impl.h"
#include "tent/log.h"
#include "topology/lcore_auto.h"

namespace tent::lcore {

Result<std::vector<config::LcoreSpec>> lcoreLayout(const config::Config& config) {
  if (config.lcores_auto) {
    auto layout = topology::autoLcoreLayout(config);
    if (!layout.ok()) return layout.status();
    TENT_INFO(kLcore, "lcores: auto: %s", topology::summary(*layout).c_str());
    for (const std::string& note : layout->notes)
      TENT_INFO(kLcore, "lcores: auto: %s", note.c_str());
    return layout->specs();
  }
  if (!config.lcores.empty()) return config.lcores;
  config::LcoreSpec spec;  // unpinned, default idle policy
  spec.pollers.push_back({config::PollerKind::kRail, "*"});
  spec.pollers.push_back({config::PollerKind::kBackground, ""});
  return std::vector<config::LcoreSpec>{spec};
}

Result<std::shared_ptr<Runtime>> Runtime::acquire(const config::Config& config) {
  auto layout = lcoreLayout(config);
  if (!layout.ok()) return layout.status();
  std::vector<config::LcoreSpec> specs = std::move(layout).value();
  if (config.eal.mode == config::LcoreMode::kManual) return acquireManualRuntime(std::move(specs));
  return acquireEalRuntime(config, std::move(specs));
}

// ---- LoopRuntime ------------------------------------------------------------

LoopRuntime::LoopRuntime(std::vector<config::LcoreSpec> specs) : specs_(std::move(specs)) {
  loops_.reserve(specs_.size());
  for (size_t i = 0; i < specs_.size(); ++i) {
    loops_.push_back(std::make_unique<LcoreLoop>(i, specs_[i]));
  }
}

Status LoopRuntime::checkLcore(size_t lcore) const {
  if (lcore < loops_.size()) return Status::OK();
  return Status::OutOfRange("lcore " + std::to_string(lcore) + " does not exist (the runtime has " +
                            std::to_string(loops_.size()) + ")");
}

const config::LcoreSpec& LoopRuntime::spec(size_t lcore) const {
  static const config::LcoreSpec kNoSuchLcore;
  if (lcore < specs_.size()) return specs_[lcore];
  TENT_ERROR(kLcore, "spec(%zu): no such lcore (the runtime has %zu)", lcore, specs_.size());
  return kNoSuchLcore;
}

Status LoopRuntime::checkCaller(const char* what) const {
  if (!LcoreLoop::inPass()) return Status::OK();
  return Status::FailedPrecondition(std::string(what) +
                                    " called from an lcore (inside a poller): only control "
                                    "threads may attach or detach pollers");
}

Status LoopRuntime::attach(size_t lcore, Poller* poller) {
  TENT_RETURN_IF_ERROR(checkCaller("attach"));
  TENT_RETURN_IF_ERROR(checkLcore(lcore));
  if (poller == nullptr) return Status::InvalidArgument("attach: poller is null");
  std::lock_guard lock(control_mu_);
  // poll_lc() is single-threaded by contract: one lcore per poller.
  for (size_t i = 0; i < loops_.size(); ++i) {
    if (loops_[i]->contains(poller)) {
      return Status::AlreadyExists("poller '" + std::string(poller->name()) +
                                   "' is already attached to lcore " + std::to_string(i));
    }
  }
  return loops_[lcore]->attach(poller);
}

Status LoopRuntime::detach(size_t lcore, Poller* poller) {
  TENT_RETURN_IF_ERROR(checkCaller("detach"));
  TENT_RETURN_IF_ERROR(checkLcore(lcore));
  if (poller == nullptr) return Status::InvalidArgument("detach: poller is null");
  std::lock_guard lock(control_mu_);
  return loops_[lcore]->detach(poller);
}

LcoreStats LoopRuntime::stats(size_t lcore) const {
  if (lcore >= loops_.size()) return {};
  return loops_[lcore]->stats();
}

// ---- manual runtime -----------------------------------------------------------

namespace {

// No EAL, no threads: whoever calls runOnce() is the lcore.
class ManualRuntime final : public LoopRuntime {
 public:
  explicit ManualRuntime(std::vector<config::LcoreSpec> specs) : LoopRuntime(std::move(specs)) {}
  bool manual() const noexcept override { return true; }
  int cpuOf(size_t /*lcore*/) const noexcept override { return -1; }  // runs on the caller
  size_t runOnce(size_t lcore) override {
    return lcore < loops_.size() ? loops_[lcore]->runOnce_lc() : 0;
  }
};

}  // namespace

Result<std::shared_ptr<Runtime>> acquireManualRuntime(std::vector<config::LcoreSpec> specs) {
  return std::shared_ptr<Runtime>(std::make_shared<ManualRuntime>(std::move(specs)));
}

}  // namespace tent::lcore
