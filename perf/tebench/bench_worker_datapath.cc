// The measured loop of a benchmark thread. Nothing here allocates per
// transfer except the engine's own batch; errors take a slow path that
// records the first message and counts the failure. What is timed follows
// Mooncake TENT's tebench (benchmark/tent_backend.cpp, main.cpp): a transfer's
// duration from submitTransfer to the status poll that sees it complete; the
// thread's window over the whole loop.
#include <cstring>
#include <string>
#include <thread>

#include "perf/tebench/bench_worker.h"

namespace tent::bench {
namespace {

class TransferLoop {
 public:
  TransferLoop(const ThreadPlan& plan, Run* run) : plan_(plan), run_(run) {
    requests_.resize(plan.batch_size);
    landed_.resize(plan.check ? plan.batch_size : 0);
    for (uint32_t j = 0; j < plan.batch_size; ++j) {
      Request& r = requests_[j];
      r.source = plan.local + uint64_t{j} * plan.block_size;
      r.target_id = plan.segment;
      r.target_offset = plan.remote_addr + uint64_t{j} * plan.block_size;
      r.length = plan.block_size;
      r.intent_type = plan.intent;
    }
  }

  // One transfer (one batch). `record` is null during warm-up. Pattern
  // filling, pacing, batch allocation and freeing, and verification lie
  // outside the transfer's duration (Avg Tx) and inside the thread's window
  // (Avg Lat, BW), as in Mooncake's tebench.
  void once(ThreadResult* record) noexcept {
    const OpCode op = nextOp();
    prepare(op);
    run_->pacer.waitTurn();
    delayBeforeTransfer(run_->thread_delay_ns);
    int64_t duration_ns = 0;
    expired_ = false;
    const bool ok = transfer(op, &duration_ns);
    if (ok && plan_.check && op == OpCode::READ) verify(record);
    if (plan_.check && op == OpCode::WRITE && ok) landAll();
    if (record == nullptr) return;
    if (ok) {
      record->samples.record(recorded(duration_ns));
      record->completed.fetch_add(1, std::memory_order_relaxed);
    } else if (expired_) {
      ++record->deadline_expired;  // nothing moved: the bytes are not checked
    } else {
      ++record->failed;
    }
  }

 private:
  OpCode nextOp() noexcept {
    ++iteration_;
    switch (plan_.op) {
      case OpType::kRead:
        return OpCode::READ;
      case OpType::kWrite:
        return OpCode::WRITE;
      case OpType::kMix:
        break;
    }
    return (iteration_ % 2 == 1) ? OpCode::WRITE : OpCode::READ;
  }

  uint64_t regionBytes() const noexcept { return plan_.block_size * plan_.batch_size; }

  // Outside the timed window: a fresh pattern before a WRITE, a cleared
  // region before the READ that brings it back.
  void prepare(OpCode op) noexcept {
    if (!plan_.check) return;
    if (op == OpCode::WRITE) {
      seed_ = (uint64_t{plan_.index} << 40) ^ iteration_;
      fillPattern(plan_.local, regionBytes(), seed_);
    } else {
      std::memset(plan_.local, 0, regionBytes());
    }
  }

  // The READ brings back what the WRITEs left at the target, request by request: the
  // last pattern each request's WRITE landed. A WRITE that expired before it started
  // moved nothing, so its requests still hold the pattern before it; one whose outcome
  // is unknown (it failed, and counts as failed) leaves them unchecked.
  void verify(ThreadResult* record) noexcept {
    int64_t at = -1;
    if (allLandedAs(seed_)) {
      at = firstPatternMismatch(plan_.local, regionBytes(), seed_);
    } else {
      for (uint32_t j = 0; j < plan_.batch_size && at < 0; ++j) {
        if (!landed_[j].known) continue;
        at = firstPatternMismatchIn(plan_.local, uint64_t{j} * plan_.block_size, plan_.block_size,
                                    landed_[j].seed);
      }
    }
    if (at < 0) return;
    if (record) ++record->mismatches;
    slowFail("thread " + std::to_string(plan_.index) + ": byte " + std::to_string(at) +
             " read back differs from the pattern written");
  }

  bool allLandedAs(uint64_t seed) const noexcept {
    for (const Landed& l : landed_)
      if (!l.known || l.seed != seed) return false;
    return true;
  }

  void landAll() noexcept {
    for (Landed& l : landed_) l = {seed_, true};
  }

  // After a WRITE that did not complete as a whole: which of its requests landed.
  void noteWriteOutcome(BatchId batch) noexcept {
    for (uint32_t j = 0; j < plan_.batch_size; ++j) {
      auto st = run_->engine->getTransferStatus(batch, j);
      const TransferState state = st.ok() ? st->state : TransferState::FAILED;
      if (state == TransferState::COMPLETED) {
        landed_[j] = {seed_, true};
      } else if (!(expired_ && state == TransferState::TIMEOUT)) {
        landed_[j].known = false;  // it may have moved part of its bytes
      }
    }
  }

  // Mooncake's timer keeps whole microseconds, truncated (--tx_resolution=us).
  uint64_t recorded(int64_t duration_ns) const noexcept {
    const auto ns = static_cast<uint64_t>(duration_ns);
    return run_->tx_in_whole_us ? ns / 1000 * 1000 : ns;
  }

