// The loopback fake's objects (private to loopback_*.cc).
//
// Every ibv_* object handed out lives in a Handle next to a pointer to ours, so
// an entry point finds its object from the provider's pointer in O(1).
//
// Locks, always taken in this order (never the other way round):
//   1. a QP's mutex        - serialises that QP's posts, state changes and service;
//   2. Fabric::tables      - MR keys and QP numbers; shared on the datapath and held
//                            across the copy, so deregistering or destroying waits
//                            for the DMA in flight, as on a NIC;
//   3. a responder QP's rq_mu - its receive queue (a SEND takes a posted receive);
//   4. a CQ's mutex        - its ring of CQEs and its attached QPs.
// What a requester reads of a responder QP (state, peer, PSN, access flags) is
// atomic, so no post ever takes a second QP's mutex.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "loopback_verbs.h"

namespace tent::fabric::testing::loopback {

class Fabric;
class Cq;
class Qp;

template <class Ibv, class Self>
struct Handle {
  Ibv ibv{};
  Self* self = nullptr;
};

// Standard layout makes a pointer to `ibv` a pointer to its Handle.
template <class Self, class Ibv>
Self* selfOf(Ibv* ibv) noexcept {
  static_assert(std::is_standard_layout_v<Handle<Ibv, Self>>);
  return ibv ? reinterpret_cast<Handle<Ibv, Self>*>(ibv)->self : nullptr;
}

inline constexpr int kGidTableLength = 8;
inline constexpr uint32_t kMaxMessage = 1u << 31;
inline constexpr int kMaxQpWr = 32768;
inline constexpr int kMaxSge = 30;
inline constexpr int kMaxCqe = (4 << 20) - 1;
inline constexpr int kMaxRdAtomic = 16;
inline constexpr uint32_t kMax24Bit = 0xffffff;

// A RoCE device's netdev ifindex: this + the device's index (named lbnet<index>).
inline constexpr uint32_t kNetdevIfindexBase = 100;

struct Device {
  Fabric* fabric = nullptr;
  uint32_t index = 0;
  LoopbackDeviceSpec spec;
  Handle<ibv_device, Device> handle;
  ibv_device_attr attr{};
  ibv_port_attr port{};
  mutable std::mutex gid_mu;  // gids[].gid may change under a test (replaceGid)
  ibv_gid_entry gids[kGidTableLength]{};
  bool gid_used[kGidTableLength]{};
  // Fake sysfs port counters, in 4-byte words as the kernel reports them.
  std::mutex counter_mu;
  int xmit_fd = -1;
  int rcv_fd = -1;
  uint64_t xmit_words = 0;
  uint64_t rcv_words = 0;

  bool ownsGid(const ibv_gid& gid) const noexcept;
  void countTraffic(uint64_t xmit_bytes, uint64_t rcv_bytes) noexcept;
};

// One ibv_context's own state: its async events (loopback_events.cc) and whether a
// fatal event killed it. An injected fatal error kills one context, not the device,
// so two engines in one test program each have their own fate.
struct ContextState {
  std::atomic<bool> fatal{false};
  std::atomic<bool> held{false};  // holdCompletions(): CQs return nothing for now
  int event_fd = -1;              // the context's async_fd: an eventfd, readable while events wait
  std::mutex mu;
  std::deque<ibv_async_event> events;  // under mu
};

// What open_device hands out: the ibv_context first, so the pointer converts back.
struct ContextBox {
  Handle<ibv_context, Device> handle;
  ContextState* state = nullptr;
};
inline ContextState* stateOf(ibv_context* ctx) noexcept {
  static_assert(std::is_standard_layout_v<ContextBox>);
  return ctx ? reinterpret_cast<ContextBox*>(ctx)->state : nullptr;
}
// After a fatal event the context completes nothing and executes nothing.
inline bool contextDead(ibv_context* ctx) noexcept {
  ContextState* s = stateOf(ctx);
  return s != nullptr && s->fatal.load(std::memory_order_acquire);
}
inline bool completionsHeld(ibv_context* ctx) noexcept {
  ContextState* s = stateOf(ctx);
  return s != nullptr &&
         (s->fatal.load(std::memory_order_acquire) || s->held.load(std::memory_order_acquire));
}
ContextState* openContextState();
void closeContextState(ContextState* state) noexcept;
int getAsyncEvent(ibv_context* ctx, ibv_async_event* event);
void ackAsyncEvent(ibv_async_event* event);

struct Pd {
  Handle<ibv_pd, Pd> handle;
  Device* device = nullptr;
  std::atomic<int> users{0};  // MRs and QPs
};

struct Mr {
  Handle<ibv_mr, Mr> handle;
  Device* device = nullptr;
  Pd* pd = nullptr;
  uint64_t addr = 0;
  uint64_t length = 0;
  int access = 0;
  bool covers(uint64_t a, uint64_t len) const noexcept {
    return a >= addr && len <= length && a - addr <= length - len;
  }
};

// A posted WR, copied out of the caller's ibv_send_wr.
struct Wqe {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
  bool signaled = false;
  int num_sge = 0;
  uint64_t length = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  ibv_sge* sges = nullptr;  // max_sge entries of the QP's SGE pool
};

struct Cqe {
  ibv_wc wc{};
  Qp* qp = nullptr;   // valid while the CQE is queued: destroying a QP removes its CQEs
  uint64_t seq = 0;   // the WR's position in its QP's send queue
  bool recv = false;  // a receive's CQE: frees no send-queue slot
};

// A posted receive.
struct Rqe {
  uint64_t wr_id = 0;
  int num_sge = 0;
  ibv_sge sge{};  // max_recv_sge 1
};

class Cq {
 public:
  Cq(Device& device, ibv_context* context, int depth, void* cq_context);
  Handle<ibv_cq, Cq> handle;
  Device& device;
  const uint32_t depth;
  std::atomic<int> recv_users{0};

