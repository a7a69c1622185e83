// Peers: mapping another process's control files and shared-memory segments.
// Whether a peer is alive is read from its control files (ownerAlive()).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "fabric/soft/soft_internal.h"
#include "tent/log.h"

namespace tent::fabric::soft {

const ShmAllocation* ProviderCore::findAllocationLocked(uintptr_t addr, size_t length,
                                                        uintptr_t* base) const {
  auto it = allocations.upper_bound(addr);
  if (it == allocations.begin()) return nullptr;
  --it;
  const uintptr_t b = it->first;
  if (addr < b || addr - b > it->second.length || length > it->second.length - (addr - b)) {
    return nullptr;
  }
  *base = b;
  return &it->second;
}

Result<std::shared_ptr<PeerProcess>> ProviderCore::attachPeer(const SoftAddress& address) {
  std::lock_guard<std::mutex> g(peers_mutex);
  for (auto it = peers.begin(); it != peers.end();) {  // forget peers nobody uses any more
    it = it->second.expired() ? peers.erase(it) : std::next(it);
  }
  auto& slot = peers[{address.pid, address.nonce}];
  if (auto existing = slot.lock()) return existing;
  auto peer = std::make_shared<PeerProcess>(*this, address.pid, address.nonce);
  TENT_RETURN_IF_ERROR(peer->open());
  slot = peer;
  return peer;
}

PeerProcess::PeerProcess(ProviderCore& core, uint32_t pid, uint64_t nonce)
    : core_(core),
      pid_(pid),
      nonce_(nonce),
      same_process_(pid == static_cast<uint32_t>(getpid())) {}

PeerProcess::~PeerProcess() {
  if (segments_) {
    for (uint32_t i = 0; i < kMaxSegments; ++i) {
      if (uint8_t* b = segments_[i].base.load(std::memory_order_relaxed)) {
        munmap(b, segments_[i].length);
      }
    }
  }
  for (auto& [index, m] : devices_) munmap(m.base, m.length);
}

Status PeerProcess::open() {
  if (same_process_) return Status::OK();  // memory is ours: plain copies, no mappings
  if (kill(static_cast<pid_t>(pid_), 0) == -1 && errno == ESRCH)
    return Status::Unavailable("soft: peer process " + std::to_string(pid_) + " is not running");
  segments_ = std::make_unique<Segment[]>(kMaxSegments);
  return Status::OK();
}

Result<ControlView> PeerProcess::attachDevice(uint32_t index) {
  std::lock_guard<std::mutex> g(attach_mutex_);
  if (auto it = devices_.find(index); it != devices_.end()) return it->second.view;
  const std::string path = core_.shm_dir + "/" + controlFileName(pid_, nonce_, index);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::NotFound("soft: peer device file " + path + ": " + std::strerror(errno) +
                            " (is the peer alive, and does it use the same shm_dir?)");
  }
  struct stat st {};
  const bool sized =
      fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= sizeof(ControlHeader);
  void* base = sized ? mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (base == MAP_FAILED) return Status::IoError("soft: cannot map peer device file " + path);
  Mapping m{base, static_cast<size_t>(st.st_size), {}};
  const auto* h = static_cast<const ControlHeader*>(base);
  std::atomic_thread_fence(std::memory_order_acquire);
  std::string bad;
  if (h->magic != kControlMagic || h->version != kLayoutVersion) {
    bad = "bad magic or version";
  } else if (h->pid != pid_ || h->nonce != nonce_ || h->device_index != index) {
    bad = "identity mismatch";
  } else if (h->max_qps != kMaxQps || h->max_mrs == 0 || h->max_mrs > kMaxMrs ||
             m.length < controlFileSize(h->max_mrs)) {
    bad = "bad table sizes";
  } else if (!same_process_ && h->start_time != processStartTime(pid_)) {
    bad = "the process that published it is gone (pid reused)";
  }
  if (!bad.empty()) {
    munmap(base, m.length);
    return Status::Unavailable("soft: peer device file " + path + ": " + bad);
  }
  m.view = ControlView::over(base, h->max_mrs);
  devices_[index] = m;
  return m.view;
}

uint8_t* PeerProcess::segmentBase(uint32_t id, uint64_t length) noexcept {
  if (!segments_ || id == 0 || id >= kMaxSegments) return nullptr;
  Segment& s = segments_[id];
  if (uint8_t* b = s.base.load(std::memory_order_acquire)) return b;
  if (s.failed.load(std::memory_order_relaxed)) return nullptr;
  SpinGuard g(map_lock_);
  if (uint8_t* b = s.base.load(std::memory_order_acquire)) return b;
  char path[512];
  std::snprintf(path, sizeof(path), "%s/%s%u-%016" PRIx64 "-m%u", core_.shm_dir.c_str(),
                kFilePrefix, pid_, nonce_, id);
  const int fd = ::open(path, O_RDWR | O_CLOEXEC);
  struct stat st {};
  // A file shorter than the mapping would SIGBUS on access: check its size first.
  const bool usable = fd >= 0 && fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= length;
  void* m = usable ? mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  if (m == MAP_FAILED) {
    s.failed.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  s.length = length;
  s.base.store(static_cast<uint8_t*>(m), std::memory_order_release);
  return static_cast<uint8_t*>(m);
}

}  // namespace tent::fabric::soft
