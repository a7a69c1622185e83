// The soft NIC's shared-memory control file: what one process publishes so that
// peers can check their remote accesses without asking it (no helper thread, no
// daemon). One file per soft device, in `shm_dir`, named after the owner's pid, a
// random nonce and the device index. It holds
//   - a header (magic, version, pid, nonce, capacities, a "closed" flag),
//   - the MR table: one entry per memory region slot; rkey = generation << 16 | slot,
//   - the QP table: one entry per QP slot; qp_num = generation << 14 | slot.
// Peers map it read-only and read entries lock-free: every field is an address-free
// lock-free atomic, and MR entries are guarded by a seqlock so a peer never uses a
// half-written entry while the owner (re)registers a slot.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fabric/fabric.h"

namespace tent::fabric::soft {

inline constexpr uint64_t kControlMagic = 0x74656e74736f6674ull;  // "tentsoft"
// 3: GPU memory in MR entries; 4: receive queues (QpEntry.rq_*).
inline constexpr uint32_t kLayoutVersion = 4;

inline constexpr uint32_t kMrSlotBits = 16;
inline constexpr uint32_t kMaxMrs = 1u << kMrSlotBits;  // upper bound of config max_mrs
inline constexpr uint32_t kQpSlotBits = 14;
inline constexpr uint32_t kMaxQps = 1u << kQpSlotBits;                // QPs per soft device
inline constexpr uint32_t kQpGenerations = 1u << (24 - kQpSlotBits);  // qp_num stays 24 bits
inline constexpr uint32_t kMaxDevices = 256;  // the device index is one GID byte

// Hardware-like limits of every soft device.
inline constexpr uint32_t kMaxSendWr = 32768;
inline constexpr uint32_t kMaxSge = 32;
inline constexpr uint32_t kMaxCqDepth = 1u << 22;
inline constexpr uint64_t kMaxMessageBytes = 1ull << 31;  // as ibv_port_attr.max_msg_sz
inline constexpr uint32_t kMaxRecvWr = 1024;
inline constexpr uint32_t kMaxRecvSge = 1;

struct ControlHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t pid;
  uint64_t nonce;
  uint32_t device_index;
  uint32_t max_mrs;
  uint32_t max_qps;
  uint32_t reserved;
  uint64_t start_time;  // of the owner process (/proc/<pid>/stat): guards against pid reuse
  std::atomic<uint32_t> closed;  // set by the owner when it shuts down
  uint32_t reserved2;
  // The owner's liveness, kept by the kernel (a robust futex, see LivenessAnchor): the
  // TID of the owner's anchor thread, with FUTEX_OWNER_DIED set by the kernel the moment
  // that thread ends - its process died (even by SIGKILL) or its provider shut down.
  // `robust_next` links this header into the anchor thread's robust list.
  uint64_t robust_next;
  std::atomic<uint32_t> owner;
  uint32_t reserved3;
};

// Is the owner of this control file still there to answer? Two loads, no syscall.
bool ownerAlive(const ControlHeader& header) noexcept;

struct MrEntry {
  std::atomic<uint32_t> seq;   // seqlock: odd while the owner rewrites the entry
  std::atomic<uint32_t> key;   // lkey == rkey of the current region; 0 = free
  std::atomic<uint64_t> addr;  // in the owner's address space
  std::atomic<uint64_t> length;
  std::atomic<uint32_t> access;      // AccessFlags
  std::atomic<uint32_t> shm_id;      // 0: not inside an allocateMemory() segment
  std::atomic<uint64_t> shm_offset;  // offset of `addr` inside that segment
  std::atomic<uint64_t> shm_length;  // size of that segment (to map it)
  // Device memory (soft_gpu.h); gpu_share 0 = host memory, the rest unused then.
  std::atomic<uint32_t> gpu_share;  // GpuShare: how a peer reaches it
  std::atomic<int32_t> gpu_device;  // CUDA ordinal in the owner
  std::atomic<uint64_t> gpu_base;   // the physical allocation holding the region
  std::atomic<uint64_t> gpu_size;
  std::atomic<uint64_t> gpu_export;  // the owner's id of this registration
  std::atomic<uint32_t> gpu_fd;      // kGpuVmmFd: the owner's descriptor number
  std::atomic<uint32_t> gpu_pad;
  std::atomic<uint64_t> gpu_uuid[2];  // the GPU, as peers find it among theirs
  std::atomic<uint64_t> gpu_ipc[8];   // kGpuLegacyIpc: the CUipcMemHandle
};

// qp_num << 8 | QpState; 0 = no QP in this slot. rq_key: the MR (of this device)
// over the QP's receive queue area (RqHeader + RqSlot[kMaxRecvWr]); 0 = no receive queue.
struct QpEntry {
  std::atomic<uint64_t> word;
  std::atomic<uint32_t> rq_key;
  std::atomic<uint32_t> rq_reserved;
};

