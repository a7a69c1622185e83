// Control path of a verbs device: open (context, port, GID, PD) and the
// creation of memory regions, CQs and QPs.
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric::verbs {

namespace {

std::string errnoText(int rc) {
  return std::string(std::strerror(rc)) + " (errno " + std::to_string(rc) + ")";
}

// libibverbs returns an errno value, or -1 with errno set (older providers).
int callError(int rc) {
  return rc == -1 ? errno : rc;
}

uint8_t clampU8(uint64_t configured, int device_limit) {
  uint64_t v = configured;
  if (device_limit > 0 && v > static_cast<uint64_t>(device_limit)) v = device_limit;
  return static_cast<uint8_t>(v > 255 ? 255 : v);
}

const char* linkLayerName(uint8_t layer) {
  return layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB";
}

}  // namespace

// ---- helpers ------------------------------------------------------------------

Result<ibv_mtu> mtuFromBytes(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    case 4096:
      return IBV_MTU_4096;
    default:
      return Status::InvalidArgument("verbs: mtu " + std::to_string(bytes) +
                                     " is not one of 256, 512, 1024, 2048, 4096");
  }
}

double linkGbps(uint8_t active_speed, uint8_t active_width) noexcept {
  double lane = 0;
  switch (active_speed) {
    case 1:
      lane = 2.5;
      break;  // SDR
    case 2:
      lane = 5;
      break;  // DDR
    case 4:
      lane = 10;
      break;  // QDR
    case 8:
      lane = 10;
      break;  // FDR10
    case 16:
      lane = 14;
      break;  // FDR
    case 32:
      lane = 25;
      break;  // EDR
    case 64:
      lane = 50;
      break;  // HDR
    case 128:
      lane = 100;
      break;  // NDR
    default:
      return 0;
  }
  switch (active_width) {
    case 1:
      return lane;
    case 2:
      return lane * 4;
    case 4:
      return lane * 8;
    case 8:
      return lane * 12;
    case 16:
      return lane * 2;
    default:
      return 0;
  }
}

bool isIpv4MappedGid(const ibv_gid& gid) noexcept {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, kPrefix, sizeof(kPrefix)) == 0;
}

