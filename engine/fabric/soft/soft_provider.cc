// The soft provider: device list, shared-memory allocation and lifetime.
#include "fabric/soft/soft_provider.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "fabric/soft/soft_internal.h"
#include "tent/log.h"

namespace tent::fabric::soft {

uint64_t coarseNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

constexpr size_t kPageSize = 4096;

std::string errnoText(int err) {
  return std::strerror(err);
}

uint64_t randomNonce() {
  uint64_t n = 0;
  if (getrandom(&n, sizeof(n), 0) != static_cast<ssize_t>(sizeof(n))) {
    n = monotonicNs() ^ (static_cast<uint64_t>(getpid()) << 32);
  }
  return n == 0 ? 1 : n;
}

Status validate(const config::SoftFabricConfig& c, const std::vector<config::SoftDevice>& devices) {
  if (devices.empty()) return Status::InvalidArgument("soft fabric: no device");
  if (devices.size() > kMaxDevices) {
    return Status::InvalidArgument("soft fabric: at most " + std::to_string(kMaxDevices) +
                                   " devices, got " + std::to_string(devices.size()));
  }
  std::set<std::string> names;
  for (const auto& d : devices) {
    if (d.name.empty()) return Status::InvalidArgument("soft fabric: a device has no name");
    if (!names.insert(d.name).second) {
      return Status::InvalidArgument("soft fabric: duplicate device name '" + d.name + "'");
    }
    if (!std::isfinite(d.link_gbps) || d.link_gbps < 0) {
      return Status::InvalidArgument("soft fabric: device '" + d.name +
                                     "': link_gbps must be >= 0");
    }
  }
  if (c.max_mrs == 0 || c.max_mrs > kMaxMrs) {
    return Status::InvalidArgument("soft fabric: max_mrs must be in [1, " +
                                   std::to_string(kMaxMrs) + "], got " + std::to_string(c.max_mrs));
  }
  if (c.retry_budget_ms == 0) {
    return Status::InvalidArgument("soft fabric: retry_budget_ms must be > 0");
  }
  if (access(c.shm_dir.c_str(), W_OK | X_OK) != 0) {
    return Status::InvalidArgument("soft fabric: shm_dir '" + c.shm_dir +
                                   "' is not a writable directory: " + errnoText(errno));
  }
  return Status::OK();
}

// Files left behind by soft providers of processes that died without cleaning up.
void removeStaleFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  const size_t prefix_len = std::strlen(kFilePrefix);
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, kFilePrefix, prefix_len) != 0) continue;
    char* end = nullptr;
    const unsigned long pid = std::strtoul(e->d_name + prefix_len, &end, 10);
    if (end == nullptr || *end != '-' || pid == 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) {
      unlinkat(dirfd(d), e->d_name, 0);
    }
  }
  closedir(d);
}

// Best effort: prefer the NUMA node (no libnuma dependency for one syscall).
void preferNode(void* addr, size_t length, int numa_node) {
  if (numa_node < 0 || numa_node >= 64) return;
  const unsigned long mask = 1ul << numa_node;
  if (syscall(SYS_mbind, addr, length, MPOL_PREFERRED, &mask, 64, 0) != 0) {
    TENT_DEBUG(kFabric, "soft: mbind to NUMA node %d failed: %s", numa_node, std::strerror(errno));
  }
}

class SoftProvider final : public Provider {
 public:
  SoftProvider(std::shared_ptr<ProviderCore> core, std::vector<std::unique_ptr<SoftDevice>> devices)
      : core_(std::move(core)), devices_(std::move(devices)) {
    std::vector<DeviceState*> states;
    for (auto& d : devices_) states.push_back(&d->state());
    core_->faults.setDevices(std::move(states));
  }

  // Peers see our devices alive from here on.
  Status startLiveness() {
    std::vector<ControlHeader*> headers;
    for (auto& d : devices_) headers.push_back(d->state().view.header);
    return anchor_.start(std::move(headers));
  }

