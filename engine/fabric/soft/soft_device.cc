// A soft device: its control file, memory registration, CQ and QP creation.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>

#include "base/mapped_range.h"
#include "fabric/soft/soft_internal.h"
#include "tent/log.h"

namespace tent::fabric::soft {

namespace {

constexpr uint32_t kKnownAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

Status mapControlFile(DeviceState& s, uint32_t max_mrs) {
  s.ctrl_length = controlFileSize(max_mrs);
  const int fd = open(s.ctrl_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("create " + s.ctrl_path + ": " + std::strerror(errno));
  // fallocate, not just ftruncate: a full tmpfs must fail here, not SIGBUS later.
  if (ftruncate(fd, static_cast<off_t>(s.ctrl_length)) != 0 ||
      fallocate(fd, 0, 0, static_cast<off_t>(s.ctrl_length)) != 0) {
    const int err = errno;
    close(fd);
    unlink(s.ctrl_path.c_str());
    return Status::ResourceExhausted("size " + s.ctrl_path + ": " + std::strerror(err));
  }
  void* base = mmap(nullptr, s.ctrl_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    unlink(s.ctrl_path.c_str());
    return Status::ResourceExhausted("map " + s.ctrl_path + ": " + std::strerror(err));
  }
  s.ctrl_base = base;
  s.view = ControlView::over(base, max_mrs);
  return Status::OK();
}

void writeHeader(DeviceState& s, uint32_t max_mrs) {
  // The file is zero-filled: every atomic in it starts at 0. Construct the header's.
  ControlHeader* h = s.view.header;
  new (&h->closed) std::atomic<uint32_t>(0);
  new (&h->owner) std::atomic<uint32_t>(0);  // dead until the liveness anchor owns it
  h->version = kLayoutVersion;
  h->pid = s.address.pid;
  h->nonce = s.address.nonce;
  h->device_index = s.address.device_index;
  h->max_mrs = max_mrs;
  h->max_qps = kMaxQps;
  h->start_time = processStartTime(s.address.pid);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kControlMagic;
}

template <typename T>
std::vector<T> descendingSlots(uint32_t n) {
  std::vector<T> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = static_cast<T>(n - 1 - i);  // pop_back() gives slot 0
  return v;
}

}  // namespace

Result<std::shared_ptr<DeviceState>> createDeviceState(std::shared_ptr<ProviderCore> core,
                                                       const config::SoftDevice& spec,
                                                       uint32_t index) {
  auto s = std::make_shared<DeviceState>();
  s->info.name = spec.name;
  s->info.index = index;
  s->info.numa_node = spec.numa_node;
  s->info.pci = spec.pci;
  s->info.link_gbps = spec.link_gbps;
  s->info.latency_ns = spec.latency_ns;
  s->info.max_message_bytes = core->max_message_bytes;
  s->address = SoftAddress{core->pid, core->nonce, index, bootTag()};
  s->ctrl_path = core->shm_dir + "/" + controlFileName(core->pid, core->nonce, index);
  s->core = std::move(core);
  TENT_RETURN_IF_ERROR(mapControlFile(*s, s->core->max_mrs));
  writeHeader(*s, s->core->max_mrs);
  s->mr_generation.assign(s->core->max_mrs, 0);
  s->free_mrs = descendingSlots<uint32_t>(s->core->max_mrs);
  s->qp_generation.assign(kMaxQps, 0);
  s->free_qps = descendingSlots<uint32_t>(kMaxQps);
  s->port.bytes_per_ns = spec.link_gbps / 8.0;  // 1 Gb/s = 0.125 bytes per ns
  s->port.latency_ns = spec.latency_ns;
  s->needs_clock = s->core->injectedClock() || spec.link_gbps > 0 || spec.latency_ns > 0;
  TENT_RETURN_IF_ERROR(s->openEvents());
  return s;
}

DeviceState::~DeviceState() {
  closeEvents();
  if (ctrl_base != nullptr) {
    releaseRqAreas(*this);
    unlink(ctrl_path.c_str());  // no-op when the provider already did
    munmap(ctrl_base, ctrl_length);
  }
}

// ---- memory regions ----------------------------------------------------------------

Status SoftDevice::checkRegistration(void* addr, size_t length, uint32_t access) const {
  if (addr == nullptr || length == 0) {
    return Status::InvalidArgument("soft: registerMemory needs an address and a length");
  }
  if ((access & ~kKnownAccess) != 0) {
    return Status::InvalidArgument("soft: unknown access flags " + std::to_string(access));
  }
  if ((access & kAccessRemoteWrite) && !(access & kAccessLocalWrite)) {
    return Status::InvalidArgument("soft: REMOTE_WRITE requires LOCAL_WRITE (as in verbs)");
  }
  return Status::OK();
}

Result<std::unique_ptr<MemoryRegion>> SoftDevice::registerMemory(void* addr, size_t length,
                                                                 uint32_t access) {
  TENT_RETURN_IF_ERROR(checkRegistration(addr, length, access));
  // A NIC pins the pages now and fails with EFAULT; the copies would fault later.
  const bool writable = (access & (kAccessLocalWrite | kAccessRemoteWrite)) != 0;
  Status mapped = checkMappedRange(reinterpret_cast<uintptr_t>(addr), length, writable);
  if (!mapped.ok()) return mapped.withContext("soft " + state_->info.name + ": registerMemory");
  MrSnapshot entry;
  entry.addr = reinterpret_cast<uintptr_t>(addr);
  entry.length = length;
  entry.access = access;
  ProviderCore& core = *state_->core;
  {
    std::lock_guard<std::mutex> g(core.mem_mutex);
    uintptr_t base = 0;
    if (const ShmAllocation* a = core.findAllocationLocked(entry.addr, length, &base)) {
      entry.shm_id = a->id;
      entry.shm_offset = entry.addr - base;
      entry.shm_length = a->length;
    }
  }
  return publishMr(entry, nullptr, -1);
}

Result<std::unique_ptr<MemoryRegion>> SoftDevice::publishMr(MrSnapshot entry,
                                                            const GpuExportRecord* gpu,
                                                            int owned_fd) {
  std::lock_guard<std::mutex> g(state_->ctrl_mutex);
  if (state_->free_mrs.empty()) {
    return Status::ResourceExhausted("soft: device " + state_->info.name + " has all " +
                                     std::to_string(state_->core->max_mrs) +
                                     " memory regions in use");
  }
  const uint32_t slot = state_->free_mrs.back();
  state_->free_mrs.pop_back();
  uint16_t gen = ++state_->mr_generation[slot];
  if (gen == 0) gen = state_->mr_generation[slot] = 1;  // key 0 means "free"
  entry.key = uint32_t{gen} << kMrSlotBits | slot;
  writeMr(state_->view.mrs[slot], entry, gpu);
  return std::unique_ptr<MemoryRegion>(
      std::make_unique<SoftMr>(state_, slot, reinterpret_cast<void*>(entry.addr), entry.length,
                               entry.key, entry.access, owned_fd));
}

SoftMr::SoftMr(std::shared_ptr<DeviceState> dev, uint32_t slot, void* addr, size_t length,
               uint32_t key, uint32_t access, int owned_fd)
    : dev_(std::move(dev)), slot_(slot), owned_fd_(owned_fd) {
  addr_ = addr;
  length_ = length;
  lkey_ = key;
  rkey_ = key;
  access_ = access;
}

SoftMr::~SoftMr() {
  // Invalidate first: from here on every peer's check of this rkey fails.
  std::lock_guard<std::mutex> g(dev_->ctrl_mutex);
  clearMr(dev_->view.mrs[slot_]);
  dev_->free_mrs.push_back(slot_);
  // A peer copies an exported descriptor only while the entry names it (soft_gpu.cc).
  if (owned_fd_ >= 0) close(owned_fd_);
}

// ---- CQs and QPs ------------------------------------------------------------------

Result<std::unique_ptr<CompletionQueue>> SoftDevice::createCq(uint32_t depth) {
  if (depth == 0 || depth > kMaxCqDepth) {
    return Status::InvalidArgument("soft: CQ depth must be in [1, " + std::to_string(kMaxCqDepth) +
                                   "], got " + std::to_string(depth));
  }
  auto core = std::make_shared<CqCore>();
  core->dev = state_;
  core->depth = depth;
  return std::unique_ptr<CompletionQueue>(std::make_unique<SoftCq>(std::move(core)));
}

Result<std::unique_ptr<QueuePair>> SoftDevice::createQp(const QpInitAttr& attr) {
  auto* cq = dynamic_cast<SoftCq*>(attr.send_cq);
  if (cq == nullptr) return Status::InvalidArgument("soft: createQp needs a soft send CQ");
  if (cq->core()->dev != state_) {
    return Status::InvalidArgument("soft: the send CQ belongs to another device");
  }
  if (attr.max_send_wr == 0 || attr.max_send_wr > kMaxSendWr) {
    return Status::InvalidArgument("soft: max_send_wr must be in [1, " +
                                   std::to_string(kMaxSendWr) + "], got " +
                                   std::to_string(attr.max_send_wr));
  }
  if (attr.max_sge == 0 || attr.max_sge > kMaxSge) {
    return Status::InvalidArgument("soft: max_sge must be in [1, " + std::to_string(kMaxSge) +
                                   "], got " + std::to_string(attr.max_sge));
  }
  std::shared_ptr<CqCore> recv_cq;
  if (attr.max_recv_wr != 0 || attr.recv_cq != nullptr) {
    auto* rcq = dynamic_cast<SoftCq*>(attr.recv_cq);
    if (rcq == nullptr || rcq->core()->dev != state_) {
      return Status::InvalidArgument("soft: a receive queue needs a soft CQ of this device");
    }
    if (attr.max_recv_wr == 0 || attr.max_recv_wr > kMaxRecvWr) {
      return Status::InvalidArgument("soft: max_recv_wr must be in [1, " +
                                     std::to_string(kMaxRecvWr) + "], got " +
                                     std::to_string(attr.max_recv_wr));
    }
    recv_cq = rcq->core();
  }
  uint32_t slot = 0;
  uint32_t qp_num = 0;
  {
    std::lock_guard<std::mutex> g(state_->ctrl_mutex);
    CqCore& core = *cq->core();
    const uint64_t recv_need = recv_cq != nullptr ? attr.max_recv_wr : 0;
    if (recv_cq != nullptr && recv_cq.get() != &core &&
        recv_cq->reserved + recv_need > recv_cq->depth) {
      return Status::ResourceExhausted(
          "soft " + state_->info.name + ": receive CQ depth " + std::to_string(recv_cq->depth) +
          " cannot hold another receive queue of " + std::to_string(recv_need));
    }
    const uint64_t same_cq = recv_cq.get() == &core ? recv_need : 0;
    if (core.reserved + attr.max_send_wr + same_cq > core.depth) {
      return Status::ResourceExhausted(
          "soft " + state_->info.name + ": CQ depth " + std::to_string(core.depth) +
          " cannot hold another QP of max_send_wr " + std::to_string(attr.max_send_wr) + " (" +
          std::to_string(core.reserved) + " entries already reserved); it could overflow");
    }
    if (state_->free_qps.empty()) {
      return Status::ResourceExhausted("soft: device " + state_->info.name + " has all " +
                                       std::to_string(kMaxQps) + " QPs in use");
    }
    slot = state_->free_qps.back();
    state_->free_qps.pop_back();
    // Generations 1..kQpGenerations-1: qp_num is never 0 (0 means "no QP" on the wire).
    const uint16_t gen =
        static_cast<uint16_t>(state_->qp_generation[slot] % (kQpGenerations - 1) + 1);
    state_->qp_generation[slot] = gen;
    qp_num = uint32_t{gen} << kQpSlotBits | slot;
    core.reserved += attr.max_send_wr;
    if (recv_cq != nullptr) recv_cq->reserved += recv_need;
  }
  auto qp = std::make_unique<SoftQp>(state_, cq->core(), slot, qp_num, attr, recv_cq);
  if (recv_cq != nullptr) {
    auto area = rqAreaFor(*state_, slot);
    if (!area.ok()) return area.status();  // ~SoftQp returns the slot and the reservations
    qp->attachRecv(*area, attr.max_recv_wr);
  }
  return std::unique_ptr<QueuePair>(std::move(qp));
}

PortCounters SoftDevice::counters() const noexcept {
  DeviceState& s = *state_;
  SpinGuard g(s.lock);
  s.advanceLocked(static_cast<double>(s.core->now()));
  PortCounters c;
  c.bytes = s.port.bytes;
  c.wrs = s.port.wrs;
  c.busy_ns = static_cast<uint64_t>(std::llround(s.port.busy_ns));
  return c;
}

}  // namespace tent::fabric::soft
