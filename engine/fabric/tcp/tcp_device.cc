// A tcp device: its listening socket, memory registration, CQ and QP creation.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/mapped_range.h"
#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"
#include "fabric/tcp/tcp_device.h"
#include "tent/log.h"

namespace tent::fabric::tcp {

namespace {

constexpr uint32_t kKnownAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
constexpr int kListenBacklog = 1024;

class TcpMr final : public MemoryRegion {
 public:
  TcpMr(std::shared_ptr<DeviceState> dev, void* addr, size_t length, uint32_t key, uint32_t access)
      : dev_(std::move(dev)) {
    addr_ = addr;
    length_ = length;
    lkey_ = key;
    rkey_ = key;
    access_ = access;
  }
  // Invalidates the key for every check that starts afterwards, local or remote, and
  // waits for a socket call moving bytes of the region to end.
  ~TcpMr() override { dev_->mrs.remove(lkey_); }

 private:
  std::shared_ptr<DeviceState> dev_;
};

}  // namespace

CqCore::CqCore(std::shared_ptr<QpWords> words, std::shared_ptr<QpWords> recv_words, uint32_t depth)
    : words_(std::move(words)),
      recv_words_(std::move(recv_words)),
      depth_(depth),
      mask_(std::bit_ceil(uint64_t{depth}) - 1),
      cells_(std::make_unique<Cell[]>(mask_ + 1)) {
  for (uint64_t i = 0; i <= mask_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
}

Result<std::shared_ptr<DeviceState>> openDevice(const config::TcpDevice& spec, uint32_t index,
                                                const config::TcpFabricConfig& config) {
  auto listen = parseListen(spec.listen);
  if (!listen.ok()) return listen.status();
  const int fd = socket(listen->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&listen->storage), listen->length) != 0 ||
      ::listen(fd, kListenBacklog) != 0) {
    const int err = errno;
    close(fd);
    return Status::IoError("cannot listen on " + spec.listen + ": " + std::strerror(err));
  }
  SockAddr bound;
  bound.length = sizeof(bound.storage);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound.storage), &bound.length);
  // What peers connect to: `advertise`, else the listen address, with the bound port.
  Result<SockAddr> advertised = bound;
  if (!spec.advertise.empty()) advertised = parseHost(spec.advertise, portOf(bound));
  if (!advertised.ok() || !addressOf(identityOf(*advertised)).ok()) {
    close(fd);
    return advertised.ok() ? Status::InvalidArgument(
                                 "listen address " + spec.listen +
                                 " is a wildcard: set advertise to an address peers can reach")
                           : advertised.status();
  }
  auto s = std::make_shared<DeviceState>(config.max_mrs);
  s->info.name = spec.name;
  s->info.index = index;
  s->info.numa_node = spec.numa_node;
  s->info.max_message_bytes = config.max_message_bytes;
  s->identity = identityOf(*advertised);
  s->listen_text = toText(*advertised);
  s->retry_budget_ms = config.retry_budget_ms;
  s->retry_budget_ns = uint64_t{config.retry_budget_ms} * 1'000'000;
  s->staging_buffers = config.gpu_staging_buffers;
  s->caller_progress = config.caller_progress;
  s->staging_buffer_bytes = config.gpu_staging_buffer_bytes;
  s->qp_generation.assign(kMaxQps, 0);
  for (uint32_t i = 0; i < kMaxQps; ++i) s->free_qps.push_back(i);
  s->loop = std::make_unique<ServiceLoop>(*s);
  Status st = s->loop->start(fd);
  if (!st.ok()) {
    close(fd);
    return st;
  }
  return s;
}

// ---- memory regions ------------------------------------------------------------------

Status TcpDevice::checkRegistration(void* addr, size_t length, uint32_t access) const {
  if (addr == nullptr || length == 0) {
    return Status::InvalidArgument("tcp: registerMemory needs an address and a length");
  }
  if ((access & ~kKnownAccess) != 0) {
    return Status::InvalidArgument("tcp: unknown access flags " + std::to_string(access));
  }
  if ((access & kAccessRemoteWrite) && !(access & kAccessLocalWrite)) {
    return Status::InvalidArgument("tcp: REMOTE_WRITE requires LOCAL_WRITE (as in verbs)");
  }
  return Status::OK();
}

