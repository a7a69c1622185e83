// Typed rte_ring wrappers: multi-producer / single-consumer work queues of pointers.
// The ring memory is allocated by us and initialised with rte_ring_init, so rings
// work with or without EAL (manual mode, unit tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tent/status.h"

struct rte_ring;

namespace tent::lcore {

class RawRing {
 public:
  // `capacity` is rounded up to a power of two (usable slots = that minus one).
  static Result<std::unique_ptr<RawRing>> create(const std::string& name, uint32_t capacity,
                                                 bool single_consumer = true);
  ~RawRing();
  RawRing(const RawRing&) = delete;
  RawRing& operator=(const RawRing&) = delete;

  bool enqueue(void* obj) noexcept;
  // All or nothing; returns the number enqueued (0 or n).
  unsigned enqueueBulk(void* const* objs, unsigned n) noexcept;
  unsigned enqueueBurst(void* const* objs, unsigned n) noexcept;
  // Consumer side: only the owning lcore (single consumer) may call.
  unsigned dequeueBurst_lc(void** objs, unsigned n) noexcept;
  unsigned count() const noexcept;
  unsigned capacity() const noexcept;

 private:
  RawRing() = default;
  rte_ring* ring_ = nullptr;
  void* mem_ = nullptr;
};

template <typename T>
class Ring {
 public:
  static Result<std::unique_ptr<Ring>> create(const std::string& name, uint32_t capacity,
                                              bool single_consumer = true) {
    auto raw = RawRing::create(name, capacity, single_consumer);
    if (!raw.ok()) return raw.status();
    return std::unique_ptr<Ring>(new Ring(std::move(raw).value()));
  }
  bool enqueue(T* obj) noexcept { return raw_->enqueue(obj); }
  unsigned enqueueBulk(T* const* objs, unsigned n) noexcept {
    return raw_->enqueueBulk(reinterpret_cast<void* const*>(objs), n);
  }
  unsigned enqueueBurst(T* const* objs, unsigned n) noexcept {
    return raw_->enqueueBurst(reinterpret_cast<void* const*>(objs), n);
  }
  unsigned dequeueBurst_lc(T** objs, unsigned n) noexcept {
    return raw_->dequeueBurst_lc(reinterpret_cast<void**>(objs), n);
  }
  unsigned count() const noexcept { return raw_->count(); }
  unsigned capacity() const noexcept { return raw_->capacity(); }

 private:
  explicit Ring(std::unique_ptr<RawRing> raw) : raw_(std::move(raw)) {}
  std::unique_ptr<RawRing> raw_;
};

}  // namespace tent::lcore
