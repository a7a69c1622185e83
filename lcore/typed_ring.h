// TypedRing<Raw, T>: a ring of pointers to T over a ring of void* (RawRing or
// RawSlotRing), with the same operations and no casts at the call sites.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "tent/status.h"

namespace tent::lcore {

template <typename Raw, typename T>
class TypedRing {
 public:
  // The raw ring's create() arguments (name, capacity, ...).
  template <typename... Args>
  static Result<std::unique_ptr<TypedRing>> create(Args&&... args) {
    auto raw = Raw::create(std::forward<Args>(args)...);
    if (!raw.ok()) return raw.status();
    return std::unique_ptr<TypedRing>(new TypedRing(std::move(raw).value()));
  }
  bool enqueue(T* obj) noexcept { return raw_->enqueue(obj); }
  unsigned enqueueBulk(T* const* objs, unsigned n) noexcept {
    return raw_->enqueueBulk(reinterpret_cast<void* const*>(objs), n);
  }
  unsigned enqueueBurst(T* const* objs, unsigned n) noexcept {
    return raw_->enqueueBurst(reinterpret_cast<void* const*>(objs), n);
  }
  unsigned dequeueBurst_sc(T** objs, unsigned n) noexcept {
    return raw_->dequeueBurst_sc(reinterpret_cast<void**>(objs), n);
  }
  unsigned count() const noexcept { return raw_->count(); }
  unsigned capacity() const noexcept { return raw_->capacity(); }
  // What only one kind of raw ring offers (RawSlotRing::claimed, RawRing::options).
  const Raw& raw() const noexcept { return *raw_; }

 private:
  explicit TypedRing(std::unique_ptr<Raw> raw) : raw_(std::move(raw)) {}
  std::unique_ptr<Raw> raw_;
};

}  // namespace tent::lcore