Result<std::unique_ptr<MemoryRegion>> TcpDevice::registerMemory(void* addr, size_t length,
                                                                uint32_t access) {
  TENT_RETURN_IF_ERROR(checkRegistration(addr, length, access));
  // A NIC pins the pages now and fails with EFAULT; a socket call would fault later.
  const bool writable = (access & (kAccessLocalWrite | kAccessRemoteWrite)) != 0;
  Status mapped = checkMappedRange(reinterpret_cast<uintptr_t>(addr), length, writable);
  if (!mapped.ok()) return mapped.withContext("tcp " + state_->info.name + ": registerMemory");
  auto key = state_->mrs.add(reinterpret_cast<uint64_t>(addr), length, access);
  if (!key.ok()) return key.status().withContext("tcp device " + state_->info.name);
  return std::unique_ptr<MemoryRegion>(std::make_unique<TcpMr>(state_, addr, length, *key, access));
}

Result<std::unique_ptr<MemoryRegion>> TcpDevice::registerGpuMemory(void* addr, size_t length,
                                                                   uint32_t access,
                                                                   const cuda::PointerInfo& gpu) {
  TENT_RETURN_IF_ERROR(checkRegistration(addr, length, access));
  const std::string where = "tcp " + state_->info.name + ": registerGpuMemory";
  if (gpu.kind != cuda::MemoryKind::kDevice) {
    return Status::InvalidArgument(where + " of memory that is not device memory");
  }
  auto driver = cuda::driver();
  if (!driver.ok()) {
    return driver.status().withContext(
        where + ": GPU memory is staged through pinned host buffers, which need the CUDA driver");
  }
  // No provider is more forgiving than a NIC: a GPU no RDMA NIC could reach is refused
  // here too, although staging itself would not need GPUDirect RDMA.
  auto gdr = cuda::attribute(gpu.device, cuda::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
  if (!gdr.ok()) return gdr.status().withContext(where);
  if (*gdr == 0) {
    return Status::FailedPrecondition(
        where + ": cuda:" + std::to_string(gpu.device) +
        " memory: the GPU does not support GPUDirect RDMA "
        "(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 0); refused as on every provider");
  }
  Status staging = ensureStaging(*state_, gpu.device);
  if (!staging.ok()) return staging.withContext(where);
  auto key = state_->mrs.add(reinterpret_cast<uint64_t>(addr), length, access, gpu.device);
  if (!key.ok()) return key.status().withContext("tcp device " + state_->info.name);
  return std::unique_ptr<MemoryRegion>(std::make_unique<TcpMr>(state_, addr, length, *key, access));
}

Status ensureStaging(DeviceState& dev, int gpu) {
  std::lock_guard<std::mutex> g(dev.staging_mutex);
  if (dev.staging_owner == nullptr) {
    TENT_ASSIGN_OR_RETURN(dev.staging_owner,
                          StagingPool::create(dev.staging_buffers, dev.staging_buffer_bytes, gpu));
    TENT_DEBUG(kFabric, "tcp %s: %u pinned staging buffers of %llu bytes for GPU memory",
               dev.info.name.c_str(), dev.staging_buffers,
               static_cast<unsigned long long>(dev.staging_buffer_bytes));
    dev.staging.store(dev.staging_owner.get(), std::memory_order_release);
    return Status::OK();
  }
  return dev.staging_owner->addGpu(gpu);
}

// ---- CQs and QPs ---------------------------------------------------------------------

Result<std::unique_ptr<CompletionQueue>> TcpDevice::createCq(uint32_t depth) {
  if (depth == 0 || depth > kMaxCqDepth) {
    return Status::InvalidArgument("tcp: CQ depth must be in [1, " + std::to_string(kMaxCqDepth) +
                                   "], got " + std::to_string(depth));
  }
  return std::unique_ptr<CompletionQueue>(std::make_unique<TcpCq>(
      std::make_shared<CqCore>(state_->qp_words, state_->recv_words, depth)));
}

Result<std::unique_ptr<QueuePair>> TcpDevice::createQp(const QpInitAttr& attr) {
  auto* cq = dynamic_cast<TcpCq*>(attr.send_cq);
  if (cq == nullptr) return Status::InvalidArgument("tcp: createQp needs a tcp send CQ");
  TcpCq* rcq = nullptr;
  if (attr.max_recv_wr != 0 || attr.recv_cq != nullptr) {
    rcq = dynamic_cast<TcpCq*>(attr.recv_cq);
    if (rcq == nullptr || rcq->core()->words() != state_->qp_words.get()) {
      return Status::InvalidArgument("tcp: a receive queue needs a tcp CQ of this device");
    }
    if (attr.max_recv_wr == 0 || attr.max_recv_wr > kMaxRecvWr) {
      return Status::InvalidArgument("tcp: max_recv_wr must be in [1, " +
                                     std::to_string(kMaxRecvWr) + "], got " +
                                     std::to_string(attr.max_recv_wr));
    }
  }
  if (cq->core()->words() != state_->qp_words.get()) {
    return Status::InvalidArgument("tcp: the send CQ belongs to another device");
  }
  if (attr.max_send_wr == 0 || attr.max_send_wr > kMaxSendWr) {
    return Status::InvalidArgument("tcp: max_send_wr must be in [1, " + std::to_string(kMaxSendWr) +
                                   "], got " + std::to_string(attr.max_send_wr));
  }
  if (attr.max_sge == 0 || attr.max_sge > kMaxSge) {
    return Status::InvalidArgument("tcp: max_sge must be in [1, " + std::to_string(kMaxSge) +
                                   "], got " + std::to_string(attr.max_sge));
  }
  uint32_t slot = 0;
  uint16_t gen = 0;
  {
    std::lock_guard<std::mutex> g(state_->ctrl_mutex);
    CqCore& core = *cq->core();
    const uint64_t reserved = core.reserved.load(std::memory_order_acquire);
    const uint64_t recv_need = rcq != nullptr ? attr.max_recv_wr : 0;
    if (rcq != nullptr && rcq->core() != cq->core() &&
        rcq->core()->reserved.load(std::memory_order_acquire) + recv_need > rcq->core()->depth()) {
      return Status::ResourceExhausted("tcp " + state_->info.name + ": receive CQ depth " +
                                       std::to_string(rcq->core()->depth()) +
                                       " cannot hold another receive queue of " +
                                       std::to_string(recv_need));
    }
    const uint64_t same_cq = rcq != nullptr && rcq->core() == cq->core() ? recv_need : 0;
    if (reserved + attr.max_send_wr + same_cq > core.depth()) {
      return Status::ResourceExhausted(
          "tcp " + state_->info.name + ": CQ depth " + std::to_string(core.depth()) +
          " cannot hold another QP of max_send_wr " + std::to_string(attr.max_send_wr) + " (" +
          std::to_string(reserved) + " entries already reserved); it could overflow");
    }
    if (state_->free_qps.empty()) {
      return Status::ResourceExhausted("tcp: device " + state_->info.name + " has all " +
                                       std::to_string(kMaxQps) + " QPs in use");
    }
    slot = state_->free_qps.front();
    state_->free_qps.pop_front();
    // Generations 1..kQpGenerations-1: qp_num is never 0 (0 means "no QP" on the wire).
    gen = static_cast<uint16_t>(state_->qp_generation[slot] % (kQpGenerations - 1) + 1);
    state_->qp_generation[slot] = gen;
    core.reserved.fetch_add(attr.max_send_wr, std::memory_order_acq_rel);
    if (rcq != nullptr) rcq->core()->reserved.fetch_add(recv_need, std::memory_order_acq_rel);
    (*state_->qp_words)[slot].store(QpWords::make(gen, 0, 0), std::memory_order_release);
    (*state_->recv_words)[slot].store(QpWords::make(gen, 0, 0), std::memory_order_release);
  }
  auto core = std::make_shared<QpCore>(state_, cq->core(), slot, gen, attr,
                                       rcq != nullptr ? rcq->core() : nullptr);
  return std::unique_ptr<QueuePair>(std::make_unique<TcpQp>(std::move(core)));
}

PortCounters TcpDevice::counters() const noexcept {
  PortCounters c;
  c.bytes = state_->bytes.load(std::memory_order_relaxed);
  c.wrs = state_->wrs.load(std::memory_order_relaxed);
  c.target_write_bytes = state_->target_write_bytes.load(std::memory_order_relaxed);
  c.target_writes = state_->target_writes.load(std::memory_order_relaxed);
  c.target_read_bytes = state_->target_read_bytes.load(std::memory_order_relaxed);
  c.target_reads = state_->target_reads.load(std::memory_order_relaxed);
  return c;
}

}  // namespace tent::fabric::tcp
