// The EAL runtime: one per process (weak_ptr singleton) over DPDK EAL lcores.
// EAL lcore 0 is the main lcore, i.e. the application thread, left free to run
// on every CPU; config lcore k is EAL lcore k+1, pinned to its CPU.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "lcore/eal_memory.h"
#include "lcore/runtime_impl.h"
#include "tent/log.h"
#include "topology/cpu_set.h"
#include "topology/placement.h"

namespace tent::lcore {

namespace {

unsigned ealLcoreId(size_t lcore) {
  return static_cast<unsigned>(lcore + 1);
}

// Every CPU this thread may run on (the main lcore's set; unpinned lcores share it).
std::vector<int> allowedCpus() {
  std::vector<int> cpus = topology::affinityCpus();
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

std::string cpuList(const std::vector<int>& cpus) {
  return topology::formatCpuList(cpus);
}

// --lcores value: "0@(0-1),1@(0-1),2@1".
std::string lcoresArgument(const std::vector<config::LcoreSpec>& specs) {
  const std::string every_cpu = "(" + cpuList(allowedCpus()) + ")";
  std::string out = "0@" + every_cpu;
  for (size_t k = 0; k < specs.size(); ++k) {
    const int cpu = specs[k].cpu;
    out += "," + std::to_string(ealLcoreId(k)) + "@" + (cpu < 0 ? every_cpu : std::to_string(cpu));
  }
  return out;
}

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

// What EAL was initialised with, for the life of the process (EAL cannot be
// re-initialised). Leaked on purpose: it must outlive static destructors.
struct EalProcess {
  // Recursive: a runtime destroyed inside acquire (failed launch) stops under it.
  std::recursive_mutex mu;
  bool initialized = false;
  std::vector<int> cpus;  // per config lcore: its CPU, -1 = unpinned
  std::weak_ptr<Runtime> live;
  std::vector<std::string> args;  // EAL may keep pointers into argv
};

EalProcess& process() {
  static auto* p = new EalProcess();
  return *p;
}

class EalRuntime final : public LoopRuntime {
 public:
  explicit EalRuntime(std::vector<config::LcoreSpec> specs) : LoopRuntime(std::move(specs)) {}
  ~EalRuntime() override {
    std::lock_guard process_lock(process().mu);
    stop();
  }
  bool manual() const noexcept override { return false; }
  int cpuOf(size_t lcore) const noexcept override {
    return lcore < specs_.size() ? specs_[lcore].cpu : -1;
  }
  size_t runOnce(size_t /*lcore*/) override { return 0; }  // the lcores run themselves

  Status launch();

 private:
  static int lcoreMain(void* loop) {
    // Idle sleeps are short (sleep_min_us defaults to 1): without this the kernel's
    // default 50 us timer slack would stretch every one of them.
    prctl(PR_SET_TIMERSLACK, kTimerSlackNs);
    // Log lines from this thread name its config lcore (EAL lcore k+1 runs config lcore k).
    log::setThreadLcore(static_cast<int>(rte_lcore_id()) - 1);
    static_cast<LcoreLoop*>(loop)->run_lc();
    return 0;
  }
  static constexpr unsigned long kTimerSlackNs = 1000;
  void stop();

  std::vector<bool> launched_;
};

Status EalRuntime::launch() {
  std::lock_guard lock(control_mu_);
  launched_.assign(loops_.size(), false);
  for (size_t k = 0; k < loops_.size(); ++k) {
    loops_[k]->prepareLaunch();
    const int rc = rte_eal_remote_launch(&EalRuntime::lcoreMain, loops_[k].get(), ealLcoreId(k));
    if (rc != 0) {
      loops_[k]->launchFailed();
      return Status::Unavailable("cannot launch the loop of lcore " + std::to_string(k) +
                                 " on EAL lcore " + std::to_string(ealLcoreId(k)) +
                                 ": rte_eal_remote_launch: " + rte_strerror(-rc));
    }
    launched_[k] = true;
  }
  return Status::OK();
}

void EalRuntime::stop() {
  std::lock_guard lock(control_mu_);
  for (size_t k = 0; k < launched_.size(); ++k) {
    if (launched_[k]) loops_[k]->requestStop();
  }
  for (size_t k = 0; k < launched_.size(); ++k) {
    if (!launched_[k]) continue;
    if (rte_lcore_id() == ealLcoreId(k)) {
      // The last reference died inside this lcore's own poller: it stops after this pass.
      TENT_WARN(kLcore, "lcore %zu released its own runtime; not waiting for itself", k);
      continue;
    }
    rte_eal_wait_lcore(ealLcoreId(k));
    loops_[k]->awaitExit();  // already true: run_lc() returned
    launched_[k] = false;
  }
}

Status checkCpus(const config::Config& config, const std::vector<config::LcoreSpec>& specs) {
  if (specs.size() + 1 > RTE_MAX_LCORE) {
    return Status::InvalidArgument(config.source + ": lcores: " + std::to_string(specs.size()) +
                                   " lcores; DPDK allows " + std::to_string(RTE_MAX_LCORE - 1) +
                                   " beside the main lcore");
  }
  const std::vector<int> allowed = allowedCpus();
  for (size_t k = 0; k < specs.size(); ++k) {
    const int cpu = specs[k].cpu;
    if (cpu < 0) continue;
    if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) {
      return Status::InvalidArgument(
          config.source + ": lcores[" + std::to_string(k) + "].cpu: CPU " + std::to_string(cpu) +
          " is not one this process may run on (allowed: " + cpuList(allowed) +
          ", or -1 for unpinned)");
    }
  }
  return Status::OK();
}

std::vector<std::string> ealArgumentsFor(const config::Config& config,
                                         const std::vector<config::LcoreSpec>& specs) {
  const config::EalConfig& eal = config.eal;
  std::vector<std::string> args = {"tent"};
  if (eal.no_huge) args.emplace_back("--no-huge");
  if (eal.no_pci) args.emplace_back("--no-pci");
  if (eal.no_shconf) args.emplace_back("--no-shconf");
  args.emplace_back("-m");
  args.push_back(std::to_string(eal.memory_mb));
  const std::string prefix =
      eal.file_prefix.empty() ? "tent-" + std::to_string(getpid()) : eal.file_prefix;
  args.push_back("--file-prefix=" + prefix);
  args.emplace_back("--no-telemetry");
  args.emplace_back("--log-level=lib.eal:error");
  args.push_back("--lcores=" + lcoresArgument(specs));
  args.insert(args.end(), eal.extra_args.begin(), eal.extra_args.end());
  return args;
}

Status initEal(const config::Config& config, const std::vector<config::LcoreSpec>& specs) {
  TENT_RETURN_IF_ERROR(checkEalMemory(config, readMachineMemory()));
  EalProcess& p = process();
  p.args = ealArgumentsFor(config, specs);
  std::vector<char*> argv;
  for (auto& a : p.args) argv.push_back(a.data());
  TENT_INFO(kLcore, "rte_eal_init: %s", joined(p.args).c_str());
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
    return Status::Unavailable("rte_eal_init failed (" + std::string(rte_strerror(rte_errno)) +
                               ") with: " + joined(p.args));
  }
  p.initialized = true;
  p.cpus.clear();
  for (const auto& spec : specs) p.cpus.push_back(spec.cpu);
  for (size_t k = 0; k < specs.size(); ++k) {
    if (!rte_lcore_is_enabled(ealLcoreId(k))) {
      return Status::FailedPrecondition("EAL lcore " + std::to_string(ealLcoreId(k)) +
                                        " is not enabled: do eal.extra_args override --lcores?");
    }
  }
  // --no-shconf leaves the per-prefix runtime directory empty; do not litter /run/dpdk.
  if (config.eal.no_shconf) rmdir(rte_eal_get_runtime_dir());
  return Status::OK();
}

// A process has one EAL lcore layout: later configs must fit into it.
Status checkFitsEal(const std::vector<config::LcoreSpec>& specs, size_t available) {
  const EalProcess& p = process();
  if (specs.size() > available) {
    return Status::FailedPrecondition(
        "the config needs " + std::to_string(specs.size()) + " lcores but only " +
        std::to_string(available) + " are available: EAL was initialised in this process with " +
        std::to_string(p.cpus.size()) +
        " and cannot be re-initialised (give the first config the largest layout)");
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    if (specs[k].cpu != p.cpus[k]) {
      return Status::FailedPrecondition("lcore " + std::to_string(k) + " wants CPU " +
                                        std::to_string(specs[k].cpu) + " but EAL pinned it to " +
                                        std::to_string(p.cpus[k]) +
                                        " (-1 = unpinned) when it was initialised in this process");
    }
  }
  return Status::OK();
}

// The process-wide part of the EAL arguments: all but --lcores, whose layout
// checkFitsEal() and checkSameLayout() judge on their own.
std::vector<std::string> processWideArguments(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    if (a.rfind("--lcores=", 0) != 0) out.push_back(a);
  }
  return out;
}

