// Internal objects of the soft provider (private to engine/fabric/soft).
//
// Locking (the emulated NIC's internal serialisation):
//   DeviceState::lock  a spinlock per device (= per port). Guards the link model,
//                      every QP's published send-queue bookkeeping and the CQs'
//                      pending lists. Held for O(QPs touched), never across a copy,
//                      a syscall or an allocation. Taken by post (to publish WRs),
//                      poll, and the control path (modify to ERR, destroy).
//   SoftQp::posting_   is not a lock: a second concurrent poster of one QP breaks the
//                      verbs contract and is refused loudly (soft_datapath.cc).
//   DeviceState::ctrl_mutex  slot allocation for MRs and QPs (control path only).
// The fault engine's lock is a leaf.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fabric/fabric.h"
#include "fabric/soft/soft_faults.h"
#include "fabric/soft/soft_gpu.h"
#include "fabric/soft/soft_layout.h"
#include "fabric/soft/soft_provider.h"
#include "fabric/soft/soft_spinlock.h"

namespace tent::fabric::soft {

class SoftQp;
struct DeviceState;

// ---- fault engine ----------------------------------------------------------

struct FaultHit {
  FaultAction action = FaultAction::kCompletionError;
  WcStatus status = WcStatus::kGeneral;
  uint64_t delay_ns = 0;
  uint64_t hold_epoch = 0;  // kHoldPost: the release epoch when the rule fired
};

class FaultEngine final : public FaultInjector {
 public:
  static constexpr size_t kMaxRules = 64;

  Result<uint32_t> addRule(const FaultRule& rule) override;
  Status removeRule(uint32_t id) override;
  void clearRules() override;
  uint64_t hits(uint32_t id) const override;
  Status setPortUp(std::string_view device, bool up) override;
  Status injectDeviceEvent(std::string_view device, DeviceEventType type) override;
  bool portUp(std::string_view device) const override;
  void releaseHeldPosts() override { hold_epoch_.fetch_add(1, std::memory_order_release); }
  // A kHoldPost hold started at this epoch ends when it changes.
  uint64_t holdEpoch() const noexcept { return hold_epoch_.load(std::memory_order_acquire); }

  // Datapath: does a rule fire for this WR? One relaxed load when no rule exists.
  bool match(uint32_t device, uint32_t qp_num, WrOpcode opcode, FaultHit* hit) noexcept {
    if (active_.load(std::memory_order_relaxed) == 0) return false;
    return matchSlow(device, qp_num, opcode, hit);
  }

  // Set by the provider (its devices outlive every call through the interface).
  void setDevices(std::vector<DeviceState*> devices) { devices_ = std::move(devices); }

 private:
  struct Rule {
    bool used = false;
    bool active = false;  // false once max_hits is reached
    uint32_t id = 0;
    int device = -1;  // -1 = any
    uint32_t qp_num = 0;
    int opcode = -1;  // -1 = any
    uint64_t every_nth = 0;
    double probability = 0;
    uint64_t rng = 0;
    uint64_t max_hits = 0;
    uint64_t seen = 0;
    uint64_t hits = 0;
    FaultHit hit;
  };
  bool matchSlow(uint32_t device, uint32_t qp_num, WrOpcode opcode, FaultHit* hit) noexcept;
  DeviceState* findDevice(std::string_view name) const noexcept;

  std::atomic<uint32_t> active_{0};
  std::atomic<uint64_t> hold_epoch_{0};
  mutable Spinlock lock_;
  Rule rules_[kMaxRules];
  uint32_t next_id_ = 1;
  std::vector<DeviceState*> devices_;
};

// ---- liveness --------------------------------------------------------------------

// A parked thread whose robust futex list holds the `owner` word of each of a
// provider's control files (soft_liveness.cc). Stopped before the files are unmapped.
class LivenessAnchor {
 public:
  LivenessAnchor() = default;
  ~LivenessAnchor();
  LivenessAnchor(const LivenessAnchor&) = delete;
  LivenessAnchor& operator=(const LivenessAnchor&) = delete;

  // Starts the thread; returns once every header names it as its owner.
  Status start(std::vector<ControlHeader*> headers);
  // Ends the thread: from then on every header reads as dead (FUTEX_OWNER_DIED).
  void stop();