  ~SoftProvider() override {
    anchor_.stop();  // first: every peer now sees us dead, while the files are still mapped
    core_->faults.setDevices({});
    for (auto& d : devices_) {
      DeviceState& s = d->state();
      s.view.header->closed.store(1, std::memory_order_release);
      unlink(s.ctrl_path.c_str());
    }
    std::lock_guard<std::mutex> g(core_->mem_mutex);
    for (auto& [base, a] : core_->allocations) {
      munmap(reinterpret_cast<void*>(base), a.length);
      unlink(a.path.c_str());
    }
    core_->allocations.clear();
  }

  std::string_view name() const noexcept override { return "soft"; }

  std::string linkModel() const override {
    std::string s = "soft:";
    for (size_t i = 0; i < devices_.size(); ++i) {
      const DeviceInfo& info = devices_[i]->info();
      char buf[160];
      if (info.link_gbps > 0) {
        std::snprintf(buf, sizeof(buf), " %s link_gbps=%g latency_ns=%llu", info.name.c_str(),
                      info.link_gbps, static_cast<unsigned long long>(info.latency_ns));
      } else {
        std::snprintf(buf, sizeof(buf), " %s link_gbps=unlimited latency_ns=%llu",
                      info.name.c_str(), static_cast<unsigned long long>(info.latency_ns));
      }
      s += (i ? ";" : "") + std::string(buf);
    }
    if (!core_->copy_payload) {
      s += "; payload=not-copied (fabric.soft.copy_payload: false)";
    } else if (core_->stream_copy_min_bytes != 0) {
      s +=
          "; payload copy non-temporal from " + std::to_string(core_->stream_copy_min_bytes) + " B";
    }
    return s;
  }

  size_t deviceCount() const noexcept override { return devices_.size(); }
  Device& device(size_t index) noexcept override { return *devices_[index]; }

  Result<void*> allocateMemory(size_t length, int numa_node) override;
  Status freeMemory(void* addr, size_t length) override;

  FaultInjector& faults() noexcept { return core_->faults; }

 private:
  std::shared_ptr<ProviderCore> core_;
  std::vector<std::unique_ptr<SoftDevice>> devices_;
  LivenessAnchor anchor_;
};

}  // namespace

Result<void*> ProviderCore::allocateShm(size_t length, int numa_node) {
  if (length == 0) return Status::InvalidArgument("soft: allocateMemory of 0 bytes");
  const size_t rounded = (length + kPageSize - 1) / kPageSize * kPageSize;
  std::lock_guard<std::mutex> g(mem_mutex);
  const uint32_t id = next_shm_id++;
  const std::string path = shm_dir + "/" + memoryFileName(pid, nonce, id);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("soft: create " + path + ": " + errnoText(errno));
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    const int err = errno;
    close(fd);
    unlink(path.c_str());
    return Status::ResourceExhausted("soft: size " + path + " to " + std::to_string(rounded) +
                                     " bytes: " + errnoText(err));
  }
  void* addr = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    const int err = errno;
    close(fd);
    unlink(path.c_str());
    return Status::ResourceExhausted("soft: map " + path + ": " + errnoText(err));
  }
  // mbind on a shared mapping sets the file's policy, which fallocate then follows.
  preferNode(addr, rounded, numa_node);
  // Reserve the pages now: a full tmpfs must fail here, not SIGBUS on a later copy.
  if (fallocate(fd, 0, 0, static_cast<off_t>(rounded)) != 0) {
    const int err = errno;
    munmap(addr, rounded);
    close(fd);
    unlink(path.c_str());
    return Status::ResourceExhausted("soft: reserve " + std::to_string(rounded) + " bytes in " +
                                     shm_dir + ": " + errnoText(err));
  }
  close(fd);
  // Map the pages in now, so the first transfers do not pay for it (best effort).
  madvise(addr, rounded, MADV_POPULATE_WRITE);
  allocations[reinterpret_cast<uintptr_t>(addr)] = ShmAllocation{id, rounded, path};
  return addr;
}