// EAL keeps the arguments of its one initialisation: a later config that asks for
// others (memory, hugepages, file prefix, extra args) would silently not get them.
Status checkSameEal(const config::Config& config) {
  const std::vector<std::string> have = processWideArguments(process().args);
  const std::vector<std::string> want = processWideArguments(ealArgumentsFor(config, {}));
  if (want == have) return Status::OK();
  return Status::FailedPrecondition(
      config.source + ": eal: DPDK EAL was initialised in this process with '" + joined(have) +
      "' and cannot be re-initialised; this config asks for '" + joined(want) +
      "' (give every engine of a process the same eal section)");
}

// Engines alive at the same time share one runtime, so a second config's lcores
// (pollers, pinning, idle policy) would silently be replaced by the first one's.
Status checkSameLayout(const config::Config& config, const std::vector<config::LcoreSpec>& specs,
                       const Runtime& live) {
  for (size_t k = 0; k < specs.size(); ++k) {
    if (specs[k] == live.spec(k)) continue;
    return Status::FailedPrecondition(
        config.source + ": lcores[" + std::to_string(k) +
        "] differs from that of the engine already running in this process; engines alive at "
        "the same time share the lcores (give them the same lcores section)");
  }
  if (specs.size() == live.lcoreCount()) return Status::OK();
  return Status::FailedPrecondition(
      config.source + ": lcores: " + std::to_string(specs.size()) +
      " lcores, but the engine "
      "already running in this process has " +
      std::to_string(live.lcoreCount()) +
      "; engines alive at the same time share the lcores (give them the same lcores section)");
}

}  // namespace

