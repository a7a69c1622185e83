// The location a caller gives when it registers or allocates memory, checked against
// what this machine (and the configured devices) have: a NUMA node that does not
// exist is an error, not a silent "anywhere".
#pragma once

#include <string_view>

#include "tent/status.h"
#include "topology/rail_map.h"

namespace tent::topology {

// OK for "*" or "" (the engine finds the memory's node), "cpu:N" when the rail map
// knows node N (the machine's NUMA nodes, and nodes configured devices are placed
// on), and any "cuda:" location (GPU memory is checked where it is registered).
// InvalidArgument naming the location and the nodes there are otherwise.
Status checkLocation(const RailMap& rails, std::string_view location);

}  // namespace tent::topology