 private:
  void run();

  std::vector<ControlHeader*> headers_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stopping_ = false;
  int error_ = 0;
};

// ---- provider-wide state ----------------------------------------------------

struct ShmAllocation {
  uint32_t id = 0;
  size_t length = 0;
  std::string path;
};

class PeerProcess;

// Shared by the provider and every object it made, so objects may outlive it.
struct ProviderCore {
  uint32_t pid = 0;
  uint64_t nonce = 0;
  Clock clock;
  std::string shm_dir;
  uint32_t max_mrs = 0;
  // How long an RC requester retransmits to a responder that does not answer before
  // it completes the WR with retry-exceeded (fabric.soft.retry_budget_ms).
  uint64_t retry_budget_ns = 0;
  // Longest message one WR may carry (fabric.soft.max_message_bytes).
  uint64_t max_message_bytes = kMaxMessageBytes;
  // fabric.soft.copy_payload: false (benchmarks) checks and completes WRs without
  // moving their bytes.
  bool copy_payload = true;
  // fabric.soft.stream_copy_min_bytes: payload copies from this size on use
  // non-temporal stores (soft_copy.h); 0 = never.
  uint64_t stream_copy_min_bytes = 65536;
  FaultEngine faults;

  std::mutex mem_mutex;
  std::map<uintptr_t, ShmAllocation> allocations;  // by base address
  uint32_t next_shm_id = 1;

  std::mutex peers_mutex;
  std::map<std::pair<uint32_t, uint64_t>, std::weak_ptr<PeerProcess>> peers;

  // Device memory (soft_gpu.cc): every QP's copy lane, and the ids of registrations
  // shared with peers.
  std::mutex gpu_mutex;
  std::vector<GpuLane*> gpu_lanes;  // under gpu_mutex
  std::atomic<uint64_t> next_gpu_export{1};
  // Waits until no lane has a copy in flight (before a peer's mapping is closed).
  void quiesceGpuLanes() noexcept;

  // allocateMemory / freeMemory: shared memory peers map (also the receive queues).
  Result<void*> allocateShm(size_t length, int numa_node);
  Status freeShm(void* addr, size_t length);

  uint64_t now() const noexcept { return clock.now_ns ? clock.now_ns(clock.ctx) : monotonicNs(); }
  bool injectedClock() const noexcept { return clock.now_ns != nullptr; }
  // The allocation holding [addr, addr+length), if any. Caller holds mem_mutex.
  const ShmAllocation* findAllocationLocked(uintptr_t addr, size_t length, uintptr_t* base) const;
  Result<std::shared_ptr<PeerProcess>> attachPeer(const SoftAddress& address);
};

// ---- a peer process (may be this one) -------------------------------------------

class PeerProcess {
 public:
  static constexpr uint32_t kMaxSegments = 4096;    // shm segments mapped lazily, by id
  static constexpr uint32_t kMaxGpuImports = 1024;  // its GPU registrations opened here

  PeerProcess(ProviderCore& core, uint32_t pid, uint64_t nonce);
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  Status open();                                     // checks it runs; control path
  Result<ControlView> attachDevice(uint32_t index);  // maps its control file once

  uint32_t pid() const noexcept { return pid_; }
  bool sameProcess() const noexcept { return same_process_; }
  // Set when process_vm_* reported the process gone (ESRCH). Liveness itself is read
  // from the owner word of its control files (ownerAlive()).
  bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }
  void markDead() noexcept { dead_.store(true, std::memory_order_release); }
  // Base of the peer's shm segment `id` in our address space, mapped on first use
  // (the one slow step of a first access, like a NIC's translation-cache miss).
  // nullptr when it cannot be mapped: the caller falls back to process_vm_*.
  uint8_t* segmentBase(uint32_t id, uint64_t length) noexcept;
  // The peer's registration of device memory behind `key` (whose entry `mr` was just
  // read from `view`), opened here on first use and kept until the registration or
  // the peer goes away. nullptr when it cannot be opened (soft_gpu.cc).
  const GpuImport* gpuImport(const ControlView& view, uint32_t key, const MrSnapshot& mr) noexcept;

