#include "bench_ring.h"

namespace tent::bench {
namespace {

template <typename R>
class RingOf final : public BenchRing {
 public:
  explicit RingOf(std::unique_ptr<R> ring) : ring_(std::move(ring)) {}
  bool enqueue(void* obj) noexcept override { return ring_->enqueue(obj); }
  unsigned enqueueBulk(void* const* objs, unsigned n) noexcept override {
    return ring_->enqueueBulk(objs, n);
  }
  unsigned enqueueBurst(void* const* objs, unsigned n) noexcept override {
    return ring_->enqueueBurst(objs, n);
  }
  unsigned dequeueBurst_sc(void** objs, unsigned n) noexcept override {
    return ring_->dequeueBurst_sc(objs, n);
  }

 private:
  std::unique_ptr<R> ring_;
};

template <typename R>
Result<std::unique_ptr<BenchRing>> wrap(Result<std::unique_ptr<R>> ring) {
  if (!ring.ok()) return ring.status();
  return std::unique_ptr<BenchRing>(new RingOf<R>(std::move(ring).value()));
}

}  // namespace

const char* ringKindName(RingKind kind) {
  switch (kind) {
    case RingKind::kClassic:
      return "classic";
    case RingKind::kSingle:
      return "single";
    case RingKind::kSlot:
      return "slot";
    default:
      return "rts";
  }
}

bool parseRingKind(const std::string& text, RingKind* out) {
  for (RingKind kind : {RingKind::kRts, RingKind::kClassic, RingKind::kSingle, RingKind::kSlot}) {
    if (text == ringKindName(kind)) {
      *out = kind;
      return true;
    }
  }
  return false;
}

Result<std::unique_ptr<BenchRing>> makeBenchRing(const std::string& name, uint32_t slots,
                                                 RingKind kind) {
  lcore::RingOptions options;  // single consumer
  switch (kind) {
    case RingKind::kSlot:
      return wrap(lcore::RawSlotRing::create(name, slots));
    case RingKind::kClassic:
      options.producers = lcore::RingSync::kClassic;
      break;
    case RingKind::kSingle:
      options.producers = lcore::RingSync::kSingle;
      break;
    case RingKind::kRts:
      options.producers = lcore::RingSync::kRts;
      break;
  }
  options.consumers = lcore::RingSync::kSingle;
  return wrap(lcore::RawRing::create(name, slots, options));
}

}  // namespace tent::bench