  // Datapath.
  void push(const ibv_wc& wc, Qp* qp, uint64_t seq, bool recv = false) noexcept;
  int poll(int max, ibv_wc* out) noexcept;
  void serviceWanted(bool wanted) noexcept;

  // Control path.
  void attach(std::shared_ptr<Qp> qp);
  void detach(Qp* qp);      // and drops its CQEs
  void dropCqesOf(Qp* qp);  // QP to RESET
  size_t users();

 private:
  void serviceQps() noexcept;

  std::mutex mu_;
  std::unique_ptr<Cqe[]> ring_;
  uint32_t head_ = 0;
  uint32_t count_ = 0;
  bool overflowed_ = false;
  std::vector<std::shared_ptr<Qp>> attached_;  // as send CQ
  size_t service_cursor_ = 0;
  std::atomic<uint32_t> attention_{0};  // attached QPs waiting on the retry timer
};

class Qp {
 public:
  Qp(Device& device, Pd& pd, Cq& send_cq, Cq& recv_cq, uint32_t qp_num,
     const ibv_qp_init_attr& init);
  Handle<ibv_qp, Qp> handle;
  Fabric& fabric;
  Device& device;
  Pd& pd;
  Cq& send_cq;
  Cq& recv_cq;
  const uint32_t qpn;
  const uint32_t max_send_wr;
  const int max_sge;
  const bool sig_all;

  int post(ibv_send_wr* wr, ibv_send_wr** bad) noexcept;
  int postRecv(ibv_recv_wr* wr, ibv_recv_wr** bad) noexcept;
  // Responder side of a SEND from another QP (tables held shared): takes the oldest
  // posted receive and places `w`'s payload there; the sender's status.
  ibv_wc_status receive(const Fabric& fabric, const Wqe& w) noexcept;
  const uint32_t max_recv_wr;
  int modify(const ibv_qp_attr& attr, int mask);
  void markDestroyed();
  // From a poll of the send CQ: runs the retry timer of a WR waiting for its responder.
  void service() noexcept;
  bool wantsService() const noexcept { return wants_service_.load(std::memory_order_acquire); }
  // Called with the send CQ's mutex held: frees send-queue slots up to `seq`.
  void retire(uint64_t seq) noexcept { freed_.store(seq, std::memory_order_release); }

  // Responder side, read by requesters of other QPs.
  bool answers(const Device& from, uint32_t from_qpn, uint32_t psn) const noexcept;
  int accessFlags() const noexcept { return access_flags_.load(std::memory_order_acquire); }
  void remoteAccessError() noexcept { async_error_.store(true, std::memory_order_release); }

 private:
  friend struct PosterCheck;
  int acceptLocked(const ibv_send_wr& wr) noexcept;
  void progressLocked() noexcept;
  bool executeLocked(const Wqe& w, ibv_wc_status* status) noexcept;
  ibv_wc_status checkLocalLocked(const Wqe& w) const noexcept;
  Qp* responderLocked() const noexcept;
  void completeLocked(const Wqe& w, ibv_wc_status status) noexcept;
  void setStateLocked(ibv_qp_state s) noexcept;
  void foldAsyncErrorLocked() noexcept;
  void setWantsServiceLocked(bool wanted) noexcept;
  int checkAttrsLocked(const ibv_qp_attr& attr, int mask) const noexcept;
  void applyAvLocked(const ibv_ah_attr& av);
  void resetLocked();
  void flushReceives() noexcept;  // in ERR: every posted receive completes flushed
  uint64_t retryBudgetNs() const noexcept;
  Wqe& slot(uint64_t seq) noexcept { return sq_[seq % max_send_wr]; }

