// Checks a NIC makes on every WR, shared by the providers that make them in software
// (soft, tcp), so both refuse exactly what a verbs NIC refuses. Header-only, noexcept,
// no allocation: called from postSend.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fabric/fabric.h"

namespace tent::fabric::rc {

// The range [addr, addr + length) lies inside [base, base + size) (overflow-safe).
inline bool inside(uint64_t base, uint64_t size, uint64_t addr, uint64_t length) noexcept {
  return addr >= base && length <= size && addr - base <= size - length;
}

// What ibv_post_send refuses before the WR reaches the send queue: too many SGEs, an
// SGE list missing, an opcode other than RDMA WRITE / READ / SEND. 0 or EINVAL.
inline int checkShape(const SendWr& wr, uint32_t max_sge) noexcept {
  if (wr.num_sge > max_sge || (wr.num_sge != 0 && wr.sg_list == nullptr)) return EINVAL;
  if (wr.opcode != WrOpcode::kRdmaWrite && wr.opcode != WrOpcode::kRdmaRead &&
      wr.opcode != WrOpcode::kSend) {
    return EINVAL;
  }
  return 0;
}

// What ibv_post_recv refuses: too many SGEs or an SGE list missing. 0 or EINVAL.
inline int checkRecvShape(const RecvWr& wr, uint32_t max_sge) noexcept {
  return wr.num_sge > max_sge || (wr.num_sge != 0 && wr.sg_list == nullptr) ? EINVAL : 0;
}

// The access a responder's region must grant for this opcode.
inline uint32_t remoteAccessFor(WrOpcode op) noexcept {
  return op == WrOpcode::kRdmaWrite ? kAccessRemoteWrite : kAccessRemoteRead;
}

// A registered region as a provider's table returns it.
struct Region {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
};

// The local half of a WR's checks: every SGE's lkey valid and the SGE inside its
// region (kLocalProtection), LOCAL_WRITE on the buffers a READ writes
// (kLocalProtection), the sum of lengths within the port's message size
// (kLocalLength). `lookup(lkey, Region*)` is the provider's lock-free table read;
// consecutive SGEs with one lkey are looked up once. `*total` gets the length.
template <typename Lookup>
WcStatus checkLocal(const SendWr& wr, uint64_t max_message_bytes, Lookup&& lookup,
                    uint64_t* total) noexcept {
  uint64_t sum = 0;
  Region r;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const Sge& g = wr.sg_list[i];
    if (i == 0 || g.lkey != wr.sg_list[i - 1].lkey) {
      if (!lookup(g.lkey, &r)) return WcStatus::kLocalProtection;
    }
    if (!inside(r.addr, r.length, g.addr, g.length)) return WcStatus::kLocalProtection;
    if (wr.opcode == WrOpcode::kRdmaRead && !(r.access & kAccessLocalWrite)) {
      return WcStatus::kLocalProtection;
    }
    sum += g.length;
  }
  if (sum > max_message_bytes) return WcStatus::kLocalLength;
  *total = sum;
  return WcStatus::kSuccess;
}

// The responder's half: the rkey names a region, the range lies inside it, and the
// region grants the opcode's access. Anything else is kRemoteAccess.
inline WcStatus checkRemote(bool key_valid, const Region& r, WrOpcode op, uint64_t remote_addr,
                            uint64_t length) noexcept {
  if (!key_valid || !inside(r.addr, r.length, remote_addr, length)) return WcStatus::kRemoteAccess;
  return (r.access & remoteAccessFor(op)) ? WcStatus::kSuccess : WcStatus::kRemoteAccess;
}

// One poster per QP at a time is the verbs contract; a NIC would corrupt its send
// queue. Debug and test builds end the program with a message naming the QP.
[[noreturn]] inline void abortSecondPoster(const char* provider, uint32_t qp_num) noexcept {
  std::fprintf(stderr,
               "tent %s provider: two threads posted on QP %u at the same time; the verbs "
               "contract allows one poster per QP at a time\n",
               provider, qp_num);
  std::abort();
}

}  // namespace tent::fabric::rc
