// tent.TransferEngine: creation from a config, the close/fork guard, memory,
// segments, batches and stats. Bulk transfers are in bulk.cc.
#include "engine.h"

#include <pthread.h>
#include <unistd.h>

#include <set>
#include <string>
#include <utility>

namespace tent::python {

namespace {

// fork(): the child has none of the parent's threads (lcores, control thread),
// so an engine it inherited must not be used or destroyed there, and DPDK EAL
// cannot start again in it.
std::atomic<uint64_t> g_fork_generation{0};
std::atomic<bool> g_engine_created{false};
std::atomic<bool> g_forked_after_engine{false};

void onForkChild() {
  g_fork_generation.fetch_add(1);
  if (g_engine_created.load()) g_forked_after_engine.store(true);
}

// Open engines, for closeAll() at exit. Touched only with the GIL held; leaked so
// that no static destructor runs after the interpreter is gone.
std::set<class Engine*>& liveEngines() {
  static auto* live = new std::set<Engine*>();
  return *live;
}

// A str is YAML text when it has a newline, a "key: value" or a flow mapping;
// anything else is a file path.
bool looksLikeYaml(const std::string& s) {
  const size_t start = s.find_first_not_of(" \t");
  return s.find('\n') != std::string::npos || s.find(": ") != std::string::npos ||
         (start != std::string::npos && s[start] == '{');
}

// A str as UTF-8; one that cannot be encoded (lone surrogates) raises
// UnicodeEncodeError, which the caller turns into tent.Error.
std::string utf8Of(py::handle text) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(text.ptr(), &n);
  if (p == nullptr) throw py::error_already_set();
  return std::string(p, static_cast<size_t>(n));
}

struct ConfigSource {
  enum Kind { kDefault, kPath, kYaml } kind = kDefault;
  std::string text;
};

ConfigSource configSource(py::handle config) {
  ConfigSource src;
  try {
    if (config.is_none()) return src;
    if (PyDict_Check(config.ptr())) {
      // JSON is YAML (flow style): the engine's own parser validates the keys.
      src.text = py::module_::import("json").attr("dumps")(config).cast<std::string>();
      src.kind = ConfigSource::kYaml;
    } else if (py::isinstance(config, py::module_::import("os").attr("PathLike"))) {
      // The file system's bytes: a name that is not UTF-8 is still a name.
      src.text = py::bytes(py::module_::import("os").attr("fsencode")(config)).cast<std::string>();
      src.kind = ConfigSource::kPath;
    } else if (PyUnicode_Check(config.ptr())) {
      src.text = utf8Of(config);
      src.kind = src.text.empty()          ? ConfigSource::kDefault
                 : looksLikeYaml(src.text) ? ConfigSource::kYaml
                                           : ConfigSource::kPath;
    } else {
      raiseInvalid("config: expected None, a dict, YAML text or a file path, got " +
                   std::string(Py_TYPE(config.ptr())->tp_name));
    }
  } catch (py::error_already_set& e) {
    rethrowAsError(e, "config");
  }
  return src;
}

std::unique_ptr<TransferEngine> createEngine(py::handle config) {
  const ConfigSource src = configSource(config);
  Result<std::unique_ptr<TransferEngine>> engine = Status::Internal("not created");
  {
    py::gil_scoped_release nogil;
    engine = src.kind == ConfigSource::kYaml ? TransferEngine::createFromYaml(src.text)
                                             : TransferEngine::create(src.text);
  }
  return unwrap(std::move(engine));
}

}  // namespace

void initForkGuard() {
  static const int once = pthread_atfork(nullptr, nullptr, onForkChild);
  (void)once;
}

Engine::Engine(py::handle config) : fork_generation_(g_fork_generation.load()) {
  if (g_forked_after_engine.load())
    raise(Status::FailedPrecondition(
        "this process was forked from one that had created a tent engine: DPDK EAL and the "
        "engine's threads do not survive fork(); create engines in a fresh process "
        "(multiprocessing's 'spawn' or 'forkserver' start method, or fork+exec)"));
  g_engine_created.store(true);
  engine_ = createEngine(config);
  liveEngines().insert(this);
}

Engine::~Engine() {
  close();
  liveEngines().erase(this);
}

Engine::Use::~Use() {
  if (e_.users_.fetch_sub(1) == 1 && e_.closed_.load()) e_.users_.notify_all();
}

