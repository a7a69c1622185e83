// LcoreLoop control path: attach/detach publication, quiescence wait, stats.
#include <algorithm>
#include <chrono>
#include <new>
#include <string>

#include "lcore/loop.h"
#include "tent/log.h"

namespace tent::lcore {

namespace {

// An lcore passes a quiescent point at least once per pass or per bounded
// sleep chunk, so this only trips when a poller blocks, which is a bug.
constexpr auto kQuiesceTimeout = std::chrono::seconds(10);

// How a control thread waits for an lcore: spin briefly (an awake lcore answers
// within one pass), then short sleeps so it leaves the CPU to the lcores.
constexpr config::IdlePolicy kControlWaitPolicy{
    .spin_polls = 64, .pause_polls = 256, .sleep_min_us = 2, .sleep_max_us = 200};

std::string describe(const Poller* poller) {
  return "poller '" + std::string(poller->name()) + "'";
}

}  // namespace

LcoreLoop::LcoreLoop(size_t index, const config::LcoreSpec& spec)
    : index_(index),
      backoff_(spec.idle),
      block_max_us_(spec.idle.block_max_us),
      current_(new PollerSet()) {}

LcoreLoop::~LcoreLoop() {
  delete current_.load(std::memory_order_relaxed);
}

bool LcoreLoop::contains(const Poller* poller) const noexcept {
  const auto& pollers = current_.load(std::memory_order_acquire)->pollers;
  return std::find(pollers.begin(), pollers.end(), poller) != pollers.end();
}

Status LcoreLoop::attach(Poller* poller) {
  if (contains(poller)) {
    return Status::AlreadyExists(describe(poller) + " is already attached to lcore " +
                                 std::to_string(index_));
  }
  std::vector<Poller*> next = current_.load(std::memory_order_acquire)->pollers;
  next.push_back(poller);
  // Before the publication: a producer that hands it work after attach() returns
  // finds the doorbell.
  poller->doorbell_.store(&doorbell_, std::memory_order_release);
  Status s = publish(std::move(next), "attach", poller);
  if (!s.ok() && !contains(poller)) poller->doorbell_.store(nullptr, std::memory_order_release);
  return s;
}

Status LcoreLoop::detach(Poller* poller) {
  if (!contains(poller)) {
    return Status::NotFound(describe(poller) + " is not attached to lcore " +
                            std::to_string(index_));
  }
  std::vector<Poller*> next = current_.load(std::memory_order_acquire)->pollers;
  next.erase(std::find(next.begin(), next.end(), poller));
  Status s = publish(std::move(next), "detach", poller);
  if (s.ok()) poller->doorbell_.store(nullptr, std::memory_order_release);
  return s;
}

Status LcoreLoop::publish(std::vector<Poller*> next, const char* what, const Poller* poller) {
  const uint64_t generation = next_generation_++;
  auto* fresh = new (std::nothrow) PollerSet{std::move(next), generation};
  if (fresh == nullptr) return Status::ResourceExhausted("out of memory for a poller set");
  // seq_cst pairs with the seq_cst load of `current_` and store of `active_` in a
  // manual pass: either that pass sees `fresh`, or we see it active and wait.
  const PollerSet* old = current_.exchange(fresh, std::memory_order_seq_cst);
  // A sleeping lcore wakes and passes over the new set: its quiescent point. An lcore
  // about to sleep re-checks after arming and loads `fresh` then (doorbell.h).
  doorbell_.ringAlways();
  if (!waitQuiescent(generation)) {
    // The lcore may still be walking `old`: leak it rather than free it under the lcore.
    TENT_ERROR(kLcore, "lcore %zu: %s of %s not acknowledged within %lld s", index_, what,
               describe(poller).c_str(), static_cast<long long>(kQuiesceTimeout.count()));
    return Status::Timeout("lcore " + std::to_string(index_) + " did not finish a pass within " +
                           std::to_string(kQuiesceTimeout.count()) + " s after the " + what +
                           " of " + describe(poller) +
                           " (a poller blocks?); the change is published but the poller may "
                           "still be running");
  }
  delete old;
  return Status::OK();
}

bool LcoreLoop::waitQuiescent(uint64_t generation) const {
  const auto deadline = std::chrono::steady_clock::now() + kQuiesceTimeout;
  IdleBackoff waiter(kControlWaitPolicy);
  // `seen_generation_ >= generation`: a whole pass ran over the new set (or a newer
  // one), and every later pass loads it or a newer one (coherence), so no pass over
  // an older set is in progress or to come.
  while (active() && seen_generation_.load(std::memory_order_acquire) < generation) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    waiter.onIdle();
  }
  return true;
}

void LcoreLoop::prepareLaunch() noexcept {
  stop_.store(false, std::memory_order_relaxed);
  active_.store(true, std::memory_order_seq_cst);
}

void LcoreLoop::requestStop() noexcept {
  stop_.store(true, std::memory_order_release);
  doorbell_.ringAlways();  // the loop checks stop_ after arming, before it sleeps
}

LcoreStats LcoreLoop::stats() const noexcept {
  LcoreStats s;
  s.busy_cycles = busy_cycles_.load(std::memory_order_relaxed);
  s.idle_cycles = idle_cycles_.load(std::memory_order_relaxed);
  s.busy_passes = busy_passes_.load(std::memory_order_relaxed);
  s.idle_passes = idle_passes_.load(std::memory_order_relaxed);
  s.sleeps = sleeps_.load(std::memory_order_relaxed);
  s.blocks = blocks_.load(std::memory_order_relaxed);
  s.doorbell_wakes = doorbell_.wakes();
  s.asleep = doorbell_.sleeping();
  return s;
}

}  // namespace tent::lcore