  std::mutex mu_;
  std::atomic<int> posters_{0};
  std::atomic<ibv_qp_state> state_{IBV_QPS_RESET};
  std::atomic<bool> async_error_{false};  // a remote access error hit us as responder
  std::atomic<bool> wants_service_{false};
  // The connection, written under mu_ by modify(), read by other QPs' requesters.
  std::atomic<int> access_flags_{0};
  std::atomic<const Device*> remote_device_{nullptr};
  std::atomic<uint32_t> remote_qpn_{0};
  std::atomic<uint32_t> rq_psn_{0};
  uint32_t sq_psn_ = 0;
  uint8_t timeout_ = 0;
  uint8_t retry_cnt_ = 0;
  // The send queue: [executed_, posted_) wait behind a responder that does not
  // answer; [freed_, posted_) hold their slots until a CQE at or after them is polled.
  std::unique_ptr<Wqe[]> sq_;
  std::unique_ptr<ibv_sge[]> sge_pool_;
  uint64_t posted_ = 0;
  uint64_t executed_ = 0;
  std::atomic<uint64_t> freed_{0};
  bool stalled_ = false;
  uint64_t stall_deadline_ = 0;
  bool destroyed_ = false;
  // The receive queue, a ring of max_recv_wr under rq_mu_ (a leaf below `tables`).
  std::mutex rq_mu_;
  std::unique_ptr<Rqe[]> rq_;
  uint32_t rq_head_ = 0;
  uint32_t rq_count_ = 0;
};

struct FabricCounters {
  std::atomic<uint64_t> wrs_executed{0}, bytes_moved{0}, error_completions{0}, flushed{0},
      retry_exceeded{0}, concurrent_posts{0}, cq_overflows{0}, registrations{0},
      relaxed_registrations{0}, async_acks{0};
  std::atomic<int64_t> contexts{0}, pds{0}, mrs{0}, cqs{0}, qps{0};
};

class Fabric {
 public:
  explicit Fabric(LoopbackOptions options);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const LoopbackOptions options;
  std::vector<std::unique_ptr<Device>> devices;
  std::string sysfs_root;
  std::atomic<OnContractBreak> policy;
  FabricCounters counters;

  // Registration cost and rendezvous (loopback_verbs.h), under reg_mu.
  std::mutex reg_mu;
  std::condition_variable reg_cv;
  RegistrationModel reg_model;
  uint64_t reg_in_flight = 0, reg_in_flight_max = 0;
  bool reg_met = false;
  // Enters reg_mr: counts it, waits for the rendezvous, pays the page cost; false
  // when the model makes this registration fail.
  bool enterRegistration(const Device& d, size_t length);
  void leaveRegistration();

  std::shared_mutex tables;
  std::unordered_map<uint64_t, Mr*> mrs;                  // key(device, lkey or rkey)
  std::unordered_map<uint64_t, std::shared_ptr<Qp>> qps;  // key(device, qp_num)
  uint32_t next_key = 1;                                  // under `tables`, exclusive
  std::atomic<uint32_t> next_qpn{0x100};
  mutable std::mutex transitions_mu;
  std::vector<LoopbackTransition> transitions;  // under transitions_mu
  void recordTransition(const LoopbackTransition& t);

  static uint64_t key(const Device& d, uint32_t k) noexcept {
    return (uint64_t{d.index} << 32) | k;
  }
  Mr* findMr(const Device& d, uint32_t k) const noexcept;  // `tables` held
  uint64_t now() const noexcept;
  const Device* deviceByGid(const ibv_gid& gid) const noexcept;
  const Device* deviceByLid(uint16_t lid) const noexcept;
  // Reports a broken contract: always on stderr; then abort() or a counter.
  void contractBreak(std::atomic<uint64_t>& counter, const char* what) noexcept;

 private:
  void buildDevice(uint32_t index, const LoopbackDeviceSpec& spec);
  void buildSysfs(Device& d);
};

// The fabric get_device_list() lists (one per process at a time).
Fabric* currentFabric() noexcept;
bool claimCurrentFabric(Fabric* fabric) noexcept;  // false: another one is current
void releaseCurrentFabric(Fabric* fabric) noexcept;
VerbsOps makeOps() noexcept;

}  // namespace tent::fabric::testing::loopback