 private:
  void closeGpuImports() noexcept;
  struct Mapping {
    void* base = nullptr;
    size_t length = 0;
    ControlView view;
  };
  struct Segment {
    std::atomic<uint8_t*> base{nullptr};
    size_t length = 0;
    std::atomic<bool> failed{false};
  };
  ProviderCore& core_;
  const uint32_t pid_;
  const uint64_t nonce_;
  const bool same_process_;
  std::atomic<bool> dead_{false};
  std::mutex attach_mutex_;
  std::map<uint32_t, Mapping> devices_;  // by device index
  Spinlock map_lock_;
  std::unique_ptr<Segment[]> segments_;
  Spinlock gpu_lock_;
  std::unique_ptr<GpuImport[]> gpu_imports_;  // kMaxGpuImports; other processes only
};

// ---- one soft device = one port ---------------------------------------------

// A WR in a send queue.
struct WrSlot {
  uint64_t wr_id = 0;
  uint64_t bytes = 0;           // payload of the WR
  uint64_t visible_ns = 0;      // when its completion shows (known once transmitted)
  uint64_t extra_delay_ns = 0;  // injected
  WcStatus status = WcStatus::kSuccess;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  bool signaled = true;
  uint64_t gpu_seq = 0;  // device memory: its copies are done when the QP's lane reaches it
};

// Service classes of a port: the class selector of the QP's traffic class (DSCP >> 3,
// i.e. traffic_class >> 5: DSCP 0 -> 0, 26 -> 3, 46 -> 5), as a switch or NIC that
// trusts DSCP maps it to a priority.
inline constexpr int kServiceClasses = 8;
inline constexpr uint8_t serviceClassOf(uint8_t traffic_class) noexcept {
  return static_cast<uint8_t>(traffic_class >> 5);
}

// One class's QPs with untransmitted WRs ("active"), served by processor sharing:
// each gets an equal share of the rate the class is given, and the head WR of a QP
// finishes once that QP has been served its bytes. Virtual time `vtime` = bytes
// served to every active QP of the class so far; a QP's `tag` = the vtime at which
// its head WR finishes.
struct PortClass {
  double vtime = 0;
  SoftQp* active = nullptr;  // intrusive list
  uint32_t active_count = 0;
};

// A port serves its classes by strict priority (an ETS strict scheduler): the whole
// rate goes to the highest class with active QPs; lower classes wait, their virtual
// time frozen. Guarded by the lock.
struct PortModel {
  double bytes_per_ns = 0;  // 0 = unlimited
  uint64_t latency_ns = 0;
  double now_ns = 0;  // the model has run up to here
  PortClass classes[kServiceClasses];
  uint32_t active_count = 0;  // over every class
  uint64_t bytes = 0;
  uint64_t wrs = 0;
  double busy_ns = 0;
  // The class served now; only while active_count > 0.
  PortClass& servedClass() noexcept {
    for (int c = kServiceClasses - 1; c > 0; --c) {
      if (classes[c].active_count > 0) return classes[c];
    }
    return classes[0];
  }
};

struct DeviceState {
  std::shared_ptr<ProviderCore> core;
  DeviceInfo info;
  SoftAddress address;

  // Our control file.
  std::string ctrl_path;
  void* ctrl_base = nullptr;
  size_t ctrl_length = 0;
  ControlView view;

  std::mutex ctrl_mutex;
  std::vector<uint16_t> mr_generation;
  std::vector<uint32_t> free_mrs;
  std::vector<uint16_t> qp_generation;
  std::vector<uint32_t> free_qps;
  // Receive queue areas by QP slot, made by the slot's first QP with a receive queue
  // and kept for the slot's later ones (a peer maps each segment once); freed with the
  // device. Under ctrl_mutex.
  struct RqArea {
    uint8_t* base = nullptr;
    uint32_t key = 0;  // MR over it
    uint32_t mr_slot = 0;
  };
  std::vector<RqArea> rq_areas;

  mutable Spinlock lock;
  PortModel port;                                // under lock
  std::atomic<uint64_t> contract_violations{0};  // release builds: refused second posters
  std::atomic<bool> port_up{true};
  // Reading the clock is the dearest step of a post or a poll on a VM (kvm-clock:
  // ~65 ns). An unlimited link without latency needs no precise time: its WRs are
  // visible at once, stamped with `seen_now`, the latest time the device has read.
  bool needs_clock = false;  // finite link, latency, or an injected clock
  uint64_t seen_now = 0;     // under lock

