// Pollers shared by the lcore tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "lcore/poller.h"
#include "lcore/runtime.h"
#include "tent/status.h"

namespace tent::lcore::testing {

// Counts its calls; reports busy while it still has `work` units left.
class CountingPoller final : public Poller {
 public:
  explicit CountingPoller(std::string name, uint64_t work = 0)
      : name_(std::move(name)), work_(work) {}
  PollResult poll_lc() noexcept override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t left = work_.load(std::memory_order_relaxed);
    if (left == 0) return PollResult::kIdle;
    work_.store(left - 1, std::memory_order_relaxed);
    return PollResult::kBusy;
  }
  std::string_view name() const noexcept override { return name_; }
  uint64_t calls() const noexcept { return calls_.load(std::memory_order_relaxed); }
  void addWork(uint64_t n) noexcept { work_.fetch_add(n, std::memory_order_relaxed); }

 private:
  std::string name_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> work_;
};

// Tries to detach itself from inside poll_lc() once, and keeps what it was told.
class SelfDetachingPoller final : public Poller {
 public:
  explicit SelfDetachingPoller(Runtime& runtime, size_t lcore) : rt_(runtime), lcore_(lcore) {}
  PollResult poll_lc() noexcept override {
    if (!tried_.load(std::memory_order_relaxed)) {
      code_ = rt_.detach(lcore_, this).code();
      tried_.store(true, std::memory_order_release);
    }
    return PollResult::kIdle;
  }
  std::string_view name() const noexcept override { return "self-detaching"; }
  bool tried() const noexcept { return tried_.load(std::memory_order_acquire); }
  StatusCode code() const noexcept { return code_; }

 private:
  Runtime& rt_;
  const size_t lcore_;
  std::atomic<bool> tried_{false};
  StatusCode code_ = StatusCode::kOk;
};

}  // namespace tent::lcore::testing
