// Where log lines go instead of stderr: Python's `logging` (python/src/logs.cc) installs
// a sink. Its own header so that the many files that only log do not depend on it.
#pragma once

#include <cstddef>

#include "tent/log.h"

namespace tent::log {

// Called from the logging thread with the bare message (no prefix, no newline) of every
// line the level filter lets through. It must not block for long nor log itself. Control
// path only: the datapath logs nothing above debug.
using Sink = void (*)(Component c, Level l, const char* message, size_t length);

// nullptr restores stderr. A sink must stay callable for the rest of the process.
void setSink(Sink sink) noexcept;

}  // namespace tent::log