int toIbvAccess(uint32_t access) noexcept {
  int flags = 0;
  if (access & kAccessLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  // Verbs refuses REMOTE_WRITE without LOCAL_WRITE.
  if (access & kAccessRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  return flags;
}

// ---- open ---------------------------------------------------------------------

Result<std::unique_ptr<VerbsDevice>> VerbsDevice::open(const VerbsOps& ops, ibv_device* device,
                                                       uint32_t index,
                                                       const config::VerbsFabricConfig& config) {
  std::unique_ptr<VerbsDevice> dev(new VerbsDevice(ops));
  const char* name = ops.get_device_name(device);
  dev->info_.name = name ? name : "?";
  dev->info_.index = index;
  dev->readSysfsPlacement(device);
  TENT_RETURN_IF_ERROR(dev->openContext(device, config));
  TENT_RETURN_IF_ERROR(dev->setupPort(config));
  dev->readSysfsTrafficClass();
  dev->events_ = dev->openEvents();
  TENT_INFO(kFabric, "verbs: opened %s", dev->describe().c_str());
  return dev;
}

Status VerbsDevice::openContext(ibv_device* device, const config::VerbsFabricConfig& config) {
  context_ = ops_.open_device(device);
  if (context_ == nullptr) {
    return Status::Unavailable("verbs " + info_.name + ": open_device failed: " + errnoText(errno));
  }
  int rc = callError(ops_.query_device(context_, &device_attr_));
  if (rc != 0)
    return Status::IoError("verbs " + info_.name + ": query_device failed: " + errnoText(rc));
  if (device_attr_.max_mr_size != 0) info_.max_mr_bytes = device_attr_.max_mr_size;
  relaxed_ordering_.store(config.relaxed_ordering, std::memory_order_relaxed);
  signal_every_ = config.signal_every;
  if (config.port == 0 || config.port > device_attr_.phys_port_cnt) {
    return Status::InvalidArgument("verbs " + info_.name + ": port " + std::to_string(config.port) +
                                   " does not exist (device has " +
                                   std::to_string(device_attr_.phys_port_cnt) + ")");
  }
  pd_ = ops_.alloc_pd(context_);
  if (pd_ == nullptr)
    return Status::IoError("verbs " + info_.name + ": alloc_pd failed: " + errnoText(errno));
  return Status::OK();
}

Status VerbsDevice::setupPort(const config::VerbsFabricConfig& config) {
  port_.port_num = config.port;
  int rc = callError(ops_.query_port(context_, config.port, &port_.attr));
  if (rc != 0)
    return Status::IoError("verbs " + info_.name + ": query_port failed: " + errnoText(rc));
  if (port_.attr.state != IBV_PORT_ACTIVE) {
    TENT_WARN(kFabric, "verbs %s: port %u is not active (state %d)", info_.name.c_str(),
              unsigned{config.port}, static_cast<int>(port_.attr.state));
  }
  TENT_ASSIGN_OR_RETURN(ibv_mtu mtu, mtuFromBytes(config.mtu));
  port_.path_mtu =
      (port_.attr.active_mtu != 0 && port_.attr.active_mtu < mtu) ? port_.attr.active_mtu : mtu;
  gid_choice_ = GidChoice{config.gid_index, config.gid_interface};
  TENT_ASSIGN_OR_RETURN(
      GidPick gid, selectGid(ops_, context_, info_.name, config.port, port_.attr, gid_choice_));
  port_.gid_index = gid.index;
  port_.gid_type = gid.type;
  port_.netdev = std::move(gid.netdev);
  rc = callError(ops_.query_gid(context_, config.port, port_.gid_index, &port_.gid));
  if (rc != 0) {
    return Status::IoError("verbs " + info_.name + ": query_gid(" +
                           std::to_string(port_.gid_index) + ") failed: " + errnoText(rc));
  }
  port_.timeout = config.timeout;
  port_.retry_cnt = config.retry_cnt;
  port_.rnr_retry = config.rnr_retry;
  port_.max_rd_atomic = clampU8(config.max_rd_atomic, device_attr_.max_qp_init_rd_atom);
  port_.max_dest_rd_atomic = clampU8(config.max_rd_atomic, device_attr_.max_qp_rd_atom);
  info_.link_gbps = linkGbps(port_.attr.active_speed, port_.attr.active_width);
  if (port_.attr.max_msg_sz != 0) info_.max_message_bytes = port_.attr.max_msg_sz;
  return Status::OK();
}

// NUMA node and PCI address from sysfs (ibdev_path/device); unknown stays -1 / "".
void VerbsDevice::readSysfsPlacement(ibv_device* device) {
  sysfs_path_ = device->ibdev_path;
  std::ifstream numa(sysfs_path_ + "/device/numa_node");
  int node = -1;
  if (numa >> node) info_.numa_node = node < 0 ? -1 : node;
  char target[512];
  ssize_t n = readlink((sysfs_path_ + "/device").c_str(), target, sizeof(target) - 1);
  if (n > 0) {
    target[n] = '\0';
    const char* slash = std::strrchr(target, '/');
    info_.pci = slash ? slash + 1 : target;
  }
}

// MLNX_OFED: /sys/class/infiniband/<dev>/tc/<port>/traffic_class holds "Global
// tclass=N" when an operator set one; the NIC then sends every QP's packets with N
// whatever the QP's address vector says, so fabric qos has no effect there.
void VerbsDevice::readSysfsTrafficClass() {
  std::ifstream in(sysfs_path_ + "/tc/" + std::to_string(port_.port_num) + "/traffic_class");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t digit = text.find_first_of("0123456789");
  if (digit == std::string::npos) return;
  sysfs_traffic_class_ = std::atoi(text.c_str() + digit);
  TENT_WARN(kFabric,
            "verbs %s port %u: the host-wide traffic class %d (sysfs tc/%u/traffic_class) "
            "overrides the traffic_class of every QP (qos.*.traffic_class has no effect here)",
            info_.name.c_str(), unsigned{port_.port_num}, sysfs_traffic_class_,
            unsigned{port_.port_num});
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) {
    int rc = ops_.dealloc_pd(pd_);
    if (rc != 0)
      TENT_WARN(kFabric, "verbs %s: dealloc_pd failed (objects still alive?): %s",
                info_.name.c_str(), errnoText(rc).c_str());
  }
  if (context_ != nullptr) ops_.close_device(context_);
}

std::string VerbsDevice::describe() const {
  char text[384];
  std::snprintf(text, sizeof(text),
                "%s port %u %s %.0f Gb/s mtu %d gid_index %d (%s %s%s%s) lid %u",
                info_.name.c_str(), unsigned{port_.port_num}, linkLayerName(port_.attr.link_layer),
                info_.link_gbps, 128 << port_.path_mtu, port_.gid_index,
                gidTypeName(port_.gid_type), gidText(port_.gid).c_str(),
                port_.netdev.empty() ? "" : " on ", port_.netdev.c_str(), unsigned{port_.attr.lid});
  std::string out = text;
  if (sysfs_traffic_class_ >= 0)
    out += " sysfs traffic_class " + std::to_string(sysfs_traffic_class_) + " overrides qos";
  return out;
}

PortIdentity VerbsDevice::portIdentity() const {
  std::lock_guard<std::mutex> lock(identity_mu_);
  PortIdentity id;
  std::memcpy(id.gid.data(), port_.gid.raw, 16);
  id.lid = port_.attr.lid;
  return id;
}

PortLink VerbsDevice::portLink() const {
  std::lock_guard<std::mutex> lock(identity_mu_);
  PortLink link;
  link.link_layer = port_.ethernet() ? LinkLayer::kEthernet : LinkLayer::kInfiniband;
  switch (port_.gid_type) {
    case IBV_GID_TYPE_IB:
      link.gid_type = GidType::kIb;
      break;
    case IBV_GID_TYPE_ROCE_V1:
      link.gid_type = GidType::kRoceV1;
      break;
    case IBV_GID_TYPE_ROCE_V2:
      link.gid_type = GidType::kRoceV2;
      break;
    default:
      link.gid_type = GidType::kUnknown;
  }
  link.mtu_bytes = 128u << port_.path_mtu;
  return link;
}

// Bytes from the port's sysfs counters (4-byte units, both directions); WRs from polls.
PortCounters VerbsDevice::counters() const noexcept {
  PortCounters c;
  c.wrs = completions_.load(std::memory_order_relaxed);
  std::string base = sysfs_path_ + "/ports/" + std::to_string(port_.port_num) + "/counters/";
  for (const char* name : {"port_xmit_data", "port_rcv_data"}) {
    std::ifstream in(base + name);
    uint64_t words = 0;
    if (in >> words) c.bytes += words * 4;
  }
  return c;
}

// ---- resources ----------------------------------------------------------------

// IBV_ACCESS_RELAXED_ORDERING is an optional access flag: a device without relaxed
// ordering ignores it. An older kernel refuses it with EINVAL instead: then this
// device registers without it from now on, said once.
Result<std::unique_ptr<MemoryRegion>> VerbsDevice::registerMemory(void* addr, size_t length,
                                                                  uint32_t access) {
  if (addr == nullptr || length == 0) {
    return Status::InvalidArgument("verbs " + info_.name + ": registerMemory of an empty range");
  }
  if (length > info_.max_mr_bytes) {
    return Status::InvalidArgument(
        "verbs " + info_.name + ": registerMemory of " + std::to_string(length) +
        " bytes exceeds the device's max_mr_size (" + std::to_string(info_.max_mr_bytes) + ")");
  }
  const bool relaxed = relaxed_ordering_.load(std::memory_order_relaxed);
  int flags = toIbvAccess(access) | (relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);
  ibv_mr* mr = ops_.reg_mr(pd_, addr, length, flags);
  if (mr == nullptr && relaxed && errno == EINVAL) {
    if (relaxed_ordering_.exchange(false))
      TENT_INFO(kFabric,
                "verbs %s: the kernel refuses IBV_ACCESS_RELAXED_ORDERING; registering "
                "without it",
                info_.name.c_str());
    mr = ops_.reg_mr(pd_, addr, length, toIbvAccess(access));
  }
  if (mr == nullptr) {
    return Status::IoError("verbs " + info_.name + ": reg_mr(" + std::to_string(length) +
                           " bytes) failed: " + errnoText(errno));
  }
  return std::unique_ptr<MemoryRegion>(new VerbsMr(ops_, mr, access));
}

Result<std::unique_ptr<CompletionQueue>> VerbsDevice::createCq(uint32_t depth) {
  if (depth == 0 ||
      (device_attr_.max_cqe > 0 && depth > static_cast<uint32_t>(device_attr_.max_cqe))) {
    return Status::InvalidArgument("verbs " + info_.name + ": CQ depth " + std::to_string(depth) +
                                   " outside [1, " + std::to_string(device_attr_.max_cqe) + "]");
  }
  ibv_cq* cq = ops_.create_cq(context_, static_cast<int>(depth), nullptr, nullptr, 0);
  if (cq == nullptr)
    return Status::IoError("verbs " + info_.name + ": create_cq failed: " + errnoText(errno));
  return std::unique_ptr<CompletionQueue>(new VerbsCq(*this, cq, depth));
}

Result<std::unique_ptr<QueuePair>> VerbsDevice::createQp(const QpInitAttr& attr) {
  auto* cq = dynamic_cast<VerbsCq*>(attr.send_cq);
  if (cq == nullptr || &cq->device() != this) {
    return Status::InvalidArgument("verbs " + info_.name + ": createQp needs a CQ of this device");
  }
  uint32_t max_wr_limit = device_attr_.max_qp_wr > 0 ? device_attr_.max_qp_wr : UINT32_MAX;
  uint32_t max_sge_limit = device_attr_.max_sge > 0
                               ? std::min<uint32_t>(device_attr_.max_sge, kMaxSgePerWr)
                               : kMaxSgePerWr;
  if (attr.max_send_wr == 0 || attr.max_send_wr > max_wr_limit) {
    return Status::InvalidArgument("verbs " + info_.name + ": max_send_wr " +
                                   std::to_string(attr.max_send_wr) + " outside [1, " +
                                   std::to_string(max_wr_limit) + "]");
  }
  if (attr.max_sge == 0 || attr.max_sge > max_sge_limit) {
    return Status::InvalidArgument("verbs " + info_.name + ": max_sge " +
                                   std::to_string(attr.max_sge) + " outside [1, " +
                                   std::to_string(max_sge_limit) + "]");
  }
  VerbsCq* recv_cq = nullptr;
  if (attr.max_recv_wr != 0 || attr.recv_cq != nullptr) {
    recv_cq = dynamic_cast<VerbsCq*>(attr.recv_cq);
    if (recv_cq == nullptr || &recv_cq->device() != this) {
      return Status::InvalidArgument("verbs " + info_.name +
                                     ": a receive queue needs a CQ of this device");
    }
    if (attr.max_recv_wr == 0 || attr.max_recv_wr > max_wr_limit) {
      return Status::InvalidArgument("verbs " + info_.name + ": max_recv_wr " +
                                     std::to_string(attr.max_recv_wr) + " outside [1, " +
                                     std::to_string(max_wr_limit) + "]");
    }
  }
  ibv_qp_init_attr init{};
  init.send_cq = cq->raw();
  // Required even without receives: RDMA WRITE/READ never complete receives.
  init.recv_cq = recv_cq != nullptr ? recv_cq->raw() : cq->raw();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = attr.max_send_wr;
  init.cap.max_send_sge = attr.max_sge;
  init.cap.max_recv_wr = recv_cq != nullptr ? attr.max_recv_wr : 1;
  init.cap.max_recv_sge = 1;
  ibv_qp* raw = ops_.create_qp(pd_, &init);
  if (raw == nullptr)
    return Status::IoError("verbs " + info_.name + ": create_qp failed: " + errnoText(errno));
  auto qp = std::make_unique<VerbsQp>(*this, *cq, raw, attr.max_send_wr, attr.max_sge, recv_cq,
                                      attr.max_recv_wr);
  qp->setSignalEvery(signal_every_);
  TENT_RETURN_IF_ERROR(qp->attachToCq());  // destroys the QP on failure
  return std::unique_ptr<QueuePair>(std::move(qp));
}

}  // namespace tent::fabric::verbs
