// The fabric layer: one verbs-shaped interface with three providers,
//   verbs - rdma-core / libibverbs, real NICs;
//   soft  - a userspace reliable-connection NIC emulation with a link timing model;
//   tcp   - RC semantics over one TCP connection per queue pair, across hosts.
// The engine only sees this header. postSend() and poll() are the hot path:
// noexcept, no allocation, one virtual call per chain of WRs / per poll.
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tent/status.h"

namespace tent::cuda {
struct PointerInfo;
}

namespace tent::fabric {

// Completion status codes, named after their ibv_wc_status counterparts.
enum class WcStatus : uint8_t {
  kSuccess = 0,      // IBV_WC_SUCCESS
  kLocalLength,      // IBV_WC_LOC_LEN_ERR
  kLocalProtection,  // IBV_WC_LOC_PROT_ERR
  kRemoteAccess,     // IBV_WC_REM_ACCESS_ERR
  kRemoteOperation,  // IBV_WC_REM_OP_ERR, IBV_WC_REM_INV_REQ_ERR
  kRetryExceeded,    // IBV_WC_RETRY_EXC_ERR
  kFlushed,          // IBV_WC_WR_FLUSH_ERR
  kGeneral,          // IBV_WC_GENERAL_ERR and anything else
  // Appended so the codes above keep their values.
  kRnrRetryExceeded,  // IBV_WC_RNR_RETRY_EXC_ERR: a SEND found no posted receive
};
std::string_view toString(WcStatus s) noexcept;

// kSend: a two-sided message, placed in the buffer of the responder's oldest posted
// receive (postRecv). kRecv appears only in completions of receives.
enum class WrOpcode : uint8_t { kRdmaWrite = 0, kRdmaRead, kSend, kRecv };

enum class QpState : uint8_t { kReset = 0, kInit, kRtr, kRts, kError };
// Inline so each provider library can name states without linking fabric.cc.
inline constexpr std::string_view toString(QpState s) noexcept {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kError:
      return "ERR";
  }
  return "unknown";
}

enum AccessFlags : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  bool signaled = true;
  uint32_t num_sge = 0;
  const Sge* sg_list = nullptr;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  const SendWr* next = nullptr;
};

// A receive buffer for one incoming SEND (ibv_recv_wr). A SEND longer than the
// buffer fails on both sides (receive: kLocalLength; send: kRemoteOperation).
struct RecvWr {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  const Sge* sg_list = nullptr;
  const RecvWr* next = nullptr;
};

struct WorkCompletion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  uint32_t qp_num = 0;
  uint32_t byte_len = 0;
  uint32_t vendor_err = 0;
};

// How a peer addresses one of our ports; carried by bootstrap.
// verbs: the port GID and LID. soft: the owning process and device, encoded in `gid`.
struct PortIdentity {
  std::array<uint8_t, 16> gid{};
  uint16_t lid = 0;
  bool operator==(const PortIdentity&) const = default;
};

// How a QP marks the packets it sends (verbs: the address vector's GRH traffic class
// and the SL; soft: the port's service class). A requester marks its requests with
// it, a responder its READ responses and ACKs, so both ends of a connection set the
// initiator's values (docs/fabric.md, "Traffic classes").
struct QpTraffic {
  uint8_t traffic_class = 0;  // IPv6 traffic class / IPv4 TOS: DSCP << 2, ECN bits 0
  uint8_t service_level = 0;  // IB SL [0, 15]; RoCE: the priority when the NIC trusts PCP
  bool operator==(const QpTraffic&) const = default;
};
inline constexpr uint32_t kMaxPsn = (1u << 24) - 1;  // PSNs are 24 bits

// What a port's packets look like on the link, which both ends of a connection must
// agree on (exchanged in the bootstrap, tag kLink): a RoCE port cannot talk to an IB
// port, nor a RoCE v1 GID to a v2 one, and both sides must use the smaller MTU.
enum class LinkLayer : uint8_t { kUnknown = 0, kInfiniband = 1, kEthernet = 2 };
enum class GidType : uint8_t { kIb = 0, kRoceV1 = 1, kRoceV2 = 2, kUnknown = 255 };
struct PortLink {
  LinkLayer link_layer = LinkLayer::kUnknown;  // soft, tcp: unknown (nothing to check)
  GidType gid_type = GidType::kUnknown;
  uint32_t mtu_bytes = 0;  // the port's active path MTU; 0: none to agree on
  bool operator==(const PortLink&) const = default;
};
std::string_view toString(LinkLayer layer) noexcept;
std::string_view toString(GidType type) noexcept;