bool Engine::inheritedThroughFork() const {
  return fork_generation_ != g_fork_generation.load();
}

Engine::Use Engine::use() {
  if (inheritedThroughFork())
    raise(Status::FailedPrecondition(
        "this engine was created before fork() in the parent process; the child cannot use it "
        "(create a new engine in a fresh process instead)"));
  // Count first, then check: close() sets closed_ first, then waits for the count.
  users_.fetch_add(1);
  if (closed_.load()) {
    Use refused(*this);  // gives the count back
    raise(Status::FailedPrecondition("the engine is closed"));
  }
  return Use(*this);
}

void Engine::close() {
  if (closed_.exchange(true)) return;
  if (inheritedThroughFork()) {
    (void)engine_.release();  // leaked on purpose: its threads exist only in the parent
  } else {
    py::gil_scoped_release nogil;
    engine_->cancelWaits();  // an open_segment in progress returns now, Canceled
    for (int64_t n = users_.load(); n != 0; n = users_.load()) users_.wait(n);
    engine_.reset();
  }
  registrations_.clear();  // with the GIL: releases the buffer exports
}

void Engine::closeAll() {
  const std::set<Engine*> open = liveEngines();
  for (Engine* e : open) e->close();
}

std::string Engine::segmentName() {
  auto u = use();
  return u->segmentName();
}

std::string Engine::controlAddress() {
  auto u = use();
  return u->controlAddress();
}

std::string Engine::metricsAddress() {
  auto u = use();
  return u->metricsAddress();
}

uint64_t Engine::allocateLocalMemory(py::handle length, py::handle location, py::handle access,
                                     py::handle name) {
  const uint64_t len = toU64(length, "length");
  const std::string loc = toStr(location, "location");
  const MemoryAccess acc = toAccess(access);
  const std::string n = toStr(name, "name");
  void* addr = call([&](TransferEngine& e) { return e.allocateLocalMemory(len, loc, acc, n); });
  return reinterpret_cast<uint64_t>(addr);
}

void Engine::freeLocalMemory(py::handle addr, py::handle cancel) {
  void* a = reinterpret_cast<void*>(toU64(addr, "addr"));
  const UnregisterMode mode = toUnregisterMode(cancel);
  call([&](TransferEngine& e) { return e.freeLocalMemory(a, mode); });
}

void Engine::registerMemory(py::handle buf, py::handle length, py::handle location,
                            py::handle access, py::handle name) {
  Buffer b = toBuffer(buf, /*writable=*/true);
  if (length.is_none() && !b.has_length) raiseInvalid("length: required with an int address");
  const uint64_t len = length.is_none() ? b.length : toU64(length, "length");
  if (b.has_length && len > b.length)
    raiseInvalid("length: " + std::to_string(len) + " is more than the buffer's " +
                 std::to_string(b.length) + " bytes");
  std::string loc = toStr(location, "location");
  // A GPU tensor says where it lives; "*" would find it too, this saves the lookup.
  if (loc == "*" && b.cuda_device >= 0) loc = "cuda:" + std::to_string(b.cuda_device);
  const MemoryAccess acc = toAccess(access);
  const std::string n = toStr(name, "name");
  void* addr = reinterpret_cast<void*>(b.addr);
  call([&](TransferEngine& e) { return e.registerLocalMemory(addr, len, loc, acc, n); });
  if (b.view || b.owner) registrations_[b.addr] = std::move(b);
}

void Engine::unregisterMemory(py::handle buf, py::handle cancel) {
  const uint64_t addr = toBuffer(buf, /*writable=*/false).addr;
  const UnregisterMode mode = toUnregisterMode(cancel);
  // Raises while transfers use the memory (or when canceling them did not drain in
  // time): the object stays held, since the engine may still move bytes in or out.
  call([&](TransferEngine& e) {
    return e.unregisterLocalMemory(reinterpret_cast<void*>(addr), mode);
  });
  registrations_.erase(addr);  // the engine released it: no WR can touch it any more
}

SegmentId Engine::openSegment(py::handle name) {
  const std::string n = toStr(name, "name");
  return call([&](TransferEngine& e) { return e.openSegment(n); });
}

py::bytes Engine::localMetadata() {
  return py::bytes(call([&](TransferEngine& e) { return e.localMetadata(); }));
}

