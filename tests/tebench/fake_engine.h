// An in-process TransferEngine double for tebench's runner tests: the "remote"
// segment is a second buffer in this process, transfers are memcpy at submit,
// and faults (failed tasks, corrupted reads, tasks that never complete) can be
// switched on. Not a model of the real engine's timing.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "perf/tebench/bench_clock.h"
#include "tent/transfer_engine.h"

namespace tent::bench::testing {

class FakeEngine : public TransferEngine {
 public:
  static constexpr SegmentId kRemote = 7;

  explicit FakeEngine(uint64_t remote_size) : remote_(remote_size, 0) {}

  // Faults.
  uint64_t fail_every = 0;      // every nth request ends FAILED (0 = never)
  bool corrupt_reads = false;   // READs flip the first byte they bring back
  bool never_complete = false;  // tasks stay PENDING forever
  uint32_t pending_polls = 2;   // polls a task reports PENDING before its final state
  // As the engine does: a request whose deadline_ns has passed at submit (tebench's
  // clock) is not started; it ends TIMEOUT at its first poll, moving no byte.
  bool expire_late = false;

  // What the fake saw.
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> latency_sensitive{0};
  std::atomic<uint64_t> bad_deadlines{0};  // deadline set but not "submit time + deadline"
  std::atomic<uint64_t> canceled{0};
  uint64_t expected_deadline_ns = 0;  // the deadline_us the test asked for, in ns

  // Called at the start of each datapath call, before the fake takes its lock
  // (tests advance a virtual clock here to give each call a known cost).
  enum class Call { kAllocateBatch, kSubmit, kStatus, kFreeBatch };
  std::function<void(Call)> on_call;

  std::string segmentName() const override { return "fake:1"; }

  Result<void*> allocateLocalMemory(size_t length, const Location&, MemoryAccess,
                                    const std::string&) override {
    void* p = std::aligned_alloc(4096, (length + 4095) / 4096 * 4096);
    if (!p) return Status::ResourceExhausted("fake: out of memory");
    return p;
  }
  Status freeLocalMemory(void* addr, UnregisterMode = UnregisterMode::kFailIfInUse) override {
    std::free(addr);
    return Status::OK();
  }
  Status registerLocalMemory(void*, size_t, const Location&, MemoryAccess,
                             const std::string&) override {
    return Status::OK();
  }
  Status unregisterLocalMemory(void*, UnregisterMode = UnregisterMode::kFailIfInUse) override {
    return Status::OK();
  }

  Result<SegmentId> openSegment(const std::string& name) override {
    if (name != "fake:1") return Status::NotFound("fake: no segment " + name);
    return kRemote;
  }
  Status closeSegment(SegmentId) override { return Status::OK(); }
  Result<std::vector<SegmentBufferInfo>> segmentBuffers(SegmentId id) override {
    if (id != kRemote) return Status::NotFound("fake: unknown segment");
    SegmentBufferInfo b;
    b.addr = reinterpret_cast<uint64_t>(remote_.data());
    b.length = remote_.size();
    b.location = "cpu:0";
    return std::vector<SegmentBufferInfo>{b};
  }

  Result<BatchId> allocateBatch(size_t capacity) override {
    hook(Call::kAllocateBatch);
    std::lock_guard<std::mutex> lock(mu_);
    batches_[next_batch_] = Batch{capacity, {}};
    return next_batch_++;
  }
  Status freeBatch(BatchId batch) override {
    hook(Call::kFreeBatch);
    std::lock_guard<std::mutex> lock(mu_);
    return batches_.erase(batch) ? Status::OK() : Status::NotFound("fake: no batch");
  }

  Status submitTransfer(BatchId batch, std::span<const Request> reqs) override {
    hook(Call::kSubmit);
    const auto now = static_cast<uint64_t>(nowNs());  // tebench's clock, virtual in some tests
    std::lock_guard<std::mutex> lock(mu_);
    auto it = batches_.find(batch);
    if (it == batches_.end()) return Status::NotFound("fake: no batch");
    if (it->second.tasks.size() + reqs.size() > it->second.capacity) {
      return Status::ResourceExhausted("fake: batch over capacity");
    }
    for (const Request& r : reqs) it->second.tasks.push_back(execute(r, now));
    return Status::OK();
  }

