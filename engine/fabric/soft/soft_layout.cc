#include "fabric/soft/soft_layout.h"

#include <linux/futex.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fabric/soft/soft_spinlock.h"

namespace tent::fabric::soft {

namespace {
constexpr uint8_t kGidMagic0 = 't';
constexpr uint8_t kGidMagic1 = 's';
constexpr uint8_t kGidVersion = 2;  // 2: lid carries the boot tag
constexpr int kSeqlockTries = 1000;
}  // namespace

bool ownerAlive(const ControlHeader& h) noexcept {
  const uint32_t word = h.owner.load(std::memory_order_acquire);
  return (word & FUTEX_TID_MASK) != 0 && (word & FUTEX_OWNER_DIED) == 0 &&
         h.closed.load(std::memory_order_acquire) == 0;
}

bool readMr(const ControlView& view, uint32_t key, MrSnapshot* out) noexcept {
  const uint32_t slot = mrSlotOf(key);
  if (key == 0 || slot >= view.max_mrs) return false;
  const MrEntry& e = view.mrs[slot];
  for (int tries = 0; tries < kSeqlockTries; ++tries) {
    const uint32_t s1 = e.seq.load(std::memory_order_acquire);
    if (s1 & 1u) {
      cpuRelax();
      continue;
    }
    out->key = e.key.load(std::memory_order_relaxed);
    out->addr = e.addr.load(std::memory_order_relaxed);
    out->length = e.length.load(std::memory_order_relaxed);
    out->access = e.access.load(std::memory_order_relaxed);
    out->shm_id = e.shm_id.load(std::memory_order_relaxed);
    out->shm_offset = e.shm_offset.load(std::memory_order_relaxed);
    out->shm_length = e.shm_length.load(std::memory_order_relaxed);
    out->gpu_share = e.gpu_share.load(std::memory_order_relaxed);
    if (out->gpu_share != 0) {  // host memory, the common case, reads no more
      out->gpu_device = e.gpu_device.load(std::memory_order_relaxed);
      out->gpu_base = e.gpu_base.load(std::memory_order_relaxed);
      out->gpu_export = e.gpu_export.load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) == s1) return out->key == key;
  }
  return false;
}

bool readGpuExport(const ControlView& view, uint32_t key, GpuExportRecord* out) noexcept {
  const uint32_t slot = mrSlotOf(key);
  if (key == 0 || slot >= view.max_mrs) return false;
  const MrEntry& e = view.mrs[slot];
  for (int tries = 0; tries < kSeqlockTries; ++tries) {
    const uint32_t s1 = e.seq.load(std::memory_order_acquire);
    if (s1 & 1u) {
      cpuRelax();
      continue;
    }
    const uint32_t k = e.key.load(std::memory_order_relaxed);
    out->share = e.gpu_share.load(std::memory_order_relaxed);
    out->device = e.gpu_device.load(std::memory_order_relaxed);
    out->base = e.gpu_base.load(std::memory_order_relaxed);
    out->size = e.gpu_size.load(std::memory_order_relaxed);
    out->export_id = e.gpu_export.load(std::memory_order_relaxed);
    out->fd = e.gpu_fd.load(std::memory_order_relaxed);
    for (int i = 0; i < 2; ++i) out->uuid[i] = e.gpu_uuid[i].load(std::memory_order_relaxed);
    for (int i = 0; i < 8; ++i) out->ipc[i] = e.gpu_ipc[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) == s1) return k == key && out->share != 0;
  }
  return false;
}

