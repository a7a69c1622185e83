// Argument conversion: strict, and every failure is tent.Error (InvalidArgument)
// naming the argument, never a crash. Methods take py::handle and convert here
// rather than letting pybind11 raise TypeError with its own message.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "binding.h"

namespace tent::python {

namespace {

std::string typeName(py::handle h) {
  return Py_TYPE(h.ptr())->tp_name;
}

// numpy.integer, so that addresses read out of numpy arrays pass as ints.
bool isNumpyInteger(py::handle h) {
  static PyObject* type = py::object(py::module_::import("numpy").attr("integer")).release().ptr();
  return PyObject_IsInstance(h.ptr(), type) == 1;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

void freeView(Py_buffer* view) {
  PyBuffer_Release(view);
  delete view;
}

// The CUDA ordinal an array object names: torch's device (type 'cuda', index), cupy's
// device.id; -1 when it names none (host memory, or an object that does not say).
int cudaDeviceOf(py::handle buf) {
  if (!py::hasattr(buf, "device")) return -1;
  py::object dev = buf.attr("device");
  if (py::hasattr(dev, "type") && py::hasattr(dev, "index")) {  // torch.device
    if (py::str(dev.attr("type")).cast<std::string>() != "cuda") return -1;
    py::object index = dev.attr("index");
    return index.is_none() ? -1 : static_cast<int>(toU64(index, "buffer.device.index"));
  }
  if (py::hasattr(dev, "id") && isInteger(dev.attr("id")))  // cupy.cuda.Device
    return static_cast<int>(toU64(dev.attr("id"), "buffer.device.id"));
  return -1;
}

Buffer fromDataPtr(py::handle buf) {
  Buffer b;
  try {
    b.addr = toU64(buf.attr("data_ptr")(), "buffer.data_ptr()");
    if (py::hasattr(buf, "numel") && py::hasattr(buf, "element_size")) {
      b.length = toU64(buf.attr("numel")(), "buffer.numel()") *
                 toU64(buf.attr("element_size")(), "buffer.element_size()");
      b.has_length = true;
    }
    if (py::hasattr(buf, "is_contiguous") && !buf.attr("is_contiguous")().cast<bool>())
      raiseInvalid("buffer: not contiguous (register a contiguous tensor, e.g. .contiguous())");
    b.cuda_device = cudaDeviceOf(buf);
  } catch (py::error_already_set& e) {
    rethrowAsError(e, "buffer");
  }
  b.owner = py::reinterpret_borrow<py::object>(buf);
  return b;
}

// __cuda_array_interface__ (v2/v3): data = (pointer, read-only), shape, typestr ("<f4":
// 4-byte items), strides None or C-contiguous.
Buffer fromCudaArrayInterface(py::handle buf, bool writable) {
  Buffer b;
  try {
    py::dict cai = buf.attr("__cuda_array_interface__");
    py::tuple data = cai["data"];
    b.addr = toU64(data[0], "__cuda_array_interface__['data'][0]");
    if (writable && data[1].cast<bool>())
      raiseInvalid("buffer: __cuda_array_interface__ says the memory is read-only");
    const std::string typestr = toStr(cai["typestr"], "__cuda_array_interface__['typestr']");
    const uint64_t item = typestr.size() > 2 ? std::strtoull(typestr.c_str() + 2, nullptr, 10) : 0;
    if (item == 0) raiseInvalid("buffer: __cuda_array_interface__ typestr '" + typestr + "'");
    uint64_t count = 1;
    std::vector<uint64_t> shape;
    for (py::handle d : py::tuple(cai["shape"])) {
      shape.push_back(toU64(d, "__cuda_array_interface__['shape']"));
      count *= shape.back();
    }
    if (cai.contains("strides") && !cai["strides"].is_none()) {
      py::tuple strides = cai["strides"];
      uint64_t expect = item;
      for (size_t i = shape.size(); i-- > 0;) {
        if (shape[i] > 1 && toU64(strides[i], "__cuda_array_interface__['strides']") != expect)
          raiseInvalid("buffer: not C-contiguous (__cuda_array_interface__ strides)");
        expect *= shape[i];
      }
    }
    b.length = count * item;
    b.has_length = true;
    b.cuda_device = cudaDeviceOf(buf);
  } catch (py::error_already_set& e) {
    rethrowAsError(e, "buffer");
  }
  b.owner = py::reinterpret_borrow<py::object>(buf);
  return b;
}

Buffer fromBufferProtocol(py::handle buf, bool writable) {
  auto* raw = new Py_buffer();
  const int flags = PyBUF_ANY_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(buf.ptr(), raw, flags) != 0) {
    delete raw;
    py::error_already_set e;  // takes the BufferError off the error indicator
    raiseInvalid(std::string("buffer: ") + e.what() +
                 (writable ? " (memory to register must be writable and contiguous)" : ""));
  }
  Buffer b;
  b.view = std::shared_ptr<Py_buffer>(raw, freeView);
  b.addr = reinterpret_cast<uint64_t>(raw->buf);
  b.length = static_cast<uint64_t>(raw->len);
  b.has_length = true;
  return b;
}

py::array asIntegerArray(py::handle obj, const char* what) {
  if (PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()))
    raiseInvalid(std::string(what) + ": expected integers, got " + typeName(obj));
  py::array arr;
  try {
    static PyObject* asarray =
        py::object(py::module_::import("numpy").attr("asarray")).release().ptr();
    arr = py::reinterpret_borrow<py::object>(asarray)(obj);
  } catch (py::error_already_set& e) {
    rethrowAsError(e, what);
  }
  const char kind = arr.dtype().kind();
  if (arr.size() > 0 && kind != 'u' && kind != 'i')
    raiseInvalid(std::string(what) + ": expected integers (a numpy integer array or a list of " +
                 "int), got dtype " + py::str(arr.dtype()).cast<std::string>());
  if (kind == 'i' && arr.size() > 0 && arr.attr("min")().cast<int64_t>() < 0)
    raiseInvalid(std::string(what) + ": negative value");
  return arr;
}

U64Column fromSequence(py::handle seq, const char* what) {
  U64Column c;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  if (n == 0) raiseInvalid(std::string(what) + ": empty");
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  c.owned.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    py::handle item(items[i]);
    if (!isInteger(item))
      raiseInvalid(std::string(what) + "[" + std::to_string(i) + "]: expected an int, got " +
                   typeName(item));
    c.owned[static_cast<size_t>(i)] = toU64(item, what);
  }
  c.data = c.owned.data();
  c.size = c.owned.size();
  return c;
}

}  // namespace