// What RTR needs to know about the remote side of an RC connection.
struct QpRemote {
  uint32_t qp_num = 0;
  PortIdentity port;
  uint32_t psn = 0;  // the PSN the remote QP starts sending with (our rq_psn)
  // The PSN our QP starts sending with (RTS sq_psn), as the peer was told; 0 toward a
  // peer that did not take ours (it expects 0). PSNs are 24 bits.
  uint32_t local_psn = 0;
  uint32_t mtu_bytes = 0;  // the remote port's active MTU; 0: unknown, ours alone decides
  QpTraffic traffic;       // how our QP marks what it sends on this connection

  // The remote QP `qp_num` on `port`, everything else at its default (tests, benchmarks).
  static QpRemote toQp(uint32_t qp_num, const PortIdentity& port) {
    QpRemote r;
    r.qp_num = qp_num;
    r.port = port;
    return r;
  }
};

struct DeviceInfo {
  std::string name;    // "mlx5_0", "soft0"
  uint32_t index = 0;  // position in the provider's device list
  int numa_node = -1;
  std::string pci;          // PCI address when known
  double link_gbps = 0;     // 0 = unlimited / unknown
  uint64_t latency_ns = 0;  // modeled one-way latency (soft); 0 for verbs
  // Longest message one WR may carry (ibv_port_attr.max_msg_sz; soft:
  // fabric.soft.max_message_bytes). Longer WRs complete with kLocalLength.
  uint64_t max_message_bytes = uint64_t{1} << 31;
  // Longest memory region one registration may cover (verbs: ibv_device_attr.max_mr_size);
  // the engine registers longer buffers as several chunks.
  uint64_t max_mr_bytes = UINT64_MAX;
};

// What a device reports on its own, outside any WR (verbs: ibv_get_async_event).
//   kFatal         the device is dead: no completion comes any more, not even a flush;
//                  what was posted on it is lost (IBV_EVENT_DEVICE_FATAL)
//   kPortDown      the port lost its link (IBV_EVENT_PORT_ERR)
//   kPortUp        the port is active again (IBV_EVENT_PORT_ACTIVE)
//   kAddressChange the port's address changed (IBV_EVENT_GID_CHANGE): portIdentity()
//                  names the new one by the time the event is returned
enum class DeviceEventType : uint8_t { kFatal = 0, kPortDown, kPortUp, kAddressChange };
std::string_view toString(DeviceEventType type) noexcept;

struct PortCounters {
  uint64_t bytes = 0;    // payload bytes that crossed the port
  uint64_t busy_ns = 0;  // time the port was transmitting
  uint64_t wrs = 0;      // WRs completed (any status)
  // Peers' one-sided operations this port served as their target, where the provider
  // takes part in them (tcp); 0 where the peer's NIC alone does them (verbs, soft).
  uint64_t target_write_bytes = 0;
  uint64_t target_writes = 0;
  uint64_t target_read_bytes = 0;
  uint64_t target_reads = 0;
};

// A registered memory region. The datapath reads lkey/rkey as plain fields;
// destroying the object deregisters it (for peers at once).
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  void* addr() const noexcept { return addr_; }
  size_t length() const noexcept { return length_; }
  uint32_t lkey() const noexcept { return lkey_; }
  uint32_t rkey() const noexcept { return rkey_; }
  uint32_t access() const noexcept { return access_; }

 protected:
  void* addr_ = nullptr;
  size_t length_ = 0;
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;
  uint32_t access_ = 0;
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Writes up to `max` completions. Returns their number, or -1 when the CQ has
  // overflowed (a CQ error, as on hardware: the CQ is unusable from then on).
  virtual int poll(WorkCompletion* wc, int max) noexcept = 0;
  virtual uint32_t depth() const noexcept = 0;
};

