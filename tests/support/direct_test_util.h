// Shared fixture for direct-path tests in manual lcore mode (lcore 0: rail pollers,
// lcore 1: background), loopback through two soft devices.
#pragma once

#include <functional>

#include "fabric/soft/soft_faults.h"
#include "datapath/direct_path.h"
#include "model/rdma_context.h"
#include "model/rdma_endpoint.h"
#include "engine_test_util.h"

namespace tent::testing {

struct DirectFixture : ::testing::Test {
  static constexpr size_t kBuf = 4 << 20;
  void SetUp() override { init(""); }
  // `workers` adds keys to the workers map (", max_slice_retries: 0"); `soft` to the
  // soft fabric map (", max_message_bytes: 4096"; ignored on other fabrics).
  void init(const std::string& extra, const std::string& workers = "",
            const std::string& soft = "") {
    std::string yaml = simYaml(extra, "", workers);
    const std::string anchor = "    retry_budget_ms: 50\n";
    if (!soft.empty() && yaml.find(anchor) != std::string::npos)
      yaml.replace(yaml.find(anchor), anchor.size(), anchor + "    " + soft + "\n");
    engine.reset();
    engine = makeEngine(yaml);
    ASSERT_NE(engine, nullptr);
    src = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
    dst = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
  }
  rdma::RdmaTransport& t() { return engine->transport(); }
  Request req(OpCode op, size_t off, size_t len, IntentType intent = IntentType::FOREGROUND_GET,
              uint64_t deadline = 0, SegmentId seg = LOCAL_SEGMENT_ID, uint8_t* remote = nullptr) {
    Request r;
    r.opcode = op;
    r.source = src + off;
    r.target_id = seg;
    r.target_offset = reinterpret_cast<uint64_t>((remote ? remote : dst) + off);
    r.length = len;
    r.intent_type = intent;
    r.deadline_ns = deadline;
    return r;
  }
  // Connects every context's endpoint to the same-named peer device.
  bool waitEndpoints(SegmentId seg = LOCAL_SEGMENT_ID, double seconds = 30) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      bool all = true;
      for (uint32_t c = 0; c < t().contextCount(); ++c)
        all = (t().getEndpointForContextIndex(c, seg, c) != nullptr) && all;
      if (all) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
  }
  rdma::RdmaEndPoint* endpoint(uint32_t ctx, SegmentId seg = LOCAL_SEGMENT_ID) {
    return t().getEndpointForContextIndex(ctx, seg, ctx);
  }
  // Submits one request in a fresh batch; returns (batch, 0).
  BatchId submitOne(const Request& r) {
    auto b = engine->allocateBatch(1);
    EXPECT_TRUE(b.ok());
    Status s = engine->submitTransfer(*b, {&r, 1});
    EXPECT_TRUE(s.ok()) << s.toString();
    return *b;
  }
  // Polls through getTransferStatus only (caller-driven progress), no poller steps.
  TransferStatus pollCaller(BatchId b, double seconds = 30) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      auto st = engine->getTransferStatus(b, 0);
      if (!st.ok() || st->state != TransferState::PENDING) return st.ok() ? *st : TransferStatus{};
      if (std::chrono::steady_clock::now() > deadline) return *st;
      std::this_thread::yield();
    }
  }
  DirectPathStats direct() { return engine->stats().direct; }
  uint32_t lanesInUse() {
    uint32_t n = 0;
    for (size_t c = 0; c < t().contextCount(); ++c) n += t().context(c).lanesInUse();
    return n;
  }
  fabric::soft::FaultInjector& faults() { return *fabric::soft::faultInjector(engine->provider()); }

  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
};

inline BatchId submitMasked(DirectFixture& f, const Request& r, uint64_t mask) {
  auto b = f.engine->allocateBatch(1);
  Status s = f.engine->submitTransferWithMask(*b, {&r, 1}, mask);
  EXPECT_TRUE(s.ok()) << s.toString();
  return *b;
}

// Adds a rule on context `ctx`'s direct QP toward the same-numbered device.
inline void faultOnDirectQp(DirectFixture& f, fabric::soft::FaultAction action,
                            uint64_t delay_ns = 0, uint32_t ctx = 0) {
  auto* ep = f.endpoint(ctx);
  ASSERT_NE(ep, nullptr);
  ASSERT_NE(ep->directQp(), nullptr);
  fabric::soft::FaultRule rule;
  rule.qp_num = ep->directQp()->qpNum();
  rule.every_nth = 1;
  rule.max_hits = 1;
  rule.action = action;
  rule.status = fabric::WcStatus::kRemoteAccess;
  rule.delay_ns = delay_ns;
  ASSERT_TRUE(f.faults().addRule(rule).ok());
}

inline bool waitFor(const std::function<bool()>& cond, double seconds = 30) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace tent::testing