  ~DeviceState();
  // Runs the link model up to `now`, finishing the WRs whose bytes have crossed.
  void advanceLocked(double now) noexcept;
  void activateLocked(SoftQp& qp) noexcept;
  void deactivateLocked(SoftQp& qp) noexcept;
  // Port down fails every WR not yet transmitted; up lets new WRs through again.
  void setPortUp(bool up) noexcept;

  // Device events (soft_events.cc): injected by tests through the fault injector,
  // read by the engine's control loop. `event_fd` (an eventfd) is readable while
  // `events` holds some. A dead device (a fatal event) completes nothing any more.
  std::atomic<bool> dead{false};
  int event_fd = -1;
  std::mutex events_mu;
  std::deque<DeviceEventType> events;  // under events_mu
  Status openEvents();
  void closeEvents() noexcept;
  void pushEvent(DeviceEventType type);
  bool popEvent(DeviceEventType* out);
};

// The receive queue area of QP slot `slot` (soft_recv.cc); made on first use.
Result<DeviceState::RqArea> rqAreaFor(DeviceState& d, uint32_t slot);
void releaseRqAreas(DeviceState& d) noexcept;

// Creates the device's control file and tables. `spec` has been validated.
Result<std::shared_ptr<DeviceState>> createDeviceState(std::shared_ptr<ProviderCore> core,
                                                       const config::SoftDevice& spec,
                                                       uint32_t index);

class SoftDevice final : public Device {
 public:
  explicit SoftDevice(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {}
  const DeviceInfo& info() const noexcept override { return state_->info; }
  PortIdentity portIdentity() const override { return encodeIdentity(state_->address); }
  Result<std::unique_ptr<MemoryRegion>> registerMemory(void* addr, size_t length,
                                                       uint32_t access) override;
  Result<std::unique_ptr<MemoryRegion>> registerGpuMemory(void* addr, size_t length,
                                                          uint32_t access,
                                                          const cuda::PointerInfo& gpu) override;
  Result<std::unique_ptr<CompletionQueue>> createCq(uint32_t depth) override;
  Result<std::unique_ptr<QueuePair>> createQp(const QpInitAttr& attr) override;
  PortCounters counters() const noexcept override;
  int eventFd() const noexcept override { return state_->event_fd; }
  bool nextEvent(DeviceEventType* out) override { return state_->popEvent(out); }
  DeviceState& state() noexcept { return *state_; }

 private:
  Status checkRegistration(void* addr, size_t length, uint32_t access) const;
  // Takes an MR slot and publishes `entry` in it; the MR closes `owned_fd` (>= 0) when
  // it goes (a descriptor exported for peers).
  Result<std::unique_ptr<MemoryRegion>> publishMr(MrSnapshot entry, const GpuExportRecord* gpu,
                                                  int owned_fd);
  std::shared_ptr<DeviceState> state_;
};

// ---- memory region ---------------------------------------------------------------

class SoftMr final : public MemoryRegion {
 public:
  SoftMr(std::shared_ptr<DeviceState> dev, uint32_t slot, void* addr, size_t length, uint32_t key,
         uint32_t access, int owned_fd = -1);
  ~SoftMr() override;

 private:
  std::shared_ptr<DeviceState> dev_;
  uint32_t slot_;
  int owned_fd_;  // a descriptor exported for peers, closed after the entry is cleared
};

// ---- completion queue ---------------------------------------------------------

struct CqCore {
  std::shared_ptr<DeviceState> dev;
  uint32_t depth = 0;
  // Send-queue entries of the QPs attached (control path, device ctrl_mutex): a QP is
  // admitted only if every attached QP's full send queue still fits (as verbs).
  uint64_t reserved = 0;
  std::atomic<bool> overflowed{false};
  std::atomic<uint32_t> pending_count{0};  // QPs in `pending`, read without the lock
  SoftQp* pending = nullptr;               // QPs with WRs not yet delivered; under dev->lock
  // QPs whose receive queue completes here; under dev->lock (soft_recv_datapath.cc).
  std::atomic<uint32_t> recv_count{0};
  SoftQp* recv_qps = nullptr;
  int pollRecvLocked(WorkCompletion* wc, int max) noexcept;