void writeMr(MrEntry& e, const MrSnapshot& v, const GpuExportRecord* gpu) noexcept {
  const uint32_t s = e.seq.load(std::memory_order_relaxed);
  e.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.addr.store(v.addr, std::memory_order_relaxed);
  e.length.store(v.length, std::memory_order_relaxed);
  e.access.store(v.access, std::memory_order_relaxed);
  e.shm_id.store(v.shm_id, std::memory_order_relaxed);
  e.shm_offset.store(v.shm_offset, std::memory_order_relaxed);
  e.shm_length.store(v.shm_length, std::memory_order_relaxed);
  const GpuExportRecord none;
  const GpuExportRecord& g = gpu != nullptr ? *gpu : none;
  e.gpu_share.store(g.share, std::memory_order_relaxed);
  e.gpu_device.store(g.device, std::memory_order_relaxed);
  e.gpu_base.store(g.base, std::memory_order_relaxed);
  e.gpu_size.store(g.size, std::memory_order_relaxed);
  e.gpu_export.store(g.export_id, std::memory_order_relaxed);
  e.gpu_fd.store(g.fd, std::memory_order_relaxed);
  for (int i = 0; i < 2; ++i) e.gpu_uuid[i].store(g.uuid[i], std::memory_order_relaxed);
  for (int i = 0; i < 8; ++i) e.gpu_ipc[i].store(g.ipc[i], std::memory_order_relaxed);
  e.key.store(v.key, std::memory_order_relaxed);
  e.seq.store(s + 2, std::memory_order_release);
}

void clearMr(MrEntry& e) noexcept {
  const uint32_t s = e.seq.load(std::memory_order_relaxed);
  e.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.key.store(0, std::memory_order_relaxed);
  e.seq.store(s + 2, std::memory_order_release);
}

PortIdentity encodeIdentity(const SoftAddress& a) noexcept {
  PortIdentity id;
  id.gid[0] = kGidMagic0;
  id.gid[1] = kGidMagic1;
  id.gid[2] = kGidVersion;
  id.gid[3] = static_cast<uint8_t>(a.device_index);
  for (int i = 0; i < 4; ++i) id.gid[4 + i] = static_cast<uint8_t>(a.pid >> (8 * i));
  for (int i = 0; i < 8; ++i) id.gid[8 + i] = static_cast<uint8_t>(a.nonce >> (8 * i));
  id.lid = a.boot;
  return id;
}

bool decodeIdentity(const PortIdentity& id, SoftAddress* out) noexcept {
  if (id.gid[0] != kGidMagic0 || id.gid[1] != kGidMagic1 || id.gid[2] != kGidVersion) return false;
  SoftAddress a;
  a.device_index = id.gid[3];
  for (int i = 0; i < 4; ++i) a.pid |= uint32_t{id.gid[4 + i]} << (8 * i);
  for (int i = 0; i < 8; ++i) a.nonce |= uint64_t{id.gid[8 + i]} << (8 * i);
  a.boot = id.lid;
  if (a.pid == 0 || a.boot == 0) return false;
  *out = a;
  return true;
}

uint16_t bootTagOf(const char* boot_id) noexcept {
  uint32_t h = 2166136261u;  // FNV-1a
  for (const char* c = boot_id; *c != 0 && *c != '\n'; ++c)
    h = (h ^ static_cast<uint8_t>(*c)) * 16777619u;
  const auto tag = static_cast<uint16_t>(h ^ (h >> 16));
  return tag == 0 ? 1 : tag;
}

uint16_t bootTag() noexcept {
  static const uint16_t tag = [] {
    char id[64] = "";
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
      if (std::fgets(id, sizeof(id), f) == nullptr) id[0] = 0;
      std::fclose(f);
    }
    return bootTagOf(id);
  }();
  return tag;
}

uint64_t processStartTime(uint32_t pid) noexcept {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // Field 2 (comm) may hold spaces and parentheses: count fields after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  for (int field = 2; field < 22 && *p; ++p) {  // starttime is field 22
    if (*p == ' ') ++field;
  }
  return std::strtoull(p, nullptr, 10);
}

std::string controlFileName(uint32_t pid, uint64_t nonce, uint32_t device_index) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s%u-%016" PRIx64 "-d%u", kFilePrefix, pid, nonce, device_index);
  return buf;
}

std::string memoryFileName(uint32_t pid, uint64_t nonce, uint32_t shm_id) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s%u-%016" PRIx64 "-m%u", kFilePrefix, pid, nonce, shm_id);
  return buf;
}

}  // namespace tent::fabric::soft
