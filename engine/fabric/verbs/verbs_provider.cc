// The verbs provider and its factories: list rdma-core's devices, open the
// configured ones. Without any device: NotFound, never a crash.
#include "fabric/verbs/verbs_provider.h"

#include <algorithm>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric {

namespace {

// Owns an ibv_get_device_list() result.
class DeviceList {
 public:
  explicit DeviceList(const VerbsOps& ops) : ops_(ops) { list_ = ops_.get_device_list(&count_); }
  ~DeviceList() {
    if (list_ != nullptr) ops_.free_device_list(list_);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  size_t size() const { return list_ == nullptr || count_ < 0 ? 0 : static_cast<size_t>(count_); }
  ibv_device* operator[](size_t i) const { return list_[i]; }
  std::string nameOf(size_t i) const {
    const char* name = ops_.get_device_name(list_[i]);
    return name ? name : "?";
  }

 private:
  const VerbsOps& ops_;
  ibv_device** list_ = nullptr;
  int count_ = 0;
};

std::string joinNames(const DeviceList& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list.nameOf(i);
  return out;
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The candidates, in configuration order (allow-list), else in rdma-core's order
// minus the deny-list. `named` says whether the user asked for them by name.
Result<std::vector<size_t>> pickDevices(const DeviceList& list,
                                        const config::VerbsFabricConfig& config) {
  std::vector<size_t> picked;
  if (config.devices.empty()) {
    for (size_t i = 0; i < list.size(); ++i)
      if (!listed(config.exclude_devices, list.nameOf(i))) picked.push_back(i);
    return picked;
  }
  for (const std::string& wanted : config.devices) {
    size_t i = 0;
    while (i < list.size() && list.nameOf(i) != wanted) ++i;
    if (i == list.size()) {
      return Status::NotFound("verbs: RDMA device " + wanted +
                              " not found (rdma-core lists: " + joinNames(list) + ")");
    }
    picked.push_back(i);
  }
  return picked;
}

// Opens one candidate and checks what a default (unnamed) device must have.
Result<std::unique_ptr<verbs::VerbsDevice>> openCandidate(const VerbsOps& ops, ibv_device* device,
                                                          uint32_t index, bool named,
                                                          const config::VerbsFabricConfig& config) {
  TENT_RETURN_IF_ERROR(verbs::checkTransport(ops, device));
  TENT_ASSIGN_OR_RETURN(auto opened, verbs::VerbsDevice::open(ops, device, index, config));
  if (!named) TENT_RETURN_IF_ERROR(verbs::checkUsablePort(*opened));
  return opened;
}

// Opens the picked devices. A named device that fails fails the provider; an
// unnamed one is skipped with a warning (a storage NIC with its port down must not
// stop the engine), and when none is left the error lists every reason.
Result<std::vector<std::unique_ptr<verbs::VerbsDevice>>> openDevices(
    const VerbsOps& ops, const config::VerbsFabricConfig& config) {
  DeviceList list(ops);
  TENT_ASSIGN_OR_RETURN(std::vector<size_t> picked, pickDevices(list, config));
  const bool named = !config.devices.empty();
  std::vector<std::unique_ptr<verbs::VerbsDevice>> devices;
  std::string skipped;
  Status first_failure;
  for (size_t i : picked) {
    auto device = openCandidate(ops, list[i], static_cast<uint32_t>(devices.size()), named, config);
    if (device.ok()) {
      devices.push_back(std::move(device).value());
      continue;
    }
    if (named) return device.status();
    TENT_WARN(kFabric, "verbs: skipping %s: %s", list.nameOf(i).c_str(),
              device.status().message().c_str());
    skipped += (skipped.empty() ? "" : "; ") + std::string(device.status().message());
    if (first_failure.ok()) first_failure = device.status();
  }
  if (devices.empty()) {
    if (first_failure.ok()) {
      return Status::NotFound("verbs: every RDMA device is in fabric.verbs.exclude_devices (" +
                              joinNames(list) + ")");
    }
    return Status(first_failure.code(), "verbs: no usable RDMA device (" + skipped +
                                            "); on a host without a usable RDMA NIC use the tcp "
                                            "provider (fabric.provider: tcp)");
  }
  return devices;
}

}  // namespace

size_t verbsDeviceCount(const VerbsOps& ops) noexcept {
  return DeviceList(ops).size();
}

size_t verbsDeviceCount() noexcept {
  return verbsDeviceCount(realVerbsOps());
}

Result<std::unique_ptr<Provider>> createVerbsProvider(const config::VerbsFabricConfig& config,
                                                      const VerbsOps& ops) {
  DeviceList list(ops);
  if (list.size() == 0) {
    std::string wanted;
    for (const std::string& d : config.devices) wanted += (wanted.empty() ? " " : ",") + d;
    return Status::NotFound(
        "verbs: no RDMA device" + wanted +
        ": rdma-core lists none (no NIC, or no RDMA support in the kernel); on a host without "
        "RDMA use the tcp provider (fabric.provider: tcp; Mooncake: protocol 'tcp')");
  }
  TENT_ASSIGN_OR_RETURN(auto devices, openDevices(ops, config));
  return std::unique_ptr<Provider>(new verbs::VerbsProvider(std::move(devices)));
}

Result<std::unique_ptr<Provider>> createVerbsProvider(const config::VerbsFabricConfig& config) {
  return createVerbsProvider(config, realVerbsOps());
}

namespace verbs {

VerbsProvider::~VerbsProvider() {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  for (auto& [addr, length] : allocations_) (void)freeNumaMemory(addr, length);
}

std::string VerbsProvider::linkModel() const {
  std::string out = "verbs:";
  for (const auto& device : devices_) out += " " + device->describe() + ";";
  if (!devices_.empty()) out.pop_back();
  return out;
}

Result<void*> VerbsProvider::allocateMemory(size_t length, int numa_node) {
  TENT_ASSIGN_OR_RETURN(void* addr, allocateNumaMemory(length, numa_node));
  std::lock_guard<std::mutex> lock(memory_mutex_);
  allocations_[addr] = length;
  return addr;
}

Status VerbsProvider::freeMemory(void* addr, size_t length) {
  {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    auto it = allocations_.find(addr);
    if (it == allocations_.end() || it->second != length) {
      return Status::InvalidArgument(
          "verbs: freeMemory of memory this provider did not allocate "
          "(or with another length)");
    }
    allocations_.erase(it);
  }
  return freeNumaMemory(addr, length);
}

}  // namespace verbs
}  // namespace tent::fabric
