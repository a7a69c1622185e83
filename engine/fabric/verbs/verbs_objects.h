// The verbs provider's objects (private to engine/fabric/verbs and its tests).
//
// Completion bookkeeping: every WR we hand to the NIC carries our own ibv wr_id,
//   bits 63..48: the QP's index in that CQ's QP table,
//   bit  47    : 1 for a receive (postRecv), 0 for a send,
//   bits 46..0 : the QP's post sequence number on that queue (modulo 2^47),
// and the caller's wr_id, opcode and length wait in the QP's slot for that
// sequence. A completion therefore finds its QP and SendWr in O(1), gets a valid
// opcode even for flush errors (where ibv_wc.opcode is undefined), and retires
// every WR up to its sequence - unsignaled WRs before it included - so
// outstanding() is exact and a QP never posts more than max_send_wr WRs.
// CQ moderation (fabric.verbs.signal_every = N): of the WRs the caller wants
// completed, the NIC signals every Nth and the last of each posted chunk; the others
// (Slot::infer) are reported from their slots when a later CQE of the QP arrives,
// succeeded before an error or flush CQE, flushed after one (docs/fabric.md).
//
// CQ overflow: a CQ overflow is reported by the NIC only as an IBV_EVENT_CQ_ERR
// async event, which the datapath cannot afford to read. We make it impossible
// instead: createQp() reserves max_send_wr entries of its send CQ and fails with
// ResourceExhausted when the CQ's depth cannot hold every QP's full send queue
// (a flush completes unsignaled WRs too, so max_send_wr is the true bound).
// poll() returns -1 when ibv_poll_cq fails, the only CQ error it can see.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "fabric/fabric.h"
#include "fabric/verbs/verbs_ops.h"

namespace tent::fabric::verbs {

inline constexpr int kWrIdIndexShift = 48;
inline constexpr uint64_t kWrIdRecvFlag = uint64_t{1} << 47;
inline constexpr uint64_t kWrIdSeqMask = kWrIdRecvFlag - 1;
inline constexpr uint32_t kMaxQpsPerCq = 1u << 16;
inline constexpr int kPostChunkWrs = 32;  // ibv_send_wr built on the stack per post call
inline constexpr int kPostChunkSges = 64;
inline constexpr uint32_t kMaxSgePerWr = kPostChunkSges;
inline constexpr int kPollChunk = 32;  // ibv_wc read per poll call
inline constexpr uint8_t kHopLimit = 64;
inline constexpr uint8_t kMaxServiceLevel = 15;
inline constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms; only SENDs (notify QPs) need RQ WRs
inline constexpr int kRecvChunkWrs = 16;     // ibv_recv_wr built on the stack per post call

// ---- device checks (verbs_device_check.cc) -------------------------------------
enum class DeviceTransport : uint8_t { kInfinibandOrRoce, kEfa, kIwarp, kOther };
DeviceTransport transportOf(const ibv_device& device) noexcept;
// OK for IB and RoCE; NotSupported naming the transport and the alternative otherwise.
Status checkTransport(const VerbsOps& ops, ibv_device* device);
class VerbsDevice;
// What a device needs to join the default set: an ACTIVE port with a non-zero GID.
Status checkUsablePort(const VerbsDevice& device);

// ---- pure helpers -------------------------------------------------------------
WcStatus toWcStatus(ibv_wc_status status) noexcept;
Result<ibv_mtu> mtuFromBytes(uint32_t bytes);
// Port speed from ibv_port_attr.active_speed / active_width; 0 when unknown.
double linkGbps(uint8_t active_speed, uint8_t active_width) noexcept;
bool isIpv4MappedGid(const ibv_gid& gid) noexcept;
int toIbvAccess(uint32_t access) noexcept;
bool isLinkLocalGid(const ibv_gid& gid) noexcept;  // fe80::/10
std::string gidText(const ibv_gid& gid);
const char* gidTypeName(uint32_t type) noexcept;  // "IB", "RoCEv1", "RoCEv2", "unknown"

// GID selection (verbs_gid.cc). `configured` >= 0: that index (checked against the
// table). Otherwise IB: index 0; RoCE: the RoCE v2 GID on an up netdev, non
// link-local first, then on `interface` (or, when that is empty, the default
// route's interface), then IPv4-mapped, then the lowest index. With `interface` set
// only GIDs on that netdev qualify. None: NotFound naming device, port and table.
struct GidChoice {
  int configured = -1;
  std::string interface;
};
inline constexpr uint32_t kGidTypeUnknown = 0xff;  // the kernel could not say
struct GidPick {
  int index = 0;
  uint32_t type = kGidTypeUnknown;  // ibv_gid_type
  std::string netdev;               // "" when none / unknown
};
Result<GidPick> selectGid(const VerbsOps& ops, ibv_context* context, const std::string& device,
                          uint8_t port, const ibv_port_attr& port_attr, const GidChoice& choice);

// What a device learnt at open and every QP transition of it uses.
struct PortSetup {
  uint8_t port_num = 1;
  ibv_port_attr attr{};
  int gid_index = 0;
  ibv_gid gid{};
  uint32_t gid_type = kGidTypeUnknown;  // ibv_gid_type of gid_index
  std::string netdev;                   // the GID's netdev ("" on IB)
  ibv_mtu path_mtu = IBV_MTU_4096;      // min(config, port's active MTU)
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t max_rd_atomic = 16;       // initiator depth, <= device max_qp_init_rd_atom
  uint8_t max_dest_rd_atomic = 16;  // responder resources, <= device max_qp_rd_atom
  bool ethernet() const noexcept { return attr.link_layer == IBV_LINK_LAYER_ETHERNET; }
};

class VerbsDevice;
class VerbsQp;

class VerbsMr final : public MemoryRegion {
 public:
  VerbsMr(const VerbsOps& ops, ibv_mr* mr, uint32_t access);
  ~VerbsMr() override;
  VerbsMr(const VerbsMr&) = delete;
  VerbsMr& operator=(const VerbsMr&) = delete;