  Result<TransferStatus> getTransferStatus(BatchId batch, size_t task_id) override {
    hook(Call::kStatus);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = batches_.find(batch);
    if (it == batches_.end() || task_id >= it->second.tasks.size()) {
      return Status::NotFound("fake: no task");
    }
    return pollTask(it->second.tasks[task_id]);
  }
  // As the engine's: COMPLETED when every task did, the first failure, else PENDING.
  Result<TransferStatus> getBatchTransferStatus(BatchId batch) override {
    hook(Call::kStatus);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = batches_.find(batch);
    if (it == batches_.end()) return Status::NotFound("fake: no batch");
    TransferStatus total{TransferState::COMPLETED, 0};
    bool pending = false, failed = false;
    for (Task& t : it->second.tasks) {
      const TransferStatus st = pollTask(t);
      total.transferred_bytes += st.transferred_bytes;
      if (st.state == TransferState::PENDING) {
        pending = true;
      } else if (st.state != TransferState::COMPLETED && !failed) {
        failed = true;
        total.state = st.state;
      }
    }
    if (pending) total.state = TransferState::PENDING;
    return total;
  }
  Status cancelTransfer(BatchId batch, size_t task_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = batches_.find(batch);
    if (it == batches_.end() || task_id >= it->second.tasks.size()) {
      return Status::NotFound("fake: no task");
    }
    it->second.tasks[task_id].final_status = {TransferState::CANCELED, 0};
    ++canceled;
    return Status::OK();
  }
  Result<TransferStatus> waitTransfer(BatchId batch, size_t task_id, uint64_t) override {
    return getTransferStatus(batch, task_id);
  }

  EngineStats stats() const override {
    EngineStats s;
    s.provider = "fake";
    s.link_model = "memcpy at submit";
    s.devices = {"fake0"};
    s.lcores = {{0, -1, "none", 0, 0}};
    s.direct.attempted = latency_sensitive.load();
    s.direct.succeeded = latency_sensitive.load();
    s.direct.latency_histogram_ns = {0, latency_sensitive.load()};
    s.worker.tasks = requests.load() - latency_sensitive.load();
    return s;
  }

  const std::vector<char>& remote() const { return remote_; }

 private:
  void hook(Call call) {
    if (on_call) on_call(call);
  }

  struct Task {
    TransferStatus final_status;
    uint32_t polls_left = 0;
  };
  struct Batch {
    size_t capacity = 0;
    std::vector<Task> tasks;
  };

  // One poll of a task: PENDING for its first pending_polls polls (or forever
  // with never_complete, until canceled), then its final state.
  TransferStatus pollTask(Task& t) {
    if (never_complete || t.polls_left > 0) {
      if (t.polls_left > 0) --t.polls_left;
      if (t.final_status.state != TransferState::CANCELED) {
        return TransferStatus{TransferState::PENDING, 0};
      }
    }
    return t.final_status;
  }

  Task execute(const Request& r, uint64_t now) {
    const uint64_t n = ++requests;
    if (r.deadline_ns != 0 || r.intent_type == IntentType::FOREGROUND_GET) ++latency_sensitive;
    if (r.deadline_ns != 0 &&
        (r.deadline_ns < expected_deadline_ns || r.deadline_ns - expected_deadline_ns > now)) {
      ++bad_deadlines;
    }
    Task t;
    t.polls_left = pending_polls;
    if (expire_late && r.deadline_ns != 0 && r.deadline_ns <= now) {
      t.polls_left = 0;
      t.final_status = {TransferState::TIMEOUT, 0};
      return t;
    }
    const uint64_t base = reinterpret_cast<uint64_t>(remote_.data());
    if (r.target_id != kRemote || r.target_offset < base ||
        r.target_offset + r.length > base + remote_.size()) {
      t.final_status = {TransferState::INVALID, 0};
      return t;
    }
    if (fail_every && n % fail_every == 0) {
      t.final_status = {TransferState::FAILED, 0};
      return t;
    }
    char* remote = remote_.data() + (r.target_offset - base);
    char* local = static_cast<char*>(r.source);
    if (r.opcode == OpCode::WRITE) {
      std::memcpy(remote, local, r.length);
    } else {
      std::memcpy(local, remote, r.length);
      if (corrupt_reads && r.length) local[0] ^= 0x5a;
    }
    t.final_status = {TransferState::COMPLETED, r.length};
    return t;
  }

  std::vector<char> remote_;
  std::mutex mu_;
  std::map<BatchId, Batch> batches_;
  BatchId next_batch_ = 1;
};

}  // namespace tent::bench::testing