// A QP's receive queue, in shared memory the sender writes (an allocateMemory segment
// of the receiver, one per QP slot, reused by the slot's later QPs). The receiver posts
// at `posted`; the one connected sender takes the slot at `consumed` by a CAS on its
// state word from posted to claimed, places its payload, and marks it done. The state
// word carries the receiving QP's number, so a sender of an older QP in the slot never
// takes a slot of a newer one.
enum class RqState : uint32_t { kFree = 0, kPosted, kClaimed, kDone, kFlushed };
inline uint64_t rqWord(uint32_t qp_num, RqState s) noexcept {
  return uint64_t{qp_num} << 8 | static_cast<uint32_t>(s);
}
struct RqHeader {
  alignas(64) std::atomic<uint64_t> posted;
  alignas(64) std::atomic<uint64_t> consumed;
};
struct RqSlot {
  std::atomic<uint64_t> state;  // rqWord
  uint64_t wr_id;
  uint64_t addr;  // the receive buffer (kMaxRecvSge = 1), in the receiver's address space
  uint32_t length;
  uint32_t lkey;
  uint32_t byte_len;  // set with kDone
  uint32_t status;    // WcStatus, set with kDone
};
inline constexpr size_t kRqAreaBytes = sizeof(RqHeader) + size_t{kMaxRecvWr} * sizeof(RqSlot);

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline size_t controlFileSize(uint32_t max_mrs) {
  return sizeof(ControlHeader) + size_t{max_mrs} * sizeof(MrEntry) +
         size_t{kMaxQps} * sizeof(QpEntry);
}

// Typed pointers into one mapped control file (ours or a peer's).
struct ControlView {
  ControlHeader* header = nullptr;
  MrEntry* mrs = nullptr;
  QpEntry* qps = nullptr;
  uint32_t max_mrs = 0;

  static ControlView over(void* base, uint32_t max_mrs) {
    ControlView v;
    auto* bytes = static_cast<uint8_t*>(base);
    v.header = reinterpret_cast<ControlHeader*>(bytes);
    v.mrs = reinterpret_cast<MrEntry*>(bytes + sizeof(ControlHeader));
    v.qps = reinterpret_cast<QpEntry*>(bytes + sizeof(ControlHeader) +
                                       size_t{max_mrs} * sizeof(MrEntry));
    v.max_mrs = max_mrs;
    return v;
  }
  bool valid() const noexcept { return header != nullptr; }
};

// A consistent copy of one MR entry.
struct MrSnapshot {
  uint32_t key = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t shm_id = 0;
  uint64_t shm_offset = 0;
  uint64_t shm_length = 0;
  uint32_t gpu_share = 0;  // 0: host memory, and the gpu_* fields are not read
  int32_t gpu_device = -1;
  uint64_t gpu_base = 0;
  uint64_t gpu_export = 0;
};

// The rest of a device-memory entry: what a peer needs to open it (slow path).
struct GpuExportRecord {
  uint32_t share = 0;
  int32_t device = -1;
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t export_id = 0;
  uint32_t fd = 0;
  uint64_t uuid[2] = {};
  uint64_t ipc[8] = {};
};

inline uint32_t mrSlotOf(uint32_t key) noexcept {
  return key & (kMaxMrs - 1);
}
inline uint32_t qpSlotOf(uint32_t qp_num) noexcept {
  return qp_num & (kMaxQps - 1);
}
inline uint64_t qpWord(uint32_t qp_num, QpState s) noexcept {
  return uint64_t{qp_num} << 8 | static_cast<uint8_t>(s);
}

// Reads the entry for `key`; false when the key is not (or no longer) registered.
// Lock-free; retries while the owner rewrites the slot. A seq that stays odd (an
// owner that died mid-write) reads as "not registered".
bool readMr(const ControlView& view, uint32_t key, MrSnapshot* out) noexcept;

// The device-memory part of the entry for `key`; false when not registered or host memory.
bool readGpuExport(const ControlView& view, uint32_t key, GpuExportRecord* out) noexcept;

// Owner side, serialised by the device's control mutex. `gpu`: device memory, or nullptr.
void writeMr(MrEntry& entry, const MrSnapshot& value,
             const GpuExportRecord* gpu = nullptr) noexcept;
void clearMr(MrEntry& entry) noexcept;

// PortIdentity.gid of a soft port: 't' 's' version device pid(4, LE) nonce(8, LE);
// PortIdentity.lid: the kernel's boot tag. Soft reaches a peer through shared memory
// and process_vm_*, so only a peer on the same kernel: RTR refuses any other.
struct SoftAddress {
  uint32_t pid = 0;
  uint64_t nonce = 0;
  uint32_t device_index = 0;
  uint16_t boot = 0;  // bootTag() of the kernel the port's process runs on
};

// A 16-bit fold of /proc/sys/kernel/random/boot_id (read once): equal on every
// process of one kernel (network namespaces included), different after a reboot and,
// but for a 1 in 65536 chance, on another host. 0 is never a tag.
uint16_t bootTag() noexcept;
uint16_t bootTagOf(const char* boot_id) noexcept;
PortIdentity encodeIdentity(const SoftAddress& a) noexcept;
bool decodeIdentity(const PortIdentity& id, SoftAddress* out) noexcept;

// File names inside shm_dir.
// Start time of a process in clock ticks since boot (0 when unknown).
uint64_t processStartTime(uint32_t pid) noexcept;

std::string controlFileName(uint32_t pid, uint64_t nonce, uint32_t device_index);
std::string memoryFileName(uint32_t pid, uint64_t nonce, uint32_t shm_id);
inline constexpr const char* kFilePrefix = "tent-soft-";

}  // namespace tent::fabric::soft