  int poll(WorkCompletion* wc, int max) noexcept;
  void addLocked(SoftQp& qp) noexcept;
  // Confirms, for every QP with due completions, that its responder was still there
  // when they completed (SoftQp::confirmDueLocked).
  void confirmDueLocked(uint64_t now) noexcept;
  void removeLocked(SoftQp& qp) noexcept;

 private:
  uint32_t countDueLocked(uint64_t now, uint32_t cap) const noexcept;
  SoftQp* earliestDueLocked(uint64_t now) const noexcept;
  bool anyLaterThanLocked(uint64_t now) const noexcept;  // a WR not visible by `now`
  uint64_t pollTimeLocked() noexcept;
};

class SoftCq final : public CompletionQueue {
 public:
  explicit SoftCq(std::shared_ptr<CqCore> core) : core_(std::move(core)) {}
  int poll(WorkCompletion* wc, int max) noexcept override { return core_->poll(wc, max); }
  uint32_t depth() const noexcept override { return core_->depth; }
  const std::shared_ptr<CqCore>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<CqCore> core_;
};

// ---- queue pair ----------------------------------------------------------------

class SoftQp final : public QueuePair {
 public:
  SoftQp(std::shared_ptr<DeviceState> dev, std::shared_ptr<CqCore> cq, uint32_t slot,
         uint32_t qp_num, const QpInitAttr& attr, std::shared_ptr<CqCore> recv_cq = nullptr);
  ~SoftQp() override;

  uint32_t qpNum() const noexcept override { return qp_num_; }
  QpState state() const noexcept override { return state_.load(std::memory_order_acquire); }
  int postSend(const SendWr* wr, const SendWr** bad_wr) noexcept override;
  int postRecv(const RecvWr* wr, const RecvWr** bad_wr) noexcept override;
  uint32_t outstanding() const noexcept override;
  // createQp: the QP's receive queue lives in `area` (soft_recv.cc).
  void attachRecv(DeviceState::RqArea area, uint32_t max_recv_wr);
  uint32_t maxSendWr() const noexcept override { return max_send_wr_; }

  Status modifyToInit() override;
  Status modifyToRtr(const QpRemote& remote) override;
  Status modifyToRts() override;
  Status modifyToError() override;

 private:
  friend struct DeviceState;
  friend struct CqCore;

  // What executing the WRs of one postSend() call asks the publish step to do.
  struct PostEffects {
    bool error = false;     // a WR failed: the QP goes to ERR, the rest are flushed
    bool qp_error = false;  // injected QP error: flush outstanding WRs as well
    bool delayed = false;   // an injected delay: completion times need the precise clock
  };

  WrSlot& slot(uint64_t seq) noexcept { return slots_[seq & mask_]; }
  const WrSlot& slot(uint64_t seq) const noexcept { return slots_[seq & mask_]; }
  static uint64_t chargedBytes(const WrSlot& s) noexcept {
    return s.status == WcStatus::kSuccess ? s.bytes : 0;
  }
  static bool makesCqe(const WrSlot& s) noexcept {
    return s.signaled || s.status != WcStatus::kSuccess;
  }

  // The responder answers: its process alive, its provider open, its QP RTR or RTS.
  bool responderUp() const noexcept;
  // A WR the responder will never answer: retry-exceeded, visible after the retry budget.
  WcStatus retryExceeded(WrSlot& s, PostEffects* fx) const noexcept;
  int postChain(const SendWr* wr, const SendWr** bad_wr) noexcept;
  WcStatus execute(const SendWr& wr, WrSlot& s, PostEffects* fx) noexcept;
  WcStatus applyFault(const FaultHit& hit, WrSlot& s, PostEffects* fx) noexcept;
  // `*gpu_device`: the CUDA ordinal of the first local SGE in device memory, or -1.
  WcStatus checkLocal(const SendWr& wr, iovec* iov, uint64_t* total,
                      int* gpu_device) const noexcept;
  WcStatus checkRemote(const SendWr& wr, uint64_t total, MrSnapshot* mr) const noexcept;
  WcStatus copy(const SendWr& wr, const iovec* iov, uint64_t total, const MrSnapshot& mr) noexcept;
  // A SEND: takes the responder's oldest posted receive and places the payload there.
  WcStatus executeSend(const SendWr& wr, const iovec* iov, uint64_t total) noexcept;
  RqHeader* remoteRq() noexcept;
  // Receive side (soft_recv_datapath.cc), under the device lock: the next completion of
  // this QP's receive queue, if one is ready.
  bool nextRecvLocked(WorkCompletion* wc) noexcept;
  void detachRecvLocked() noexcept;
  // Either side in device memory: the driver's copies on the QP's lane (soft_gpu.h).
  WcStatus copyGpu(const SendWr& wr, const iovec* iov, const MrSnapshot& mr, int local_device,
                   WrSlot& s) noexcept;
  // A completion is visible only after the copies of its WR are done.
  bool copied(const WrSlot& s) const noexcept {
    return s.gpu_seq == 0 || gpu_lane_->done(s.gpu_seq);
  }
  void publish(uint64_t first, uint64_t last, uint64_t now, const PostEffects& fx) noexcept;

