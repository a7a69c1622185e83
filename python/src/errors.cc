// tent.Error: every failed native call raises it with the StatusCode name and
// the engine's message, so Python callers match on `.code` instead of text.
#include <string>

#include "binding.h"

namespace tent::python {

namespace {

// Leaked on purpose: raised until the interpreter is gone, never freed by a
// static destructor running after Python's teardown.
PyObject* g_error = nullptr;

}  // namespace

void initErrors() {
  g_error = py::object(py::module_::import("tent._error").attr("Error")).release().ptr();
}

[[noreturn]] void raise(const Status& status) {
  py::object type = py::reinterpret_borrow<py::object>(g_error);
  // Messages quote what the caller gave (config values, file contents, peer names),
  // which need not be UTF-8: undecodable bytes show as \xNN rather than raising
  // UnicodeDecodeError in place of the error.
  const std::string& text = status.message();
  PyObject* message =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (message == nullptr) throw py::error_already_set();
  py::object exc =
      type(std::string(statusCodeName(status.code())), py::reinterpret_steal<py::object>(message));
  PyErr_SetObject(g_error, exc.ptr());
  throw py::error_already_set();
}

[[noreturn]] void raiseInvalid(const std::string& message) {
  raise(Status::InvalidArgument(message));
}

[[noreturn]] void rethrowAsError(py::error_already_set& error, const std::string& context) {
  // Only conversion failures become tent.Error; KeyboardInterrupt and the like pass.
  if (!error.matches(PyExc_TypeError) && !error.matches(PyExc_ValueError) &&
      !error.matches(PyExc_BufferError) && !error.matches(PyExc_OverflowError) &&
      !error.matches(PyExc_AttributeError))
    throw;
  raiseInvalid(context + ": " + error.what());  // pybind11 already took it off the error indicator
}

}  // namespace tent::python
