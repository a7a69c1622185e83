// What a scrape shows: one EngineStats snapshot as Prometheus metric families.
// docs/metrics.md lists every family; tests/metrics keeps the two in step.
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <vector>

#include "tent/transfer_engine.h"

namespace tent::metrics {

struct EngineSnapshot {
  std::string name;  // the engine's segment name: the `engine` label of its samples
  EngineStats stats;
};

// Every family, each with the samples of every engine (labelled `engine`), and
// tent_build_info; a family whose source is empty (no device yet, no engine) still
// appears, with no samples, so the set of names never changes.
std::vector<prometheus::MetricFamily> toFamilies(const std::vector<EngineSnapshot>& engines);

}  // namespace tent::metrics