  // Under the device lock.
  void finishHeadLocked(double at) noexcept;  // the head untransmitted WR finished at `at`
  void completeSlotLocked(WrSlot& s, double at) noexcept;
  void flushLocked(uint64_t now) noexcept;  // every WR whose CQE is not yet visible
  void failInFlightLocked(WcStatus status, uint64_t now) noexcept;
  // A due success is final only once the responder is known to have been up when it
  // completed; otherwise the WR fails as on RC (see soft_cq_datapath.cc).
  void confirmDueLocked(uint64_t now) noexcept;
  // From WR `first` on: retry-exceeded for it, flushed for the rest, all visible at
  // `visible`; the QP goes to ERR.
  void failFromLocked(uint64_t first, uint64_t visible) noexcept;
  void setStateLocked(QpState s) noexcept;

  Status transition(QpState from, QpState to);

  std::shared_ptr<DeviceState> dev_;
  std::shared_ptr<CqCore> cq_;
  const uint32_t slot_index_;
  const uint32_t qp_num_;
  const uint32_t max_send_wr_;
  const uint32_t max_sge_;
  std::atomic<QpState> state_{QpState::kReset};

  std::unique_ptr<WrSlot[]> slots_;
  uint64_t mask_ = 0;
  std::atomic<bool> posting_{false};   // a poster is inside postSend (one at a time)
  uint64_t post_tail_ = 0;             // the poster's
  std::atomic<uint64_t> tail_{0};      // published WRs; written under the device lock
  std::atomic<uint64_t> released_{0};  // slots below are free for posters
  uint64_t delivered_ = 0;             // CQEs handled below; device lock
  uint64_t transmitted_ = 0;           // visible_ns known below; device lock
  uint64_t last_visible_ = 0;          // device lock: completions stay in order
  uint64_t responder_seen_ns_ = 0;     // device lock: latest time the responder was seen up

  // Receive queue (max_recv_wr_ 0: none). rq_ lies in dev_->rq_areas[slot_index_].
  std::shared_ptr<CqCore> recv_cq_;
  uint32_t max_recv_wr_ = 0;
  RqHeader* rq_ = nullptr;
  RqSlot* rq_slots_ = nullptr;
  std::atomic<bool> recv_posting_{false};
  std::atomic<uint64_t> rq_polled_{0};  // receives completed below; written under the device lock
  SoftQp* rq_prev_ = nullptr;           // recv_cq_'s list, under the device lock
  SoftQp* rq_next_ = nullptr;

  // Made by the first WR on device memory (the poster's), read by pollers after that.
  std::unique_ptr<GpuLane, GpuLaneDeleter> gpu_lane_;

  // Set at RTR, read-only while the QP can post.
  std::shared_ptr<PeerProcess> peer_;
  ControlView remote_;
  uint32_t remote_qp_num_ = 0;

  // Intrusive list links, under the device lock.
  SoftQp* port_prev_ = nullptr;
  SoftQp* port_next_ = nullptr;
  bool in_port_ = false;
  uint8_t service_class_ = 0;  // set at RTR from QpRemote::traffic
  double tag_ = 0;
  SoftQp* cq_prev_ = nullptr;
  SoftQp* cq_next_ = nullptr;
  bool in_cq_ = false;
};

}  // namespace tent::fabric::soft
