// Helpers shared by the soft provider's tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "config/config.h"
#include "fabric/fabric.h"
#include "fabric/soft/soft_faults.h"
#include "fabric/soft/soft_provider.h"

namespace tent::fabric::soft::testing {

inline config::SoftFabricConfig testConfig() {
  config::SoftFabricConfig c;
  c.retry_budget_ms = 50;
  return c;
}

inline config::SoftDevice softDevice(std::string name, double link_gbps = 0,
                                     uint64_t latency_ns = 0) {
  config::SoftDevice d;
  d.name = std::move(name);
  d.link_gbps = link_gbps;
  d.latency_ns = latency_ns;
  return d;
}

inline std::unique_ptr<Provider> makeProvider(std::vector<config::SoftDevice> devices,
                                              Clock clock = {},
                                              config::SoftFabricConfig cfg = testConfig()) {
  auto r = createSoftProvider(cfg, std::move(devices), SoftOptions{clock});
  if (!r.ok()) {
    ADD_FAILURE() << r.status().toString();
    return nullptr;
  }
  return std::move(r).value();
}

inline QpRemote remoteOf(const QueuePair& qp, const Device& dev) {
  return QpRemote::toQp(qp.qpNum(), dev.portIdentity());
}

// A registered buffer with `guard` canary bytes on each side outside the region.
struct GuardedBuffer {
  static constexpr uint8_t kCanary = 0xC5;
  std::vector<uint8_t> bytes;
  size_t guard = 0;
  std::unique_ptr<MemoryRegion> mr;

  GuardedBuffer(Device& dev, size_t length, uint32_t access, size_t guard_bytes = 64)
      : bytes(length + 2 * guard_bytes, kCanary), guard(guard_bytes) {
    auto r = dev.registerMemory(data(), length, access);
    EXPECT_TRUE(r.ok()) << r.status().toString();
    if (r.ok()) mr = std::move(r).value();
  }
  uint8_t* data() { return bytes.data() + guard; }
  uint64_t addr() { return reinterpret_cast<uint64_t>(data()); }
  size_t length() const { return bytes.size() - 2 * guard; }
  bool canariesIntact() const {
    for (size_t i = 0; i < guard; ++i) {
      if (bytes[i] != kCanary || bytes[bytes.size() - 1 - i] != kCanary) return false;
    }
    return true;
  }
  void fill(uint8_t seed) {
    for (size_t i = 0; i < length(); ++i) data()[i] = static_cast<uint8_t>(seed + i * 7);
  }
  bool holds(uint8_t seed, size_t offset = 0, size_t n = SIZE_MAX) {
    n = std::min(n, length() - offset);
    for (size_t i = offset; i < offset + n; ++i) {
      if (data()[i] != static_cast<uint8_t>(seed + i * 7)) return false;
    }
    return true;
  }
};

constexpr uint32_t kAllAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

// Two RC QPs on `dev_a` / `dev_b` connected to each other; `a` is the one tests post on.
struct QpPair {
  std::unique_ptr<CompletionQueue> cq_a, cq_b;
  std::unique_ptr<QueuePair> a, b;

  static QpPair make(Device& dev_a, Device& dev_b, uint32_t max_send_wr = 16, uint32_t max_sge = 4,
                     uint32_t cq_depth = 1024, bool connect = true) {
    QpPair p;
    p.cq_a = std::move(dev_a.createCq(cq_depth)).value();
    p.cq_b = std::move(dev_b.createCq(cq_depth)).value();
    p.a = std::move(dev_a.createQp({p.cq_a.get(), max_send_wr, max_sge})).value();
    p.b = std::move(dev_b.createQp({p.cq_b.get(), max_send_wr, max_sge})).value();
    if (connect) {
      EXPECT_TRUE(connectQp(*p.a, remoteOf(*p.b, dev_b)).ok());
      EXPECT_TRUE(connectQp(*p.b, remoteOf(*p.a, dev_a)).ok());
    }
    return p;
  }
};

inline SendWr makeWr(uint64_t id, WrOpcode op, const Sge* sges, uint32_t n, uint64_t remote_addr,
                     uint32_t rkey, bool signaled = true) {
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = op;
  wr.signaled = signaled;
  wr.num_sge = n;
  wr.sg_list = sges;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  return wr;
}

// Posts one WR; expects the post itself to succeed.
inline void post(QueuePair& qp, const SendWr& wr) {
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp.postSend(&wr, &bad), 0);
}

// Polls (real clock) until `n` completions arrived or `bound` passed.
inline std::vector<WorkCompletion> pollN(
    CompletionQueue& cq, size_t n, std::chrono::milliseconds bound = std::chrono::seconds(10)) {
  std::vector<WorkCompletion> out;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  WorkCompletion wc[16];
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    const int got = cq.poll(wc, 16);
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
    if (got == 0) std::this_thread::yield();
  }
  return out;
}

// Polls once and returns what came (for tests on an injected clock).
inline std::vector<WorkCompletion> pollNow(CompletionQueue& cq) {
  std::vector<WorkCompletion> out;
  WorkCompletion wc[64];
  int got = 0;
  while ((got = cq.poll(wc, 64)) > 0) out.insert(out.end(), wc, wc + got);
  return out;
}

// WRITE (or READ) of the whole `local` buffer to `remote`, one WR, one completion.
inline WorkCompletion transferOne(QpPair& p, WrOpcode op, GuardedBuffer& local,
                                  uint64_t remote_addr, uint32_t rkey, size_t length) {
  Sge sge{local.addr(), static_cast<uint32_t>(length), local.mr->lkey()};
  SendWr wr = makeWr(42, op, &sge, 1, remote_addr, rkey);
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wr, &bad), 0);
  auto wcs = pollN(*p.cq_a, 1);
  EXPECT_EQ(wcs.size(), 1u);
  return wcs.empty() ? WorkCompletion{0, WcStatus::kGeneral} : wcs[0];
}

}  // namespace tent::fabric::soft::testing