  // allocateBatch, then the timed part: from just before submitTransfer to the
  // batch status poll that sees every task COMPLETED; then freeBatch.
  bool transfer(OpCode op, int64_t* duration_ns) noexcept {
    auto batch = run_->engine->allocateBatch(plan_.batch_size);
    if (!batch.ok()) {
      slowFail("allocateBatch: " + batch.status().toString());
      run_->abort.store(true);
      return false;
    }
    for (Request& r : requests_) r.opcode = op;
    const int64_t t0 = nowNs();
    if (plan_.deadline_us != 0) {
      const uint64_t deadline = static_cast<uint64_t>(t0) + plan_.deadline_us * 1000;
      for (Request& r : requests_) r.deadline_ns = deadline;
    }
    Status s = run_->engine->submitTransfer(*batch, requests_);
    submitted_late_ =
        plan_.deadline_us != 0 && nowNs() >= t0 + static_cast<int64_t>(plan_.deadline_us * 1000);
    bool ok = s.ok();
    if (!ok) slowFail("submitTransfer: " + s.toString());
    int64_t t1 = t0;
    if (ok) ok = waitBatch(*batch, t0, &t1);
    *duration_ns = t1 - t0;
    if (plan_.check && op == OpCode::WRITE && !ok) noteWriteOutcome(*batch);
    (void)run_->engine->freeBatch(*batch);
    return ok;
  }

  // Polls the batch's status until it leaves PENDING, as Mooncake's tebench does:
  // no clock read between polls (one per 1024 for the stuck-transfer check), so
  // *seen_ns is the clock right after the poll that saw it COMPLETED.
  bool waitBatch(BatchId batch, int64_t t0, int64_t* seen_ns) noexcept {
    if (plan_.poll_mode == PollMode::kWait) return waitEachTask(batch, seen_ns);
    for (uint64_t polls = 1;; ++polls) {
      auto st = run_->engine->getBatchTransferStatus(batch);
      const bool check_stuck = (polls & 1023) == 0;
      if (!st.ok() || st->state != TransferState::PENDING || check_stuck) *seen_ns = nowNs();
      if (!st.ok()) {
        slowFail("getBatchTransferStatus: " + st.status().toString());
        return false;
      }
      const TransferState state = st->state;
      if (state == TransferState::COMPLETED) return true;
      if (state == TransferState::TIMEOUT && polls == 1 && submitted_late_) {
        // The engine did not start it: its deadline had passed when submit looked
        // (a TIMEOUT seen at the first poll of a submit that returned after the
        // deadline; a timeout of a started WR takes direct/slice timeout_ms).
        expired_ = true;
        return false;
      }
      if (state != TransferState::PENDING && state != TransferState::INITIAL) {
        slowFail(std::string("transfer ended ") + std::string(toString(state)));
        return false;
      }
      if (check_stuck && *seen_ns - t0 > run_->transfer_timeout_ns) return failStuck(batch);
      if (plan_.poll_mode == PollMode::kYield) std::this_thread::yield();
    }
  }

  // --poll_mode=wait: waitTransfer on each task in turn (the engine's waiter spins
  // briefly, then sleeps), bounded by --transfer_timeout; *seen_ns is the clock after the
  // last task's wait returned.
  bool waitEachTask(BatchId batch, int64_t* seen_ns) noexcept {
    for (size_t i = 0; i < requests_.size(); ++i) {
      auto st = run_->engine->waitTransfer(batch, i, run_->transfer_timeout_ns);
      if (!st.ok() && st.status().code() == StatusCode::kTimeout) return failStuck(batch);
      if (!st.ok()) {
        slowFail("waitTransfer: " + st.status().toString());
        return false;
      }
      if (st->state != TransferState::COMPLETED) {
        slowFail(std::string("transfer ended ") + std::string(toString(st->state)));
        return false;
      }
    }
    *seen_ns = nowNs();
    return true;
  }

  // A transfer outlived --transfer_timeout: cancels the batch's tasks and aborts the run.
  bool failStuck(BatchId batch) noexcept {
    for (size_t i = 0; i < requests_.size(); ++i) (void)run_->engine->cancelTransfer(batch, i);
    slowFail("a transfer stayed pending longer than --transfer_timeout");
    run_->abort.store(true);
    return false;
  }

  // Error path only (allocates the message).
  void slowFail(const std::string& message) noexcept {
    try {
      run_->fail(message);
    } catch (...) {  // out of memory while reporting: the count still says it failed
    }
  }

  const ThreadPlan& plan_;
  Run* run_;
  std::vector<Request> requests_;
  uint64_t iteration_ = 0;
  uint64_t seed_ = 0;
  struct Landed {
    uint64_t seed = 0;   // the pattern the request's last landed WRITE left at the target
    bool known = false;  // false: none landed yet, or one ended in a state that says nothing
  };
  std::vector<Landed> landed_;   // per request, with --check_consistency
  bool expired_ = false;         // the last transfer expired before it started
  bool submitted_late_ = false;  // its submit returned after its deadline
};

}  // namespace

void runBenchThread(const ThreadPlan& plan, Run* run, ThreadResult* out) {
  TransferLoop loop(plan, run);
  while (!run->abort.load(std::memory_order_relaxed) && nowNs() < run->warmup_end_ns) {
    loop.once(nullptr);
  }
  run->start_barrier.arrive_and_wait();  // every thread arrives, even after an abort
  const int64_t start = nowNs();
  const int64_t end = run->measure_end_ns.load(std::memory_order_acquire);
  while (!run->abort.load(std::memory_order_relaxed) && nowNs() < end) loop.once(out);
  out->elapsed_s = static_cast<double>(nowNs() - start) / 1e9;
}

}  // namespace tent::bench
