// Fault injection rules of the soft provider. Rules live in a fixed array, in the
// order they were added; the datapath scans them under a leaf spinlock only while
// at least one rule is active.
#include <cmath>
#include <string>

#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

namespace {

uint64_t splitmix64(uint64_t& state) noexcept {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform(uint64_t& state) noexcept {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
}

Status validateRule(const FaultRule& r) {
  const bool probable = std::isfinite(r.probability) && r.probability > 0 && r.probability <= 1;
  if (r.every_nth == 0 && !probable) {
    return Status::InvalidArgument("fault rule: needs every_nth > 0 or a probability in (0, 1]");
  }
  if (r.action == FaultAction::kCompletionError && r.status == WcStatus::kSuccess) {
    return Status::InvalidArgument("fault rule: a completion error needs an error status");
  }
  if ((r.action == FaultAction::kDelay || r.action == FaultAction::kHoldPost) && r.delay_ns == 0) {
    return Status::InvalidArgument("fault rule: a delay or hold needs delay_ns > 0");
  }
  return Status::OK();
}

}  // namespace

std::string_view toString(FaultAction a) noexcept {
  switch (a) {
    case FaultAction::kCompletionError:
      return "completion_error";
    case FaultAction::kDelay:
      return "delay";
    case FaultAction::kQpError:
      return "qp_error";
    case FaultAction::kPortDown:
      return "port_down";
    case FaultAction::kPortUp:
      return "port_up";
    case FaultAction::kHoldPost:
      return "hold_post";
  }
  return "unknown";
}

DeviceState* FaultEngine::findDevice(std::string_view name) const noexcept {
  for (DeviceState* d : devices_) {
    if (d->info.name == name) return d;
  }
  return nullptr;
}

Result<uint32_t> FaultEngine::addRule(const FaultRule& r) {
  TENT_RETURN_IF_ERROR(validateRule(r));
  int device = -1;
  if (!r.device.empty() && r.device != "*") {
    const DeviceState* d = findDevice(r.device);
    if (d == nullptr)
      return Status::InvalidArgument("fault rule: unknown device '" + r.device + "'");
    device = static_cast<int>(d->info.index);
  }
  SpinGuard g(lock_);
  size_t free = kMaxRules;
  for (size_t i = 0; i < kMaxRules; ++i) {
    if (!rules_[i].used) {
      free = i;
      break;
    }
  }
  if (free == kMaxRules) {
    return Status::ResourceExhausted("fault rule: at most " + std::to_string(kMaxRules) + " rules");
  }
  Rule& rule = rules_[free];
  rule = Rule{};
  rule.used = true;
  rule.active = true;
  rule.id = next_id_++;
  rule.device = device;
  rule.qp_num = r.qp_num;
  rule.opcode = r.opcode ? static_cast<int>(*r.opcode) : -1;
  rule.every_nth = r.every_nth;
  rule.probability = r.probability;
  rule.rng = r.seed;
  rule.max_hits = r.max_hits;
  rule.hit = FaultHit{r.action, r.status, r.delay_ns};
  active_.fetch_add(1, std::memory_order_relaxed);
  return rule.id;
}

Status FaultEngine::removeRule(uint32_t id) {
  SpinGuard g(lock_);
  for (size_t i = 0; i < kMaxRules; ++i) {
    Rule& r = rules_[i];
    if (!r.used || r.id != id) continue;
    if (r.active) active_.fetch_sub(1, std::memory_order_relaxed);
    // Keep the order of the remaining rules: shift the later ones down.
    for (size_t j = i; j + 1 < kMaxRules; ++j) rules_[j] = rules_[j + 1];
    rules_[kMaxRules - 1] = Rule{};
    return Status::OK();
  }
  return Status::NotFound("fault rule " + std::to_string(id) + " does not exist");
}

void FaultEngine::clearRules() {
  SpinGuard g(lock_);
  for (Rule& r : rules_) r = Rule{};
  active_.store(0, std::memory_order_relaxed);
}

uint64_t FaultEngine::hits(uint32_t id) const {
  SpinGuard g(lock_);
  for (const Rule& r : rules_) {
    if (r.used && r.id == id) return r.hits;
  }
  return 0;
}

bool FaultEngine::matchSlow(uint32_t device, uint32_t qp_num, WrOpcode opcode,
                            FaultHit* hit) noexcept {
  SpinGuard g(lock_);
  for (Rule& r : rules_) {
    if (!r.used) break;  // the used rules are packed at the front
    if (!r.active) continue;
    if (r.device >= 0 && static_cast<uint32_t>(r.device) != device) continue;
    if (r.qp_num != 0 && r.qp_num != qp_num) continue;
    if (r.opcode >= 0 && r.opcode != static_cast<int>(opcode)) continue;
    ++r.seen;
    const bool fire = r.every_nth ? r.seen % r.every_nth == 0 : uniform(r.rng) < r.probability;
    if (!fire) continue;
    ++r.hits;
    if (r.max_hits != 0 && r.hits >= r.max_hits) {  // retired; its hit count stays readable
      r.active = false;
      active_.fetch_sub(1, std::memory_order_relaxed);
    }
    *hit = r.hit;
    // Taken with the hit counted (same lock): a releaseHeldPosts() after anyone saw
    // this hit ends the hold, however late the holder starts it.
    hit->hold_epoch = hold_epoch_.load(std::memory_order_acquire);
    return true;
  }
  return false;
}

Status FaultEngine::setPortUp(std::string_view device, bool up) {
  DeviceState* d = findDevice(device);
  if (d == nullptr) return Status::NotFound("soft: no device named '" + std::string(device) + "'");
  d->setPortUp(up);
  return Status::OK();
}

Status FaultEngine::injectDeviceEvent(std::string_view device, DeviceEventType type) {
  DeviceState* d = findDevice(device);
  if (d == nullptr) return Status::NotFound("soft: no device named '" + std::string(device) + "'");
  switch (type) {
    case DeviceEventType::kFatal:
      d->dead.store(true, std::memory_order_release);
      d->setPortUp(false);
      break;
    case DeviceEventType::kPortDown:
      d->setPortUp(false);
      break;
    case DeviceEventType::kPortUp:
      if (!d->dead.load(std::memory_order_acquire)) d->setPortUp(true);
      break;
    case DeviceEventType::kAddressChange:
      break;
  }
  d->pushEvent(type);
  return Status::OK();
}

bool FaultEngine::portUp(std::string_view device) const {
  const DeviceState* d = findDevice(device);
  return d != nullptr && d->port_up.load(std::memory_order_acquire);
}

}  // namespace tent::fabric::soft