Status ProviderCore::freeShm(void* addr, size_t length) {
  std::lock_guard<std::mutex> g(mem_mutex);
  auto it = allocations.find(reinterpret_cast<uintptr_t>(addr));
  if (it == allocations.end()) {
    return Status::InvalidArgument("soft: freeMemory of memory not from allocateMemory");
  }
  if (length > it->second.length) {
    return Status::InvalidArgument("soft: freeMemory length " + std::to_string(length) +
                                   " exceeds the allocation (" + std::to_string(it->second.length) +
                                   ")");
  }
  munmap(addr, it->second.length);
  unlink(it->second.path.c_str());
  allocations.erase(it);
  return Status::OK();
}

namespace {

Result<void*> SoftProvider::allocateMemory(size_t length, int numa_node) {
  return core_->allocateShm(length, numa_node);
}

Status SoftProvider::freeMemory(void* addr, size_t length) {
  return core_->freeShm(addr, length);
}

}  // namespace

std::vector<config::SoftDevice> resolveDevices(const config::SoftFabricConfig& config,
                                               const std::vector<topology::PciDevice>& rdma) {
  if (!config.devices.empty()) return config.devices;
  auto make = [&](std::string name, int numa_node, std::string pci) {
    config::SoftDevice d;
    d.name = std::move(name);
    d.numa_node = numa_node;
    d.pci = std::move(pci);
    d.link_gbps = config.default_link_gbps;
    d.latency_ns = config.default_latency_ns;
    return d;
  };
  std::vector<config::SoftDevice> out;
  for (const auto& nic : rdma) out.push_back(make(nic.name, nic.numa_node, nic.pci));
  if (out.empty()) out.push_back(make("soft0", 0, ""));
  return out;
}

Result<std::unique_ptr<Provider>> createSoftProvider(const config::SoftFabricConfig& config,
                                                     const topology::Topology& topology) {
  return createSoftProvider(config, resolveDevices(config, topology.rdmaDevices()));
}

Result<std::unique_ptr<Provider>> createSoftProvider(const config::SoftFabricConfig& config,
                                                     std::vector<config::SoftDevice> devices,
                                                     SoftOptions options) {
  TENT_RETURN_IF_ERROR(validate(config, devices));
  removeStaleFiles(config.shm_dir);
  auto core = std::make_shared<ProviderCore>();
  core->pid = static_cast<uint32_t>(getpid());
  core->nonce = randomNonce();
  core->clock = options.clock;
  core->shm_dir = config.shm_dir;
  core->max_mrs = config.max_mrs;
  core->retry_budget_ns = uint64_t{config.retry_budget_ms} * 1'000'000ull;
  core->max_message_bytes = config.max_message_bytes;
  core->copy_payload = config.copy_payload;
  core->stream_copy_min_bytes = config.stream_copy_min_bytes;
  std::vector<std::unique_ptr<SoftDevice>> made;
  for (uint32_t i = 0; i < devices.size(); ++i) {
    auto state = createDeviceState(core, devices[i], i);
    if (!state.ok()) return state.status().withContext("soft device '" + devices[i].name + "'");
    made.push_back(std::make_unique<SoftDevice>(std::move(state).value()));
  }
  auto provider = std::make_unique<SoftProvider>(core, std::move(made));
  TENT_RETURN_IF_ERROR(provider->startLiveness());
  TENT_INFO(kFabric, "soft provider: %s", provider->linkModel().c_str());
  return std::unique_ptr<Provider>(std::move(provider));
}

FaultInjector* faultInjector(Provider& provider) noexcept {
  auto* soft = dynamic_cast<SoftProvider*>(&provider);
  return soft ? &soft->faults() : nullptr;
}

}  // namespace tent::fabric::soft
