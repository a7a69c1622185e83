#include "topology/location_check.h"

#include <string>

namespace tent::topology {

Status checkLocation(const RailMap& rails, std::string_view location) {
  if (location.empty() || location == "*" || location.substr(0, 5) == "cuda:") return Status::OK();
  if (location.substr(0, 4) == "cpu:" && rails.locationId(location) != kAnyLocation)
    return Status::OK();
  std::string known;
  for (size_t i = 0; i < rails.locationCount(); ++i) {
    const std::string& name = rails.locationName(static_cast<LocationId>(i));
    if (name.rfind("cpu:", 0) != 0) continue;
    known += (known.empty() ? "" : ", ") + name;
  }
  const bool cpu = location.substr(0, 4) == "cpu:";
  return Status::InvalidArgument(
      "location '" + std::string(location) + "' " +
      (cpu ? "names no NUMA node of this machine" : "is not a location") + "; allowed: " + known +
      ", cuda:N or \"*\" (the engine finds the memory's node)");
}

}  // namespace tent::topology
