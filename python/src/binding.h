// Shared declarations of the Python binding (module tent._tent). The binding
// sees only the public API (tent/transfer_engine.h): engine internals may change
// under it without breaking it.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent::python {

namespace py = pybind11;

// ---- errors (errors.cc) ---------------------------------------------------------
// Loads tent._error.Error, the one exception type the native API raises.
void initErrors();
// Raises tent.Error(code name, message) as a C++ exception pybind11 passes on.
[[noreturn]] void raise(const Status& status);
[[noreturn]] void raiseInvalid(const std::string& message);
// From a catch block: a conversion failure (TypeError, ValueError, ...) becomes
// tent.Error (InvalidArgument) with `context`; anything else is rethrown as it is.
[[noreturn]] void rethrowAsError(py::error_already_set& error, const std::string& context);
inline void check(const Status& status) {
  if (!status.ok()) raise(status);
}
template <typename T>
T unwrap(Result<T> result) {
  if (!result.ok()) raise(result.status());
  return std::move(result).value();
}

// ---- argument conversion (args.cc) --------------------------------------------
// Each raises tent.Error (InvalidArgument) naming `what` on a wrong type or value,
// never TypeError, so bad arguments look like every other failed call.
bool isInteger(py::handle h);  // int or numpy integer, not bool
uint64_t toU64(py::handle h, const char* what);
double toSeconds(py::handle h, const char* what);
std::string toStr(py::handle h, const char* what);
// A notification's message: str (UTF-8) or bytes-like.
std::string toMessage(py::handle h, const char* what);
OpCode toOpCode(py::handle h);
IntentType toIntent(py::handle h);
MemoryAccess toAccess(py::handle h);
// `cancel` (a bool) of unregister_memory / free_local_memory.
UnregisterMode toUnregisterMode(py::handle cancel);
// `deadline_us` relative to now -> Request::deadline_ns (absolute steady clock); 0 = none.
uint64_t deadlineFromNowUs(py::handle deadline_us);

// A local buffer given as an int address, a buffer-protocol object (numpy array,
// memoryview, bytearray) or an object with data_ptr() (a torch tensor). For the
// latter two it holds the object (and its buffer export) while it lives.
// An object exposing __cuda_array_interface__ (cupy, numba, torch) is read from it.
struct Buffer {
  uint64_t addr = 0;
  uint64_t length = 0;
  bool has_length = false;  // false for an int address
  int cuda_device = -1;     // the GPU the object says it lives on (CUDA ordinal); -1: host/unknown
  py::object owner;         // the object, for data_ptr() objects
  std::shared_ptr<Py_buffer> view;
};
Buffer toBuffer(py::handle buf, bool writable);

// A 1-D column of uint64 values: a numpy integer array (a uint64 one is borrowed,
// not copied), a list or tuple of int (read straight into a vector: no numpy
// conversion for the one-element lists of per-call APIs), or one int to broadcast.
struct U64Column {
  U64Column() = default;
  U64Column(U64Column&&) = default;  // a moved vector keeps its buffer, so `data` stays valid
  U64Column& operator=(U64Column&&) = default;
  U64Column(const U64Column&) = delete;
  U64Column& operator=(const U64Column&) = delete;

  py::object array;  // the numpy array `data` points into (a py::object: an empty
                     // py::array_t would allocate an array for nothing)
  std::vector<uint64_t> owned;
  const uint64_t* data = nullptr;
  size_t size = 0;
  uint64_t scalar = 0;  // broadcast value when `is_scalar`
  bool is_scalar = false;
  uint64_t at(size_t i) const { return is_scalar ? scalar : data[i]; }
};
U64Column toColumn(py::handle obj, const char* what, bool allow_scalar);

// ---- stats (stats.cc) ----------------------------------------------------------
// EngineStats -> dict: the one place that knows its fields.
py::dict statsToDict(const EngineStats& stats);
// Direct members of EngineStats and of each struct in it, counted by the compiler.
py::dict statsFieldCounts();

// ---- logs (logs.cc) -------------------------------------------------------------
// _log_to_python, _log_drain: the C++ half of tent/_logging.py.
void bindLogs(py::module_& m);

}  // namespace tent::python
