// A minimal in-test fabric device: QPs that record their state and an
// outstanding-WR count the test drives, for endpoint state-machine tests.
#pragma once

#include <atomic>
#include <memory>

#include "fabric/fabric.h"

namespace tent::testing {

class FakeCq final : public fabric::CompletionQueue {
 public:
  int poll(fabric::WorkCompletion*, int) noexcept override { return 0; }
  uint32_t depth() const noexcept override { return 64; }
};

class FakeQp final : public fabric::QueuePair {
 public:
  explicit FakeQp(uint32_t num, uint32_t depth) : num_(num), depth_(depth) {}
  uint32_t qpNum() const noexcept override { return num_; }
  fabric::QpState state() const noexcept override { return state_; }
  int postSend(const fabric::SendWr*, const fabric::SendWr**) noexcept override { return EINVAL; }
  uint32_t outstanding() const noexcept override { return outstanding_.load(); }
  uint32_t maxSendWr() const noexcept override { return depth_; }
  Status modifyToInit() override {
    state_ = fabric::QpState::kInit;
    return Status::OK();
  }
  Status modifyToRtr(const fabric::QpRemote& r) override {
    remote_ = r;
    state_ = fabric::QpState::kRtr;
    return Status::OK();
  }
  Status modifyToRts() override {
    state_ = fabric::QpState::kRts;
    return Status::OK();
  }
  Status modifyToError() override {
    state_ = fabric::QpState::kError;
    return Status::OK();
  }
  std::atomic<uint32_t> outstanding_{0};
  fabric::QpRemote remote_;

 private:
  uint32_t num_, depth_;
  fabric::QpState state_ = fabric::QpState::kReset;
};

class FakeDevice final : public fabric::Device {
 public:
  FakeDevice() { info_.name = "fake0"; }
  const fabric::DeviceInfo& info() const noexcept override { return info_; }
  fabric::PortIdentity portIdentity() const override { return {}; }
  Result<std::unique_ptr<fabric::MemoryRegion>> registerMemory(void*, size_t, uint32_t) override {
    return Status::NotSupported("fake");
  }
  Result<std::unique_ptr<fabric::CompletionQueue>> createCq(uint32_t) override {
    return std::unique_ptr<fabric::CompletionQueue>(new FakeCq());
  }
  Result<std::unique_ptr<fabric::QueuePair>> createQp(const fabric::QpInitAttr& a) override {
    auto qp = std::make_unique<FakeQp>(next_qp_++, a.max_send_wr);
    last_qp = qp.get();
    return std::unique_ptr<fabric::QueuePair>(std::move(qp));
  }
  fabric::PortCounters counters() const noexcept override { return {}; }
  FakeQp* last_qp = nullptr;

 private:
  fabric::DeviceInfo info_;
  uint32_t next_qp_ = 100;
};

}  // namespace tent::testing