bool isInteger(py::handle h) {
  if (PyBool_Check(h.ptr())) return false;
  return PyLong_Check(h.ptr()) || isNumpyInteger(h);
}

uint64_t toU64(py::handle h, const char* what) {
  if (!isInteger(h)) raiseInvalid(std::string(what) + ": expected an int, got " + typeName(h));
  PyObject* index = PyNumber_Index(h.ptr());
  unsigned long long v =
      index ? PyLong_AsUnsignedLongLong(index) : static_cast<unsigned long long>(-1);
  Py_XDECREF(index);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    raiseInvalid(std::string(what) + ": expected an int in [0, 2**64), got " +
                 py::repr(h).cast<std::string>());
  }
  return v;
}

double toSeconds(py::handle h, const char* what) {
  if (PyBool_Check(h.ptr()) || !(PyFloat_Check(h.ptr()) || isInteger(h)))
    raiseInvalid(std::string(what) + ": expected a number of seconds, got " + typeName(h));
  const double v = PyFloat_AsDouble(h.ptr());
  if (!std::isfinite(v) || v < 0)
    raiseInvalid(std::string(what) + ": expected a finite number >= 0, got " +
                 py::repr(h).cast<std::string>());
  return v;
}

std::string toStr(py::handle h, const char* what) {
  if (!PyUnicode_Check(h.ptr()))
    raiseInvalid(std::string(what) + ": expected a str, got " + typeName(h));
  return h.cast<std::string>();
}

