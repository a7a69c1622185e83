// tent.TransferEngine: the C++ engine behind a guard that makes close(), other
// threads and fork() safe. Every call that can wait releases the GIL.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "binding.h"
#include "waits.h"

namespace tent::python {

// Registers the fork handler; once per process, at module import.
void initForkGuard();

class Engine {
 public:
  explicit Engine(py::handle config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  std::string segmentName();
  std::string controlAddress();
  std::string metricsAddress();
  bool closed() const { return closed_.load(); }
  // Refuses new calls, waits for those in progress (they stop waiting at once),
  // then destroys the engine. Idempotent.
  void close();
  // Closes every engine still open (registered with atexit at import).
  static void closeAll();

  uint64_t allocateLocalMemory(py::handle length, py::handle location, py::handle access,
                               py::handle name);
  void freeLocalMemory(py::handle addr, py::handle cancel);
  void registerMemory(py::handle buf, py::handle length, py::handle location, py::handle access,
                      py::handle name);
  void unregisterMemory(py::handle buf, py::handle cancel);

  SegmentId openSegment(py::handle name);
  py::bytes localMetadata();
  SegmentId addRemoteMetadata(py::handle blob);
  void closeSegment(py::handle segment);
  py::list segmentBuffers(py::handle segment);

  BatchId allocateBatch(py::handle capacity);
  void freeBatch(py::handle batch);
  void submit(py::handle batch, py::handle requests);
  py::tuple getTransferStatus(py::handle batch, py::handle task);
  py::tuple getBatchStatus(py::handle batch);
  py::tuple wait(py::handle batch, py::handle task, py::handle timeout_s);
  py::tuple waitBatch(py::handle batch, py::handle timeout_s);
  void cancel(py::handle batch, py::handle task);

  // bulk.cc: numpy columns in, no Python object per descriptor.
  uint64_t transferSync(py::handle target, py::handle opcode, py::handle local_addrs,
                        py::handle remote_addrs, py::handle lengths, py::handle intent,
                        py::handle deadline_us, py::handle timeout_s, py::handle notify);
  BatchId transferAsync(py::handle target, py::handle opcode, py::handle local_addrs,
                        py::handle remote_addrs, py::handle lengths, py::handle intent,
                        py::handle deadline_us, py::handle notify);

  // notify.cc: notifications (docs/python.md, "Notifications").
  void sendNotification(py::handle target, py::handle message);
  py::list getNotifications();
  py::list waitNotifications(py::handle timeout_s);

  py::dict stats();

 private:
  // One call in progress: close() waits until none is left.
  class Use {
   public:
    explicit Use(Engine& e) : e_(e) {}
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    TransferEngine* operator->() const { return e_.engine_.get(); }
    TransferEngine& operator*() const { return *e_.engine_; }

   private:
    Engine& e_;
  };
  // Raises tent.Error when the engine is closed or was inherited through fork().
  Use use();
  // Runs fn(engine) with the GIL released; raises tent.Error for a failed Status
  // or Result, and returns the Result's value.
  template <typename Fn>
  auto call(Fn&& fn) {
    auto u = use();
    std::optional<decltype(fn(*u))> r;
    {
      py::gil_scoped_release nogil;
      r.emplace(fn(*u));
    }
    if constexpr (std::is_same_v<std::decay_t<decltype(*r)>, Status>)
      check(*r);
    else
      return unwrap(std::move(*r));
  }
  bool inheritedThroughFork() const;
  SegmentId resolveTarget(py::handle target);
  // The rows of a bulk call, submitted in a fresh batch: (batch, rows).
  std::pair<BatchId, size_t> submitBulk(py::handle target, py::handle opcode,
                                        py::handle local_addrs, py::handle remote_addrs,
                                        py::handle lengths, py::handle intent,
                                        py::handle deadline_us, py::handle notify);
  py::tuple waitResult(const WaitOutcome& w);

  std::unique_ptr<TransferEngine> engine_;
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> users_{0};
  const uint64_t fork_generation_;
  // Buffers registered from Python objects, kept alive (and their exports held)
  // while registered: an entry goes only once the engine unregistered the memory,
  // which it does only when no transfer uses it any more (or after close()).
  // Touched only with the GIL held.
  std::map<uint64_t, Buffer> registrations_;
};

}  // namespace tent::python
