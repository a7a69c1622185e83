// tent._tent: the enums, tent.Request and tent.TransferEngine. The package
// tent/__init__.py re-exports them; docs/python.md describes the API.
#include <string>

#include "binding.h"
#include "engine.h"

namespace tent::python {

namespace {

void bindEnums(py::module_& m) {
  py::enum_<OpCode>(m, "OpCode").value("READ", OpCode::READ).value("WRITE", OpCode::WRITE);
  py::enum_<IntentType>(m, "Intent", "Why a request is issued (tent::IntentType).")
      .value("UNSPEC", IntentType::UNSPEC)
      .value("FOREGROUND_GET", IntentType::FOREGROUND_GET)
      .value("BACKGROUND_PREFETCH", IntentType::BACKGROUND_PREFETCH)
      .value("MIGRATION", IntentType::MIGRATION)
      .value("CHECKPOINT", IntentType::CHECKPOINT)
      .value("WEIGHT_LOADING", IntentType::WEIGHT_LOADING);
  py::enum_<TransferState>(m, "TransferState")
      .value("INITIAL", TransferState::INITIAL)
      .value("PENDING", TransferState::PENDING)
      .value("INVALID", TransferState::INVALID)
      .value("CANCELED", TransferState::CANCELED)
      .value("COMPLETED", TransferState::COMPLETED)
      .value("TIMEOUT", TransferState::TIMEOUT)
      .value("FAILED", TransferState::FAILED);
}

Request makeRequest(py::handle opcode, py::handle source, py::handle target,
                    py::handle target_offset, py::handle length, py::handle intent,
                    py::handle deadline_ns, py::handle priority) {
  Request r;
  r.opcode = toOpCode(opcode);
  r.source = reinterpret_cast<void*>(toBuffer(source, /*writable=*/false).addr);
  r.target_id = toU64(target, "target");
  r.target_offset = toU64(target_offset, "target_offset");
  r.length = toU64(length, "length");
  r.intent_type = toIntent(intent);
  r.deadline_ns = toU64(deadline_ns, "deadline_ns");
  const uint64_t p = toU64(priority, "priority");
  if (p > INT32_MAX) raiseInvalid("priority: out of range");
  r.priority = static_cast<int>(p);
  return r;
}

std::string requestRepr(const Request& r) {
  return "tent.Request(" + std::string(r.opcode == OpCode::READ ? "READ" : "WRITE") +
         ", source=" + std::to_string(reinterpret_cast<uint64_t>(r.source)) +
         ", target=" + std::to_string(r.target_id) +
         ", target_offset=" + std::to_string(r.target_offset) +
         ", length=" + std::to_string(r.length) +
         ", intent=" + std::string(toString(r.intent_type)) +
         ", deadline_ns=" + std::to_string(r.deadline_ns) + ")";
}

void bindRequest(py::module_& m) {
  py::class_<Request>(m, "Request", "One transfer: tent::Request.")
      .def(py::init(&makeRequest), py::arg("opcode"), py::arg("source"), py::arg("target"),
           py::arg("target_offset"), py::arg("length"), py::arg("intent") = IntentType::UNSPEC,
           py::arg("deadline_ns") = 0, py::arg("priority") = 0,
           "source: a local address (int) or a buffer; target: a segment id; deadline_ns: "
           "absolute, time.monotonic_ns() clock, 0 = none.")
      .def_property(
          "opcode", [](const Request& r) { return r.opcode; },
          [](Request& r, py::handle v) { r.opcode = toOpCode(v); })
      .def_property(
          "source", [](const Request& r) { return reinterpret_cast<uint64_t>(r.source); },
          [](Request& r, py::handle v) {
            r.source = reinterpret_cast<void*>(toBuffer(v, false).addr);
          })
      .def_property(
          "target", [](const Request& r) { return r.target_id; },
          [](Request& r, py::handle v) { r.target_id = toU64(v, "target"); })
      .def_property(
          "target_offset", [](const Request& r) { return r.target_offset; },
          [](Request& r, py::handle v) { r.target_offset = toU64(v, "target_offset"); })
      .def_property(
          "length", [](const Request& r) { return r.length; },
          [](Request& r, py::handle v) { r.length = toU64(v, "length"); })
      .def_property(
          "intent", [](const Request& r) { return r.intent_type; },
          [](Request& r, py::handle v) { r.intent_type = toIntent(v); })
      .def_property(
          "deadline_ns", [](const Request& r) { return r.deadline_ns; },
          [](Request& r, py::handle v) { r.deadline_ns = toU64(v, "deadline_ns"); })
      .def("__repr__", &requestRepr);
}

void bindMemoryAndSegments(py::class_<Engine>& c) {
  c.def("allocate_local_memory", &Engine::allocateLocalMemory, py::arg("length"),
        py::arg("location") = "*", py::arg("access") = "rw", py::arg("name") = "",
        "Engine-allocated memory, registered on every device; returns its address. "
        "name: shown to peers in segment_buffers() (at most 255 bytes).")
      .def("free_local_memory", &Engine::freeLocalMemory, py::arg("addr"),
           py::arg("cancel") = false,
           "Unregisters and frees allocate_local_memory's memory. While transfers use it: "
           "raises tent.Error (FailedPrecondition), or with cancel=True cancels them and "
           "frees it once they are drained.")
      .def("register_memory", &Engine::registerMemory, py::arg("buf"),
           py::arg("length") = py::none(), py::arg("location") = "*", py::arg("access") = "rw",
           py::arg("name") = "",
           "buf: an int address (length required), a writable contiguous buffer (numpy array, "
           "memoryview, bytearray; held while registered), or an object with data_ptr() or "
           "__cuda_array_interface__ (torch, cupy; a GPU tensor registers on its GPU). "
           "location '*': host memory by NUMA node, GPU memory by the CUDA driver. "
           "access: 'r', 'w' or 'rw' (what peers may do). name: shown to peers in "
           "segment_buffers() (at most 255 bytes).")
      .def("unregister_memory", &Engine::unregisterMemory, py::arg("buf"),
           py::arg("cancel") = false,
           "While transfers read into or write from the memory: raises tent.Error "
           "(FailedPrecondition, naming how many) and keeps holding buf; cancel=True "
           "cancels them and returns once they are drained. On return buf is released.")
      .def("open_segment", &Engine::openSegment, py::arg("name"),
           "Opens a peer's segment by its name ('host:port', or with metadata.backend etcd the "
           "name it registered); returns its id.")
      .def("local_metadata", &Engine::localMetadata,
           "This engine's segment as bytes (descriptor, address, name; signed when "
           "bootstrap.auth is set), for a peer's add_remote_metadata.")
      .def("add_remote_metadata", &Engine::addRemoteMetadata, py::arg("blob"),
           "Opens the segment another engine's local_metadata() describes, without "
           "fetching its descriptor from its control port; returns its id.")
      .def("close_segment", &Engine::closeSegment, py::arg("segment"))
      .def("segment_buffers", &Engine::segmentBuffers, py::arg("segment"),
           "[{'addr', 'length', 'location', 'name', 'access'}] of an open segment "
           "(LOCAL_SEGMENT_ID: ours), in registration order. access is 'r', 'w' or 'rw'; "
           "a peer of descriptor v1/v2 lists its buffers in address order with name '' "
           "and access None.");
}

void bindTransfers(py::class_<Engine>& c) {
  c.def("allocate_batch", &Engine::allocateBatch, py::arg("capacity"))
      .def("free_batch", &Engine::freeBatch, py::arg("batch"))
      .def("submit", &Engine::submit, py::arg("batch"), py::arg("requests"))
      .def("get_transfer_status", &Engine::getTransferStatus, py::arg("batch"), py::arg("task"),
           "(tent.TransferState, transferred bytes) of one task; does not wait.")
      .def("get_batch_status", &Engine::getBatchStatus, py::arg("batch"))
      .def("wait", &Engine::wait, py::arg("batch"), py::arg("task"), py::arg("timeout_s") = 30.0,
           "Waits until the task leaves PENDING: (state, bytes); tent.Error Timeout after "
           "timeout_s.")
      .def("wait_batch", &Engine::waitBatch, py::arg("batch"), py::arg("timeout_s") = 30.0,
           "Waits for every task of the batch: (first failure or COMPLETED, total bytes).")
      .def("cancel", &Engine::cancel, py::arg("batch"), py::arg("task"))
      .def("transfer_sync", &Engine::transferSync, py::arg("target"), py::arg("opcode"),
           py::arg("local_addrs"), py::arg("remote_addrs"), py::arg("lengths"),
           py::arg("intent") = IntentType::UNSPEC, py::arg("deadline_us") = 0,
           py::arg("timeout_s") = 30.0, py::arg("notify") = py::none(),
           "Moves every row and waits; returns the bytes moved, raises tent.Error when a task "
           "did not complete. Columns: numpy uint64 arrays (borrowed) or lists; lengths may be "
           "one int. target: a segment id or name. deadline_us: relative to the call, 0 = none. "
           "notify: a message (str or bytes) the target receives once every row landed.")
      .def("transfer_async", &Engine::transferAsync, py::arg("target"), py::arg("opcode"),
           py::arg("local_addrs"), py::arg("remote_addrs"), py::arg("lengths"),
           py::arg("intent") = IntentType::UNSPEC, py::arg("deadline_us") = 0,
           py::arg("notify") = py::none(),
           "As transfer_sync without the wait: returns the batch (task i = row i); wait with "
           "wait_batch(), then free_batch(). notify: sent when the wait sees every row done.")
      .def("send_notification", &Engine::sendNotification, py::arg("target"), py::arg("message"),
           "Sends a notification (str or bytes) to a segment (id or name); tent.Error "
           "ResourceExhausted when its receive side is full, NotSupported for an older peer.")
      .def("get_notifications", &Engine::getNotifications,
           "The notifications received since the last call: [(sender segment name, bytes)].")
      .def("wait_notifications", &Engine::waitNotifications, py::arg("timeout_s") = 30.0,
           "get_notifications, waiting (GIL released) up to timeout_s for at least one; [] "
           "when none came.")
      .def("stats", &Engine::stats, "Every field of tent::EngineStats, as a dict.");
}

void bindEngine(py::module_& m) {
  py::class_<Engine> c(m, "TransferEngine",
                       "A tent engine. config: None (TENT_CONFIG or defaults), a dict, YAML text "
                       "or a YAML file path.");
  c.def(py::init<py::handle>(), py::arg("config") = py::none())
      .def_property_readonly("segment_name", &Engine::segmentName,
                             "This engine's segment name: 'host:port' of its listener, or "
                             "with metadata.backend etcd the name it registers under.")
      .def_property_readonly("control_address", &Engine::controlAddress,
                             "'host:port' of the control listener as peers dial it (the port "
                             "the engine picked when bootstrap.listen's port is 0).")
      .def_property_readonly("metrics_address", &Engine::metricsAddress,
                             "'host:port' of the metrics endpoint (metrics.listen, port 0 "
                             "resolved); '' when metrics are off.")
      .def_property_readonly("closed", &Engine::closed)
      .def("close", &Engine::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Engine& e, py::args) {
        e.close();
        return false;
      });
  bindMemoryAndSegments(c);
  bindTransfers(c);
}

void initModule(py::module_& m) {
  m.doc() = "tent native module; import the package `tent` instead.";
  initErrors();
  initForkGuard();
  bindEnums(m);
  bindRequest(m);
  bindEngine(m);
  m.attr("LOCAL_SEGMENT_ID") = LOCAL_SEGMENT_ID;
  m.attr("__version__") = TENT_VERSION;  // meson's project version
  m.def("_stats_field_counts", &statsFieldCounts);
  m.def("_close_all", &Engine::closeAll, "Closes every engine still open (atexit does too).");
  bindLogs(m);
  // Engines still open at exit are closed while the interpreter is whole.
  py::module_::import("atexit").attr("register")(py::cpp_function(&Engine::closeAll));
}

}  // namespace
}  // namespace tent::python

PYBIND11_MODULE(_tent, m) {
  tent::python::initModule(m);
}