std::string toMessage(py::handle h, const char* what) {
  if (PyUnicode_Check(h.ptr())) return h.cast<std::string>();
  if (PyBytes_Check(h.ptr())) return std::string(h.cast<py::bytes>());
  if (PyObject_CheckBuffer(h.ptr()))
    return std::string(py::bytes(py::reinterpret_borrow<py::object>(h)));
  raiseInvalid(std::string(what) + ": expected a str or bytes, got " + typeName(h));
}

OpCode toOpCode(py::handle h) {
  if (py::isinstance<OpCode>(h)) return h.cast<OpCode>();
  if (PyUnicode_Check(h.ptr())) {
    const std::string s = lower(h.cast<std::string>());
    if (s == "read") return OpCode::READ;
    if (s == "write") return OpCode::WRITE;
  }
  raiseInvalid("opcode: expected tent.OpCode.READ or WRITE, got " +
               py::repr(h).cast<std::string>());
}

IntentType toIntent(py::handle h) {
  if (h.is_none()) return IntentType::UNSPEC;
  if (py::isinstance<IntentType>(h)) return h.cast<IntentType>();
  if (PyUnicode_Check(h.ptr())) return unwrap(parseIntentType(lower(h.cast<std::string>())));
  raiseInvalid("intent: expected a tent.Intent or its name, got " +
               py::repr(h).cast<std::string>());
}

MemoryAccess toAccess(py::handle h) {
  return unwrap(parseMemoryAccess(toStr(h, "access")));
}

UnregisterMode toUnregisterMode(py::handle cancel) {
  if (!PyBool_Check(cancel.ptr()))
    raiseInvalid(std::string("cancel: expected a bool, got ") + Py_TYPE(cancel.ptr())->tp_name);
  return cancel.ptr() == Py_True ? UnregisterMode::kCancelTransfers : UnregisterMode::kFailIfInUse;
}

uint64_t deadlineFromNowUs(py::handle deadline_us) {
  const uint64_t us = toU64(deadline_us, "deadline_us");
  if (us == 0) return 0;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const uint64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count();
  return now_ns + std::min<uint64_t>(us, UINT64_MAX / 2000) * 1000;
}

Buffer toBuffer(py::handle buf, bool writable) {
  if (isInteger(buf)) {
    Buffer b;
    b.addr = toU64(buf, "address");
    return b;
  }
  if (py::hasattr(buf, "data_ptr")) return fromDataPtr(buf);
  if (py::hasattr(buf, "__cuda_array_interface__")) return fromCudaArrayInterface(buf, writable);
  if (PyObject_CheckBuffer(buf.ptr())) return fromBufferProtocol(buf, writable);
  raiseInvalid("buffer: expected an int address, a buffer (numpy array, memoryview, bytearray), " +
               std::string("an object with data_ptr() or __cuda_array_interface__, got ") +
               typeName(buf));
}

U64Column toColumn(py::handle obj, const char* what, bool allow_scalar) {
  U64Column c;
  if (allow_scalar && isInteger(obj)) {
    c.is_scalar = true;
    c.scalar = toU64(obj, what);
    return c;
  }
  if (PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr())) return fromSequence(obj, what);
  py::array arr = py::array_t<uint64_t>::check_(obj) ? py::reinterpret_borrow<py::array>(obj)
                                                     : asIntegerArray(obj, what);
  if (arr.ndim() != 1)
    raiseInvalid(std::string(what) + ": expected a 1-D array, got " + std::to_string(arr.ndim()) +
                 " dimensions");
  if (arr.size() == 0) raiseInvalid(std::string(what) + ": empty");
  // Borrowed when already contiguous uint64; one vectorised copy otherwise.
  auto u64 = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
  if (!u64) raiseInvalid(std::string(what) + ": cannot be read as uint64");
  c.data = u64.data();
  c.size = static_cast<size_t>(u64.size());
  c.array = std::move(u64);
  return c;
}

}  // namespace tent::python