 private:
  const VerbsOps& ops_;
  ibv_mr* mr_;
};

class VerbsCq final : public CompletionQueue {
 public:
  VerbsCq(VerbsDevice& device, ibv_cq* cq, uint32_t depth);
  ~VerbsCq() override;
  VerbsCq(const VerbsCq&) = delete;
  VerbsCq& operator=(const VerbsCq&) = delete;

  int poll(WorkCompletion* wc, int max) noexcept override;
  uint32_t depth() const noexcept override { return depth_; }

  // Control path: reserves `max_send_wr` entries for a QP and gives its index.
  Result<uint32_t> attach(VerbsQp* qp, uint32_t max_send_wr);
  void detach(uint32_t index, uint32_t max_send_wr);
  ibv_cq* raw() const noexcept { return cq_; }
  VerbsDevice& device() const noexcept { return device_; }

 private:
  int pollOwned(WorkCompletion* wc, int max) noexcept;  // with polling_ held
  std::atomic<bool> polling_{false};
  // Writes the completions one CQE stands for from wc[*done] on (the WRs before it
  // completed by inference, then its own); false when `max` left no room for all of
  // them: the CQE stays held for the next poll, the inferred ones written stay done.
  bool emit(const ibv_wc& in, WorkCompletion* wc, int max, int* done) noexcept;
  void translateRecv(VerbsQp& qp, const ibv_wc& in, WorkCompletion* out) noexcept;
  void translateSend(VerbsQp& qp, const ibv_wc& in, WorkCompletion* out) noexcept;

  VerbsDevice& device_;
  const VerbsOps& ops_;
  ibv_cq* cq_;
  uint32_t depth_;
  std::mutex attach_mutex_;  // control path only; poll() never takes it
  uint32_t reserved_wr_ = 0;
  uint32_t qp_capacity_;
  std::unique_ptr<std::atomic<VerbsQp*>[]> qps_;
  // CQEs read from the NIC but not handed out yet (under polling_): a CQE may stand
  // for up to signal_every completions and the caller's array may be full.
  ibv_wc held_[kPollChunk]{};
  int held_count_ = 0;
  int held_next_ = 0;
  uint32_t signal_every_ = 1;
};

class VerbsQp final : public QueuePair {
 public:
  // Posted WR waiting for its completion.
  struct Slot {
    uint64_t wr_id = 0;
    uint32_t byte_len = 0;
    WrOpcode opcode = WrOpcode::kRdmaWrite;
    // The caller asked for a completion (SendWr::signaled) and the NIC was not asked
    // to signal it: it completes by inference from a later CQE of its QP.
    bool infer = false;
  };