SegmentId Engine::addRemoteMetadata(py::handle blob) {
  if (!py::isinstance<py::bytes>(blob) && !py::isinstance<py::bytearray>(blob))
    throw py::type_error("blob: expected bytes (another engine's local_metadata())");
  const std::string bytes = py::isinstance<py::bytes>(blob)
                                ? std::string(py::reinterpret_borrow<py::bytes>(blob))
                                : std::string(py::reinterpret_borrow<py::bytearray>(blob));
  return call([&](TransferEngine& e) { return e.addRemoteMetadata(bytes); });
}

void Engine::closeSegment(py::handle segment) {
  const SegmentId id = toU64(segment, "segment");
  call([&](TransferEngine& e) { return e.closeSegment(id); });
}

py::list Engine::segmentBuffers(py::handle segment) {
  const SegmentId id = toU64(segment, "segment");
  py::list out;
  for (const SegmentBufferInfo& b : call([&](TransferEngine& e) { return e.segmentBuffers(id); })) {
    py::dict d;
    d["addr"] = b.addr;
    d["length"] = b.length;
    d["location"] = b.location;
    d["name"] = b.name;
    // None: a v1/v2 peer does not say.
    d["access"] = b.access ? py::object(py::str(std::string(toString(*b.access)))) : py::none();
    out.append(d);
  }
  return out;
}

BatchId Engine::allocateBatch(py::handle capacity) {
  const uint64_t cap = toU64(capacity, "capacity");
  return call([&](TransferEngine& e) { return e.allocateBatch(cap); });
}

void Engine::freeBatch(py::handle batch) {
  const BatchId id = toU64(batch, "batch");
  call([&](TransferEngine& e) { return e.freeBatch(id); });
}

void Engine::submit(py::handle batch, py::handle requests) {
  const BatchId id = toU64(batch, "batch");
  if (!PySequence_Check(requests.ptr()) || PyUnicode_Check(requests.ptr()))
    raiseInvalid("requests: expected a sequence of tent.Request");
  std::vector<Request> reqs;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(requests)) {
    if (!py::isinstance<Request>(item))
      raiseInvalid("requests[" + std::to_string(reqs.size()) + "]: expected a tent.Request, got " +
                   Py_TYPE(item.ptr())->tp_name);
    reqs.push_back(item.cast<const Request&>());
  }
  call([&](TransferEngine& e) { return e.submitTransfer(id, reqs); });
}

py::tuple Engine::getTransferStatus(py::handle batch, py::handle task) {
  const BatchId id = toU64(batch, "batch");
  const uint64_t t = toU64(task, "task");
  const TransferStatus s = call([&](TransferEngine& e) { return e.getTransferStatus(id, t); });
  return py::make_tuple(s.state, s.transferred_bytes);
}

py::tuple Engine::getBatchStatus(py::handle batch) {
  const BatchId id = toU64(batch, "batch");
  const TransferStatus s = call([&](TransferEngine& e) { return e.getBatchTransferStatus(id); });
  return py::make_tuple(s.state, s.transferred_bytes);
}

py::tuple Engine::waitResult(const WaitOutcome& w) {
  if (w.interrupted) throw py::error_already_set();
  check(w.error);
  return py::make_tuple(w.state, w.bytes);
}

py::tuple Engine::wait(py::handle batch, py::handle task, py::handle timeout_s) {
  const BatchId id = toU64(batch, "batch");
  const uint64_t t = toU64(task, "task");
  const uint64_t deadline = deadlineAfter(toSeconds(timeout_s, "timeout_s"));
  auto u = use();
  return waitResult(waitTasks(*u, id, t, 1, deadline, closed_));
}

py::tuple Engine::waitBatch(py::handle batch, py::handle timeout_s) {
  const BatchId id = toU64(batch, "batch");
  const uint64_t deadline = deadlineAfter(toSeconds(timeout_s, "timeout_s"));
  auto u = use();
  return waitResult(waitTasks(*u, id, 0, kAllTasks, deadline, closed_));
}

void Engine::cancel(py::handle batch, py::handle task) {
  const BatchId id = toU64(batch, "batch");
  const uint64_t t = toU64(task, "task");
  call([&](TransferEngine& e) { return e.cancelTransfer(id, t); });
}

py::dict Engine::stats() {
  auto u = use();
  EngineStats s;
  {
    py::gil_scoped_release nogil;
    s = u->stats();
  }
  return statsToDict(s);
}

}  // namespace tent::python
