// The TSC rate calibrate() measured: what turns the lcores' busy and idle cycles into
// seconds (EngineStats::tsc_hz). Apart from clock.h so the files that read the clock on
// every completion do not depend on it.
#pragma once

namespace tent::clock {

// TSC ticks per second measured against CLOCK_MONOTONIC by the first calibrate(); 0
// before it, and where there is no TSC or it did not advance.
double tscHz() noexcept;

}  // namespace tent::clock