std::vector<std::string> ealArguments(const config::Config& config) {
  // A layout that cannot be derived (lcores: auto without enough CPUs) shows as
  // the main lcore alone; acquire() reports the error itself.
  auto specs = lcoreLayout(config);
  return ealArgumentsFor(config, specs.ok() ? *specs : std::vector<config::LcoreSpec>{});
}

Result<std::shared_ptr<Runtime>> acquireEalRuntime(const config::Config& config,
                                                   std::vector<config::LcoreSpec> specs) {
  EalProcess& p = process();
  std::lock_guard lock(p.mu);
  TENT_RETURN_IF_ERROR(checkCpus(config, specs));
  if (p.initialized)
    TENT_RETURN_IF_ERROR(checkSameEal(config));
  else
    TENT_RETURN_IF_ERROR(initEal(config, specs));
  if (auto live = p.live.lock()) {
    // Shared: only a config with the live runtime's own layout may join it.
    TENT_RETURN_IF_ERROR(checkFitsEal(specs, live->lcoreCount()));
    TENT_RETURN_IF_ERROR(checkSameLayout(config, specs, *live));
    return live;
  }
  TENT_RETURN_IF_ERROR(checkFitsEal(specs, p.cpus.size()));
  auto runtime = std::make_shared<EalRuntime>(std::move(specs));
  TENT_RETURN_IF_ERROR(runtime->launch());
  p.live = runtime;
  return std::shared_ptr<Runtime>(std::move(runtime));
}

}  // namespace tent::lcore
