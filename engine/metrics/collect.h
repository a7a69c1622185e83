// What a scrape shows: one EngineStats snapshot as Prometheus metric families.
// docs/metrics.md lists every family; tests/metrics keeps the two in step.
#pragma once

#include <prometheus/metric_family.h>

#include <vector>

#include "tent/transfer_engine.h"

namespace tent::metrics {

// Every family, each with its samples; a family whose source is empty (no device
// yet, say) still appears, with no samples, so the set of names never changes.
std::vector<prometheus::MetricFamily> toFamilies(const EngineStats& stats);

}  // namespace tent::metrics