  VerbsQp(VerbsDevice& device, VerbsCq& cq, ibv_qp* qp, uint32_t max_send_wr, uint32_t max_sge,
          VerbsCq* recv_cq = nullptr, uint32_t max_recv_wr = 0);
  ~VerbsQp() override;
  VerbsQp(const VerbsQp&) = delete;
  VerbsQp& operator=(const VerbsQp&) = delete;
  Status attachToCq();

  uint32_t qpNum() const noexcept override { return qp_->qp_num; }
  QpState state() const noexcept override { return state_.load(std::memory_order_acquire); }
  int postSend(const SendWr* wr, const SendWr** bad_wr) noexcept override;
  int postRecv(const RecvWr* wr, const RecvWr** bad_wr) noexcept override;
  uint32_t outstanding() const noexcept override;
  uint32_t maxSendWr() const noexcept override { return max_send_wr_; }

  Status modifyToInit() override;
  Status modifyToRtr(const QpRemote& remote) override;
  Status modifyToRts() override;
  Status modifyToError() override;

  // CQ moderation: of the WRs the caller wants completed, the NIC signals every Nth
  // and the last of each posted chunk; the others complete by inference (VerbsCq).
  void setSignalEvery(uint32_t n) noexcept { signal_every_ = n < 1 ? 1 : n; }

  // Completion side (called by VerbsCq::poll, one poller of the CQ at a time).
  const Slot& slotOf(uint64_t seq48) const noexcept { return slots_[seq48 & slot_mask_]; }
  // The full sequence number of a posted WR from the 47 bits a wr_id carries.
  uint64_t fullSeq(uint64_t seq48) const noexcept;
  // The oldest WR not retired yet, and retiring exactly it (inferred completions).
  uint64_t retiredSeq() const noexcept { return retired_.load(std::memory_order_acquire); }
  const Slot& slotAt(uint64_t seq) const noexcept { return slots_[seq & slot_mask_]; }
  void retireNext(uint64_t seq) noexcept { retired_.store(seq + 1, std::memory_order_release); }
  // After an error or flush completion the QP executes nothing more: WRs completed
  // by inference from then on were flushed, those before it succeeded.
  bool errorSeen() const noexcept { return error_seen_; }
  void noteErrorCompletion() noexcept { error_seen_ = true; }
  void retire(uint64_t seq48) noexcept;
  // Receives complete in posting order: the caller's wr_id of receive `seq48`, retired.
  uint64_t takeRecv(uint64_t seq48) noexcept;
  void markError() noexcept { state_.store(QpState::kError, std::memory_order_release); }

 private:
  Status modify(ibv_qp_attr& attr, int mask, QpState from, QpState to);
  uint64_t fillWr(const SendWr& wr, uint64_t seq, ibv_send_wr* out, ibv_sge* sges) noexcept;
  void signalByNic(uint64_t seq, ibv_send_wr* wr) noexcept;
  bool sendQueueFull(uint64_t seq, uint64_t& retired_view) noexcept;
  int postChain(const SendWr* wr, const SendWr** bad_wr) noexcept;

  VerbsDevice& device_;
  const VerbsOps& ops_;
  VerbsCq& cq_;
  ibv_qp* qp_;
  uint32_t max_send_wr_;
  uint32_t max_sge_;
  uint32_t sq_psn_ = 0;  // QpRemote::local_psn, from RTR to RTS
  uint32_t cq_index_ = 0;
  bool attached_ = false;
  std::atomic<QpState> state_{QpState::kReset};
  // posted_ is written by the (single) poster, retired_ by whoever polls.
  std::atomic<bool> posting_{false};  // debug builds: detects a second concurrent poster
  alignas(64) std::atomic<uint64_t> posted_{0};
  alignas(64) std::atomic<uint64_t> retired_{0};
  uint64_t slot_mask_;
  std::unique_ptr<Slot[]> slots_;
  uint32_t signal_every_ = 1;  // set before the QP is used; read by the poster only
  bool error_seen_ = false;    // the CQ's poller only (polling_ orders its pollers)
  // Receive queue (max_recv_wr_ 0: none).
  VerbsCq* recv_cq_ = nullptr;
  uint32_t max_recv_wr_ = 0;
  uint32_t recv_index_ = 0;
  bool recv_attached_ = false;
  alignas(64) std::atomic<uint64_t> recv_posted_{0};
  alignas(64) std::atomic<uint64_t> recv_retired_{0};
  uint64_t recv_mask_ = 0;
  std::unique_ptr<uint64_t[]> recv_wr_ids_;
};

class VerbsDevice final : public Device {
 public:
  static Result<std::unique_ptr<VerbsDevice>> open(const VerbsOps& ops, ibv_device* device,
                                                   uint32_t index,
                                                   const config::VerbsFabricConfig& config);
  ~VerbsDevice() override;
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  const DeviceInfo& info() const noexcept override { return info_; }
  PortIdentity portIdentity() const override;
  PortLink portLink() const override;
  Result<std::unique_ptr<MemoryRegion>> registerMemory(void* addr, size_t length,
                                                       uint32_t access) override;
  // dma-buf first, ibv_reg_mr (nvidia-peermem) second (verbs_gpu_memory.cc).
  Result<std::unique_ptr<MemoryRegion>> registerGpuMemory(void* addr, size_t length,
                                                          uint32_t access,
                                                          const cuda::PointerInfo& gpu) override;
  Result<std::unique_ptr<CompletionQueue>> createCq(uint32_t depth) override;
  Result<std::unique_ptr<QueuePair>> createQp(const QpInitAttr& attr) override;
  PortCounters counters() const noexcept override;
  // The context's async events (verbs_events.cc).
  int eventFd() const noexcept override;
  bool nextEvent(DeviceEventType* out) override;