struct QpInitAttr {
  CompletionQueue* send_cq = nullptr;
  uint32_t max_send_wr = 1;
  uint32_t max_sge = 1;
  // The receive queue, for QPs that take SENDs (the notify channel). 0 = none: such a
  // QP's postRecv fails with EINVAL and a SEND to it fails with kRnrRetryExceeded.
  CompletionQueue* recv_cq = nullptr;
  uint32_t max_recv_wr = 0;
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual uint32_t qpNum() const noexcept = 0;
  virtual QpState state() const noexcept = 0;
  // Posts a chain of WRs, like ibv_post_send: returns 0, or an errno value
  // (ENOMEM: send queue full; EINVAL: bad WR or QP not in RTS) with *bad_wr set
  // to the first WR not posted. WRs before it are posted.
  virtual int postSend(const SendWr* wr, const SendWr** bad_wr) noexcept = 0;
  // WRs posted and not yet completed (their completion not yet polled or flushed).
  virtual uint32_t outstanding() const noexcept = 0;
  virtual uint32_t maxSendWr() const noexcept = 0;
  // Posts receive buffers, like ibv_post_recv: 0, or ENOMEM (receive queue full) /
  // EINVAL (no receive queue, bad SGEs, QP in RESET) with *bad_wr at the first not
  // posted. Receives complete on recv_cq, in posting order, with opcode kRecv and
  // byte_len = the SEND's length; on ERR the ones not yet used complete kFlushed.
  // One poster of receives at a time (separate from the send poster).
  // A SEND that finds no posted receive is not retried: it completes with
  // kRnrRetryExceeded and the sender's QP goes to ERR (verbs QPs run with the
  // configured rnr_retry). Users of SENDs keep the receiver ready with credits.
  virtual int postRecv(const RecvWr* wr, const RecvWr** bad_wr) noexcept {
    if (bad_wr != nullptr) *bad_wr = wr;
    return EINVAL;
  }

  virtual Status modifyToInit() = 0;
  virtual Status modifyToRtr(const QpRemote& remote) = 0;
  virtual Status modifyToRts() = 0;
  // ERR: outstanding WRs complete with kFlushed; new posts fail.
  virtual Status modifyToError() = 0;
};

// RESET -> INIT -> RTR -> RTS in one call: the RC state-machine helper shared by
// data, notification and direct QPs.
Status connectQp(QueuePair& qp, const QpRemote& remote);

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const noexcept = 0;
  virtual PortIdentity portIdentity() const = 0;
  // What peers must agree on with this port (verbs); unknown everywhere by default.
  virtual PortLink portLink() const { return {}; }
  virtual Result<std::unique_ptr<MemoryRegion>> registerMemory(void* addr, size_t length,
                                                               uint32_t access) = 0;
  // Registers device memory of one GPU: [addr, addr+length) lies inside the one physical
  // allocation `gpu` describes (cuda::chunksOf splits larger ranges). docs/gpu.md says
  // what each provider does with it.
  virtual Result<std::unique_ptr<MemoryRegion>> registerGpuMemory(void* addr, size_t length,
                                                                  uint32_t access,
                                                                  const cuda::PointerInfo& gpu) {
    (void)addr, (void)length, (void)access, (void)gpu;
    return Status::NotSupported("this device cannot register GPU memory");
  }
  virtual Result<std::unique_ptr<CompletionQueue>> createCq(uint32_t depth) = 0;
  virtual Result<std::unique_ptr<QueuePair>> createQp(const QpInitAttr& attr) = 0;
  virtual PortCounters counters() const noexcept = 0;

  // Device events (control path, one thread). eventFd() is readable (poll/epoll,
  // level-triggered) while events wait; -1: this device reports none. nextEvent()
  // takes the oldest waiting one without blocking; false when none waits.
  virtual int eventFd() const noexcept { return -1; }
  virtual bool nextEvent(DeviceEventType* out) {
    (void)out;
    return false;
  }
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const noexcept = 0;  // "soft", "verbs" or "tcp"
  // One line naming the link model, e.g. "soft: soft0 link_gbps=100 latency_ns=2000".
  virtual std::string linkModel() const = 0;
  virtual size_t deviceCount() const noexcept = 0;
  virtual Device& device(size_t index) noexcept = 0;
  // Memory for transfers, placed on `numa_node` when possible (-1: anywhere).
  // soft: shared memory that peers map, the emulation's fastest path.
  virtual Result<void*> allocateMemory(size_t length, int numa_node) = 0;
  virtual Status freeMemory(void* addr, size_t length) = 0;
};

}  // namespace tent::fabric
