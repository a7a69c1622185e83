// fabric_bench's measuring loop: keeps `depth` WRs in flight on every QP, and
// times each WR from just before its postSend() to the poll() that returns it.
// Everything is preallocated before the clock starts.
#include <time.h>

#include <algorithm>
#include <cstring>

#include "perf/fabric_bench/bench.h"
#include "perf/fabric_bench/bench_loop.h"

namespace tent::perf::fabric_bench {

uint64_t nowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Loop::prepare(Bench& bench, uint64_t size) {
  bench_ = &bench;
  size_ = size;
  const Options& o = bench.options;
  slots_.assign(static_cast<size_t>(o.qps) * o.depth, Slot{});
  for (uint32_t q = 0; q < o.qps; ++q) {
    for (uint32_t d = 0; d < o.depth; ++d) {
      Slot& s = slots_[q * o.depth + d];
      s.qp = q;
      s.sge.addr = reinterpret_cast<uint64_t>(bench.local) + q * bench.slot_bytes;
      s.sge.length = static_cast<uint32_t>(size);
      s.sge.lkey = bench.local_mr->lkey();
      s.wr.wr_id = q * o.depth + d;
      s.wr.opcode = o.opcode;
      s.wr.signaled = true;
      s.wr.num_sge = 1;
      s.wr.sg_list = &s.sge;
      s.wr.remote_addr = bench.remote_addr + q * bench.slot_bytes;
      s.wr.rkey = bench.remote_rkey;
    }
  }
}

bool Loop::post(Slot& slot) noexcept {
  const fabric::SendWr* bad = nullptr;
  slot.post_ns = nowNs();
  return bench_->qps[slot.qp]->postSend(&slot.wr, &bad) == 0;
}

// Posts in QP-interleaved order so every QP starts with work at once.
bool Loop::postInitial(uint64_t max_wrs, Drive& d) noexcept {
  const Options& o = bench_->options;
  for (uint32_t k = 0; k < o.depth; ++k) {
    for (uint32_t q = 0; q < o.qps; ++q) {
      if (max_wrs != 0 && d.posted >= max_wrs) return true;
      if (!post(slots_[q * o.depth + k])) return false;
      ++d.posted;
      ++d.outstanding;
    }
  }
  return true;
}

Drive Loop::run(uint64_t max_wrs, uint64_t duration_ns, std::vector<uint32_t>* samples) noexcept {
  Drive d;
  d.start_ns = nowNs();
  d.end_ns = d.start_ns;
  if (!postInitial(max_wrs, d)) {
    d.post_failed = true;
    d.stopping = true;
  }
  fabric::WorkCompletion wcs[64];
  while (d.outstanding > 0) {
    int n = bench_->cq->poll(wcs, 64);
    if (n < 0) {
      d.cq_error = true;
      break;
    }
    if (n == 0) continue;
    uint64_t t = nowNs();
    d.end_ns = t;
    for (int i = 0; i < n; ++i) complete(wcs[i], t, max_wrs, duration_ns, samples, d);
  }
  return d;
}

void Loop::complete(const fabric::WorkCompletion& wc, uint64_t t, uint64_t max_wrs,
                    uint64_t duration_ns, std::vector<uint32_t>* samples, Drive& d) noexcept {
  --d.outstanding;
  Slot& slot = slots_[wc.wr_id];
  if (wc.status != fabric::WcStatus::kSuccess) {
    if (d.errors++ == 0) d.first_error = wc.status;
    d.stopping = true;
    return;
  }
  ++d.completed;
  uint64_t lat = t - slot.post_ns;
  if (samples != nullptr && samples->size() < samples->capacity()) {
    samples->push_back(lat > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(lat));
  }
  bool more = !d.stopping && (max_wrs == 0 || d.posted < max_wrs) &&
              (duration_ns == 0 || t - d.start_ns < duration_ns);
  if (!more) return;
  if (!post(slot)) {
    d.post_failed = true;
    d.stopping = true;
    return;
  }
  ++d.posted;
  ++d.outstanding;
}

// One WR, waited for with a deadline: the verification transfers.
fabric::WcStatus Loop::once(uint32_t qp, fabric::WrOpcode opcode, uint64_t local, uint64_t remote,
                            uint64_t size) noexcept {
  fabric::Sge sge{local, static_cast<uint32_t>(size), bench_->local_mr->lkey()};
  fabric::SendWr wr;
  wr.wr_id = 0;
  wr.opcode = opcode;
  wr.num_sge = 1;
  wr.sg_list = &sge;
  wr.remote_addr = remote;
  wr.rkey = bench_->remote_rkey;
  const fabric::SendWr* bad = nullptr;
  if (bench_->qps[qp]->postSend(&wr, &bad) != 0) return fabric::WcStatus::kGeneral;
  uint64_t deadline = nowNs() + 30'000'000'000ull;
  fabric::WorkCompletion wc;
  while (nowNs() < deadline) {
    int n = bench_->cq->poll(&wc, 1);
    if (n < 0) return fabric::WcStatus::kGeneral;
    if (n == 1) return wc.status;
  }
  return fabric::WcStatus::kRetryExceeded;
}

// p50 of an empty interval (two clock reads back to back): the timer's own share
// of every latency figure above, for both the WRs and the memcpy reference.
double timerP50Us() {
  std::vector<uint32_t> samples(20000);
  for (auto& s : samples) {
    uint64_t t0 = nowNs();
    s = static_cast<uint32_t>(nowNs() - t0);
  }
  auto mid = samples.begin() + static_cast<long>(samples.size() / 2);
  std::nth_element(samples.begin(), mid, samples.end());
  return *mid / 1000.0;
}

double memcpyP50Us(uint64_t size) {
  std::vector<char> src(size, 1), dst(size, 0);
  std::vector<uint32_t> samples;
  samples.reserve(20000);
  uint64_t deadline = nowNs() + 300'000'000ull;
  for (int i = 0; i < 20 && size <= (64u << 20); ++i)
    std::memcpy(dst.data(), src.data(), size);  // warm
  while (samples.size() < samples.capacity() && nowNs() < deadline) {
    uint64_t t0 = nowNs();
    std::memcpy(dst.data(), src.data(), size);
    asm volatile("" : : "r"(dst.data()) : "memory");  // keep the copy
    samples.push_back(static_cast<uint32_t>(std::min<uint64_t>(nowNs() - t0, UINT32_MAX)));
  }
  auto mid = samples.begin() + static_cast<long>(samples.size() / 2);
  std::nth_element(samples.begin(), mid, samples.end());
  return *mid / 1000.0;
}

}  // namespace tent::perf::fabric_bench