  const VerbsOps& ops() const noexcept { return ops_; }
  ibv_context* context() const noexcept { return context_; }
  const PortSetup& port() const noexcept { return port_; }
  const std::string& name() const noexcept { return info_.name; }
  std::string describe() const;  // one line for linkModel()
  uint32_t signalEvery() const noexcept { return signal_every_; }
  void countCompletions(uint64_t n) noexcept {
    completions_.fetch_add(n, std::memory_order_relaxed);
  }

 private:
  explicit VerbsDevice(const VerbsOps& ops) : ops_(ops) {}
  Status openContext(ibv_device* device, const config::VerbsFabricConfig& config);
  Status setupPort(const config::VerbsFabricConfig& config);
  void readSysfsPlacement(ibv_device* device);
  // MLNX_OFED's host-wide tc/<port>/traffic_class, which overrides every QP's.
  void readSysfsTrafficClass();
  // Async events: the fd made non-blocking at open (false: no events from this device).
  bool openEvents();
  // After a GID change: the GID chosen again by the configured rule (under identity_mu_).
  void refreshGid();
  // The MR through dma-buf, or nullptr with `*why` saying what was missing or failed.
  ibv_mr* registerDmabuf(void* addr, size_t length, int ibv_access, int device, std::string* why);

  const VerbsOps& ops_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_device_attr device_attr_{};
  PortSetup port_;
  // port_'s GID and LID change on the control loop (address events) while
  // portIdentity() may be read elsewhere (a descriptor built on an API thread).
  mutable std::mutex identity_mu_;
  GidChoice gid_choice_;
  bool events_ = false;  // get_async_event works on context_
  DeviceInfo info_;
  std::string sysfs_path_;
  int sysfs_traffic_class_ = -1;  // -1: not set (upstream kernels have no such knob)
  std::atomic<uint64_t> completions_{0};
  std::atomic<bool> relaxed_ordering_{false};  // registrations ask for it (config, kernel)
  uint32_t signal_every_ = 1;                  // fabric.verbs.signal_every
};

class VerbsProvider final : public Provider {
 public:
  explicit VerbsProvider(std::vector<std::unique_ptr<VerbsDevice>> devices)
      : devices_(std::move(devices)) {}
  ~VerbsProvider() override;

  std::string_view name() const noexcept override { return "verbs"; }
  std::string linkModel() const override;
  size_t deviceCount() const noexcept override { return devices_.size(); }
  Device& device(size_t index) noexcept override { return *devices_[index]; }
  Result<void*> allocateMemory(size_t length, int numa_node) override;
  Status freeMemory(void* addr, size_t length) override;

 private:
  std::vector<std::unique_ptr<VerbsDevice>> devices_;
  std::mutex memory_mutex_;
  std::unordered_map<void*, size_t> allocations_;  // address -> length asked for
};

// Aligned (2 MiB, transparent-hugepage friendly) anonymous memory, preferring
// `numa_node` (-1: anywhere). Shared with tests; the provider tracks what it hands out.
Result<void*> allocateNumaMemory(size_t length, int numa_node);
Status freeNumaMemory(void* addr, size_t length);

}  // namespace tent::fabric::verbs
