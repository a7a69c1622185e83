// The tcp provider: its devices, transfer memory and lifetime.
#include "fabric/tcp/tcp_provider.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "fabric/tcp/tcp_device.h"
#include "tent/log.h"

namespace tent::fabric::tcp {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr int kMpolPreferred = 1;  // <linux/mempolicy.h>

Status validate(const config::TcpFabricConfig& c, const std::vector<config::TcpDevice>& devices) {
  if (devices.size() > kMaxDevices) {
    return Status::InvalidArgument("tcp fabric: at most " + std::to_string(kMaxDevices) +
                                   " devices, got " + std::to_string(devices.size()));
  }
  std::set<std::string> names;
  for (const auto& d : devices) {
    if (d.name.empty()) return Status::InvalidArgument("tcp fabric: a device has no name");
    if (!names.insert(d.name).second) {
      return Status::InvalidArgument("tcp fabric: duplicate device name '" + d.name + "'");
    }
  }
  if (c.max_mrs == 0 || c.max_mrs > kMaxMrs) {
    return Status::InvalidArgument("tcp fabric: max_mrs must be in [1, " + std::to_string(kMaxMrs) +
                                   "], got " + std::to_string(c.max_mrs));
  }
  if (c.retry_budget_ms < 10) {
    return Status::InvalidArgument("tcp fabric: retry_budget_ms must be >= 10");
  }
  if (c.max_message_bytes < 1 || c.max_message_bytes > kMaxWireLength) {
    return Status::InvalidArgument("tcp fabric: max_message_bytes must be in [1, 2147483648]");
  }
  if (c.gpu_staging_buffers < 1 || c.gpu_staging_buffers > kMaxStagingBuffers) {
    return Status::InvalidArgument("tcp fabric: gpu_staging_buffers must be in [1, " +
                                   std::to_string(kMaxStagingBuffers) + "], got " +
                                   std::to_string(c.gpu_staging_buffers));
  }
  if (c.gpu_staging_buffer_bytes < kMinStagingBufferBytes ||
      c.gpu_staging_buffer_bytes > kMaxStagingBufferBytes) {
    return Status::InvalidArgument("tcp fabric: gpu_staging_buffer_bytes must be in [" +
                                   std::to_string(kMinStagingBufferBytes) + ", " +
                                   std::to_string(kMaxStagingBufferBytes) + "], got " +
                                   std::to_string(c.gpu_staging_buffer_bytes));
  }
  return Status::OK();
}

class TcpProvider final : public Provider {
 public:
  TcpProvider(std::vector<std::unique_ptr<TcpDevice>> devices, uint32_t retry_budget_ms)
      : devices_(std::move(devices)), retry_budget_ms_(retry_budget_ms) {}

  // Connections close, outstanding WRs are flushed and QPs go to ERR; objects that
  // outlive the provider see a closed device (posts fail with EINVAL).
  ~TcpProvider() override {
    for (auto& d : devices_) d->state().loop->stop();
    std::lock_guard<std::mutex> g(mem_mutex_);
    for (auto& [addr, length] : allocations_) munmap(reinterpret_cast<void*>(addr), length);
  }

  std::string_view name() const noexcept override { return "tcp"; }

  std::string linkModel() const override {
    std::string s = "tcp:";
    for (size_t i = 0; i < devices_.size(); ++i) {
      const DeviceState& st = devices_[i]->state();
      s += (i ? "; " : " ") + st.info.name + " " + st.listen_text;
    }
    return s + "; one TCP connection per QP, retry_budget_ms=" + std::to_string(retry_budget_ms_);
  }

  size_t deviceCount() const noexcept override { return devices_.size(); }
  Device& device(size_t index) noexcept override { return *devices_[index]; }

  Result<void*> allocateMemory(size_t length, int numa_node) override;
  Status freeMemory(void* addr, size_t length) override;

 private:
  std::vector<std::unique_ptr<TcpDevice>> devices_;
  const uint32_t retry_budget_ms_;
  std::mutex mem_mutex_;
  std::map<uintptr_t, size_t> allocations_;  // base -> mapped length
};

// Anonymous memory aligned for transparent huge pages, preferring `numa_node`.
Result<void*> TcpProvider::allocateMemory(size_t length, int numa_node) {
  if (length == 0) return Status::InvalidArgument("tcp: allocateMemory of 0 bytes");
  const size_t align = length >= kHugePage ? kHugePage : static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (length + align - 1) / align * align;
  void* raw =
      mmap(nullptr, mapped + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return Status::ResourceExhausted("tcp: cannot map " + std::to_string(mapped) +
                                     " bytes: " + std::strerror(errno));
  }
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + align - 1) / align * align;
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t end = begin + mapped + align;
  if (end > aligned + mapped)
    munmap(reinterpret_cast<void*>(aligned + mapped), end - aligned - mapped);
  void* addr = reinterpret_cast<void*>(aligned);
  if (mapped >= kHugePage) (void)madvise(addr, mapped, MADV_HUGEPAGE);
  if (numa_node >= 0 && numa_node < 64) {
    unsigned long mask = 1ul << numa_node;
    (void)syscall(SYS_mbind, addr, mapped, kMpolPreferred, &mask, 65, 0);
  }
  std::lock_guard<std::mutex> g(mem_mutex_);
  allocations_[aligned] = mapped;
  return addr;
}

Status TcpProvider::freeMemory(void* addr, size_t length) {
  std::lock_guard<std::mutex> g(mem_mutex_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(addr));
  if (it == allocations_.end()) {
    return Status::InvalidArgument("tcp: freeMemory of memory not from allocateMemory");
  }
  if (length > it->second) {
    return Status::InvalidArgument("tcp: freeMemory length " + std::to_string(length) +
                                   " exceeds the allocation (" + std::to_string(it->second) + ")");
  }
  munmap(addr, it->second);
  allocations_.erase(it);
  return Status::OK();
}

}  // namespace

std::vector<config::TcpDevice> resolveDevices(const config::TcpFabricConfig& config) {
  if (!config.devices.empty()) return config.devices;
  config::TcpDevice d;
  d.name = "tcp0";
  return {d};
}

Result<std::unique_ptr<Provider>> createTcpProvider(const config::TcpFabricConfig& config) {
  const std::vector<config::TcpDevice> specs = resolveDevices(config);
  TENT_RETURN_IF_ERROR(validate(config, specs));
  std::vector<std::unique_ptr<TcpDevice>> devices;
  for (uint32_t i = 0; i < specs.size(); ++i) {
    auto state = openDevice(specs[i], i, config);
    if (!state.ok()) return state.status().withContext("tcp device '" + specs[i].name + "'");
    devices.push_back(std::make_unique<TcpDevice>(std::move(state).value()));
  }
  auto provider = std::make_unique<TcpProvider>(std::move(devices), config.retry_budget_ms);
  TENT_INFO(kFabric, "tcp provider: %s", provider->linkModel().c_str());
  return std::unique_ptr<Provider>(std::move(provider));
}

}  // namespace tent::fabric::tcp
